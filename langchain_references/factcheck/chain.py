"""The fact-check chain: verify a statement against evidence from the web, an index, or both.

:func:`create_fact_check_chain` builds a :class:`FactCheckChain`, a LangChain
:class:`~langchain_core.runnables.Runnable` that takes a statement (a string, or
``{"statement": ..., "query": ...}``) and returns a
:class:`~langchain_references.factcheck.result.FactCheckResult`. It is an LCEL composition of
small runnables, one per stage (:mod:`~langchain_references.factcheck.stages`)::

    prepare | search | fetch | extract | passages | relevance | judge | aggregate | result

1. **prepare** — validate the input (:func:`coerce_request`);
2. **search** — ask the search provider for up to ``max_results`` hits (the search rank is kept
   with every source from here on);
3. **fetch** — download the hits concurrently with
   :class:`~langchain_references.factcheck.fetch.PageFetcher` (SSRF-guarded, bounded);
4. **extract** — main text and title of each page (trafilatura);
5. **passages** — deduplicated, token-bounded passages;
6. **relevance** — the ``k`` passages closest to the statement (Chroma, cosine);
7. **judge** — the judge runnable on every kept passage, in one batch with the caller's
   ``config["max_concurrency"]`` (the chain's ``max_concurrency`` is only the default); a
   failed judgement counts as *unknown* and is recorded;
8. **aggregate** — the aggregator (default
   :class:`~langchain_references.factcheck.verdict.WeightedVoteAggregator`) gives the verdict;
9. **result** — the :class:`~langchain_references.factcheck.result.FactCheckResult`, which
   names the judge (``judge``: kind, model, description).

Evidence sources (:mod:`~langchain_references.factcheck.evidence`): with ``index=`` (a
:class:`~langchain_references.factcheck.evidence.PassageIndex`) the index's passages are
judged too. With an index and no ``search`` the chain is
``prepare | search (the index) | judge | aggregate | result``; with both, the web stages and
the index run side by side and their passages are merged, most similar first, before the
judge::

    prepare | {index, search | fetch | extract | passages | relevance} | merge | judge | ...

A source that fails at any stage is recorded in ``FactCheckResult.failed_sources`` and the run
goes on with the others. The time spent in each stage is in ``FactCheckResult.timings``.

Resuming and rate limits: with ``cache=RunCache(...)`` every finished check (a result with no
failed judgement) is stored under the key of its statement, query and the chain's settings
and judge (:meth:`FactCheckChain.item_key`), and the searches, pages (the default fetcher's)
and judgements are stored under keys of their inputs (the judgements' include the judge's
identity; a corpus served on a local port, ``corpus=``, by its content, not its port). When
the cache reuses (``RunCache(path, reuse=True)``, the CLI's ``--resume``) a
check already finished is returned from it without running the stages (no progress events),
and a check that did not finish reuses the searches, pages and judgements it finds. With
``limiter=RateLimiter(...)`` the searches (key ``"search"``) and the default fetcher's
requests (``"fetch:HOST"``) wait for the limits shared by every worker holding the limiter,
and a 429/503 is retried after its ``Retry-After``.

Each stage has a sync and an async driver: ``invoke`` / ``batch`` / ``stream`` call the sync
APIs of the search provider, fetcher, extractor, splitter, relevance selection and judge
(``judge.batch``); ``ainvoke`` / ``abatch`` / ``astream`` call the async ones, with the
CPU-bound steps (extraction, splitting, embedding) in the default executor.

Progress: every stage dispatches the custom callback event :data:`PROGRESS_EVENT` (data: a
:class:`~langchain_references.factcheck.result.FactCheckProgress`) when it starts and when it
ends, on the sync and async paths alike. Read it from ``astream_events(version="v2")``
(``on_custom_event``) or a callback handler's ``on_custom_event``. ``stream`` and ``astream``
yield only the result, so the chain pipes into other runnables like any other. Callbacks and
``astream_events`` see the stages, and the judge calls under the ``judge`` stage, as child runs
of the ``fact_check`` run.

Examples:
    >>> from langchain_references.services.embeddings import MiniLMEmbeddings  # doctest: +SKIP
    >>> from langchain_references.factcheck import DuckDuckGoSearch  # doctest: +SKIP
    >>> from langchain_references.factcheck import HeuristicJudge  # doctest: +SKIP
    >>> chain = create_fact_check_chain(  # doctest: +SKIP
    ...     search=DuckDuckGoSearch(), judge=HeuristicJudge(MiniLMEmbeddings())
    ... )
    >>> chain.invoke("The Eiffel Tower is in Rome.").verdict  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableParallel
from pydantic import BaseModel, ConfigDict, field_validator

from langchain_references.factcheck._wiring import ChainOptions, build_stages, wire
from langchain_references.factcheck.evidence import PassageIndex, merge_evidence
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PassageSplitter
from langchain_references.factcheck.relevance import DEFAULT_K
from langchain_references.factcheck.result import PROGRESS_EVENT, FactCheckResult
from langchain_references.factcheck.search.base import (
    DEFAULT_K as DEFAULT_MAX_RESULTS,
)
from langchain_references.factcheck.search.base import SearchProvider
from langchain_references.factcheck.served import ServedCorpus
from langchain_references.factcheck.stages import FactCheckStage, FactCheckState, to_result
from langchain_references.factcheck.verdict import Aggregator
from langchain_references.judges.base import JudgeInputLike, Judgement
from langchain_references.services.ratelimit import RateLimiter
from langchain_references.services.retrieval import DEFAULT_RETRIEVAL, Retrieval
from langchain_references.services.runcache import RunCache, content_key

if TYPE_CHECKING:
    from langchain_chroma import Chroma
    from langchain_core.runnables.graph import Graph

__all__ = [
    "DEFAULT_JUDGE_CONCURRENCY",
    "ITEM_NAMESPACE",
    "PROGRESS_EVENT",
    "FactCheckChain",
    "FactCheckInput",
    "FactCheckRequest",
    "coerce_request",
    "create_fact_check_chain",
]

#: Default number of judge calls in flight (when the caller's config sets no
#: ``max_concurrency``).
DEFAULT_JUDGE_CONCURRENCY: Final = 4
#: Namespace of the finished checks in a run cache.
ITEM_NAMESPACE: Final = "factcheck"

logger = logging.getLogger(__name__)

T = TypeVar("T")


class FactCheckRequest(BaseModel):
    """Input of the chain in mapping form.

    Attributes:
        statement: The statement to check (non-blank).
        query: The search query; defaults to the statement.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    statement: str
    query: str | None = None

    @field_validator("statement")
    @classmethod
    def _statement_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("statement is blank")
        return " ".join(value.split())

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("query is blank")
        return " ".join(value.split()) if value is not None else None

    @property
    def search_query(self) -> str:
        """The query sent to the search provider."""
        return self.query or self.statement


FactCheckInput: TypeAlias = str | FactCheckRequest | Mapping[str, Any]
"""A statement, a :class:`FactCheckRequest`, or ``{"statement": ..., "query": ...}``."""


def coerce_request(value: object) -> FactCheckRequest:
    """Validate the chain input.

    Args:
        value: A statement string, a :class:`FactCheckRequest`, or a mapping with a
            ``statement`` string (and optionally a ``query`` string).

    Returns:
        The validated request (whitespace in the statement collapsed).

    Raises:
        TypeError: If ``value`` is neither a string, a request nor a mapping.
        ValueError: If the statement is missing, not a string, or blank
            (``pydantic.ValidationError`` is a ``ValueError``).
    """
    if isinstance(value, FactCheckRequest):
        return value
    if isinstance(value, str):
        return FactCheckRequest(statement=value)
    if isinstance(value, Mapping):
        return FactCheckRequest.model_validate(dict(value), strict=True)
    raise TypeError(
        "the fact-check chain takes a statement string or {'statement': ...}, "
        f"not {type(value).__name__}"
    )


def _prepare(value: object) -> FactCheckState:
    """The ``prepare`` step: validate the input and start the clock."""
    request = coerce_request(value)
    return FactCheckState.begin(request.statement, request.search_query)


def _step(func: Callable[[Any], T], name: str) -> Runnable[Any, T]:
    """A cheap step that runs the same function on both paths (no executor on the async one)."""

    async def afunc(value: Any) -> T:
        return func(value)

    return RunnableLambda(func, afunc=afunc, name=name)


class FactCheckChain(Runnable[FactCheckInput, FactCheckResult]):
    """Runnable that checks a statement against web or index evidence; see the module docs.

    Build it with :func:`create_fact_check_chain` (the same callable). Every call runs
    :attr:`pipeline`, the LCEL composition of the stages (its run is named after the chain);
    the components are fixed when the chain is built.

    Args:
        search: Search provider (``search(query, k)`` / ``asearch(query, k)`` returning ranked
            :class:`~langchain_references.factcheck.types.SearchHit` objects). ``None`` with an
            ``index``: no web evidence.
        judge: Runnable ``{"statement", "passage"} -> Judgement``, e.g. an
            :class:`~langchain_references.judges.LLMJudge`.
        embeddings: Embeddings of the relevance stage (statement and passages). Defaults
            to the offline :class:`~langchain_references.services.embeddings.MiniLMEmbeddings`
            unless ``vector_store`` is given.
        fetcher: Page fetcher; defaults to ``PageFetcher()`` (public addresses only, 10 s and
            2 MB per page). Pass ``PageFetcher(allow_private=True)`` for a local server.
        splitter: Passage splitter; defaults to ``PassageSplitter()`` (256-token passages).
        aggregator: Turns the judgements into a verdict; defaults to
            :class:`~langchain_references.factcheck.verdict.WeightedVoteAggregator`.
        k: Number of passages kept by the relevance stage and judged.
        max_results: Number of search results fetched.
        vector_store: An existing Chroma store for the relevance stage, which then embeds
            the passages (they are added under a run tag and removed afterwards).
        max_concurrency: Judge calls in flight when the caller's ``config`` sets no
            ``max_concurrency`` (the caller's value wins).
        weight_by: Rank given to the aggregator for each passage: its position in the
            relevance ranking (``"relevance"``, 0 = most similar) or its page's search rank
            (``"search"``).
        retrieval: How the relevance stage ranks the passages: ``"dense"`` (cosine),
            ``"bm25"``, or ``"hybrid"`` (the default: both, fused by reciprocal rank). A
            :class:`~langchain_references.judges.HeuristicJudge` given the same ``embeddings``
            object reuses the passages' vectors (each passage is embedded once per run).
        name: Name of the runnable in traces.
        cache: Run cache of finished checks, searches, pages and judgements (module docs).
        limiter: Rate limits of the searches and the default fetcher (module docs).
        search_identity: What distinguishes this search back-end's results from another's
            of the same name (e.g. a recording's digest); part of the cache keys. Never a
            local server's address, which changes with every run: name a served corpus by
            ``corpus`` instead.
        corpus: The corpus the search links to when it is served on a local port
            (:class:`~langchain_references.factcheck.served.ServedCorpus`): the searches and
            the default fetcher's pages are keyed by its stable links, and its identity (the
            pages' digest) stands for the search in the cache keys when ``search_identity`` is
            empty.
        index: An evidence index whose ``k`` closest passages are judged as well (module
            docs); its ``name`` is part of the cache keys.

    Raises:
        TypeError: If a component has the wrong type.
        ValueError: If a number is out of range, both ``embeddings`` and ``vector_store`` are
            given, or neither ``search`` nor ``index`` is.

    Attributes:
        stages: The stage objects: the web's in run order, then the index's, the judge and
            the aggregate stage.
        pipeline: ``prepare | search | ... | aggregate | result`` (module docs).
        judge_info: Which judge it is (kind, model, description), as every result names it.
    """

    def __init__(
        self,
        *,
        search: SearchProvider | None = None,
        judge: Runnable[JudgeInputLike, Judgement],
        embeddings: Embeddings | None = None,
        fetcher: PageFetcher | None = None,
        splitter: PassageSplitter | None = None,
        aggregator: Aggregator | None = None,
        k: int = DEFAULT_K,
        max_results: int = DEFAULT_MAX_RESULTS,
        vector_store: Chroma | None = None,
        max_concurrency: int = DEFAULT_JUDGE_CONCURRENCY,
        weight_by: Literal["relevance", "search"] = "relevance",
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        name: str | None = "fact_check",
        cache: RunCache | None = None,
        limiter: RateLimiter | None = None,
        search_identity: str = "",
        index: PassageIndex | None = None,
        corpus: ServedCorpus | None = None,
    ) -> None:
        options = ChainOptions(
            search=search,
            judge=judge,
            embeddings=embeddings,
            fetcher=fetcher,
            splitter=splitter,
            aggregator=aggregator,
            k=k,
            max_results=max_results,
            vector_store=vector_store,
            max_concurrency=max_concurrency,
            weight_by=weight_by,
            retrieval=retrieval,
            name=name,
            cache=cache,
            limiter=limiter,
            search_identity=search_identity,
            index=index,
            corpus=corpus,
        )
        wiring = wire(options)
        stages = build_stages(options, wiring)
        self.cache = cache
        self.limiter = limiter
        self.corpus = corpus
        self.search_identity = wiring.search_identity
        self._fingerprint = wiring.fingerprint
        self.search = wiring.search
        self.judge = wiring.judge
        self.embeddings = wiring.embeddings
        self.vector_store = vector_store
        self.fetcher = wiring.fetcher
        self.splitter = wiring.splitter
        self.aggregator: Aggregator = wiring.aggregator
        self.k = k
        self.max_results = max_results
        self.max_concurrency = max_concurrency
        self.weight_by = weight_by
        self.name = name
        self.index = index
        self._web: tuple[FactCheckStage[Any], ...] = stages.web
        self._index_stage = stages.index
        self._judge_stage = stages.judge
        self._aggregate_stage = stages.aggregate
        self.stages: tuple[FactCheckStage[Any], ...] = stages.all
        self.judge_info = self._judge_stage.info
        self.pipeline: Runnable[FactCheckInput, FactCheckResult] = self._compose()

    def item_key(self, input: FactCheckInput) -> str:
        """The run-cache key of a check: its statement, query, and the chain's settings.

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.

        Returns:
            The key (:func:`~langchain_references.services.runcache.content_key`).

        Raises:
            TypeError: If the input has the wrong type.
            ValueError: If the statement is missing or blank.
        """
        request = coerce_request(input)
        return content_key("factcheck", request.statement, request.search_query, self._fingerprint)

    def cached_result(self, input: FactCheckInput) -> FactCheckResult | None:
        """The finished check of ``input`` in the run cache, if it reuses and has one.

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.

        Returns:
            The stored result, or ``None`` (no cache, not reusing, not finished).
        """
        if self.cache is None:
            return None
        value = self.cache.get(ITEM_NAMESPACE, self.item_key(input))
        if value is None:
            return None
        try:
            return FactCheckResult.model_validate(value)
        except ValueError as exc:
            logger.warning("Ignoring a malformed cached fact-check result: %s", exc)
            return None

    def _record(self, input: FactCheckInput, result: FactCheckResult) -> None:
        """Store a finished check: checked, and no judgement failed (else it is redone)."""
        if self.cache is not None and result.checked and not result.counts.judge_errors:
            self.cache.put(ITEM_NAMESPACE, self.item_key(input), result.model_dump(mode="json"))

    def _evidence(self) -> Runnable[FactCheckState, FactCheckState]:
        """The stages that find the passages to judge: the web's, the index's, or both."""
        web: Runnable[FactCheckState, FactCheckState] | None = None
        for stage in self._web:
            web = stage.as_runnable() if web is None else web | stage.as_runnable()
        index = None if self._index_stage is None else self._index_stage.as_runnable()
        if web is not None and index is not None:
            return RunnableParallel(index=index, web=web) | _step(merge_evidence, "merge")
        (found,) = [source for source in (web, index) if source is not None]
        return found

    def _compose(self) -> Runnable[FactCheckInput, FactCheckResult]:
        steps = (
            _step(_prepare, "prepare")
            | self._evidence()
            | self._judge_stage.as_runnable()
            | self._aggregate_stage.as_runnable()
            | _step(to_result, "result")
        )
        return steps.with_config(run_name=self.get_name())

    # ----------------------------------------------------------------------- Runnable API

    # The output type is the class's generic argument (Runnable's own OutputType reads it).

    @property
    def InputType(self) -> type[FactCheckRequest]:  # noqa: N802 - Runnable API name
        """The input type (a bare statement string is accepted too)."""
        return FactCheckRequest

    def get_graph(self, config: RunnableConfig | None = None) -> Graph:
        """The graph of the stages.

        Args:
            config: Runnable config.

        Returns:
            The graph of :attr:`pipeline`.
        """
        return self.pipeline.get_graph(config)

    def invoke(
        self, input: FactCheckInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> FactCheckResult:
        """Check one statement with the sync APIs of the components.

        Works inside a running event loop too (only the page fetcher drives async I/O, on a
        worker thread's loop then).

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.
            config: Runnable config (callbacks, tags, ``max_concurrency`` of the judge...).
            **kwargs: Ignored.

        Returns:
            The result (from the run cache when it reuses and has it).

        Raises:
            TypeError: If the input has the wrong type.
            ValueError: If the statement is missing or blank.
        """
        cached = self.cached_result(input)
        if cached is not None:
            return cached
        result = self.pipeline.invoke(input, config)
        self._record(input, result)
        return result

    async def ainvoke(
        self, input: FactCheckInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> FactCheckResult:
        """Check one statement with the async APIs of the components (see :meth:`invoke`).

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.
            config: Runnable config.
            **kwargs: Ignored.

        Returns:
            The result.
        """
        cached = await asyncio.to_thread(self.cached_result, input)
        if cached is not None:
            return cached
        result = await self.pipeline.ainvoke(input, config)
        await asyncio.to_thread(self._record, input, result)
        return result

    def stream(
        self, input: FactCheckInput, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> Iterator[FactCheckResult]:
        """Check one statement like :meth:`invoke`; yields the result (progress: module docs).

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.
            config: Runnable config.
            **kwargs: Ignored.

        Yields:
            The result, the only item.
        """
        yield from self.pipeline.stream(input, config)

    async def astream(
        self, input: FactCheckInput, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> AsyncIterator[FactCheckResult]:
        """Async :meth:`stream` (the components' async APIs, as :meth:`ainvoke`): same arguments.

        Yields:
            The result, the only item.
        """
        async for item in self.pipeline.astream(input, config):
            yield item


#: Build the fact-check chain: the class itself, whose docstring documents the arguments.
create_fact_check_chain = FactCheckChain
