"""Turn judgements of several evidence passages into one verdict about a statement.

An :class:`Aggregator` is anything with an ``aggregate`` method that takes a sequence of
``(judgement, rank, similarity)`` tuples (one per passage; ``rank`` 0 is the best-ranked
passage, ``similarity`` the retrieval score if known) and returns a :class:`VerdictResult`.
:class:`WeightedVoteAggregator` is the rank-weighted vote of the original notebook; a
probabilistic aggregator (e.g. a FactReasoner-style posterior over a factor graph) plugs in the
same way:

Examples:
    >>> class NoisyOrAggregator:
    ...     '''P(supported) = 1 - prod(1 - p_entail); same for refuted.'''
    ...
    ...     def aggregate(self, judgements):
    ...         p_sup = p_ref = 1.0
    ...         for judgement, _rank, _similarity in judgements:
    ...             probs = judgement.probabilities or {judgement.label: judgement.confidence}
    ...             p_sup *= 1 - probs.get(Label.ENTAILS, 0.0)
    ...             p_ref *= 1 - probs.get(Label.CONTRADICTS, 0.0)
    ...         score = (1 - p_sup) - (1 - p_ref)
    ...         verdict = (
    ...             Verdict.SUPPORTED if score > 0.5
    ...             else Verdict.REFUTED if score < -0.5
    ...             else Verdict.NOT_ENOUGH_EVIDENCE
    ...         )
    ...         return VerdictResult(verdict=verdict, confidence=abs(score), score=score)
    >>> isinstance(NoisyOrAggregator(), Aggregator)
    True
    >>> NoisyOrAggregator().aggregate(
    ...     [(Judgement(label=Label.ENTAILS, confidence=0.9), 0, None)]
    ... ).verdict
    <Verdict.SUPPORTED: 'supported'>
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from langchain_references.judges.base import Judgement, Label

__all__ = [
    "Aggregator",
    "RankedJudgement",
    "Verdict",
    "VerdictResult",
    "WeightedVoteAggregator",
    "could_not_check",
    "validate_ranked",
    "verdict_note",
]

RankedJudgement: TypeAlias = tuple[Judgement, int, float | None]
"""``(judgement, rank, similarity)``: rank 0 is the best-ranked passage."""


class Verdict(StrEnum):
    """The overall verdict about a statement."""

    SUPPORTED = "supported"
    REFUTED = "refuted"
    NOT_ENOUGH_EVIDENCE = "not_enough_evidence"
    DISPUTED = "disputed"
    """Strong support and strong refutation both exist (only if the strategy enables it)."""
    ERROR = "error"
    """The statement could not be checked ("could not check"): the search failed or found
    nothing, no page could be fetched or read, or no passage was judged successfully. Not a
    verdict about the statement: its confidence and score are 0 and the reason is given
    (:func:`could_not_check`). Aggregators never return it; the fact-check chain does when
    no judgement succeeded."""


class VerdictResult(BaseModel):
    """An aggregator's verdict.

    Attributes:
        verdict: The verdict.
        confidence: Confidence in the verdict, in ``[0, 1]``.
        score: Signed evidence balance in ``[-1, 1]``: positive supports, negative refutes.
        details: Strategy-specific numbers (counts, weights, ...), JSON-serialisable.
    """

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    score: float = Field(ge=-1.0, le=1.0)
    details: dict[str, Any] = Field(default_factory=dict)


def could_not_check(reason: str) -> VerdictResult:
    """The :attr:`Verdict.ERROR` result: confidence 0, score 0, ``details["error"]`` = reason.

    Args:
        reason: Why the statement could not be checked, e.g. ``"search failed: ..."``.

    Returns:
        The verdict result.

    Raises:
        ValueError: If ``reason`` is blank.
    """
    if not reason.strip():
        raise ValueError("the reason why a statement could not be checked must not be blank")
    return VerdictResult(
        verdict=Verdict.ERROR, confidence=0.0, score=0.0, details={"error": reason}
    )


#: How a verdict's score stands to its threshold: whether ``|score|`` is below it, and the
#: sign shown for a positive and a negative score (``+0.45 ≥ 0.30``, ``-0.45 ≤ -0.30``,
#: ``+0.29 < 0.30``, ``-0.29 > -0.30``).
_SIDES: Final = {
    Verdict.SUPPORTED: (False, "≥", "≥"),
    Verdict.REFUTED: (False, "≤", "≤"),
    Verdict.NOT_ENOUGH_EVIDENCE: (True, "<", ">"),
}


def _score(verdict: Verdict, score: float, details: Mapping[str, Any]) -> str:
    """The score, beside the threshold that decided the verdict when the details give it.

    The score has as many digits as it takes for the comparison shown to hold (two, up to
    six): ``+0.299 < 0.30``, never a rounded ``+0.30`` beside *not enough evidence*.
    """
    threshold = details.get("threshold")
    side = _SIDES.get(verdict)
    if side is None or isinstance(threshold, bool) or not isinstance(threshold, float | int):
        return f"{score:+.2f}"
    below, positive, negative = side
    limit = float(threshold)
    shown = f"{limit:.2f}" if float(f"{limit:.2f}") == limit else f"{limit:g}"
    digits = 2
    while digits < 6 and (abs(float(f"{score:.{digits}f}")) < limit) is not below:
        digits += 1
    if score < 0:
        return f"{score:+.{digits}f} {negative} -{shown}"
    return f"{score:+.{digits}f} {positive} {shown}"


def verdict_note(
    verdict: Verdict, confidence: float, score: float, details: Mapping[str, Any]
) -> str:
    """How a verdict's note reads for a person: the one rule of every report and progress line.

    A verdict about the statement shows its confidence and its score, the score beside the
    threshold that decided it when ``details["threshold"]`` gives one:
    ``confidence 75%, score +0.75 ≥ 0.30``. A *not enough evidence* verdict shows its score
    beside the threshold and no confidence: ``score +0.00 < 0.30``. Its confidence (for
    :class:`WeightedVoteAggregator`, its distance from the threshold) is 100% when no passage
    leans either way, which a reader would take for a certainty the evidence does not carry;
    it stays in the data (``confidence``, the JSON), only the text leaves it out.

    Args:
        verdict: The verdict; not :attr:`Verdict.ERROR` (the caller gives its reason).
        confidence: Its confidence, in ``[0, 1]``.
        score: Its signed score, in ``[-1, 1]``.
        details: The aggregator's details (``VerdictResult.details``,
            ``FactCheckResult.verdict_details``); only ``threshold`` is read.

    Returns:
        The note, without parentheses.

    Raises:
        ValueError: If ``verdict`` is :attr:`Verdict.ERROR`.

    Examples:
        >>> verdict_note(Verdict.SUPPORTED, 0.75, 0.75, {"threshold": 0.3})
        'confidence 75%, score +0.75 ≥ 0.30'
        >>> verdict_note(Verdict.NOT_ENOUGH_EVIDENCE, 1.0, 0.0, {"threshold": 0.3})
        'score +0.00 < 0.30'
        >>> verdict_note(Verdict.NOT_ENOUGH_EVIDENCE, 0.6, -0.12, {"threshold": 0.3})
        'score -0.12 > -0.30'
    """
    if verdict is Verdict.ERROR:
        raise ValueError("a statement that could not be checked has a reason, not a note")
    shown = f"score {_score(verdict, score, details)}"
    if verdict is Verdict.NOT_ENOUGH_EVIDENCE:
        return shown
    return f"confidence {confidence:.0%}, {shown}"


@runtime_checkable
class Aggregator(Protocol):
    """Strategy that turns per-passage judgements into a verdict."""

    def aggregate(self, judgements: Sequence[RankedJudgement]) -> VerdictResult:
        """Aggregate judgements.

        Args:
            judgements: ``(judgement, rank, similarity)`` tuples, one per passage.

        Returns:
            The verdict.
        """
        ...


def validate_ranked(judgements: Sequence[RankedJudgement]) -> list[RankedJudgement]:
    """Check aggregator input: a sequence of ``(Judgement, rank >= 0, similarity | None)``.

    Args:
        judgements: The input of :meth:`Aggregator.aggregate`.

    Returns:
        The items as a list.

    Raises:
        TypeError: If an item is not a 3-tuple of the right types.
        ValueError: If a rank is negative or a similarity is not finite.
    """
    if isinstance(judgements, str | bytes) or not isinstance(judgements, Sequence):
        raise TypeError("judgements must be a sequence of (Judgement, rank, similarity) tuples")
    items = list(judgements)
    for i, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) != 3:
            raise TypeError(f"judgements[{i}] must be a (Judgement, rank, similarity) tuple")
        judgement, rank, similarity = item
        if not isinstance(judgement, Judgement):
            raise TypeError(f"judgements[{i}][0] is {type(judgement).__name__}, not a Judgement")
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise TypeError(f"judgements[{i}] rank must be an int, not {type(rank).__name__}")
        if rank < 0:
            raise ValueError(f"judgements[{i}] rank must be >= 0, got {rank}")
        if similarity is not None and (
            isinstance(similarity, bool)
            or not isinstance(similarity, int | float)
            or not math.isfinite(similarity)
        ):
            raise ValueError(f"judgements[{i}] similarity must be a finite number or None")
    return items


@dataclass(frozen=True)
class WeightedVoteAggregator:
    """Rank-weighted vote (the rule of the original notebook).

    ``score = Σ sign(label) · confidence · w(rank) / Σ w(rank)`` with ``sign`` = +1 for
    *entails*, −1 for *contradicts*, 0 for *unknown*, and ``w(rank) = (rank + 1) ** -exponent``.
    The similarity is not used. Failed judgements (``error`` set) are skipped entirely.

    By default the denominator sums over *entails* and *contradicts* judgements only
    (``count_unknown=False``): a passage that says nothing about the statement neither
    supports nor dilutes the others, so one relevant, confidently entailing passage among
    four off-topic ones gives a supported verdict. With ``count_unknown=True`` unknown
    judgements count in the denominator, which pulls the score towards 0 when most evidence is
    off-topic. Measured on the 768 Climate-FEVER dev claims with the gold evidence labels as
    judgements (``benchmarks/eval_climate_fever.py --judge gold``), claim-label accuracy is
    1.000 with the default and 0.832 with ``count_unknown=True`` (``disputed_threshold=0.5``;
    0.908 vs 0.740 without the disputed verdict). The 1.000 only says that the default rule
    reproduces the dataset's own label definition (supported if some evidence supports and
    none refutes, ...) when the pair labels are right.

    Verdict: ``|score| < threshold`` gives *not enough evidence*, else *supported* (score > 0)
    or *refuted*. Confidence is ``|score|`` for supported / refuted and
    ``1 - |score| / threshold`` for not enough evidence (1 when no passage leans either way: a
    distance from the threshold, not a certainty, so what people read shows that verdict's
    score beside the threshold instead, :func:`verdict_note`). If ``disputed_threshold`` is set
    and some *entails* and some *contradicts* judgement both have confidence ≥ it, the verdict
    is *disputed* with confidence ``min`` of the two best confidences.

    Args:
        threshold: Minimum ``|score|`` for a supported / refuted verdict, in ``(0, 1]``.
        exponent: Power-law exponent of the rank weight (0 = unweighted).
        count_unknown: Count *unknown* judgements in the denominator.
        disputed_threshold: Enable the *disputed* verdict at this confidence (``None`` =
            never disputed).

    Raises:
        ValueError: If a parameter is out of range.
    """

    threshold: float = 0.3
    exponent: float = 1.0
    count_unknown: bool = False
    disputed_threshold: float | None = None

    def __post_init__(self) -> None:
        if not (0.0 < self.threshold <= 1.0):
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if not (math.isfinite(self.exponent) and self.exponent >= 0.0):
            raise ValueError(f"exponent must be a finite number >= 0, got {self.exponent}")
        if self.disputed_threshold is not None and not (0.0 <= self.disputed_threshold <= 1.0):
            raise ValueError(f"disputed_threshold must be in [0, 1], got {self.disputed_threshold}")

    def weight(self, rank: int) -> float:
        """Weight of the passage at ``rank`` (0-based): ``(rank + 1) ** -exponent``.

        Args:
            rank: The rank.

        Returns:
            The weight, in ``(0, 1]``.
        """
        return float((rank + 1) ** -self.exponent)

    def aggregate(self, judgements: Sequence[RankedJudgement]) -> VerdictResult:
        """Aggregate judgements by a rank-weighted vote.

        Args:
            judgements: ``(judgement, rank, similarity)`` tuples.

        Returns:
            The verdict; *not enough evidence* with score 0 if nothing usable was given.

        Raises:
            TypeError: If an item has the wrong types.
            ValueError: If a rank is negative or a similarity not finite.
        """
        items = validate_ranked(judgements)
        counts = {label.value: 0 for label in Label}
        failed = 0
        weights: list[float] = []
        support: list[float] = []
        refute: list[float] = []
        best = {Label.ENTAILS: 0.0, Label.CONTRADICTS: 0.0}
        for judgement, rank, _similarity in items:
            if not judgement.ok:
                failed += 1
                continue
            counts[judgement.label.value] += 1
            if judgement.label is Label.UNKNOWN and not self.count_unknown:
                continue
            w = self.weight(rank)
            weights.append(w)
            if judgement.label is Label.ENTAILS:
                support.append(judgement.confidence * w)
            elif judgement.label is Label.CONTRADICTS:
                refute.append(judgement.confidence * w)
            if judgement.label in best:
                best[judgement.label] = max(best[judgement.label], judgement.confidence)

        # math.fsum is exactly rounded: the result does not depend on the input order, and
        # swapping entails / contradicts negates the score exactly.
        denominator = math.fsum(weights)
        numerator = math.fsum([*support, *(-r for r in refute)])
        score = max(-1.0, min(1.0, numerator / denominator)) if denominator > 0 else 0.0
        details: dict[str, Any] = {
            "counts": counts,
            "failed": failed,
            "support": math.fsum(support) / denominator if denominator > 0 else 0.0,
            "refute": math.fsum(refute) / denominator if denominator > 0 else 0.0,
            "weight_total": denominator,
            "threshold": self.threshold,
        }
        strongest = min(best[Label.ENTAILS], best[Label.CONTRADICTS])
        if (
            self.disputed_threshold is not None
            and counts[Label.ENTAILS.value]
            and counts[Label.CONTRADICTS.value]
            and strongest >= self.disputed_threshold
        ):
            return VerdictResult(
                verdict=Verdict.DISPUTED, confidence=strongest, score=score, details=details
            )
        if abs(score) < self.threshold:
            return VerdictResult(
                verdict=Verdict.NOT_ENOUGH_EVIDENCE,
                confidence=1.0 - abs(score) / self.threshold,
                score=score,
                details=details,
            )
        verdict = Verdict.SUPPORTED if score > 0 else Verdict.REFUTED
        return VerdictResult(verdict=verdict, confidence=abs(score), score=score, details=details)
