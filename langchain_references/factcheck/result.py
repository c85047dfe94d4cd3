"""Typed output of the fact-check chain: the result, its evidence and progress events.

:class:`FactCheckResult` is what the chain built by
:func:`~langchain_references.factcheck.chain.create_fact_check_chain` returns: the verdict
with its confidence and signed score, the passages that support or contradict the statement
(:class:`Evidence`, each traceable to its URL and search rank), the sources that failed and
why, and the time spent in each stage. :class:`FactCheckProgress` is the data of the custom
callback event :data:`PROGRESS_EVENT` that each stage of the chain dispatches when it starts
and when it ends (read it from ``astream_events`` or a callback handler's
``on_custom_event``, on the sync and async paths alike).

All models are frozen pydantic v2 models; ``to_json()`` gives the JSON that programs consume.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from langchain_references.factcheck.verdict import Verdict, could_not_check
from langchain_references.failures import Failure
from langchain_references.judges.base import JudgeInfo, Label

__all__ = [
    "PROGRESS_EVENT",
    "STAGES",
    "Evidence",
    "FactCheckCounts",
    "FactCheckProgress",
    "FactCheckResult",
    "Stage",
]

#: Name of the custom callback event whose data is a :class:`FactCheckProgress`.
PROGRESS_EVENT: Final = "factcheck_progress"
#: A stage of the fact-check chain, in run order.
Stage = Literal["search", "fetch", "extract", "passages", "relevance", "judge", "aggregate"]
#: The stages in run order.
STAGES: tuple[Stage, ...] = (
    "search",
    "fetch",
    "extract",
    "passages",
    "relevance",
    "judge",
    "aggregate",
)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Evidence(_Model):
    """A judged passage.

    Attributes:
        text: The passage text (retrieved data, not instructions).
        url: URL of the page it comes from (after redirects).
        title: Title of the page.
        rank: Search rank of the page (0 = first search result).
        relevance_rank: Position of the passage among the passages kept for judging
            (0 = most similar to the statement).
        similarity: Cosine similarity between the passage and the statement.
        label: The judge's label.
        confidence: The judge's confidence in ``label``, in ``[0, 1]``.
        rationale: The judge's explanation.
        error: Why the judge failed on this passage, if it did (the label is then unknown).
    """

    text: str
    url: str
    title: str
    rank: int = Field(ge=0)
    relevance_rank: int = Field(ge=0)
    similarity: float
    label: Label
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = ""
    error: str | None = None


class FactCheckCounts(_Model):
    """How many items each stage produced.

    Attributes:
        hits: Search hits.
        fetched: Pages downloaded.
        extracted: Pages with main text.
        passages: Passages cut from the pages.
        judged: Passages kept by the relevance stage and judged.
        supporting: Passages judged to entail the statement.
        contradicting: Passages judged to contradict it.
        neutral: Passages judged to say nothing about it.
        judge_errors: Passages the judge failed on.
    """

    hits: int = Field(default=0, ge=0)
    fetched: int = Field(default=0, ge=0)
    extracted: int = Field(default=0, ge=0)
    passages: int = Field(default=0, ge=0)
    judged: int = Field(default=0, ge=0)
    supporting: int = Field(default=0, ge=0)
    contradicting: int = Field(default=0, ge=0)
    neutral: int = Field(default=0, ge=0)
    judge_errors: int = Field(default=0, ge=0)


class FactCheckResult(_Model):
    """The outcome of checking one statement.

    Attributes:
        statement: The statement that was checked.
        verdict: Supported, refuted, not enough evidence, disputed, or
            :attr:`~langchain_references.factcheck.verdict.Verdict.ERROR` when the statement
            could not be checked (see ``error``).
        confidence: Confidence in the verdict, in ``[0, 1]`` (0 for an error).
        score: Signed evidence balance in ``[-1, 1]`` (positive supports, negative refutes).
        supporting: Passages judged to entail the statement, most confident first.
        contradicting: Passages judged to contradict it, most confident first.
        neutral_count: Number of judged passages that say nothing about the statement
            (judge failures not included; see ``counts.judge_errors``).
        failed_sources: Sources (or passages, at the ``"judge"`` stage) that could not be used,
            with the stage and the reason.
        timings: Seconds spent in each stage that ran, in run order.
        total_s: Seconds for the whole check.
        counts: Items produced by each stage.
        verdict_details: Aggregator-specific numbers (JSON-serialisable).
        error: Why the statement could not be checked: set exactly when ``verdict`` is
            ``error`` (e.g. ``"search failed: ..."``, ``"no page could be fetched: ..."``).
        judge: Which judge made the verdict (kind, model, description), as the chain's judge
            stage records it; ``None`` for a result built without one.
    """

    statement: str
    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    score: float = Field(ge=-1.0, le=1.0)
    supporting: list[Evidence] = Field(default_factory=list)
    contradicting: list[Evidence] = Field(default_factory=list)
    neutral_count: int = Field(default=0, ge=0)
    failed_sources: list[Failure] = Field(default_factory=list)
    timings: dict[Stage, float] = Field(default_factory=dict)
    total_s: float = Field(default=0.0, ge=0.0)
    counts: FactCheckCounts = Field(default_factory=FactCheckCounts)
    verdict_details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    judge: JudgeInfo | None = None

    @model_validator(mode="after")
    def _error_matches_verdict(self) -> FactCheckResult:
        if (self.verdict is Verdict.ERROR) != (self.error is not None):
            raise ValueError("error must be set exactly when the verdict is 'error'")
        if self.verdict is Verdict.ERROR and (self.confidence or self.score):
            raise ValueError("a statement that could not be checked has confidence and score 0")
        return self

    @classmethod
    def could_not_check(
        cls,
        statement: str,
        reason: str,
        *,
        failed_sources: list[Failure] | None = None,
        judge: JudgeInfo | None = None,
    ) -> FactCheckResult:
        """The result for a statement that could not be checked at all (e.g. the chain raised).

        Args:
            statement: The statement.
            reason: Why it could not be checked.
            failed_sources: The failures behind it, if known.
            judge: The judge the check would have used, if known.

        Returns:
            A result with verdict ``error``, confidence 0 and ``error`` = ``reason``.
        """
        outcome = could_not_check(reason)
        return cls(
            statement=statement,
            verdict=outcome.verdict,
            confidence=outcome.confidence,
            score=outcome.score,
            failed_sources=list(failed_sources or []),
            verdict_details=outcome.details,
            error=reason,
            judge=judge,
        )

    @property
    def checked(self) -> bool:
        """Whether the statement was checked (false when the verdict is ``error``)."""
        return self.verdict is not Verdict.ERROR

    @property
    def evidence(self) -> list[Evidence]:
        """Supporting then contradicting evidence."""
        return [*self.supporting, *self.contradicting]

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialise the result as JSON.

        Args:
            indent: Indentation for pretty printing; ``None`` for one compact line.

        Returns:
            The JSON text (enum values as strings, e.g. ``"verdict": "supported"``).
        """
        return self.model_dump_json(indent=indent)


class FactCheckProgress(_Model):
    """A progress event of the fact-check chain (the data of a :data:`PROGRESS_EVENT`).

    Each stage dispatches one event when it starts (``done=False``) and one when it ends
    (``done=True``, with its counts and duration), as a custom callback event: it reaches
    ``astream_events`` (``on_custom_event``) and callback handlers' ``on_custom_event``, and
    is never an item of ``stream`` / ``astream``.

    Attributes:
        statement: The statement being checked.
        stage: The stage.
        done: Whether the stage has finished.
        detail: Human-readable summary, e.g. ``"5 pages, 1 failed"``.
        counts: Numbers behind the summary (e.g. ``{"pages": 5, "failed": 1}``).
        elapsed_s: Seconds the stage took (0 for a start event).
    """

    statement: str
    stage: Stage
    done: bool
    detail: str = ""
    counts: dict[str, int] = Field(default_factory=dict)
    elapsed_s: float = Field(default=0.0, ge=0.0)
