"""The fact-check chain: verify a statement against evidence found on the web.

:func:`create_fact_check_chain` builds a :class:`FactCheckChain`, a LangChain
:class:`~langchain_core.runnables.Runnable` that takes a statement (a string, or
``{"statement": ..., "query": ...}``) and returns a
:class:`~langchain_references.factcheck.result.FactCheckResult`. The stages are:

1. **search** — ask the search provider for up to ``max_results`` hits (the search rank is kept
   with every source from here on);
2. **fetch** — download the hits concurrently with
   :class:`~langchain_references.factcheck.fetch.PageFetcher` (SSRF-guarded, bounded);
3. **extract** — main text and title of each page (trafilatura);
4. **passages** — deduplicated, token-bounded passages;
5. **relevance** — the ``k`` passages closest to the statement (Chroma, cosine);
6. **judge** — the judge runnable on every kept passage (``abatch`` with ``max_concurrency``);
   a failed judgement counts as *unknown* and is recorded;
7. **aggregate** — the aggregator (default
   :class:`~langchain_references.factcheck.verdict.WeightedVoteAggregator`) gives the verdict.

A source that fails at any stage is recorded in ``FactCheckResult.failed_sources`` and the run
goes on with the others. The time spent in each stage is in ``FactCheckResult.timings``.

``ainvoke`` / ``abatch`` are natively async: network I/O is awaited, CPU-bound steps (text
extraction, passage splitting, embedding) run in the default executor. ``invoke`` / ``batch``
run the same pipeline on a private event loop, with the sync ``search`` / ``batch`` of the
search provider and the judge. ``astream`` yields
:class:`~langchain_references.factcheck.result.FactCheckProgress` events while the stages run
and the result last (the sync ``stream`` yields only the result). Callbacks and
``astream_events`` see the judge calls as child runs, and each progress event is also
dispatched as the custom callback event :data:`PROGRESS_EVENT`.

Example:
    >>> from langchain_references.embeddings import MiniLMEmbeddings  # doctest: +SKIP
    >>> from langchain_references.factcheck import DuckDuckGoSearch  # doctest: +SKIP
    >>> from langchain_references.factcheck import HeuristicJudge  # doctest: +SKIP
    >>> chain = create_fact_check_chain(  # doctest: +SKIP
    ...     search=DuckDuckGoSearch(), judge=HeuristicJudge(MiniLMEmbeddings())
    ... )
    >>> chain.invoke("The Eiffel Tower is in Rome.").verdict  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, cast

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import patch_config, run_in_executor
from pydantic import BaseModel, ConfigDict, field_validator

from langchain_references.factcheck.extract import aextract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PassageSplitter
from langchain_references.factcheck.relevance import DEFAULT_K, aselect_relevant
from langchain_references.factcheck.result import (
    Evidence,
    FactCheckCounts,
    FactCheckProgress,
    FactCheckResult,
    Stage,
)
from langchain_references.factcheck.search.base import (
    DEFAULT_K as DEFAULT_MAX_RESULTS,
)
from langchain_references.factcheck.search.base import (
    SearchProvider,
    asearch_report,
    search_report,
)
from langchain_references.factcheck.types import Passage
from langchain_references.factcheck.verdict import (
    Aggregator,
    RankedJudgement,
    WeightedVoteAggregator,
)
from langchain_references.failures import Failure
from langchain_references.judges.base import JudgeInputLike, Judgement, Label

if TYPE_CHECKING:
    from langchain_chroma import Chroma

__all__ = [
    "DEFAULT_JUDGE_CONCURRENCY",
    "PROGRESS_EVENT",
    "FactCheckChain",
    "FactCheckInput",
    "FactCheckRequest",
    "coerce_request",
    "create_fact_check_chain",
]

logger = logging.getLogger(__name__)

#: Name of the custom callback event that carries each :class:`FactCheckProgress`.
PROGRESS_EVENT: Final = "factcheck_progress"
#: Default number of judge calls in flight.
DEFAULT_JUDGE_CONCURRENCY: Final = 4

T = TypeVar("T")
ProgressSink: TypeAlias = Callable[[FactCheckProgress], None]


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


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when this thread already runs an event loop.

    With a running loop (a notebook cell, an async framework calling ``invoke``), the
    coroutine runs on a fresh loop in a worker thread, with the caller's context variables.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lcr-factcheck") as pool:
        return pool.submit(context.run, asyncio.run, coro).result()


class _StageRun:
    """What a stage reports when it ends."""

    __slots__ = ("counts", "detail")

    def __init__(self) -> None:
        self.detail = ""
        self.counts: dict[str, int] = {}

    def done(self, detail: str, **counts: int) -> None:
        self.detail = detail
        self.counts = counts


class _Progress:
    """Times the stages and reports progress to the stream sink and to the callbacks."""

    def __init__(self, statement: str, config: RunnableConfig, sink: ProgressSink | None) -> None:
        self.statement = statement
        self.config = config
        self.sink = sink
        self.timings: dict[Stage, float] = {}

    async def emit(self, event: FactCheckProgress) -> None:
        if self.sink is not None:
            self.sink(event)
        await adispatch_custom_event(PROGRESS_EVENT, event, config=self.config)

    @contextlib.asynccontextmanager
    async def stage(self, stage: Stage, detail: str) -> AsyncIterator[_StageRun]:
        await self.emit(
            FactCheckProgress(statement=self.statement, stage=stage, done=False, detail=detail)
        )
        run = _StageRun()
        start = time.perf_counter()
        yield run
        elapsed = time.perf_counter() - start
        self.timings[stage] = elapsed
        logger.debug("Stage %s took %.3fs: %s", stage, elapsed, run.detail)
        await self.emit(
            FactCheckProgress(
                statement=self.statement,
                stage=stage,
                done=True,
                detail=run.detail,
                counts=run.counts,
                elapsed_s=elapsed,
            )
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _as_judgement(output: object) -> Judgement:
    if isinstance(output, Judgement):
        return output
    if isinstance(output, BaseException):
        return Judgement.failed(f"{type(output).__name__}: {output}")
    return Judgement.failed(f"the judge returned {type(output).__name__}, not a Judgement")


def _to_evidence(
    selected: Sequence[tuple[Passage, float]], judgements: Sequence[Judgement]
) -> list[Evidence]:
    return [
        Evidence(
            text=passage.text,
            url=passage.url,
            title=passage.title,
            rank=passage.rank,
            relevance_rank=position,
            similarity=similarity,
            label=judgement.label,
            confidence=judgement.confidence,
            rationale=judgement.rationale,
            error=judgement.error,
        )
        for position, ((passage, similarity), judgement) in enumerate(
            zip(selected, judgements, strict=True)
        )
    ]


def _with_label(evidence: Sequence[Evidence], label: Label) -> list[Evidence]:
    """The evidence with ``label``, most confident first (then most relevant)."""
    chosen = [e for e in evidence if e.label is label]
    return sorted(chosen, key=lambda e: (-e.confidence, e.relevance_rank))


class FactCheckChain(Runnable[FactCheckInput, FactCheckResult]):
    """Runnable that checks a statement against web evidence; see the module docs.

    Build it with :func:`create_fact_check_chain`, which documents the arguments.
    """

    def __init__(
        self,
        *,
        search: SearchProvider,
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
        name: str | None = "fact_check",
    ) -> None:
        if not isinstance(search, SearchProvider):
            raise TypeError(
                f"search must have search() and asearch() methods, not {type(search).__name__}"
            )
        if not isinstance(judge, Runnable):
            raise TypeError(f"judge must be a Runnable, not {type(judge).__name__}")
        if embeddings is not None and not isinstance(embeddings, Embeddings):
            raise TypeError(f"embeddings must be an Embeddings, not {type(embeddings).__name__}")
        if embeddings is not None and vector_store is not None:
            raise ValueError("pass embeddings or vector_store, not both: the store embeds itself")
        if fetcher is not None and not isinstance(fetcher, PageFetcher):
            raise TypeError(f"fetcher must be a PageFetcher, not {type(fetcher).__name__}")
        if splitter is not None and not isinstance(splitter, PassageSplitter):
            raise TypeError(f"splitter must be a PassageSplitter, not {type(splitter).__name__}")
        if aggregator is not None and not isinstance(aggregator, Aggregator):
            raise TypeError(
                f"aggregator must have an aggregate() method, not {type(aggregator).__name__}"
            )
        for label, value in (
            ("k", k),
            ("max_results", max_results),
            ("max_concurrency", max_concurrency),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
        if weight_by not in ("relevance", "search"):
            raise ValueError(f"weight_by must be 'relevance' or 'search', got {weight_by!r}")
        if embeddings is None and vector_store is None:
            from langchain_references.embeddings import MiniLMEmbeddings

            embeddings = MiniLMEmbeddings()
        self.search = search
        self.judge = judge
        self.embeddings = embeddings
        self.vector_store = vector_store
        self.fetcher = fetcher if fetcher is not None else PageFetcher()
        self.splitter = splitter if splitter is not None else PassageSplitter()
        self.aggregator: Aggregator = (
            aggregator if aggregator is not None else WeightedVoteAggregator()
        )
        self.k = k
        self.max_results = max_results
        self.max_concurrency = max_concurrency
        self.weight_by = weight_by
        self.name = name

    # ----------------------------------------------------------------------- Runnable API

    @property
    def InputType(self) -> type[FactCheckRequest]:  # noqa: N802 - Runnable API name
        """The input type (a bare statement string is accepted too)."""
        return FactCheckRequest

    @property
    def OutputType(self) -> type[FactCheckResult]:  # noqa: N802 - Runnable API name
        """The output type."""
        return FactCheckResult

    def invoke(
        self, input: FactCheckInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> FactCheckResult:
        """Check one statement.

        Runs the pipeline on a private event loop (in a worker thread if this thread already
        runs one), calling the search provider's and the judge's sync methods.

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.
            config: Runnable config (callbacks, tags, ...).
            **kwargs: Ignored.

        Returns:
            The result.

        Raises:
            TypeError: If the input has the wrong type.
            ValueError: If the statement is missing or blank.
        """
        return self._call_with_config(self._invoke, input, config)

    async def ainvoke(
        self, input: FactCheckInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> FactCheckResult:
        """Check one statement asynchronously (see :meth:`invoke`).

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.
            config: Runnable config.
            **kwargs: Ignored.

        Returns:
            The result.
        """
        return await self._acall_with_config(self._ainvoke, input, config)

    # Yields progress events before the result, so the items are wider than Output.
    async def astream(  # type: ignore[override]
        self,
        input: FactCheckInput,
        config: RunnableConfig | None = None,
        **kwargs: Any | None,
    ) -> AsyncIterator[FactCheckProgress | FactCheckResult]:
        """Check one statement, yielding progress events and then the result.

        Args:
            input: A statement, or ``{"statement": ..., "query": ...}``.
            config: Runnable config.
            **kwargs: Ignored.

        Yields:
            A :class:`FactCheckProgress` when each stage starts and ends, then the
            :class:`FactCheckResult` as the last item.
        """

        async def single() -> AsyncIterator[FactCheckInput]:
            yield input

        # The base class types the stream items as Output; ours also carry progress events.
        stream = cast(
            "AsyncIterator[FactCheckProgress | FactCheckResult]",
            self._atransform_stream_with_config(single(), cast("Any", self._stream), config),
        )
        async for item in stream:
            yield item

    # ----------------------------------------------------------------------- internals

    def _invoke(
        self,
        input: FactCheckInput,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> FactCheckResult:
        request = coerce_request(input)
        return _run_sync(self._run(request, config, sync=True, sink=None))

    async def _ainvoke(
        self,
        input: FactCheckInput,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> FactCheckResult:
        return await self._run(coerce_request(input), config, sync=False, sink=None)

    async def _stream(
        self,
        inputs: AsyncIterator[FactCheckInput],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[FactCheckProgress | FactCheckResult]:
        last: object = None
        async for value in inputs:
            last = value
        request = coerce_request(last)
        queue: asyncio.Queue[FactCheckProgress | None] = asyncio.Queue()
        task = asyncio.create_task(self._run(request, config, sync=False, sink=queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            yield task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _in_thread(
        self, config: RunnableConfig, func: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:
        return await run_in_executor(config, func, *args, **kwargs)

    async def _run(
        self,
        request: FactCheckRequest,
        config: RunnableConfig,
        *,
        sync: bool,
        sink: ProgressSink | None,
    ) -> FactCheckResult:
        statement, query = request.statement, request.search_query
        progress = _Progress(statement, config, sink)
        failures: list[Failure] = []
        counts: dict[str, int] = {}
        started = time.perf_counter()

        provider = getattr(self.search, "name", type(self.search).__name__)
        async with progress.stage("search", f"searching {provider}") as stage:
            if sync:
                report = await self._in_thread(
                    config, search_report, self.search, query, self.max_results
                )
            else:
                report = await asearch_report(self.search, query, self.max_results)
            failures.extend(report.failures)
            counts["hits"] = len(report.hits)
            detail = _plural(len(report.hits), "hit")
            if report.failures:
                detail += f"; search failed: {report.failures[0].reason}"
            stage.done(detail, hits=len(report.hits), failed=len(report.failures))

        async with progress.stage(
            "fetch", f"fetching {_plural(len(report.hits), 'page')}"
        ) as stage:
            fetched = await self.fetcher.afetch_all(report.hits)
            failures.extend(fetched.failures)
            counts["fetched"] = len(fetched.pages)
            stage.done(
                f"{_plural(len(fetched.pages), 'page')}, {len(fetched.failures)} failed",
                pages=len(fetched.pages),
                failed=len(fetched.failures),
            )

        async with progress.stage(
            "extract", f"extracting {_plural(len(fetched.pages), 'page')}"
        ) as stage:
            extracted = await aextract_all(fetched.pages)
            failures.extend(extracted.failures)
            counts["extracted"] = len(extracted.pages)
            stage.done(
                f"{_plural(len(extracted.pages), 'page')} with text, "
                f"{len(extracted.failures)} failed",
                pages=len(extracted.pages),
                failed=len(extracted.failures),
            )

        async with progress.stage(
            "passages", f"splitting {_plural(len(extracted.pages), 'page')}"
        ) as stage:
            passages: list[Passage] = await self._in_thread(
                config, self.splitter.split, extracted.pages
            )
            counts["passages"] = len(passages)
            stage.done(_plural(len(passages), "passage"), passages=len(passages))

        async with progress.stage(
            "relevance", f"ranking {_plural(len(passages), 'passage')}"
        ) as stage:
            selected = await aselect_relevant(
                statement,
                passages,
                embeddings=self.embeddings,
                k=self.k,
                store=self.vector_store,
            )
            counts["judged"] = len(selected)
            stage.done(f"kept {_plural(len(selected), 'passage')}", kept=len(selected))

        async with progress.stage("judge", f"judging {_plural(len(selected), 'passage')}") as stage:
            judgements = await self._judge(statement, selected, config, sync=sync)
            evidence = _to_evidence(selected, judgements)
            failures.extend(
                Failure(url=e.url, stage="judge", reason=e.error, rank=e.rank)
                for e in evidence
                if e.error is not None
            )
            supporting = _with_label(evidence, Label.ENTAILS)
            contradicting = _with_label(evidence, Label.CONTRADICTS)
            errors = sum(1 for e in evidence if e.error is not None)
            neutral = len(evidence) - len(supporting) - len(contradicting) - errors
            counts.update(
                supporting=len(supporting),
                contradicting=len(contradicting),
                neutral=neutral,
                judge_errors=errors,
            )
            stage.done(
                f"{len(supporting)} supporting, {len(contradicting)} contradicting, "
                f"{neutral} neutral, {errors} failed",
                supporting=len(supporting),
                contradicting=len(contradicting),
                neutral=neutral,
                failed=errors,
            )

        async with progress.stage("aggregate", "weighing the evidence") as stage:
            ranked: list[RankedJudgement] = [
                (
                    judgement,
                    e.relevance_rank if self.weight_by == "relevance" else e.rank,
                    e.similarity,
                )
                for e, judgement in zip(evidence, judgements, strict=True)
            ]
            outcome = self.aggregator.aggregate(ranked)
            stage.done(f"{outcome.verdict.value} (confidence {outcome.confidence:.2f})")

        return FactCheckResult(
            statement=statement,
            verdict=outcome.verdict,
            confidence=outcome.confidence,
            score=outcome.score,
            supporting=supporting,
            contradicting=contradicting,
            neutral_count=neutral,
            failed_sources=failures,
            timings=progress.timings,
            total_s=time.perf_counter() - started,
            counts=FactCheckCounts(**counts),
            verdict_details=outcome.details,
        )

    async def _judge(
        self,
        statement: str,
        selected: Sequence[tuple[Passage, float]],
        config: RunnableConfig,
        *,
        sync: bool,
    ) -> list[Judgement]:
        if not selected:
            return []
        inputs: list[JudgeInputLike] = [
            {"statement": statement, "passage": passage.text} for passage, _ in selected
        ]
        judge_config = patch_config(config, max_concurrency=self.max_concurrency)
        outputs: Sequence[object]
        try:
            if sync:
                outputs = await self._in_thread(
                    config, self.judge.batch, inputs, judge_config, return_exceptions=True
                )
            else:
                outputs = await self.judge.abatch(inputs, judge_config, return_exceptions=True)
        except Exception as exc:  # a broken judge fails the passages, not the run
            logger.warning("The judge failed on the whole batch: %s: %s", type(exc).__name__, exc)
            outputs = [exc] * len(inputs)
        if len(outputs) != len(inputs):
            reason = f"the judge returned {len(outputs)} results for {len(inputs)} passages"
            outputs = [ValueError(reason)] * len(inputs)
        return [_as_judgement(output) for output in outputs]


def create_fact_check_chain(
    *,
    search: SearchProvider,
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
    name: str | None = "fact_check",
) -> FactCheckChain:
    """Build the fact-check chain.

    Args:
        search: Search provider (``search(query, k)`` / ``asearch(query, k)`` returning ranked
            :class:`~langchain_references.factcheck.types.SearchHit` objects).
        judge: Runnable ``{"statement", "passage"} -> Judgement``, e.g. an
            :class:`~langchain_references.judges.LLMJudge`.
        embeddings: Embeddings for the relevance stage's temporary Chroma collection. Defaults
            to the offline :class:`~langchain_references.embeddings.MiniLMEmbeddings` unless
            ``vector_store`` is given.
        fetcher: Page fetcher; defaults to ``PageFetcher()`` (public addresses only, 10 s and
            2 MB per page). Pass ``PageFetcher(allow_private=True)`` for a local server.
        splitter: Passage splitter; defaults to ``PassageSplitter()`` (256-token passages).
        aggregator: Turns the judgements into a verdict; defaults to
            :class:`~langchain_references.factcheck.verdict.WeightedVoteAggregator`.
        k: Number of passages kept by the relevance stage and judged.
        max_results: Number of search results fetched.
        vector_store: An existing Chroma store for the relevance stage instead of a temporary
            collection (the passages are added under a run tag and removed afterwards).
        max_concurrency: Maximum number of judge calls in flight.
        weight_by: Rank given to the aggregator for each passage: its position in the
            relevance ranking (``"relevance"``, 0 = most similar) or its page's search rank
            (``"search"``).
        name: Name of the runnable in traces.

    Returns:
        The chain.

    Raises:
        TypeError: If a component has the wrong type.
        ValueError: If a number is out of range, or both ``embeddings`` and ``vector_store``
            are given.
    """
    return FactCheckChain(
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
        name=name,
    )
