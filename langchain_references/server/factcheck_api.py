"""``POST /v1/factcheck``: the fact-check chain over the evidence index and the web back-end.

The verdict is always the fact-check chain's: the stages of
:mod:`langchain_references.factcheck.stages` judge and weigh the evidence, whatever its source.
Only where the passages come from changes (:func:`build_checker`):

* **index only** (no web back-end configured at start-up)::

      prepare | index | judge | aggregate | result

  :class:`IndexEvidenceStage` (run as the ``search`` stage: the index search is the search
  and the relevance ranking at once) asks the evidence index for the ``top_k`` entries closest
  to the statement and hands them on as the passages selected for judging;
* **index and web**::

      prepare | {index, search | fetch | extract | passages | relevance} | merge | judge | ...

  the index and the chain's own web stages (those of a
  :class:`~langchain_references.factcheck.chain.FactCheckChain` built with the start-up search
  provider and the guarded page fetcher) run side by side, and :func:`merge_evidence` joins
  their passages, most similar first, before the judge.

The index records count as pages read from a local store: they fill the state's hits, pages,
extracted pages and passages (``from_cache=True``, nothing downloaded), so that
:func:`~langchain_references.factcheck.stages.unchecked_reason` explains an empty index or a
failing judge with the chain's own words. Similarities are cosines, as in the chain (the
index's ``(cosine + 1) / 2`` is mapped back).

:func:`check_stream` runs a checker with ``astream_events`` and yields the chain's progress
events (:class:`~langchain_references.factcheck.result.FactCheckProgress`) as they are
dispatched, then the result; ``/v1/factcheck`` sends them as ``progress`` and ``result``
events (:mod:`langchain_references.server.events`) and ``/v1/article`` reuses it per claim.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any, Final, TypeAlias

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableParallel
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import override

from langchain_references.factcheck.chain import (
    DEFAULT_JUDGE_CONCURRENCY,
    FactCheckChain,
    FactCheckInput,
    coerce_request,
)
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.result import (
    PROGRESS_EVENT as FACTCHECK_PROGRESS,
)
from langchain_references.factcheck.result import (
    FactCheckProgress,
    FactCheckResult,
    Stage,
)
from langchain_references.factcheck.stages import (
    AggregateStage,
    FactCheckStage,
    FactCheckState,
    JudgeStage,
    StageEnd,
    to_result,
)
from langchain_references.factcheck.types import (
    ExtractedPage,
    FetchedPage,
    Passage,
    SearchHit,
)
from langchain_references.factcheck.verdict import WeightedVoteAggregator
from langchain_references.failures import Failure
from langchain_references.server.events import (
    PROGRESS_EVENT,
    RESULT_EVENT,
    Event,
    openapi_responses,
    respond,
)
from langchain_references.server.index import EvidenceHit, EvidenceIndex, Granularity
from langchain_references.server.links import safe_result
from langchain_references.server.live import LiveIndex
from langchain_references.server.services import Services, ServicesDep
from langchain_references.server.settings import Text

__all__ = [
    "DEFAULT_GRANULARITY",
    "FactCheckBody",
    "IndexEvidenceStage",
    "PageFetcherDep",
    "build_checker",
    "check_stream",
    "evidence_link",
    "get_page_fetcher",
    "merge_evidence",
    "router",
]

logger = logging.getLogger(__name__)

#: Index entries used as evidence when a request does not say: single sentences, which
#: the judges compare more sharply than whole abstracts.
DEFAULT_GRANULARITY: Final[Granularity] = "phrase"

router = APIRouter(tags=["native"])


def get_page_fetcher() -> PageFetcher:
    """FastAPI dependency: the guarded page fetcher of web evidence and article URLs.

    Public addresses only (private, loopback and link-local addresses are refused), 10 s and
    2 MB per page. A new fetcher per request (it keeps no state between calls); an
    application that must reach an intranet overrides this dependency.

    Returns:
        The fetcher.
    """
    return PageFetcher()


#: A handler's parameter that receives the page fetcher (``fetcher: PageFetcherDep``).
PageFetcherDep: TypeAlias = Annotated[PageFetcher, Depends(get_page_fetcher)]


def evidence_link(hit: EvidenceHit) -> str:
    """The URL that a passage from the index links to: its URL, else its DOI or OpenAlex page.

    Args:
        hit: The index hit.

    Returns:
        The URL, or ``""`` when the record has none.
    """
    if hit.url:
        return hit.url
    if hit.doi:
        doi = hit.doi.strip()
        return doi if doi.lower().startswith(("http://", "https://")) else f"https://doi.org/{doi}"
    if hit.openalex_id:
        oa = hit.openalex_id.strip()
        return (
            oa if oa.lower().startswith(("http://", "https://")) else f"https://openalex.org/{oa}"
        )
    return ""


def _cosine(hit: EvidenceHit) -> float:
    """The index's ``(cosine + 1) / 2`` mapped back to a cosine in ``[-1, 1]``."""
    value = 2.0 * hit.similarity - 1.0
    return max(-1.0, min(1.0, value)) if math.isfinite(value) else 0.0


_IndexOutcome = tuple[list[EvidenceHit], list[Failure]]


class IndexEvidenceStage(FactCheckStage[_IndexOutcome]):
    """Take the passages to judge from the evidence index (the ``search`` stage of a check).

    A failing index is recorded as a ``search`` failure and the check goes on (to the
    chain's "search failed" error verdict).

    Args:
        index: The evidence index.
        granularity: Entries searched: ``"phrase"`` (sentences) or ``"abstract"``.
        k: Number of entries kept.
    """

    stage = "search"

    def __init__(
        self, index: EvidenceIndex | LiveIndex, *, granularity: Granularity, k: int
    ) -> None:
        self.index = index
        self.granularity = granularity
        self.k = k

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"searching the evidence index {self.index.name!r}"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> _IndexOutcome:
        return self.index.search(state.statement, granularity=self.granularity, k=self.k), []

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> _IndexOutcome:
        hits = await self.index.asearch(state.statement, granularity=self.granularity, k=self.k)
        return hits, []

    @override
    def recover(self, state: FactCheckState, exc: Exception) -> _IndexOutcome:
        logger.warning("The evidence index failed: %s: %s", type(exc).__name__, exc)
        reason = f"evidence index: {type(exc).__name__}: {exc}"
        return [], [Failure(stage="search", reason=reason, query=state.statement)]

    @override
    def finish(self, state: FactCheckState, outcome: _IndexOutcome) -> StageEnd:
        hits, failures = outcome
        search_hits: list[SearchHit] = []
        pages: dict[str, FetchedPage] = {}
        extracted: dict[str, ExtractedPage] = {}
        selected: list[tuple[Passage, float]] = []
        for rank, hit in enumerate(hits):
            link = evidence_link(hit)
            title = hit.title or hit.record_id
            search_hit = SearchHit(
                title=title, snippet=hit.text, link=link or f"index:{hit.id}", rank=rank
            )
            search_hits.append(search_hit)
            if hit.record_id not in pages:
                pages[hit.record_id] = FetchedPage(
                    url=link,
                    final_url=link,
                    status=200,
                    content_type="text/plain",
                    body=hit.text,
                    from_cache=True,
                    elapsed_s=0.0,
                    rank=rank,
                    hit=search_hit,
                )
                extracted[hit.record_id] = ExtractedPage(
                    url=link,
                    final_url=link,
                    title=title,
                    text=hit.text,
                    rank=rank,
                    content_type="text/plain",
                )
            passage = Passage(
                text=hit.text,
                url=link,
                title=title,
                rank=rank,
                index_in_page=int(hit.metadata.get("position", 0) or 0),
                n_tokens=max(1, len(hit.text.split())),
            )
            selected.append((passage, _cosine(hit)))
        n = len(hits)
        counts = {
            "hits": n,
            "fetched": len(pages),
            "extracted": len(extracted),
            "passages": n,
            "judged": n,
        }
        detail = f"{n} index {'entry' if n == 1 else 'entries'}"
        if failures:
            detail += f"; search failed: {failures[0].reason}"
        return StageEnd(
            state.advance(
                failures,
                counts,
                hits=tuple(search_hits),
                pages=tuple(pages.values()),
                extracted=tuple(extracted.values()),
                passages=tuple(p for p, _ in selected),
                selected=tuple(selected),
            ),
            detail,
            {"hits": n, "failed": len(failures)},
        )


def merge_evidence(states: Mapping[str, FactCheckState]) -> FactCheckState:
    """Join the index branch and the web branch of a check into one state for the judge.

    Both branches started from the same state. Hits, pages and passages are concatenated (web
    first), the selected passages are ordered by similarity (most similar first, the web's
    first on a tie), failures are concatenated and counts added; a stage that ran in both
    branches is timed by the longer of the two, since they ran side by side.

    Args:
        states: ``{"index": state, "web": state}``.

    Returns:
        The merged state.
    """
    index, web = states["index"], states["web"]
    counts = dict(web.counts)
    for key, value in index.counts.items():
        counts[key] = counts.get(key, 0) + value
    timings: dict[Stage, float] = {}
    for stage, seconds in (*web.timings, *index.timings):
        timings[stage] = max(seconds, timings.get(stage, 0.0))
    order = {id(item): i for i, item in enumerate((*web.selected, *index.selected))}
    selected = sorted((*web.selected, *index.selected), key=lambda p: (-p[1], order[id(p)]))
    return FactCheckState(
        statement=web.statement,
        query=web.query,
        started=min(web.started, index.started),
        failures=(*web.failures, *index.failures),
        timings=tuple(timings.items()),
        counts=counts,
        hits=(*web.hits, *index.hits),
        pages=(*web.pages, *index.pages),
        extracted=(*web.extracted, *index.extracted),
        passages=(*web.passages, *index.passages),
        selected=tuple(selected),
    )


def _prepare(value: object) -> FactCheckState:
    request = coerce_request(value)
    return FactCheckState.begin(request.statement, request.search_query)


def _sync_and_async(func: Any, name: str) -> Runnable[Any, Any]:
    """A cheap step that runs the same function on both paths (no executor on the async one)."""

    async def afunc(value: Any) -> Any:
        return func(value)

    return RunnableLambda(func, afunc=afunc, name=name)


def build_checker(
    services: Services,
    *,
    k: int,
    granularity: Granularity = DEFAULT_GRANULARITY,
    fetcher: PageFetcher | None = None,
) -> Runnable[FactCheckInput, FactCheckResult]:
    """The fact-check pipeline of the service (see the module docs).

    Args:
        services: The service's index, judge and optional web search back-end.
        k: Passages taken from the index (and, with a web back-end, kept from the web).
        granularity: Index entries used as passages.
        fetcher: Page fetcher of the web stages (default: public addresses only).

    Returns:
        A runnable ``statement -> FactCheckResult`` named ``fact_check``; every stage
        dispatches the chain's progress events.
    """
    index_stage = IndexEvidenceStage(services.index, granularity=granularity, k=k)
    aggregate = AggregateStage(WeightedVoteAggregator(), "relevance")
    judge = JudgeStage(services.judge, DEFAULT_JUDGE_CONCURRENCY)
    evidence: Runnable[FactCheckState, FactCheckState]
    if services.search is None:
        evidence = index_stage.as_runnable()
    else:
        chain = FactCheckChain(
            search=services.search,
            judge=services.judge,
            embeddings=services.index.embeddings,
            fetcher=fetcher,
            k=k,
            retrieval=services.settings.retrieval,
        )
        judge = next(s for s in chain.stages if isinstance(s, JudgeStage))
        aggregate = next(s for s in chain.stages if isinstance(s, AggregateStage))
        web: Runnable[FactCheckState, FactCheckState] = chain.stages[0].as_runnable()
        for stage in chain.stages[1:]:
            if stage.stage in ("judge", "aggregate"):
                break
            web = web | stage.as_runnable()
        evidence = RunnableParallel(index=index_stage.as_runnable(), web=web) | (
            _sync_and_async(merge_evidence, "merge")
        )
    pipeline = (
        _sync_and_async(_prepare, "prepare")
        | evidence
        | judge.as_runnable()
        | aggregate.as_runnable()
        | _sync_and_async(to_result, "result")
    )
    return pipeline.with_config(run_name="fact_check")


async def check_stream(
    checker: Runnable[FactCheckInput, FactCheckResult], statement: FactCheckInput
) -> AsyncIterator[FactCheckProgress | FactCheckResult]:
    """Run a check and yield its progress events as they happen, then its result.

    Args:
        checker: A pipeline from :func:`build_checker`.
        statement: The statement, or ``{"statement": ..., "query": ...}``.

    Yields:
        :class:`FactCheckProgress` events, then the :class:`FactCheckResult`.

    Raises:
        ValueError: If the statement is blank.
        RuntimeError: If the pipeline ended without a result (a programming error).
    """
    result: FactCheckResult | None = None
    async for event in checker.astream_events(statement, version="v2"):
        kind = event["event"]
        if kind == "on_custom_event" and event["name"] == FACTCHECK_PROGRESS:
            data = event["data"]
            if isinstance(data, FactCheckProgress):
                yield data
        elif kind == "on_chain_end" and not event["parent_ids"]:
            output = event["data"].get("output")
            if isinstance(output, FactCheckResult):
                result = output
    if result is None:
        raise RuntimeError("the fact-check pipeline ended without a result")
    yield result


class FactCheckBody(BaseModel):
    """Body of ``POST /v1/factcheck``.

    Attributes:
        statement: The statement to check.
        query: The web search query (default: the statement); the index is searched with the
            statement.
        top_k: Passages taken from the index (and kept from the web); the server's
            ``default_top_k`` when absent, at most its ``max_top_k``.
        granularity: Index entries used as evidence: sentences (``phrase``) or abstracts.
    """

    model_config = ConfigDict(extra="forbid")

    statement: Text = Field(min_length=1, pattern=r"\S", examples=["The Eiffel Tower is in Rome."])
    query: Text | None = Field(default=None, min_length=1, pattern=r"\S")
    top_k: int | None = Field(default=None, ge=1)
    granularity: Granularity = DEFAULT_GRANULARITY


async def _factcheck_events(
    checker: Runnable[FactCheckInput, FactCheckResult], payload: FactCheckInput
) -> AsyncIterator[Event]:
    """The events of one check: its progress, then its result."""
    async for item in check_stream(checker, payload):
        if isinstance(item, FactCheckProgress):
            yield Event(PROGRESS_EVENT, item.model_dump(mode="json"))
        else:
            logger.info("Checked a statement: %s", item.verdict.value)
            yield Event(RESULT_EVENT, safe_result(item).model_dump(mode="json"))


_FACTCHECK_RESPONSES: Final = openapi_responses(
    "The fact-check result (JSON), or with `Accept: text/event-stream` `progress` events (one "
    "per stage start and end) and a final `result` event.",
    "The statement exceeds `max_claim_chars` (JSON naming the limit).",
)


@router.post(
    "/v1/factcheck",
    response_model=FactCheckResult,
    responses=_FACTCHECK_RESPONSES,
    summary="Fact-check one statement against the evidence index (and the web back-end)",
)
async def factcheck(
    body: FactCheckBody,
    request: Request,
    services: ServicesDep,
    fetcher: PageFetcherDep,
) -> Response:
    """Check one statement: evidence from the index (and the web back-end chosen at start-up).

    Args:
        body: The statement and options.
        request: The request (``Accept`` chooses JSON or server-sent events).
        services: The service's shared members.
        fetcher: The guarded page fetcher.

    Returns:
        The :class:`~langchain_references.factcheck.result.FactCheckResult` as JSON, or its
        progress and result as server-sent events.
    """
    services.settings.check_claims([body.statement])
    k = services.settings.check_top_k(body.top_k)
    checker = build_checker(services, k=k, granularity=body.granularity, fetcher=fetcher)
    payload: FactCheckInput = (
        body.statement if body.query is None else {"statement": body.statement, "query": body.query}
    )
    return await respond(request, _factcheck_events(checker, payload))
