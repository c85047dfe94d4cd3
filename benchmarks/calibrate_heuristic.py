"""Calibrate the confidence of the offline HeuristicJudge on Climate-FEVER.

The heuristic decides its label (entails / contradicts / unknown) from a relevance score and
lexical cues; its confidence should be the probability that this label is right. This script
fits that probability per label (and for the *unknown* pairs withheld for their polarity) as a
logistic function of the word overlap, the number of shared content words and (with
embeddings) the cosine (Platt scaling, see ``Calibration``) on the pairs of the *first* half
of the claims (``split_claims``) and reports on the *second* half: the judge's pair accuracy
and macro-F1 next to the majority-class baseline (always the most frequent gold label of the
same pairs), a reliability table (confidence bins: count, mean
confidence, accuracy) and the expected calibration error (ECE, 10 equal-width bins, weighted by
count), and per decided label its accuracy next to that label's share of the gold (the
accuracy of deciding it blindly), for

* *before*: the old linear confidence (``linear_confidence``: 0.5 at the threshold, 1 at the
  extremes),
* *fitted*: the calibration fitted by this run, capped like the judge caps it,
* *shipped*: the judge's hard-coded default calibration (should equal *fitted*).

It prints the fitted parameters as Python, to paste into
``HeuristicJudge.DEFAULT_CALIBRATION_LEXICAL`` (or ``..._WITH_EMBEDDINGS`` with
``--embeddings minilm``). The labels, hence pair accuracy and macro-F1, do not depend on the
calibration.

    .venv/bin/python benchmarks/calibrate_heuristic.py
    .venv/bin/python benchmarks/calibrate_heuristic.py --embeddings minilm
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from climate_fever import EVIDENCE_TO_LABEL, ClaimRecord, load_climate_fever, split_claims

from langchain_references.factuality.metrics import macro_f1, majority_baseline
from langchain_references.judges.base import Label
from langchain_references.judges.heuristic import (
    Calibration,
    HeuristicJudge,
    LexicalFeatures,
    lexical_features,
    linear_confidence,
)

__all__ = [
    "PairRow",
    "ReliabilityBin",
    "expected_calibration_error",
    "fit_calibration",
    "fit_platt",
    "pair_rows",
    "reliability_table",
]

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "climate-fever-dev.jsonl"
LABELS = (Label.ENTAILS, Label.CONTRADICTS, Label.UNKNOWN)


@dataclass(frozen=True)
class PairRow:
    """The judge's decision on one (claim, evidence) pair.

    Attributes:
        label: The decided label.
        relevance: The pair's relevance (what the label is decided on).
        features: The pair's lexical features.
        cosine: The pair's embedding cosine, or ``None`` (lexical only).
        correct: Whether the label equals the gold evidence label.
        gold: The gold label (``None`` if unknown).
        withheld: An *unknown* of a relevant pair (withheld for its polarity).
    """

    label: Label
    relevance: float
    features: LexicalFeatures
    cosine: float | None
    correct: bool
    gold: Label | None = None
    withheld: bool = False


@dataclass(frozen=True)
class ReliabilityBin:
    """One confidence bin of a reliability table.

    Attributes:
        low: Lower edge (inclusive).
        high: Upper edge (exclusive, except for the last bin).
        count: Number of judgements in the bin.
        confidence: Their mean confidence (0 if empty).
        accuracy: Share of them that are right (0 if empty).
    """

    low: float
    high: float
    count: int
    confidence: float
    accuracy: float


def pair_rows(judge: HeuristicJudge, claims: Sequence[ClaimRecord]) -> list[PairRow]:
    """Decide every (claim, evidence) pair and record label, relevance and correctness.

    Args:
        judge: The judge (its embeddings are called once for all texts).
        claims: The claims.

    Returns:
        One row per pair, claim by claim, in evidence order.
    """
    pairs = [(c.claim, e.evidence) for c in claims for e in c.evidences]
    gold = [EVIDENCE_TO_LABEL[e.evidence_label] for c in claims for e in c.evidences]
    rows = []
    for (statement, passage), cosine, expected in zip(
        pairs, judge.similarities(pairs), gold, strict=True
    ):
        features = lexical_features(statement, passage)
        relevance, _ = judge.relevance(features, cosine)
        label = judge.decide_features(features, cosine).label
        rows.append(
            PairRow(
                label=label,
                relevance=relevance,
                features=features,
                cosine=cosine if judge.embedding_weight > 0 else None,
                correct=label is expected,
                gold=expected,
                withheld=label is Label.UNKNOWN and relevance >= judge.relevance_threshold,
            )
        )
    return rows


def reliability_table(
    confidences: Sequence[float], correct: Sequence[bool], *, bins: int = 10
) -> list[ReliabilityBin]:
    """Group judgements into equal-width confidence bins.

    Args:
        confidences: Confidences, in ``[0, 1]``.
        correct: Whether each judgement is right.
        bins: Number of bins.

    Returns:
        All bins, empty ones included, from low to high confidence.

    Raises:
        ValueError: If the lengths differ or ``bins`` < 1.
    """
    if len(confidences) != len(correct):
        raise ValueError(f"{len(confidences)} confidences but {len(correct)} outcomes")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for c, ok in zip(confidences, correct, strict=True):
        members[min(bins - 1, max(0, int(c * bins)))].append((c, ok))
    table = []
    for i, group in enumerate(members):
        n = len(group)
        table.append(
            ReliabilityBin(
                low=i / bins,
                high=(i + 1) / bins,
                count=n,
                confidence=math.fsum(c for c, _ in group) / n if n else 0.0,
                accuracy=sum(ok for _, ok in group) / n if n else 0.0,
            )
        )
    return table


def expected_calibration_error(
    confidences: Sequence[float], correct: Sequence[bool], *, bins: int = 10
) -> float:
    """Expected calibration error: count-weighted mean |accuracy - confidence| over bins.

    Args:
        confidences: Confidences, in ``[0, 1]``.
        correct: Whether each judgement is right.
        bins: Number of equal-width bins.

    Returns:
        The ECE, in ``[0, 1]`` (0 for no judgements).
    """
    table = reliability_table(confidences, correct, bins=bins)
    total = sum(b.count for b in table)
    if not total:
        return 0.0
    return math.fsum(b.count / total * abs(b.accuracy - b.confidence) for b in table)


def fit_platt(
    features: Sequence[Sequence[float]], outcomes: Sequence[bool], *, ridge: float = 1e-3
) -> tuple[float, ...]:
    """Fit ``P(y) = sigmoid(w0 + w1 * x1 + ...)`` by Newton's method on the log-loss.

    A small ridge penalty keeps the fit finite when the outcomes are separable (or all equal).

    Args:
        features: One feature vector per outcome (the intercept is added).
        outcomes: The outcomes.
        ridge: L2 penalty weight.

    Returns:
        ``(w0, w1, ...)``.

    Raises:
        ValueError: If the lengths differ or there is no data.
    """
    if len(features) != len(outcomes) or not outcomes:
        raise ValueError(
            f"need one outcome per feature vector (> 0): {len(features)}, {len(outcomes)}"
        )
    x = np.column_stack([np.ones(len(outcomes)), np.asarray(features, dtype=float)])
    y = np.asarray(outcomes, dtype=float)
    w = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + ridge * w
        hessian = (x.T * (p * (1 - p))) @ x + ridge * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return tuple(float(v) for v in w)


def fit_calibration(rows: Sequence[PairRow]) -> Calibration:
    """Fit one Platt scaling per label on the rows of that label, and one on the withheld rows.

    Features are :meth:`Calibration.inputs`; the cosine one only when the rows have cosines.
    *Unknown* is fitted on the unknown rows that are not withheld, ``withheld`` on the others.

    Args:
        rows: Decided pairs (see :func:`pair_rows`).

    Returns:
        The calibration (a group without rows gets zeros: confidence 0.5; ``withheld`` is
        ``None`` without withheld rows).
    """

    def fit(mine: Sequence[PairRow]) -> tuple[float, float, float, float]:
        if not mine:
            return (0.0, 0.0, 0.0, 0.0)
        lexical = all(r.cosine is None for r in mine)
        inputs = [Calibration.inputs(r.features, r.cosine) for r in mine]
        fitted = fit_platt([x[:2] if lexical else x for x in inputs], [r.correct for r in mine])
        a, b, c, d = (*fitted, 0.0) if lexical else fitted
        return (a, b, c, d)

    withheld = [r for r in rows if r.withheld]
    return Calibration(
        entails=fit([r for r in rows if r.label is Label.ENTAILS]),
        contradicts=fit([r for r in rows if r.label is Label.CONTRADICTS]),
        unknown=fit([r for r in rows if r.label is Label.UNKNOWN and not r.withheld]),
        withheld=fit(withheld) if withheld else None,
    )


def print_table(
    title: str, rows: Sequence[PairRow], confidence: Callable[[PairRow], float]
) -> None:
    confidences = [confidence(r) for r in rows]
    correct = [r.correct for r in rows]
    ece = expected_calibration_error(confidences, correct)
    print(f"\n### {title}: ECE {ece:.3f}\n")
    print("| confidence | count | mean confidence | accuracy |")
    print("|---|---|---|---|")
    for b in reliability_table(confidences, correct):
        if b.count:
            print(
                f"| [{b.low:.1f}, {b.high:.1f}) | {b.count} | {b.confidence:.3f} | "
                f"{b.accuracy:.3f} |"
            )
    summary = []
    for label in LABELS:
        mine = [(c, r.correct) for c, r in zip(confidences, rows, strict=True) if r.label is label]
        if mine:
            accuracy = sum(ok for _, ok in mine) / len(mine)
            base_rate = sum(r.gold is label for r in rows) / len(rows)
            mean = math.fsum(c for c, _ in mine) / len(mine)
            top = max(c for c, _ in mine)
            summary.append(
                f"{label.value} {len(mine)} (accuracy {accuracy:.3f}, gold share "
                f"{base_rate:.3f}, confidence mean {mean:.3f} max {top:.3f})"
            )
    print(f"\nby label: {', '.join(summary)}")


def print_label_scores(rows: Sequence[PairRow]) -> None:
    """Pair accuracy and macro-F1 of the judge and of the majority class, same gold labels."""
    gold = [r.gold.value for r in rows if r.gold is not None]
    predicted = [r.label.value for r in rows if r.gold is not None]
    labels = [label.value for label in LABELS]
    base = majority_baseline(gold, labels=labels)
    accuracy = sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)
    print(
        f"pair accuracy {accuracy:.3f} (always {base.label!r}: {base.accuracy:.3f}), "
        f"macro-F1 {macro_f1(gold, predicted, labels=labels):.3f} "
        f"(always {base.label!r}: {base.macro_f1:.3f}); labels and accuracy do not depend on "
        "the calibration"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embeddings", default="none", choices=["none", "minilm"])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not args.data.is_file():
        print(f"data file not found: {args.data}", file=sys.stderr)
        return 2
    embeddings = None
    if args.embeddings == "minilm":
        from langchain_references.services.embeddings import MiniLMEmbeddings

        embeddings = MiniLMEmbeddings()
    judge = HeuristicJudge(embeddings)
    claims = load_climate_fever(args.data)
    fit_rows = pair_rows(judge, split_claims(claims, "first"))
    test_rows = pair_rows(judge, split_claims(claims, "second"))
    fitted = fit_calibration(fit_rows)
    t = judge.relevance_threshold
    print(f"# Calibration of HeuristicJudge ({args.embeddings} embeddings), {args.data.name}\n")
    print(f"fit on the first half ({len(fit_rows)} pairs), report on the second half")
    print(f"({len(test_rows)} pairs); relevance threshold {t}, cues {sorted(judge.cues)}")
    print_label_scores(test_rows)
    print_table(
        "Before (linear confidence)",
        test_rows,
        lambda r: linear_confidence(r.label, r.relevance, t),
    )
    print_table(
        "After (fitted calibration, capped)",
        test_rows,
        lambda r: fitted.confidence(r.label, r.features, r.cosine, withheld=r.withheld),
    )
    print_table(
        "Shipped default calibration",
        test_rows,
        lambda r: judge.calibration.confidence(r.label, r.features, r.cosine, withheld=r.withheld),
    )
    attribute = "LEXICAL" if embeddings is None else "WITH_EMBEDDINGS"
    print(f"\n## Fitted parameters (paste into HeuristicJudge.DEFAULT_CALIBRATION_{attribute})\n")
    print("    Calibration(")
    for name in (*(label.value for label in LABELS), "withheld"):
        fitted_values = getattr(fitted, name)
        if fitted_values is not None:
            values = ", ".join(f"{v:.3f}" for v in fitted_values)
            print(f"        {name}=({values}),")
    print("    )")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
