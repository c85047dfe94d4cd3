"""``POST /v1/factcheck``: the fact-check chain over the evidence index and the web back-end.

The verdict is always the fact-check chain's
(:class:`~langchain_references.factcheck.chain.FactCheckChain`, built by
:func:`build_checker`): the evidence index is its ``index`` source
(:class:`IndexPassages`), and the web back-end chosen at start-up, if any, its ``search``
provider:

* **index only** (no web back-end configured at start-up)::

      prepare | index | judge | aggregate | result

  the ``top_k`` entries closest to the statement are the passages judged;
* **index and web**::

      prepare | {index, search | fetch | extract | passages | relevance} | merge | judge | ...

  the index and the chain's web stages run side by side and their passages are merged, most
  similar first, before the judge.

Index entries are passages, not pages: nothing is counted as fetched or extracted.
Similarities are cosines, as in the chain: each index hit carries its cosine as the index found
it (:attr:`~langchain_references.server.index.EvidenceHit.cosine`); the ``(cosine + 1) / 2`` of
the compatible API is not mapped back.

:func:`check_stream` runs a checker with ``astream_events`` and yields the chain's progress
events (:class:`~langchain_references.factcheck.result.FactCheckProgress`) as they are
dispatched, then the result; ``/v1/factcheck`` sends them as ``progress`` and ``result``
events (:mod:`langchain_references.server.events`) and ``/v1/article`` reuses it per claim.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Final, TypeAlias

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ConfigDict, Field

from langchain_references.factcheck.chain import FactCheckChain, FactCheckInput
from langchain_references.factcheck.evidence import IndexedPassage
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.result import (
    PROGRESS_EVENT as FACTCHECK_PROGRESS,
)
from langchain_references.factcheck.result import FactCheckProgress, FactCheckResult
from langchain_references.factcheck.types import Passage
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
    "IndexPassages",
    "PageFetcherDep",
    "build_checker",
    "check_stream",
    "evidence_link",
    "get_page_fetcher",
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


class IndexPassages:
    """The evidence index as the fact-check chain's :class:`PassageIndex` (one granularity).

    Each hit becomes a passage linking to :func:`evidence_link` (its record's title, or the
    record id when there is none) with its cosine similarity (as the chain's relevance stage
    reports cosines; the index's ``(cosine + 1) / 2`` is the compatible API's).

    Args:
        index: The evidence index (or the live index of ``serve``).
        granularity: Entries searched: ``"phrase"`` (sentences) or ``"abstract"``.
    """

    def __init__(self, index: EvidenceIndex | LiveIndex, granularity: Granularity) -> None:
        self.index = index
        self.granularity = granularity
        self.name = index.name

    def find(self, statement: str, k: int) -> list[IndexedPassage]:
        """The ``k`` entries closest to ``statement`` as passages (see the class docs).

        Args:
            statement: The statement being checked.
            k: How many entries.

        Returns:
            The passages, most similar first.
        """
        return _passages(self.index.search(statement, granularity=self.granularity, k=k))

    async def afind(self, statement: str, k: int) -> list[IndexedPassage]:
        """Async :meth:`find`.

        Args:
            statement: The statement being checked.
            k: How many entries.

        Returns:
            The passages, most similar first.
        """
        return _passages(await self.index.asearch(statement, granularity=self.granularity, k=k))


def _passages(hits: list[EvidenceHit]) -> list[IndexedPassage]:
    return [
        IndexedPassage(
            passage=Passage(
                text=hit.text,
                url=evidence_link(hit),
                title=hit.title or hit.record_id,
                rank=rank,
                index_in_page=int(hit.metadata.get("position") or 0),
                n_tokens=max(1, len(hit.text.split())),
            ),
            similarity=hit.cosine_similarity(),
            id=hit.id,
        )
        for rank, hit in enumerate(hits)
    ]


def build_checker(
    services: Services,
    *,
    k: int,
    granularity: Granularity = DEFAULT_GRANULARITY,
    fetcher: PageFetcher | None = None,
) -> FactCheckChain:
    """The fact-check chain of the service (see the module docs).

    Args:
        services: The service's index, judge and optional web search back-end.
        k: Passages taken from the index (and, with a web back-end, kept from the web).
        granularity: Index entries used as passages.
        fetcher: Page fetcher of the web stages (default: public addresses only).

    Returns:
        A :class:`~langchain_references.factcheck.chain.FactCheckChain` named ``fact_check``
        over the index (and the web back-end); every stage dispatches the chain's progress
        events.
    """
    return FactCheckChain(
        search=services.search,
        index=IndexPassages(services.index, granularity),
        judge=services.judge,
        embeddings=services.index.embeddings if services.search is not None else None,
        fetcher=fetcher,
        k=k,
        retrieval=services.settings.retrieval,
    )


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
