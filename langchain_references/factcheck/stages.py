"""The stages of the fact-check chain: one small runnable each, with a sync and an async driver.

:class:`~langchain_references.factcheck.chain.FactCheckChain` composes them with LCEL::

    prepare | search | fetch | extract | passages | relevance | judge | aggregate | result

``prepare`` turns the request into a :class:`FactCheckState` (:meth:`FactCheckState.begin`),
each stage maps the state to the next one, and ``result`` (:func:`to_result`) builds the
:class:`~langchain_references.factcheck.result.FactCheckResult`.

A stage is a :class:`FactCheckStage`: it says what it starts on (:meth:`~FactCheckStage.describe`),
does its work through the sync APIs (:meth:`~FactCheckStage.work`: ``search_report``,
``PageFetcher.fetch_all``, ``extract_all``, ``PassageSplitter.split``, ``select_relevant``,
``judge.batch``) or the async ones (:meth:`~FactCheckStage.awork`), and turns the outcome into
the next state, a summary and counts (:meth:`~FactCheckStage.finish`). The two drivers,
:meth:`~FactCheckStage.invoke` and :meth:`~FactCheckStage.ainvoke`, only dispatch the progress
events (``dispatch_custom_event`` / ``adispatch_custom_event``) and call the matching work
method; the events, the timing, the recovery from a failed work call and every count, summary
and failure are decided once, in :class:`_StageRun` and the stages' ``finish``.

Progress: each stage dispatches the custom callback event
:data:`~langchain_references.factcheck.result.PROGRESS_EVENT` with a
:class:`~langchain_references.factcheck.result.FactCheckProgress` when it starts and when it
ends, under its own run (``astream_events`` and callback handlers' ``on_custom_event`` see
them, on both paths).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import run_in_executor
from typing_extensions import override

from langchain_references.factcheck.extract import aextract_all, extract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PassageSplitter
from langchain_references.factcheck.relevance import aselect_relevant, select_relevant
from langchain_references.factcheck.result import (
    PROGRESS_EVENT,
    Evidence,
    FactCheckCounts,
    FactCheckProgress,
    FactCheckResult,
    Stage,
)
from langchain_references.factcheck.search.base import (
    SearchProvider,
    asearch_report,
    search_report,
)
from langchain_references.factcheck.types import (
    ExtractedPage,
    ExtractReport,
    FetchedPage,
    FetchReport,
    Passage,
    SearchHit,
    SearchReport,
)
from langchain_references.factcheck.verdict import (
    Aggregator,
    RankedJudgement,
    Verdict,
    VerdictResult,
    could_not_check,
    verdict_note,
)
from langchain_references.failures import Failure
from langchain_references.judges.base import (
    JudgeInfo,
    JudgeInputLike,
    Judgement,
    Label,
    judge_info,
    raise_interrupts,
)
from langchain_references.services._concurrency import with_default_concurrency
from langchain_references.services.retrieval import DEFAULT_RETRIEVAL, Retrieval, check_retrieval

if TYPE_CHECKING:
    from langchain_chroma import Chroma

__all__ = [
    "AggregateStage",
    "ExtractStage",
    "FactCheckStage",
    "FactCheckState",
    "FetchStage",
    "JudgeStage",
    "PassagesStage",
    "RelevanceStage",
    "SearchStage",
    "StageEnd",
    "to_result",
    "unchecked_reason",
]

logger = logging.getLogger(__name__)

#: What a stage's work call produces.
W = TypeVar("W")


@dataclass(frozen=True)
class FactCheckState:
    """What flows from one stage to the next (each stage returns a new state).

    Attributes:
        statement: The statement being checked.
        query: The search query.
        started: ``time.perf_counter()`` when the check began.
        failures: Sources (or passages) that could not be used, in stage order.
        timings: ``(stage, seconds)`` of each stage that ran, in run order.
        counts: The :class:`~langchain_references.factcheck.result.FactCheckCounts` so far.
        hits: Search hits.
        pages: Fetched pages.
        extracted: Pages with main text.
        passages: Passages cut from the pages.
        selected: The passages kept for judging with their similarity, most similar first.
        evidence: The judged passages, in ``selected`` order.
        judgements: The judgements, in ``selected`` order.
        supporting: Evidence that entails the statement, most confident first.
        contradicting: Evidence that contradicts it, most confident first.
        outcome: The aggregator's verdict.
        judge: Which judge the judge stage ran (set by that stage).
    """

    statement: str
    query: str
    started: float
    failures: tuple[Failure, ...] = ()
    timings: tuple[tuple[Stage, float], ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    hits: tuple[SearchHit, ...] = ()
    pages: tuple[FetchedPage, ...] = ()
    extracted: tuple[ExtractedPage, ...] = ()
    passages: tuple[Passage, ...] = ()
    selected: tuple[tuple[Passage, float], ...] = ()
    evidence: tuple[Evidence, ...] = ()
    judgements: tuple[Judgement, ...] = ()
    supporting: tuple[Evidence, ...] = ()
    contradicting: tuple[Evidence, ...] = ()
    outcome: VerdictResult | None = None
    judge: JudgeInfo | None = None

    @classmethod
    def begin(cls, statement: str, query: str) -> FactCheckState:
        """The state before the first stage (starts the ``total_s`` clock).

        Args:
            statement: The statement to check.
            query: The search query.

        Returns:
            The initial state.
        """
        return cls(statement=statement, query=query, started=time.perf_counter())

    def advance(
        self,
        failures: Sequence[Failure] = (),
        counts: Mapping[str, int] | None = None,
        **changes: Any,
    ) -> FactCheckState:
        """The next state: more failures, updated counts and the given fields replaced.

        Args:
            failures: Failures to append.
            counts: Counts to set (the others are kept).
            **changes: Fields to replace.

        Returns:
            The new state.
        """
        return replace(
            self,
            failures=(*self.failures, *failures),
            counts={**self.counts, **(counts or {})},
            **changes,
        )


@dataclass(frozen=True)
class StageEnd:
    """How a stage ended: the next state and what its end event says.

    Attributes:
        state: The state for the next stage.
        detail: Human-readable summary.
        counts: Numbers behind the summary.
    """

    state: FactCheckState
    detail: str
    counts: dict[str, int] = field(default_factory=dict)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class FactCheckStage(ABC, Generic[W]):
    """One stage of the chain; :meth:`as_runnable` makes it a ``RunnableLambda``.

    Subclasses set :attr:`stage` and implement :meth:`describe`, :meth:`work`, :meth:`awork`
    and :meth:`finish`; :meth:`recover` may turn a failed work call into an outcome.
    """

    #: The stage name (also the name of its runs).
    stage: ClassVar[Stage]

    def as_runnable(self) -> Runnable[FactCheckState, FactCheckState]:
        """The stage as a runnable named after it.

        Returns:
            ``RunnableLambda(self.invoke, afunc=self.ainvoke)``.
        """
        return RunnableLambda(self.invoke, afunc=self.ainvoke, name=self.stage)

    @abstractmethod
    def describe(self, state: FactCheckState) -> str:
        """What the start event says, e.g. ``"fetching 5 pages"``."""

    @abstractmethod
    def work(self, state: FactCheckState, config: RunnableConfig) -> W:
        """Do the stage's work with the sync APIs."""

    @abstractmethod
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> W:
        """Do the stage's work with the async APIs."""

    @abstractmethod
    def finish(self, state: FactCheckState, outcome: W) -> StageEnd:
        """Turn the work's outcome into the next state and the end event's summary."""

    def recover(self, state: FactCheckState, exc: Exception) -> W:
        """The outcome of a work call that raised ``exc``; by default the error propagates.

        Args:
            state: The stage's input.
            exc: The error.

        Returns:
            An outcome standing for the failure.

        Raises:
            Exception: ``exc``, unless the stage can go on without its work.
        """
        raise exc

    def invoke(self, state: FactCheckState, config: RunnableConfig) -> FactCheckState:
        """Run the stage synchronously (the sync driver).

        Args:
            state: The previous stage's state.
            config: The config of the stage's run (its callbacks get the progress events).

        Returns:
            The next state.
        """
        run = _StageRun(self, state)
        dispatch_custom_event(PROGRESS_EVENT, run.started(), config=config)
        outcome = run.attempt(lambda: self.work(state, config))
        dispatch_custom_event(PROGRESS_EVENT, run.ended(outcome), config=config)
        return run.state

    async def ainvoke(self, state: FactCheckState, config: RunnableConfig) -> FactCheckState:
        """Run the stage asynchronously (the async driver).

        Args:
            state: The previous stage's state.
            config: The config of the stage's run.

        Returns:
            The next state.
        """
        run = _StageRun(self, state)
        await adispatch_custom_event(PROGRESS_EVENT, run.started(), config=config)
        outcome = await run.aattempt(lambda: self.awork(state, config))
        await adispatch_custom_event(PROGRESS_EVENT, run.ended(outcome), config=config)
        return run.state


class _StageRun(Generic[W]):
    """One run of a stage: builds its progress events, times it and applies its outcome."""

    def __init__(self, stage: FactCheckStage[W], state: FactCheckState) -> None:
        self.stage = stage
        self.state = state
        self._clock = time.perf_counter()

    def _event(self, **fields: Any) -> FactCheckProgress:
        return FactCheckProgress(statement=self.state.statement, stage=self.stage.stage, **fields)

    def started(self) -> FactCheckProgress:
        """The start event (``done=False``)."""
        return self._event(done=False, detail=self.stage.describe(self.state))

    def attempt(self, work: Callable[[], W]) -> W:
        """Start the clock and call ``work``; a failure goes to the stage's ``recover``."""
        self._clock = time.perf_counter()
        try:
            return work()
        except Exception as exc:
            return self.stage.recover(self.state, exc)

    async def aattempt(self, work: Callable[[], Awaitable[W]]) -> W:
        """Async :meth:`attempt`."""
        self._clock = time.perf_counter()
        try:
            return await work()
        except Exception as exc:
            return self.stage.recover(self.state, exc)

    def ended(self, outcome: W) -> FactCheckProgress:
        """Apply the outcome (``self.state`` becomes the next state) and build the end event."""
        end = self.stage.finish(self.state, outcome)
        elapsed = time.perf_counter() - self._clock
        logger.debug("Stage %s took %.3fs: %s", self.stage.stage, elapsed, end.detail)
        self.state = replace(end.state, timings=(*end.state.timings, (self.stage.stage, elapsed)))
        return self._event(done=True, detail=end.detail, counts=end.counts, elapsed_s=elapsed)


# --------------------------------------------------------------------------- the stages


class SearchStage(FactCheckStage[SearchReport]):
    """Ask the search provider for up to ``max_results`` hits (a failure is recorded).

    Args:
        search: The search provider.
        max_results: Number of hits asked for.
    """

    stage = "search"

    def __init__(self, search: SearchProvider, max_results: int) -> None:
        self.search = search
        self.max_results = max_results

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"searching {getattr(self.search, 'name', type(self.search).__name__)}"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> SearchReport:
        return search_report(self.search, state.query, self.max_results)

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> SearchReport:
        return await asearch_report(self.search, state.query, self.max_results)

    @override
    def finish(self, state: FactCheckState, outcome: SearchReport) -> StageEnd:
        hits = len(outcome.hits)
        detail = _plural(hits, "hit")
        if outcome.failures:
            detail += f"; search failed: {outcome.failures[0].reason}"
        return StageEnd(
            state.advance(outcome.failures, {"hits": hits}, hits=tuple(outcome.hits)),
            detail,
            {"hits": hits, "failed": len(outcome.failures)},
        )


def _pages_end(
    state: FactCheckState,
    report: FetchReport | ExtractReport,
    *,
    count: Literal["fetched", "extracted"],
    changes: dict[str, Any],
    what: str,
) -> StageEnd:
    """The end of the fetch and extract stages: pages kept, pages failed."""
    pages, failed = len(report.pages), len(report.failures)
    return StageEnd(
        state.advance(report.failures, {count: pages}, **changes),
        f"{_plural(pages, 'page')}{what}, {failed} failed",
        {"pages": pages, "failed": failed},
    )


class FetchStage(FactCheckStage[FetchReport]):
    """Download the hits concurrently with the page fetcher.

    Args:
        fetcher: The fetcher (SSRF-guarded, bounded).
    """

    stage = "fetch"

    def __init__(self, fetcher: PageFetcher) -> None:
        self.fetcher = fetcher

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"fetching {_plural(len(state.hits), 'page')}"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> FetchReport:
        return self.fetcher.fetch_all(state.hits)

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> FetchReport:
        return await self.fetcher.afetch_all(state.hits)

    @override
    def finish(self, state: FactCheckState, outcome: FetchReport) -> StageEnd:
        pages = tuple(outcome.pages)
        return _pages_end(state, outcome, count="fetched", changes={"pages": pages}, what="")


class ExtractStage(FactCheckStage[ExtractReport]):
    """Extract the main text and title of each page (trafilatura; CPU-bound)."""

    stage = "extract"

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"extracting {_plural(len(state.pages), 'page')}"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> ExtractReport:
        return extract_all(state.pages)

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> ExtractReport:
        return await aextract_all(state.pages)

    @override
    def finish(self, state: FactCheckState, outcome: ExtractReport) -> StageEnd:
        extracted = tuple(outcome.pages)
        changes = {"extracted": extracted}
        return _pages_end(state, outcome, count="extracted", changes=changes, what=" with text")


class PassagesStage(FactCheckStage[list[Passage]]):
    """Cut the pages into deduplicated, token-bounded passages.

    Args:
        splitter: The passage splitter.
    """

    stage = "passages"

    def __init__(self, splitter: PassageSplitter) -> None:
        self.splitter = splitter

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"splitting {_plural(len(state.extracted), 'page')}"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> list[Passage]:
        return self.splitter.split(state.extracted)

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> list[Passage]:
        return await run_in_executor(config, self.splitter.split, state.extracted)

    @override
    def finish(self, state: FactCheckState, outcome: list[Passage]) -> StageEnd:
        n = len(outcome)
        return StageEnd(
            state.advance(counts={"passages": n}, passages=tuple(outcome)),
            _plural(n, "passage"),
            {"passages": n},
        )


class RelevanceStage(FactCheckStage[list[tuple[Passage, float]]]):
    """Keep the ``k`` passages most relevant to the statement (dense, BM25 or both fused).

    Args:
        embeddings: Embeddings of the statement and passages (``None`` with ``vector_store``).
        vector_store: An existing Chroma store to use instead.
        k: Number of passages kept.
        retrieval: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (see
            :func:`~langchain_references.factcheck.relevance.select_relevant`).
    """

    stage = "relevance"

    def __init__(
        self,
        *,
        embeddings: Embeddings | None,
        vector_store: Chroma | None,
        k: int,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
    ) -> None:
        self.options: dict[str, Any] = {
            "embeddings": embeddings,
            "store": vector_store,
            "k": k,
            "retrieval": check_retrieval(retrieval),
        }

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"ranking {_plural(len(state.passages), 'passage')}"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> list[tuple[Passage, float]]:
        return select_relevant(state.statement, state.passages, **self.options)

    @override
    async def awork(
        self, state: FactCheckState, config: RunnableConfig
    ) -> list[tuple[Passage, float]]:
        return await aselect_relevant(state.statement, state.passages, **self.options)

    @override
    def finish(self, state: FactCheckState, outcome: list[tuple[Passage, float]]) -> StageEnd:
        kept = len(outcome)
        return StageEnd(
            state.advance(counts={"judged": kept}, selected=tuple(outcome)),
            f"kept {_plural(kept, 'passage')}",
            {"kept": kept},
        )


def _as_judgement(output: object) -> Judgement:
    if isinstance(output, Judgement):
        return output
    if isinstance(output, Exception):
        return Judgement.failed(f"{type(output).__name__}: {output}")
    return Judgement.failed(f"the judge returned {type(output).__name__}, not a Judgement")


def _to_evidence(
    selected: Sequence[tuple[Passage, float]], judgements: Sequence[Judgement]
) -> tuple[Evidence, ...]:
    return tuple(
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
    )


def _with_label(evidence: Sequence[Evidence], label: Label) -> tuple[Evidence, ...]:
    """The evidence with ``label``, most confident first (then most relevant)."""
    chosen = [e for e in evidence if e.label is label]
    return tuple(sorted(chosen, key=lambda e: (-e.confidence, e.relevance_rank)))


class JudgeStage(FactCheckStage[Sequence[object]]):
    """Judge every kept passage in one batch; a failed judgement counts as unknown.

    The batch runs with the caller's ``config["max_concurrency"]``, else ``max_concurrency``
    (:func:`~langchain_references.services._concurrency.with_default_concurrency`).

    The next state names the judge (:func:`~langchain_references.judges.base.judge_info`),
    which the result carries.

    Args:
        judge: Runnable ``{"statement", "passage"} -> Judgement``.
        max_concurrency: Judge calls in flight when the caller's config sets no limit.

    Attributes:
        info: Which judge it is.
    """

    stage = "judge"

    def __init__(self, judge: Runnable[JudgeInputLike, Judgement], max_concurrency: int) -> None:
        self.judge = judge
        self.max_concurrency = max_concurrency
        self.info = judge_info(judge)

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"judging {_plural(len(state.selected), 'passage')}"

    def _batch(
        self, state: FactCheckState, config: RunnableConfig
    ) -> tuple[list[JudgeInputLike], RunnableConfig]:
        """The judge's inputs and the batch config."""
        inputs: list[JudgeInputLike] = [
            {"statement": state.statement, "passage": passage.text} for passage, _ in state.selected
        ]
        return inputs, with_default_concurrency(config, self.max_concurrency)

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> Sequence[object]:
        return self.judge.batch(*self._batch(state, config), return_exceptions=True)

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> Sequence[object]:
        return await self.judge.abatch(*self._batch(state, config), return_exceptions=True)

    def recover(self, state: FactCheckState, exc: Exception) -> Sequence[object]:
        """A judge that fails on the whole batch fails every passage, not the run.

        Args:
            state: The stage's input.
            exc: The error.

        Returns:
            ``exc`` for every passage.
        """
        logger.warning("The judge failed on the whole batch: %s: %s", type(exc).__name__, exc)
        return [exc] * len(state.selected)

    @override
    def finish(self, state: FactCheckState, outcome: Sequence[object]) -> StageEnd:
        if len(outcome) != len(state.selected):
            reason = f"the judge returned {len(outcome)} results for {len(state.selected)} passages"
            outcome = [ValueError(reason)] * len(state.selected)
        raise_interrupts(outcome)  # Ctrl-C or a cancellation stops the run: not a failure
        judgements = tuple(_as_judgement(output) for output in outcome)
        evidence = _to_evidence(state.selected, judgements)
        failures = [
            Failure(url=e.url, stage="judge", reason=e.error, rank=e.rank)
            for e in evidence
            if e.error is not None
        ]
        supporting = _with_label(evidence, Label.ENTAILS)
        contradicting = _with_label(evidence, Label.CONTRADICTS)
        errors = len(failures)
        neutral = len(evidence) - len(supporting) - len(contradicting) - errors
        tally = {
            "supporting": len(supporting),
            "contradicting": len(contradicting),
            "neutral": neutral,
        }
        return StageEnd(
            state.advance(
                failures,
                {**tally, "judge_errors": errors},
                evidence=evidence,
                judgements=judgements,
                supporting=supporting,
                contradicting=contradicting,
                judge=self.info,
            ),
            f"{len(supporting)} supporting, {len(contradicting)} contradicting, "
            f"{neutral} neutral, {errors} failed",
            {**tally, "failed": errors},
        )


def _first_reason(state: FactCheckState, stage: Stage) -> str:
    reasons = [f.reason for f in state.failures if f.stage == stage]
    if not reasons:
        return ""
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return f": {reasons[0]}{more}"


def unchecked_reason(state: FactCheckState) -> str | None:
    """Why the statement could not be checked, or ``None`` if some passage was judged.

    A check is only a check if at least one judgement succeeded: a failed search, a search
    that found nothing, pages that could not be fetched or read, or a judge that failed on
    every passage leave nothing to weigh, which is an error, not "not enough evidence".

    Args:
        state: The state after the judge stage.

    Returns:
        The reason (the first stage that left nothing, with its first failure), or ``None``.
    """
    if any(judgement.ok for judgement in state.judgements):
        return None
    if not state.hits:
        if any(f.stage == "search" for f in state.failures):
            return "search failed" + _first_reason(state, "search")
        return f"the search found nothing for {state.query!r}"
    if not state.passages:  # an index gives passages directly; pages come from the web
        if not state.pages:
            return f"no page could be fetched ({_plural(len(state.hits), 'hit')})" + (
                _first_reason(state, "fetch")
            )
        if not state.extracted:
            return "no page had readable text" + _first_reason(state, "extract")
        return "no passage could be cut from the pages"
    if not state.selected:
        return "no passage was selected for judging"
    return f"the judge failed on all {_plural(len(state.judgements), 'passage')}" + (
        _first_reason(state, "judge")
    )


class AggregateStage(FactCheckStage[VerdictResult]):
    """Weigh the judgements into a verdict (cheap and CPU-bound: the same call on both paths).

    When no judgement succeeded (nothing found, fetched or judged) the aggregator is not
    called: the verdict is :attr:`~langchain_references.factcheck.verdict.Verdict.ERROR`
    with confidence 0 and the reason (:func:`unchecked_reason`), never a confident
    "not enough evidence".

    Args:
        aggregator: The aggregator.
        weight_by: Rank given for each passage: its relevance position or its search rank.
    """

    stage = "aggregate"

    def __init__(self, aggregator: Aggregator, weight_by: Literal["relevance", "search"]) -> None:
        self.aggregator = aggregator
        self.weight_by = weight_by

    @override
    def describe(self, state: FactCheckState) -> str:
        return "weighing the evidence"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> VerdictResult:
        reason = unchecked_reason(state)
        if reason is not None:
            logger.warning("Could not check %r: %s", state.statement, reason)
            return could_not_check(reason)
        ranked: list[RankedJudgement] = [
            (judgement, e.relevance_rank if self.weight_by == "relevance" else e.rank, e.similarity)
            for e, judgement in zip(state.evidence, state.judgements, strict=True)
        ]
        return self.aggregator.aggregate(ranked)

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> VerdictResult:
        return self.work(state, config)

    @override
    def finish(self, state: FactCheckState, outcome: VerdictResult) -> StageEnd:
        if outcome.verdict is Verdict.ERROR:
            detail = f"could not check: {outcome.details.get('error', 'unknown reason')}"
        else:
            note = verdict_note(outcome.verdict, outcome.confidence, outcome.score, outcome.details)
            detail = f"{outcome.verdict.value} ({note})"
        return StageEnd(state.advance(outcome=outcome), detail)


def to_result(state: FactCheckState) -> FactCheckResult:
    """Build the result from the state after the aggregate stage.

    Args:
        state: The final state.

    Returns:
        The result (``total_s`` measured from :meth:`FactCheckState.begin`); its ``error``
        is set when the verdict is ``error``.

    Raises:
        ValueError: If the aggregate stage has not run.
    """
    if state.outcome is None:
        raise ValueError("the aggregate stage has not run")
    outcome = state.outcome
    error: str | None = None
    if outcome.verdict is Verdict.ERROR:
        error = str(outcome.details.get("error") or "the statement could not be checked")
        outcome = could_not_check(error)
    return FactCheckResult(
        statement=state.statement,
        verdict=outcome.verdict,
        confidence=outcome.confidence,
        score=outcome.score,
        supporting=list(state.supporting),
        contradicting=list(state.contradicting),
        neutral_count=state.counts.get("neutral", 0),
        failed_sources=list(state.failures),
        timings=dict(state.timings),
        total_s=time.perf_counter() - state.started,
        counts=FactCheckCounts(**state.counts),
        verdict_details=outcome.details,
        error=error,
        judge=state.judge,
    )
