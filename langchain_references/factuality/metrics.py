"""Factuality metrics from atom marginals, with FactReasoner's conventions.

Conventions follow ``FactReasoner.score`` in IBM FactReasoner's
``src/fact_reasoner/assessor.py`` (same code in the older ``factreasoner.py``) and
``get_stats`` / ``get_avg_numbers`` in VeriScore's ``veriscore/utils.py``:

* an atom is *supported* (``"S"``) iff ``P(a) > P(not a)``, i.e. ``P(a) > 0.5``; otherwise
  ``"NS"``. Here ``P(a)`` is the posterior of the atom being true;
* factual precision ``Pr(y) = S(y) / |A|`` (``factuality_score``);
* ``num_false_atoms = |A| - S(y)``: it *includes* the undecided atoms, as in the code
  (the README's "P(a) < 0.5" describes the decided ones only);
* ``num_uniform_atoms`` counts atoms with ``P(a) == 0.5``. FactReasoner compares exactly;
  since in-process inference carries rounding noise, ``uniform_tolerance`` (default
  ``1e-9``) widens that to ``|P(a) - 0.5| <= tol`` and such atoms are labelled ``"NS"``;
* entropy: ``entropy = sum_i -p_i log p_i`` and ``avg_entropy = entropy / n`` (the paper's
  ``E(y)``), with ``p_i < 1e-6`` raised to ``1e-6`` and ``p_i = 1`` lowered to ``0.999999``,
  and the *natural* log, as the
  code computes it. The README's "E(y) ~ 0.15 when every P(a) = 0.5" corresponds to a
  base-10 log: pass ``log_base=10`` to reproduce that scale. ``norm_entropy`` sums the
  binary entropies in bits;
* ``R@K = min(S / K, 1)`` and ``F1@K = 2 P R / (P + R)`` (0 when ``S = 0``). FactReasoner
  uses ``K = floor(n / 2)`` per response; VeriScore uses the median number of claims over
  the responses of a domain, ``sorted(counts)[len // 2]`` (:func:`median_k`);
* against gold labels ``"S"``/``"NS"``: ``gold_factuality_score = #S / #labelled``,
  TP/TN/FP/FN with ``"S"`` as the positive class, and the Brier score.

Baselines, so that an accuracy is read against what a constant answer scores on the same
labels: :func:`constant_baseline` (e.g. always ``"NS"``), :func:`majority_baseline` and
:func:`macro_f1`; :class:`GoldComparison` has ``macro_f1``, ``always_ns`` and ``majority``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

PredictedLabel = Literal["S", "NS"]

_CLIP_LOW = 1e-6
_CLIP_HIGH = 0.999999


def atom_label(probability: float, *, uniform_tolerance: float = 1e-9) -> PredictedLabel:
    """``"S"`` if the atom is more likely true than false, else ``"NS"``.

    Args:
        probability: Posterior ``P(a = 1)``.
        uniform_tolerance: Atoms within this distance of 0.5 are undecided (``"NS"``).

    Returns:
        The predicted label.
    """
    return "S" if probability > 0.5 + uniform_tolerance else "NS"


def _clipped(probabilities: Iterable[float]) -> npt.NDArray[np.float64]:
    values = np.asarray(list(probabilities), dtype=np.float64)
    if values.size and (not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1):
        raise ValueError("probabilities must be finite and within [0, 1]")
    # FactReasoner: ``p < 1e-6 -> 1e-6``, ``p >= 1.0 -> 0.999999``, otherwise unchanged.
    return np.where(values >= 1.0, _CLIP_HIGH, np.maximum(values, _CLIP_LOW))


def f1_at_k(num_supported: int, num_atoms: int, k: int) -> tuple[float, float, float]:
    """Precision, recall@K and F1@K of one response (VeriScore / FactReasoner).

    Args:
        num_supported: ``S(y)``.
        num_atoms: ``|A_y|``.
        k: The number of supported atoms that earns full recall.

    Returns:
        ``(precision, recall_k, f1_k)``; all 0.0 when there are no atoms.

    Raises:
        ValueError: If ``k < 1`` or the counts are inconsistent.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if num_atoms < 0 or not 0 <= num_supported <= max(num_atoms, 0):
        raise ValueError("need 0 <= num_supported <= num_atoms")
    if num_atoms == 0:
        return 0.0, 0.0, 0.0
    precision = num_supported / num_atoms
    recall = min(num_supported / k, 1.0)
    f1 = 2 * precision * recall / (precision + recall) if recall > 0 else 0.0
    return precision, recall, f1


def median_k(atom_counts: Sequence[int]) -> int:
    """VeriScore's ``K_median``: the upper median of the per-response atom counts.

    Args:
        atom_counts: Number of atoms of every response of a domain / dataset.

    Returns:
        ``sorted(atom_counts)[len(atom_counts) // 2]``.

    Raises:
        ValueError: If ``atom_counts`` is empty.
    """
    if not atom_counts:
        raise ValueError("median_k needs at least one response")
    return sorted(atom_counts)[len(atom_counts) // 2]


def _f1(tp: int, fp: int, fn: int) -> float:
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


@dataclass(frozen=True, slots=True)
class Baseline:
    """A predictor that always answers ``label``, scored on a set of gold labels.

    Attributes:
        label: The constant prediction.
        accuracy: Share of the gold labels equal to ``label``.
        macro_f1: Macro-F1 over the label set (``label``'s F1, the others 0, averaged).
        count: Number of gold labels.
    """

    label: str
    accuracy: float
    macro_f1: float
    count: int


def macro_f1(
    gold: Sequence[str], predicted: Sequence[str], *, labels: Sequence[str] | None = None
) -> float:
    """Unweighted mean of the per-label F1 scores.

    Args:
        gold: Gold labels.
        predicted: Predicted labels, aligned with ``gold``.
        labels: The label set to average over (default: every label in ``gold`` or
            ``predicted``, sorted); a label with no gold and no prediction scores 0.

    Returns:
        The macro-F1, or 0.0 for no labels.

    Raises:
        ValueError: If the two sequences differ in length.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    label_set = list(labels) if labels is not None else sorted(set(gold) | set(predicted))
    if not label_set:
        return 0.0
    scores = []
    for label in label_set:
        tp = sum(1 for g, p in zip(gold, predicted, strict=True) if g == label and p == label)
        fp = sum(1 for g, p in zip(gold, predicted, strict=True) if g != label and p == label)
        fn = sum(1 for g, p in zip(gold, predicted, strict=True) if g == label and p != label)
        scores.append(_f1(tp, fp, fn))
    return sum(scores) / len(scores)


def constant_baseline(
    gold: Sequence[str], label: str, *, labels: Sequence[str] | None = None
) -> Baseline:
    """Accuracy and macro-F1 of always predicting ``label`` on ``gold``.

    Args:
        gold: Gold labels.
        label: The constant prediction.
        labels: The label set of the macro-F1 (default: the gold labels and ``label``).

    Returns:
        The baseline (accuracy and macro-F1 0.0 when ``gold`` is empty).
    """
    label_set = labels if labels is not None else sorted(set(gold) | {label})
    predicted = [label] * len(gold)
    accuracy = sum(1 for g in gold if g == label) / len(gold) if gold else 0.0
    f1 = macro_f1(gold, predicted, labels=label_set) if gold else 0.0
    return Baseline(label=label, accuracy=accuracy, macro_f1=f1, count=len(gold))


def majority_baseline(gold: Sequence[str], *, labels: Sequence[str] | None = None) -> Baseline:
    """The constant baseline of the most frequent gold label.

    Args:
        gold: Gold labels (at least one).
        labels: The label set; also breaks ties (the earlier label wins). Default: the gold
            labels, sorted.

    Returns:
        The baseline.

    Raises:
        ValueError: If ``gold`` is empty.
    """
    if not gold:
        raise ValueError("majority_baseline needs at least one gold label")
    label_set = list(labels) if labels is not None else sorted(set(gold))
    for g in gold:
        if g not in label_set:
            label_set.append(g)
    counts = {label: 0 for label in label_set}
    for g in gold:
        counts[g] += 1
    best = max(label_set, key=lambda lab: (counts[lab], -label_set.index(lab)))
    return constant_baseline(gold, best, labels=label_set)


@dataclass(frozen=True, slots=True)
class GoldComparison:
    """Predictions compared with gold ``"S"``/``"NS"`` labels (labelled atoms only).

    Attributes:
        gold_factuality_score: Share of labelled atoms that are ``"S"``.
        gold_true_atoms: Number of ``"S"`` atoms.
        true_positive: Gold ``S``, predicted ``S``.
        true_negative: Gold ``NS``, predicted ``NS``.
        false_positive: Gold ``NS``, predicted ``S``.
        false_negative: Gold ``S``, predicted ``NS``.
        avg_brier: Mean of ``(P(a) - [gold == S])^2``.
        references: The gold label of every labelled atom.
    """

    gold_factuality_score: float
    gold_true_atoms: int
    true_positive: int
    true_negative: int
    false_positive: int
    false_negative: int
    avg_brier: float
    references: dict[str, PredictedLabel] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        """Share of labelled atoms predicted correctly."""
        total = self.true_positive + self.true_negative + self.false_positive + self.false_negative
        return (self.true_positive + self.true_negative) / total if total else 0.0

    @property
    def macro_f1(self) -> float:
        """Mean of the F1 of ``"S"`` and of ``"NS"`` (a class never predicted nor present: 0)."""
        tp, tn, fp, fn = (
            self.true_positive,
            self.true_negative,
            self.false_positive,
            self.false_negative,
        )
        return (_f1(tp, fp, fn) + _f1(tn, fn, fp)) / 2

    @property
    def always_ns(self) -> Baseline:
        """The baseline that predicts ``"NS"`` for every labelled atom (same labels)."""
        return constant_baseline(self._gold_labels(), "NS", labels=("S", "NS"))

    @property
    def majority(self) -> Baseline:
        """The majority-class baseline on the same labels (ties: ``"NS"``)."""
        return majority_baseline(self._gold_labels(), labels=("NS", "S"))

    def _gold_labels(self) -> list[str]:
        positives = self.true_positive + self.false_negative
        negatives = self.true_negative + self.false_positive
        return ["S"] * positives + ["NS"] * negatives


@dataclass(frozen=True, slots=True)
class FactualityScores:
    """Response-level factuality scores (FactReasoner's results dictionary).

    Attributes:
        factuality_score: Factual precision ``S(y) / |A|``.
        recall_k: ``min(S / K, 1)``.
        f1_k: F1@K.
        k: The K used.
        num_atoms: ``|A|``.
        num_contexts: Number of contexts in the graph (``None`` if unknown).
        num_true_atoms: ``S(y)``.
        num_false_atoms: ``|A| - S(y)`` (undecided atoms included, as in FactReasoner).
        num_uniform_atoms: Atoms with ``P(a) = 0.5`` (within the tolerance).
        entropy: ``sum -p log p`` over atoms (clipped ``p``).
        avg_entropy: ``entropy / |A|``, the paper's ``E(y)``.
        norm_entropy: Sum of binary entropies in bits.
        avg_norm_entropy: ``norm_entropy / |A|``.
        avg_prob: Mean of the clipped ``P(a)``.
        avg_logprob: Mean of ``log P(a)`` (clipped).
        avg_explogprob: ``exp(avg_logprob)``.
        probabilities: ``P(a = 1)`` per atom, in atom order.
        predictions: ``"S"``/``"NS"`` per atom.
        gold: Comparison with gold labels, when any atom is labelled.
    """

    factuality_score: float
    recall_k: float
    f1_k: float
    k: int
    num_atoms: int
    num_contexts: int | None
    num_true_atoms: int
    num_false_atoms: int
    num_uniform_atoms: int
    entropy: float
    avg_entropy: float
    norm_entropy: float
    avg_norm_entropy: float
    avg_prob: float
    avg_logprob: float
    avg_explogprob: float
    probabilities: dict[str, float]
    predictions: dict[str, PredictedLabel]
    gold: GoldComparison | None = None


def _gold(
    probabilities: Mapping[str, float],
    predictions: Mapping[str, PredictedLabel],
    labels: Mapping[str, str | None],
) -> GoldComparison | None:
    references: dict[str, PredictedLabel] = {}
    for atom_id, label in labels.items():
        if label is None:
            continue
        if atom_id not in probabilities:
            raise ValueError(f"gold label for unknown atom {atom_id!r}")
        if label not in ("S", "NS"):
            raise ValueError(f"atom {atom_id!r}: gold label must be 'S' or 'NS', got {label!r}")
        references[atom_id] = "S" if label == "S" else "NS"
    if not references:
        return None
    tp = tn = fp = fn = 0
    brier = 0.0
    for atom_id, gold in references.items():
        predicted = predictions[atom_id]
        target = 1.0 if gold == "S" else 0.0
        brier += (probabilities[atom_id] - target) ** 2
        if gold == "S":
            tp, fn = (tp + 1, fn) if predicted == "S" else (tp, fn + 1)
        else:
            tn, fp = (tn + 1, fp) if predicted == "NS" else (tn, fp + 1)
    true_atoms = tp + fn
    return GoldComparison(
        gold_factuality_score=true_atoms / len(references),
        gold_true_atoms=true_atoms,
        true_positive=tp,
        true_negative=tn,
        false_positive=fp,
        false_negative=fn,
        avg_brier=brier / len(references),
        references=references,
    )


def _check_atoms(
    ids: Sequence[str], marginals: Mapping[str, float], uniform_tolerance: float
) -> None:
    """Raise ``ValueError`` on an atom without a marginal, a duplicate, or a bad tolerance."""
    missing = [a for a in ids if a not in marginals]
    if missing:
        raise ValueError(f"no marginal for atom(s) {missing[:5]}")
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate atom ids")
    if not uniform_tolerance >= 0:
        raise ValueError("uniform_tolerance must be >= 0")


class _Spread(NamedTuple):
    """The entropy and probability figures of :class:`FactualityScores` (all 0 without atoms)."""

    entropy: float
    avg_entropy: float
    norm_entropy: float
    avg_norm_entropy: float
    avg_prob: float
    avg_logprob: float
    avg_explogprob: float

    @classmethod
    def of(cls, p: npt.NDArray[np.float64], log_base: float) -> _Spread:
        """The figures of the clipped probabilities ``p`` (entropy in base ``log_base``)."""
        scale = math.log(log_base)  # raises on a bad base, atoms or not
        n = p.size
        if not n:
            return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        entropy = float(np.sum(-p * np.log(p)) / scale)
        norm = float(np.sum(-(p * np.log2(p) + (1 - p) * np.log2(1 - p))))
        avg_log = float(np.mean(np.log(p)))
        return cls(
            entropy=entropy,
            avg_entropy=entropy / n,
            norm_entropy=norm,
            avg_norm_entropy=norm / n,
            avg_prob=float(np.mean(p)),
            avg_logprob=avg_log,
            avg_explogprob=math.exp(avg_log),
        )


def score_marginals(
    marginals: Mapping[str, float],
    atom_ids: Sequence[str] | None = None,
    *,
    labels: Mapping[str, str | None] | None = None,
    k: int | None = None,
    num_contexts: int | None = None,
    log_base: float = math.e,
    uniform_tolerance: float = 1e-9,
) -> FactualityScores:
    """Score a response from the posterior marginals of its atoms.

    Args:
        marginals: ``P(v = 1)`` per variable (atoms, possibly contexts too).
        atom_ids: Which variables are atoms (default: every key of ``marginals``).
            Pass ``graph.atom_ids`` when ``marginals`` comes from
            :func:`~langchain_references.factuality.inference.infer_marginals`.
        labels: Optional gold labels ``"S"``/``"NS"`` (``None`` = unlabelled) by atom id.
        k: K for recall/F1@K; default ``max(1, n // 2)`` as FactReasoner's ``assessor.py``
            (use :func:`median_k` over a dataset for VeriScore's F1@K-median).
        num_contexts: Reported as is.
        log_base: Base of the entropy logarithm (see module docstring).
        uniform_tolerance: Distance from 0.5 under which an atom counts as undecided.

    Returns:
        The scores.

    Raises:
        ValueError: On unknown atom ids, probabilities outside ``[0, 1]`` or bad labels.
    """
    ids = list(marginals) if atom_ids is None else list(atom_ids)
    _check_atoms(ids, marginals, uniform_tolerance)
    raw = {a: float(marginals[a]) for a in ids}
    p = _clipped(raw.values())
    n = len(ids)
    predictions: dict[str, PredictedLabel] = {
        a: atom_label(v, uniform_tolerance=uniform_tolerance) for a, v in raw.items()
    }
    num_true = sum(1 for lab in predictions.values() if lab == "S")
    num_uniform = sum(1 for v in raw.values() if abs(v - 0.5) <= uniform_tolerance)
    k_used = max(1, n // 2) if k is None else k
    precision, recall, f1 = f1_at_k(num_true, n, k_used)
    spread = _Spread.of(p, log_base)
    return FactualityScores(
        factuality_score=precision,
        recall_k=recall,
        f1_k=f1,
        k=k_used,
        num_atoms=n,
        num_contexts=num_contexts,
        num_true_atoms=num_true,
        num_false_atoms=n - num_true,
        num_uniform_atoms=num_uniform,
        entropy=spread.entropy,
        avg_entropy=spread.avg_entropy,
        norm_entropy=spread.norm_entropy,
        avg_norm_entropy=spread.avg_norm_entropy,
        avg_prob=spread.avg_prob,
        avg_logprob=spread.avg_logprob,
        avg_explogprob=spread.avg_explogprob,
        probabilities=raw,
        predictions=predictions,
        gold=_gold(raw, predictions, labels) if labels is not None else None,
    )
