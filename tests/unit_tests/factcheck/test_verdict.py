from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_references.factcheck.verdict import (
    Aggregator,
    RankedJudgement,
    Verdict,
    VerdictResult,
    WeightedVoteAggregator,
    could_not_check,
    verdict_note,
)
from langchain_references.judges import Judgement, Label

E, C, U = Label.ENTAILS, Label.CONTRADICTS, Label.UNKNOWN


def j(label: Label, confidence: float) -> Judgement:
    return Judgement(label=label, confidence=confidence)


judgements = st.builds(
    Judgement,
    label=st.sampled_from(list(Label)),
    confidence=st.floats(0.0, 1.0),
)
failed = st.builds(Judgement.failed, st.text(min_size=1, max_size=5))
ranked = st.lists(
    st.tuples(
        st.one_of(judgements, judgements, judgements, failed),
        st.integers(0, 50),
        st.one_of(st.none(), st.floats(-1.0, 1.0)),
    ),
    max_size=12,
)
aggregators = st.builds(
    WeightedVoteAggregator,
    threshold=st.floats(0.01, 1.0),
    exponent=st.floats(0.0, 3.0),
    count_unknown=st.booleans(),
    disputed_threshold=st.one_of(st.none(), st.floats(0.0, 1.0)),
)


def swap(items: list[RankedJudgement]) -> list[RankedJudgement]:
    flip = {E: C, C: E, U: U}
    return [
        (jd if not jd.ok else jd.model_copy(update={"label": flip[jd.label]}), r, s)
        for jd, r, s in items
    ]


def reference_score(agg: WeightedVoteAggregator, items: list[RankedJudgement]) -> float:
    sign = {E: 1.0, C: -1.0, U: 0.0}
    usable = [(jd, r) for jd, r, _ in items if jd.ok and (agg.count_unknown or jd.label is not U)]
    den = sum((r + 1) ** -agg.exponent for _, r in usable)
    num = sum(sign[jd.label] * jd.confidence * (r + 1) ** -agg.exponent for jd, r in usable)
    return num / den if den else 0.0


@given(aggregators, ranked, st.randoms())
def test_permutation_invariance(
    agg: WeightedVoteAggregator, items: list[RankedJudgement], rnd: object
) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a, b = agg.aggregate(items), agg.aggregate(shuffled)
    assert (a.verdict, a.score, a.confidence) == (b.verdict, b.score, b.confidence)


@given(aggregators, ranked)
def test_sign_symmetry(agg: WeightedVoteAggregator, items: list[RankedJudgement]) -> None:
    a, b = agg.aggregate(items), agg.aggregate(swap(items))
    assert b.score == -a.score
    mirror = {
        Verdict.SUPPORTED: Verdict.REFUTED,
        Verdict.REFUTED: Verdict.SUPPORTED,
        Verdict.NOT_ENOUGH_EVIDENCE: Verdict.NOT_ENOUGH_EVIDENCE,
        Verdict.DISPUTED: Verdict.DISPUTED,
    }
    assert b.verdict == mirror[a.verdict]
    assert b.confidence == a.confidence


@given(aggregators, ranked)
def test_bounds_and_reference(agg: WeightedVoteAggregator, items: list[RankedJudgement]) -> None:
    result = agg.aggregate(items)
    assert -1.0 <= result.score <= 1.0
    assert 0.0 <= result.confidence <= 1.0
    assert result.score == pytest.approx(reference_score(agg, items), abs=1e-9)
    if result.verdict in (Verdict.SUPPORTED, Verdict.REFUTED):
        assert abs(result.score) >= agg.threshold
        assert result.confidence == pytest.approx(abs(result.score))
        assert (result.score > 0) == (result.verdict is Verdict.SUPPORTED)
    if result.verdict is Verdict.NOT_ENOUGH_EVIDENCE:
        assert abs(result.score) < agg.threshold
    if result.verdict is Verdict.DISPUTED:
        assert agg.disputed_threshold is not None


@given(st.lists(st.integers(0, 20), min_size=1, max_size=8), st.floats(0.0, 1.0))
def test_unanimous_evidence_scores_its_confidence(ranks: list[int], confidence: float) -> None:
    agg = WeightedVoteAggregator()
    items: list[RankedJudgement] = [(j(E, confidence), r, None) for r in ranks]
    assert agg.aggregate(items).score == pytest.approx(confidence)


def test_rank_weights_power_law() -> None:
    agg = WeightedVoteAggregator()
    assert [agg.weight(r) for r in range(4)] == [1.0, 0.5, pytest.approx(1 / 3), 0.25]
    assert WeightedVoteAggregator(exponent=2).weight(1) == 0.25
    assert WeightedVoteAggregator(exponent=0).weight(9) == 1.0
    # A top-ranked contradiction outweighs a lower-ranked entailment of equal confidence.
    result = agg.aggregate([(j(C, 0.9), 0, None), (j(E, 0.9), 3, 0.99)])
    assert result.score == pytest.approx((-0.9 + 0.9 * 0.25) / 1.25)
    assert result.verdict is Verdict.REFUTED


def test_unknowns_in_the_denominator_are_optional() -> None:
    items: list[RankedJudgement] = [
        (j(E, 1.0), 2, None),
        (j(U, 0.9), 0, None),
        (j(U, 0.9), 1, None),
    ]
    assert WeightedVoteAggregator().aggregate(items).verdict is Verdict.SUPPORTED
    diluted = WeightedVoteAggregator(count_unknown=True).aggregate(items)
    assert diluted.score == pytest.approx((1 / 3) / (1 + 1 / 2 + 1 / 3))
    assert diluted.verdict is Verdict.NOT_ENOUGH_EVIDENCE


def test_threshold_and_confidences() -> None:
    agg = WeightedVoteAggregator(threshold=0.3)
    weak = agg.aggregate([(j(E, 0.29), 0, None)])
    assert weak.verdict is Verdict.NOT_ENOUGH_EVIDENCE
    assert weak.confidence == pytest.approx(1 - 0.29 / 0.3)
    strong = agg.aggregate([(j(E, 0.3), 0, None)])
    assert strong.verdict is Verdict.SUPPORTED
    assert strong.confidence == pytest.approx(0.3)


def test_disputed_only_when_enabled() -> None:
    items: list[RankedJudgement] = [(j(E, 0.9), 0, None), (j(C, 0.6), 1, None)]
    assert WeightedVoteAggregator().aggregate(items).verdict is Verdict.SUPPORTED
    disputed = WeightedVoteAggregator(disputed_threshold=0.5).aggregate(items)
    assert disputed.verdict is Verdict.DISPUTED
    assert disputed.confidence == pytest.approx(0.6)
    assert WeightedVoteAggregator(disputed_threshold=0.7).aggregate(items).verdict is (
        Verdict.SUPPORTED
    )


def test_failed_and_empty_inputs() -> None:
    agg = WeightedVoteAggregator()
    empty = agg.aggregate([])
    assert empty.verdict is Verdict.NOT_ENOUGH_EVIDENCE
    assert empty.score == 0.0
    result = agg.aggregate([(Judgement.failed("timeout"), 0, None), (j(C, 0.8), 1, None)])
    assert result.verdict is Verdict.REFUTED
    assert result.score == pytest.approx(-0.8)
    assert result.details["failed"] == 1
    assert result.details["counts"] == {"entails": 0, "contradicts": 1, "unknown": 0}


@pytest.mark.parametrize(
    ("items", "error"),
    [
        ("abc", TypeError),
        ([(j(E, 1.0), 0)], TypeError),
        ([("entails", 0, None)], TypeError),
        ([(j(E, 1.0), 1.0, None)], TypeError),
        ([(j(E, 1.0), True, None)], TypeError),
        ([(j(E, 1.0), -1, None)], ValueError),
        ([(j(E, 1.0), 0, math.nan)], ValueError),
    ],
)
def test_invalid_input(items: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        WeightedVoteAggregator().aggregate(items)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"threshold": 0.0}, {"threshold": 1.5}, {"exponent": -1}, {"disputed_threshold": 2.0}],
)
def test_invalid_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        WeightedVoteAggregator(**kwargs)  # type: ignore[arg-type]


def test_protocol_accepts_other_strategies() -> None:
    class Majority:
        def aggregate(self, judgements: list[RankedJudgement]) -> VerdictResult:
            n = sum(1 if jd.label is E else -1 if jd.label is C else 0 for jd, _, _ in judgements)
            verdict = Verdict.SUPPORTED if n > 0 else Verdict.NOT_ENOUGH_EVIDENCE
            return VerdictResult(verdict=verdict, confidence=1.0, score=max(-1, min(1, n)))

    assert isinstance(WeightedVoteAggregator(), Aggregator)
    assert isinstance(Majority(), Aggregator)
    assert not isinstance(object(), Aggregator)
    with pytest.raises(ValueError, match="score"):
        VerdictResult(verdict=Verdict.SUPPORTED, confidence=1.0, score=1.5)


@pytest.mark.parametrize(
    ("items", "error", "message"),
    [
        ("ab", TypeError, "judgements must be a sequence of (Judgement, rank, similarity) tuples"),
        (None, TypeError, "judgements must be a sequence of (Judgement, rank, similarity) tuples"),
        (
            [(j(E, 1.0), 0)],
            TypeError,
            "judgements[0] must be a (Judgement, rank, similarity) tuple",
        ),
        ([("x", 0, None)], TypeError, "judgements[0][0] is str, not a Judgement"),
        (
            [(j(E, 1.0), 0, None), (j(E, 1.0), 1.0, None)],
            TypeError,
            "judgements[1] rank must be an int, not float",
        ),
        ([(j(E, 1.0), -1, None)], ValueError, "judgements[0] rank must be >= 0, got -1"),
        (
            [(j(E, 1.0), 0, "0.5")],
            ValueError,
            "judgements[0] similarity must be a finite number or None",
        ),
        (
            [(j(E, 1.0), 0, math.nan)],
            ValueError,
            "judgements[0] similarity must be a finite number or None",
        ),
    ],
)
def test_bad_input_is_named_exactly(items: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as raised:
        WeightedVoteAggregator().aggregate(items)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_a_blank_reason_is_refused_with_its_message() -> None:
    with pytest.raises(ValueError, match="must not be blank") as raised:
        could_not_check("  ")
    assert str(raised.value) == "the reason why a statement could not be checked must not be blank"


def test_details_count_every_judgement_and_every_failure() -> None:
    items: list[RankedJudgement] = [
        (Judgement.failed("timeout"), 0, None),
        (j(E, 0.9), 1, None),
        (Judgement.failed("dns"), 2, None),
        (j(E, 0.8), 3, None),
        (j(C, 0.2), 4, None),
        (j(U, 0.5), 5, None),
        (j(U, 0.5), 6, None),
    ]
    details = WeightedVoteAggregator().aggregate(items).details
    assert details["failed"] == 2
    assert details["counts"] == {"entails": 2, "contradicts": 1, "unknown": 2}


def test_details_give_support_refute_and_weight_total() -> None:
    # Ranks 0 and 1 weigh 1 and 1/2: support 0.8 / 1.5, refute 0.3 * 0.5 / 1.5.
    result = WeightedVoteAggregator().aggregate([(j(E, 0.8), 0, None), (j(C, 0.3), 1, 0.2)])
    assert result.details == {
        "counts": {"entails": 1, "contradicts": 1, "unknown": 0},
        "failed": 0,
        "support": pytest.approx(0.8 / 1.5),
        "refute": pytest.approx(0.15 / 1.5),
        "weight_total": 1.5,
        "threshold": 0.3,
    }
    assert result.score == pytest.approx((0.8 - 0.15) / 1.5)


def test_one_passage_at_rank_zero_gives_its_own_confidence() -> None:
    details = WeightedVoteAggregator().aggregate([(j(C, 0.6), 0, None)]).details
    assert (details["support"], details["refute"], details["weight_total"]) == (0.0, 0.6, 1.0)
    details = WeightedVoteAggregator().aggregate([(j(E, 0.8), 0, None)]).details
    assert (details["support"], details["refute"], details["weight_total"]) == (0.8, 0.0, 1.0)


def test_nothing_usable_gives_zero_support_and_refute() -> None:
    result = WeightedVoteAggregator().aggregate([(j(U, 0.9), 0, None)])
    assert result.verdict is Verdict.NOT_ENOUGH_EVIDENCE
    assert (result.details["support"], result.details["refute"]) == (0.0, 0.0)
    assert result.details["weight_total"] == 0.0


def test_disputed_at_exactly_the_threshold_keeps_its_details() -> None:
    items: list[RankedJudgement] = [(j(E, 0.9), 0, None), (j(C, 0.7), 1, None)]
    result = WeightedVoteAggregator(disputed_threshold=0.7).aggregate(items)
    assert result.verdict is Verdict.DISPUTED
    assert result.confidence == 0.7
    assert result.details["counts"] == {"entails": 1, "contradicts": 1, "unknown": 0}
    below = WeightedVoteAggregator(disputed_threshold=0.71).aggregate(items)
    assert below.verdict is Verdict.SUPPORTED


# ------------------------------------------------------------------- how a verdict's note reads


THRESHOLD = {"threshold": 0.3}


@pytest.mark.parametrize(
    ("verdict", "confidence", "score", "details", "note"),
    [
        # not enough evidence: the score beside the threshold, never the confidence
        (Verdict.NOT_ENOUGH_EVIDENCE, 1.0, 0.0, THRESHOLD, "score +0.00 < 0.30"),
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.6, 0.12, THRESHOLD, "score +0.12 < 0.30"),
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.6, -0.12, THRESHOLD, "score -0.12 > -0.30"),
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.001, 0.2997, THRESHOLD, "score +0.2997 < 0.30"),
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.6, 0.12, {}, "score +0.12"),  # no threshold given
        # a threshold of more than two decimals is shown as it is
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.6, 0.1, {"threshold": 0.255}, "score +0.10 < 0.255"),
        # six decimals at most, even when the comparison would take more
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.0, 0.2999999, THRESHOLD, "score +0.300000 < 0.30"),
        # the other verdicts keep their confidence
        (Verdict.SUPPORTED, 0.75, 0.75, THRESHOLD, "confidence 75%, score +0.75 ≥ 0.30"),
        (Verdict.REFUTED, 0.45, -0.45, THRESHOLD, "confidence 45%, score -0.45 ≤ -0.30"),
        (Verdict.DISPUTED, 0.8, 0.1, THRESHOLD, "confidence 80%, score +0.10"),
        (Verdict.SUPPORTED, 0.75, 0.75, {"threshold": True}, "confidence 75%, score +0.75"),
    ],
)
def test_a_verdicts_note_shows_confidence_except_for_not_enough_evidence(
    verdict: Verdict, confidence: float, score: float, details: dict[str, object], note: str
) -> None:
    assert verdict_note(verdict, confidence, score, details) == note


def test_nothing_leaning_keeps_confidence_one_in_the_data_but_not_in_the_note() -> None:
    result = WeightedVoteAggregator().aggregate([(j(U, 0.9), 0, None)])
    assert (result.verdict, result.confidence, result.score) == (
        Verdict.NOT_ENOUGH_EVIDENCE,
        1.0,
        0.0,
    )
    note = verdict_note(result.verdict, result.confidence, result.score, result.details)
    assert note == "score +0.00 < 0.30"


def test_a_statement_that_could_not_be_checked_has_no_note() -> None:
    error = could_not_check("search failed")
    with pytest.raises(
        ValueError, match=r"^a statement that could not be checked has a reason, not a note$"
    ):
        verdict_note(error.verdict, error.confidence, error.score, error.details)
