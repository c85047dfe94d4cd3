"""Evaluate judges and verdict aggregation on Climate-FEVER-style data.

Climate-FEVER (Diggelmann et al., 2020) pairs each climate claim with five Wikipedia evidence
sentences. Each *pair* has a label (``SUPPORTS`` / ``REFUTES`` / ``NOT_ENOUGH_INFO``) and each
*claim* an overall label (the same three plus ``DISPUTED``: both supporting and refuting
evidence). This module loads that JSONL format, runs a judge on every pair, aggregates the five
judgements of each claim into a verdict, and computes accuracy, macro-F1 and confusion matrices.
``benchmarks/eval_climate_fever.py`` is the command-line front end.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langchain_references.factcheck.verdict import Aggregator, RankedJudgement, Verdict
from langchain_references.judges.base import (
    Judge,
    JudgeInput,
    JudgeInputLike,
    Judgement,
    Label,
)

__all__ = [
    "CLAIM_LABELS",
    "EVIDENCE_TO_LABEL",
    "PAIR_LABELS",
    "VERDICT_TO_CLAIM_LABEL",
    "ClaimRecord",
    "ConfusionMatrix",
    "EvaluationReport",
    "EvidenceRecord",
    "GoldLabelJudge",
    "evaluate",
    "load_climate_fever",
    "split_claims",
]

logger = logging.getLogger(__name__)

EvidenceLabel = Literal["SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO"]
ClaimLabel = Literal["SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED"]

#: Climate-FEVER evidence label -> judge label.
EVIDENCE_TO_LABEL: Final[Mapping[str, Label]] = {
    "SUPPORTS": Label.ENTAILS,
    "REFUTES": Label.CONTRADICTS,
    "NOT_ENOUGH_INFO": Label.UNKNOWN,
}
#: Verdict -> Climate-FEVER claim label.
VERDICT_TO_CLAIM_LABEL: Final[Mapping[Verdict, str]] = {
    Verdict.SUPPORTED: "SUPPORTS",
    Verdict.REFUTED: "REFUTES",
    Verdict.NOT_ENOUGH_EVIDENCE: "NOT_ENOUGH_INFO",
    Verdict.DISPUTED: "DISPUTED",
}
#: Row / column order of the pair-level confusion matrix.
PAIR_LABELS: Final = tuple(
    label.value for label in (Label.ENTAILS, Label.CONTRADICTS, Label.UNKNOWN)
)
#: Row / column order of the claim-level confusion matrix.
CLAIM_LABELS: Final = ("SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED")


class EvidenceRecord(BaseModel):
    """One evidence sentence of a claim (other fields of the file are ignored)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    evidence_id: str
    evidence_label: EvidenceLabel
    evidence: str
    article: str = ""


class ClaimRecord(BaseModel):
    """One Climate-FEVER claim with its evidences, in file (= rank) order."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    claim_id: str
    claim: str = Field(min_length=1)
    claim_label: ClaimLabel
    evidences: tuple[EvidenceRecord, ...]


def load_climate_fever(path: str | Path, *, limit: int | None = None) -> list[ClaimRecord]:
    """Load a JSONL file in the Climate-FEVER format.

    Args:
        path: The file.
        limit: Keep only the first ``limit`` claims.

    Returns:
        The claims, in file order.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If a line is not valid JSON or not a valid claim (the message names the
            line), or ``limit`` is negative.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    claims: list[ClaimRecord] = []
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if limit is not None and len(claims) >= limit:
                break
            if not line.strip():
                continue
            try:
                claims.append(ClaimRecord.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValidationError) as exc:
                raise ValueError(f"{path}:{number}: not a Climate-FEVER claim: {exc}") from exc
    return claims


def split_claims(
    claims: Sequence[ClaimRecord], split: Literal["all", "first", "second"]
) -> list[ClaimRecord]:
    """Select all claims or the first / second half (in file order).

    The first half is for tuning, the second for reporting.

    Args:
        claims: The claims.
        split: ``"all"``, ``"first"`` or ``"second"``.

    Returns:
        The selected claims.

    Raises:
        ValueError: If ``split`` is unknown.
    """
    half = (len(claims) + 1) // 2
    if split == "all":
        return list(claims)
    if split == "first":
        return list(claims[:half])
    if split == "second":
        return list(claims[half:])
    raise ValueError(f"unknown split {split!r}: use all, first or second")


@dataclass(frozen=True)
class ConfusionMatrix:
    """Confusion matrix with accuracy and per-class / macro F1.

    Attributes:
        labels: Class names, the row (gold) and column (predicted) order.
        counts: ``counts[g][p]`` = number of items with gold ``labels[g]`` predicted
            ``labels[p]``.
    """

    labels: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]

    @classmethod
    def from_pairs(
        cls, gold: Iterable[str], predicted: Iterable[str], labels: Sequence[str]
    ) -> ConfusionMatrix:
        """Count (gold, predicted) pairs.

        Args:
            gold: Gold labels.
            predicted: Predicted labels, same length.
            labels: All class names, in display order.

        Returns:
            The matrix.

        Raises:
            ValueError: If lengths differ or a label is not in ``labels``.
        """
        index = {label: i for i, label in enumerate(labels)}
        if len(index) != len(labels):
            raise ValueError(f"duplicate labels in {labels}")
        gold, predicted = list(gold), list(predicted)
        if len(gold) != len(predicted):
            raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
        grid = [[0] * len(labels) for _ in labels]
        for g, p in zip(gold, predicted, strict=True):
            if g not in index or p not in index:
                raise ValueError(f"label {g if g not in index else p!r} not in {tuple(labels)}")
            grid[index[g]][index[p]] += 1
        return cls(tuple(labels), tuple(tuple(row) for row in grid))

    @property
    def total(self) -> int:
        """Number of items."""
        return sum(map(sum, self.counts))

    @property
    def accuracy(self) -> float:
        """Share of items on the diagonal (0 for an empty matrix)."""
        total = self.total
        return sum(self.counts[i][i] for i in range(len(self.labels))) / total if total else 0.0

    def precision(self, label: str) -> float:
        """Precision of one class (0 when never predicted).

        Args:
            label: The class.

        Returns:
            The precision.
        """
        i = self.labels.index(label)
        predicted = sum(row[i] for row in self.counts)
        return self.counts[i][i] / predicted if predicted else 0.0

    def recall(self, label: str) -> float:
        """Recall of one class (0 when absent from the gold labels).

        Args:
            label: The class.

        Returns:
            The recall.
        """
        i = self.labels.index(label)
        actual = sum(self.counts[i])
        return self.counts[i][i] / actual if actual else 0.0

    def f1(self, label: str) -> float:
        """F1 of one class (0 when precision and recall are 0).

        Args:
            label: The class.

        Returns:
            The F1 score.
        """
        p, r = self.precision(label), self.recall(label)
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def macro_f1(self) -> float:
        """Mean per-class F1 over classes present in gold or predictions (as scikit-learn)."""
        present = [
            label
            for i, label in enumerate(self.labels)
            if sum(self.counts[i]) or sum(row[i] for row in self.counts)
        ]
        return sum(self.f1(label) for label in present) / len(present) if present else 0.0

    def to_markdown(self) -> str:
        """Render as a Markdown table: rows gold, columns predicted, plus recall / F1.

        Returns:
            The table.
        """
        head = "| gold \\ predicted | " + " | ".join(self.labels) + " | recall | F1 |"
        rule = "|---" * (len(self.labels) + 3) + "|"
        rows = [
            f"| {label} | "
            + " | ".join(str(n) for n in self.counts[i])
            + f" | {self.recall(label):.3f} | {self.f1(label):.3f} |"
            for i, label in enumerate(self.labels)
        ]
        precision = (
            "| precision | "
            + " | ".join(f"{self.precision(label):.3f}" for label in self.labels)
            + " | | |"
        )
        return "\n".join([head, rule, *rows, precision])


class GoldLabelJudge(Judge):
    """A judge that answers the gold evidence label (confidence 1) of known pairs.

    It measures the aggregation alone: with perfect pair labels, how often does the verdict
    match the claim label? Unknown pairs are judged ``unknown`` with confidence 0.

    Args:
        claims: Claims whose evidence labels are the answers.
    """

    judge_kind = "gold"

    def __init__(self, claims: Iterable[ClaimRecord]) -> None:
        self._gold: dict[tuple[str, str], Label] = {}
        for claim in claims:
            for ev in claim.evidences:
                self._gold[(claim.claim, ev.evidence)] = EVIDENCE_TO_LABEL[ev.evidence_label]

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        label = self._gold.get((statement, passage))
        if label is None:
            return Judgement(label=Label.UNKNOWN, confidence=0.0, rationale="not a known pair")
        return Judgement(label=label, confidence=1.0, rationale="gold label")


@dataclass(frozen=True)
class EvaluationReport:
    """Result of :func:`evaluate`.

    Attributes:
        pairs: Pair-level confusion matrix (entails / contradicts / unknown).
        claims: Claim-level confusion matrix (SUPPORTS / REFUTES / NOT_ENOUGH_INFO / DISPUTED).
        failed_judgements: Judgements with ``error`` set (counted as ``unknown``).
        judgements: All judgements, claim by claim, in evidence order.
    """

    pairs: ConfusionMatrix
    claims: ConfusionMatrix
    failed_judgements: int
    judgements: tuple[tuple[Judgement, ...], ...] = field(repr=False)


def evaluate(
    judge: Judge,
    claims: Sequence[ClaimRecord],
    aggregator: Aggregator,
    *,
    config: RunnableConfig | None = None,
    judgements: Sequence[Sequence[Judgement]] | None = None,
) -> EvaluationReport:
    """Judge every (claim, evidence) pair, aggregate per claim and score both levels.

    Args:
        judge: The judge (run with ``judge.batch`` over all pairs).
        claims: The claims.
        aggregator: Turns a claim's judgements (rank = evidence position) into a verdict.
        config: Runnable config for the batch (e.g. ``{"max_concurrency": 8}``).
        judgements: Judgements computed earlier for these claims (the judge is then not
            called), e.g. to compare aggregators.

    Returns:
        The report.

    Raises:
        ValueError: If ``judgements`` does not match the claims' evidences.
    """
    if judgements is None:
        inputs: list[JudgeInputLike] = [
            JudgeInput(statement=c.claim, passage=ev.evidence) for c in claims for ev in c.evidences
        ]
        flat = judge.batch(inputs, config)
        grouped: list[tuple[Judgement, ...]] = []
        start = 0
        for c in claims:
            grouped.append(tuple(flat[start : start + len(c.evidences)]))
            start += len(c.evidences)
    else:
        if len(judgements) != len(claims) or any(
            len(js) != len(c.evidences) for js, c in zip(judgements, claims, strict=False)
        ):
            raise ValueError("judgements do not match the claims' evidences")
        grouped = [tuple(js) for js in judgements]

    pair_gold: list[str] = []
    pair_pred: list[str] = []
    claim_gold: list[str] = []
    claim_pred: list[str] = []
    failed = 0
    for claim, js in zip(claims, grouped, strict=True):
        ranked: list[RankedJudgement] = []
        for rank, (ev, j) in enumerate(zip(claim.evidences, js, strict=True)):
            pair_gold.append(EVIDENCE_TO_LABEL[ev.evidence_label].value)
            pair_pred.append(j.label.value)
            failed += not j.ok
            ranked.append((j, rank, None))
        claim_gold.append(claim.claim_label)
        claim_pred.append(VERDICT_TO_CLAIM_LABEL[aggregator.aggregate(ranked).verdict])
    if failed:
        logger.warning("%d of %d judgements failed", failed, len(pair_pred))
    return EvaluationReport(
        pairs=ConfusionMatrix.from_pairs(pair_gold, pair_pred, PAIR_LABELS),
        claims=ConfusionMatrix.from_pairs(claim_gold, claim_pred, CLAIM_LABELS),
        failed_judgements=failed,
        judgements=tuple(grouped),
    )
