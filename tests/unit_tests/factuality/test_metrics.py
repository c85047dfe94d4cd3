from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_references.factuality import score_marginals
from langchain_references.factuality.metrics import atom_label, f1_at_k, median_k


def test_atom_label_threshold_is_strictly_above_one_half() -> None:
    assert atom_label(0.51) == "S"
    assert atom_label(0.5) == "NS"
    assert atom_label(0.5 + 1e-12) == "NS"  # undecided within the tolerance
    assert atom_label(0.5 + 1e-12, uniform_tolerance=0.0) == "S"
    assert atom_label(0.49) == "NS"


def entropy_score(probabilities: list[float], log_base: float = math.e) -> float:
    marginals = {f"a{i}": p for i, p in enumerate(probabilities)}
    return score_marginals(marginals, log_base=log_base).avg_entropy


def test_entropy_conventions() -> None:
    # FactReasoner's code: natural log; its README's 0.15 for P = 0.5 is base 10.
    assert entropy_score([0.5] * 4) == pytest.approx(0.5 * math.log(2))
    assert entropy_score([0.5] * 4, log_base=10) == pytest.approx(0.1505, abs=1e-4)
    # P = 1 is clipped to 0.999999, P = 0 to 1e-6
    assert entropy_score([1.0]) == pytest.approx(-0.999999 * math.log(0.999999))
    assert entropy_score([0.0]) == pytest.approx(-1e-6 * math.log(1e-6))
    assert entropy_score([]) == 0.0
    with pytest.raises(ValueError, match="within"):
        entropy_score([1.2])


def test_f1_at_k_and_median_k() -> None:
    assert f1_at_k(6, 10, 5) == pytest.approx((0.6, 1.0, 0.75))
    p, r, f = f1_at_k(2, 4, 8)
    assert (p, r) == (0.5, 0.25)
    assert f == pytest.approx(2 * 0.5 * 0.25 / 0.75)
    assert f1_at_k(0, 5, 3) == (0.0, 0.0, 0.0)
    assert f1_at_k(0, 0, 3) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="k must"):
        f1_at_k(1, 2, 0)
    with pytest.raises(ValueError, match="num_supported"):
        f1_at_k(3, 2, 1)
    assert median_k([10, 3, 7, 8]) == 8  # VeriScore: sorted(counts)[len // 2]
    assert median_k([5]) == 5
    with pytest.raises(ValueError, match="at least one"):
        median_k([])


def test_score_marginals_counts_like_factreasoner() -> None:
    marginals = {"a0": 0.9, "a1": 0.5, "a2": 0.2, "a3": 0.7, "c0": 0.99}
    labels = {"a0": "S", "a1": "S", "a2": "NS", "a3": "NS"}
    scores = score_marginals(marginals, ["a0", "a1", "a2", "a3"], labels=labels, num_contexts=1)
    assert scores.predictions == {"a0": "S", "a1": "NS", "a2": "NS", "a3": "S"}
    assert scores.num_true_atoms == 2
    assert scores.num_false_atoms == 2  # includes the undecided a1, as FactReasoner does
    assert scores.num_uniform_atoms == 1
    assert scores.factuality_score == 0.5
    assert scores.k == 2
    assert (scores.recall_k, scores.f1_k) == pytest.approx((1.0, 2 / 3))
    probs = [0.9, 0.5, 0.2, 0.7]
    assert scores.entropy == pytest.approx(sum(-p * math.log(p) for p in probs))
    assert scores.avg_entropy == pytest.approx(scores.entropy / 4)
    bits = sum(-(p * math.log2(p) + (1 - p) * math.log2(1 - p)) for p in probs)
    assert scores.norm_entropy == pytest.approx(bits)
    assert scores.avg_prob == pytest.approx(sum(probs) / 4)
    assert scores.avg_explogprob == pytest.approx(math.prod(probs) ** 0.25)
    gold = scores.gold
    assert gold is not None
    assert (gold.true_positive, gold.false_negative, gold.true_negative, gold.false_positive) == (
        1,
        1,
        1,
        1,
    )
    assert gold.gold_true_atoms == 2
    assert gold.gold_factuality_score == 0.5
    assert gold.avg_brier == pytest.approx((0.1**2 + 0.5**2 + 0.2**2 + 0.7**2) / 4)
    assert gold.accuracy == 0.5


def test_score_marginals_defaults_and_errors() -> None:
    scores = score_marginals({"a0": 0.8})
    assert scores.k == 1
    assert scores.f1_k == 1.0
    assert scores.gold is None
    assert score_marginals({"a0": 0.8}, labels={"a0": None}).gold is None
    assert score_marginals({"a0": 0.8}, k=4).recall_k == 0.25
    empty = score_marginals({})
    assert empty.num_atoms == 0
    assert empty.factuality_score == 0.0
    with pytest.raises(ValueError, match="no marginal"):
        score_marginals({"a0": 0.8}, ["a1"])
    with pytest.raises(ValueError, match="gold label"):
        score_marginals({"a0": 0.8}, labels={"a0": "maybe"})
    with pytest.raises(ValueError, match="unknown atom"):
        score_marginals({"a0": 0.8}, labels={"zz": "S"})


@given(st.lists(st.floats(0.0, 1.0), max_size=30), st.integers(1, 40))
def test_score_invariants(probabilities: list[float], k: int) -> None:
    marginals = {f"a{i}": p for i, p in enumerate(probabilities)}
    scores = score_marginals(marginals, k=k)
    n = len(probabilities)
    assert scores.num_true_atoms + scores.num_false_atoms == n
    assert scores.num_true_atoms == sum(p > 0.5 + 1e-9 for p in probabilities)
    for value in (scores.factuality_score, scores.recall_k, scores.f1_k):
        assert 0.0 <= value <= 1.0
    assert scores.f1_k <= max(scores.factuality_score, scores.recall_k) + 1e-12
    assert 0.0 <= scores.avg_entropy <= 1 / math.e + 1e-12  # max of -p ln p
    assert 0.0 <= scores.avg_norm_entropy <= 1.0 + 1e-12
