"""Exact values of the heuristic judge's features and calibration (found by mutation testing)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from langchain_references.judges import HeuristicJudge, Label
from langchain_references.judges.heuristic import Calibration, LexicalFeatures, lexical_features
from tests.unit_tests.fakes import CosineEmbeddings


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


# ----------------------------------------------------------------------- lexical features


def test_curly_apostrophes_read_as_straight_ones() -> None:
    curly = lexical_features("Sea ice isn’t melting.", "The Earth’s sea ice is melting.")
    straight = lexical_features("Sea ice isn't melting.", "The Earth's sea ice is melting.")
    assert curly == straight
    # "isn’t" is one negation word, not the content words "isn" and "t".
    assert (curly.overlap, curly.shared, curly.negation) == (1.0, 3, True)


def test_stop_words_of_the_passage_are_not_content_words() -> None:
    # "Others" stems to "other", a stop word: the passage's "Other" is no shared content word.
    f = lexical_features("Others study glaciers", "Other people study glaciers.")
    assert (f.shared, f.overlap, f.rest_overlap) == (2, 2 / 3, 2 / 3)


def test_rest_overlap_leaves_out_direction_words_stop_words_and_negations() -> None:
    # Content words: arctic, ice, grow (2 of 3 in the passage); the rest: arctic, ice.
    f = lexical_features("Arctic ice is growing", "Arctic ice is shrinking.")
    assert (f.overlap, f.rest_overlap) == (2 / 3, 1.0)
    # The rest: arctic, sea, ice; "sea" is not in the passage.
    g = lexical_features("Arctic sea ice is growing", "Arctic ice is shrinking.")
    assert (g.overlap, g.rest_overlap) == (0.5, 2 / 3)
    # Nothing but a negation and a direction word: the rest is the overlap.
    h = lexical_features("Not growing", "Growing.")
    assert (h.overlap, h.rest_overlap) == (1.0, 1.0)


def test_contradiction_threshold_applies_to_the_rest_not_the_overlap() -> None:
    judge = HeuristicJudge(contradiction_threshold=0.8)
    # overlap 2/3 < 0.8 but the rest (without "growing") matches fully: contradicts.
    strong = judge.judge("Arctic ice is growing", "Arctic ice is shrinking.")
    assert strong.label is Label.CONTRADICTS
    # The rest 2/3 < 0.8: unknown, and the rationale gives the rest's value.
    weak = judge.judge("Arctic sea ice is growing", "Arctic ice is shrinking.")
    assert weak.label is Label.UNKNOWN
    assert "the rest matches weakly (0.67 < 0.80), so unknown" in weak.rationale


# ----------------------------------------------------------------------- calibration

CAL = Calibration(
    entails=(-1.0, 0.5, 0.25, 2.0),
    contradicts=(0.3, -0.4, 0.6, -1.0),
    unknown=(0.5, -1.0, 0.5, 3.0),
    withheld=(-2.0, 1.0, 1.0, 1.0),
)
FEATURES = LexicalFeatures(
    overlap=0.5, negation=False, refutation=False, antonym=False, number=False, shared=3
)


def test_calibration_inputs() -> None:
    # Without a cosine the cosine input is 0, like a negative cosine.
    assert Calibration.inputs(FEATURES, None) == (0.5, 0.5, 0.0)
    assert Calibration.inputs(FEATURES, -0.3) == (0.5, 0.5, 0.0)
    assert Calibration.inputs(FEATURES, 0.4) == (0.5, 0.5, 0.4)
    assert Calibration.inputs(replace(FEATURES, shared=9), 0.4) == (0.5, 1.0, 0.4)


def test_calibrated_confidence_is_the_logistic_of_the_label_parameters() -> None:
    # entails: -1 + 0.5 * 0.5 + 0.25 * 0.5 (+ 2 * cosine): z < 0 without a cosine.
    assert CAL.confidence(Label.ENTAILS, FEATURES, None) == pytest.approx(_sigmoid(-0.625))
    assert CAL.confidence(Label.ENTAILS, FEATURES, 0.5) == pytest.approx(_sigmoid(0.375))
    # contradicts: 0.3 - 0.4 * 0.5 + 0.6 * 0.5 - 1 * 0.25
    assert CAL.confidence(Label.CONTRADICTS, FEATURES, 0.25) == pytest.approx(_sigmoid(0.15))
    # unknown: 0.5 - 0.5 + 0.25 + 3 * 0.1; withheld is off by default.
    assert CAL.confidence(Label.UNKNOWN, FEATURES, 0.1) == pytest.approx(_sigmoid(0.55))
    assert CAL.confidence(Label.UNKNOWN, FEATURES, 0.1, withheld=False) == pytest.approx(
        _sigmoid(0.55)
    )


def test_withheld_parameters_apply_to_unknown_only() -> None:
    # withheld: -2 + 0.5 + 0.5 + 0.1
    assert CAL.confidence(Label.UNKNOWN, FEATURES, 0.1, withheld=True) == pytest.approx(
        _sigmoid(-0.9)
    )
    for label in (Label.ENTAILS, Label.CONTRADICTS):
        assert CAL.confidence(label, FEATURES, 0.1, withheld=True) == CAL.confidence(
            label, FEATURES, 0.1
        )
    # Without withheld parameters a withheld unknown uses the unknown ones.
    plain = replace(CAL, withheld=None)
    assert plain.confidence(Label.UNKNOWN, FEATURES, 0.1, withheld=True) == pytest.approx(
        _sigmoid(0.55)
    )


def test_judge_confidence_of_a_withheld_unknown() -> None:
    judge = HeuristicJudge(contradiction_threshold=0.8, calibration=CAL)
    # Relevant (overlap 0.5 >= 0.25) but the rest matches weakly: withheld.
    j = judge.judge("Arctic sea ice is growing", "Arctic ice is shrinking.")
    assert j.label is Label.UNKNOWN
    # withheld, lexical (no cosine): -2 + 1 * 0.5 + 1 * 2 / 6
    assert j.confidence == pytest.approx(_sigmoid(-2.0 + 0.5 + 2 / 6))
    # Below the relevance threshold: a plain unknown, 0.5 - 1 * 0 + 0.5 * 0.
    below = judge.judge("Arctic sea ice is growing", "Bananas are yellow.")
    assert below.label is Label.UNKNOWN
    assert below.confidence == pytest.approx(_sigmoid(0.5))


def test_judge_confidence_at_the_relevance_threshold_is_withheld() -> None:
    # overlap 2 / 4 = 0.5 exactly, at the threshold: relevant, its unknown is withheld.
    judge = HeuristicJudge(relevance_threshold=0.5, contradiction_threshold=0.8, calibration=CAL)
    j = judge.judge("Arctic sea ice is growing", "Arctic ice is shrinking.")
    assert j.label is Label.UNKNOWN
    assert j.confidence == pytest.approx(_sigmoid(-2.0 + 0.5 + 2 / 6))


def test_an_unused_cosine_does_not_reach_the_calibration() -> None:
    # Embeddings with weight 0: the cosine counts as absent, also in the confidence.
    judge = HeuristicJudge(CosineEmbeddings("x", 0.5), embedding_weight=0.0, calibration=CAL)
    j = judge.decide_features(FEATURES, 0.8)
    assert j.label is Label.ENTAILS  # overlap 0.5 >= 0.25, no cue
    assert j.confidence == pytest.approx(_sigmoid(-0.625))
    assert "(0.50; word overlap 0.50)" in j.rationale


# ----------------------------------------------------------------------- decisions and rationales


def test_rationale_of_several_cues() -> None:
    j = HeuristicJudge().judge("Seas did not rise 20 cm.", "Seas rose 15 cm.")
    assert j.label is Label.CONTRADICTS
    assert j.rationale == (
        "Heuristic: relevant (0.50; word overlap 0.50) with contradiction cues antonym, number: "
        "not rise vs rose; 20 cm vs 15 cm. "
        f"Calibrated confidence {j.confidence:.2f}, weak evidence."
    )


def test_rationale_of_a_reversal_whose_rest_matches_weakly() -> None:
    judge = HeuristicJudge(contradiction_threshold=0.8)
    j = judge.judge("Arctic sea ice is growing", "Arctic ice is shrinking.")
    assert j.rationale == (
        "Heuristic: relevant (0.50; word overlap 0.50) with contradiction cues antonym: "
        "growing vs shrinking; the rest matches weakly (0.67 < 0.80), so unknown. "
        f"Calibrated confidence {j.confidence:.2f}, weak evidence."
    )
    strong = judge.judge("Arctic ice is growing", "Arctic ice is shrinking.")
    assert strong.rationale == (
        "Heuristic: relevant (0.67; word overlap 0.67) with contradiction cues antonym: "
        f"growing vs shrinking. Calibrated confidence {strong.confidence:.2f}, weak evidence."
    )


def test_negations_the_passage_does_not_state_contradict_when_the_rest_matches() -> None:
    statement, passage = "Arctic ice did not grow and did not thin", "Arctic ice."
    j = HeuristicJudge().judge(statement, passage)
    assert j.label is Label.CONTRADICTS
    assert j.rationale == (
        "Heuristic: relevant (0.50; word overlap 0.50) but the passage does not state the "
        "statement's polarity: not grow; not thin. "
        f"Calibrated confidence {j.confidence:.2f}, weak evidence."
    )
    # Relevant (overlap 1 / 4), but the rest (arctic, ice: 1 / 2) matches weakly: unknown.
    weak = HeuristicJudge(relevance_threshold=0.25, contradiction_threshold=0.6)
    unknown = weak.judge(statement, "Ice.")
    assert unknown.label is Label.UNKNOWN
    assert unknown.rationale.startswith(
        "Heuristic: relevant (0.25; word overlap 0.25) but the passage does not state"
    )
    assert weak.judge(statement, passage).label is Label.CONTRADICTS  # the rest: 1
    # Without the negation cue, the unstated negations are not read at all.
    assert HeuristicJudge(cues=["antonym"]).judge(statement, passage).label is Label.ENTAILS


def test_a_direction_the_passage_states_only_the_other_way_needs_the_antonym_cue() -> None:
    statement, passage = "Arctic sea ice grew.", "Arctic sea ice is reported; forests shrank."
    assert lexical_features(statement, passage).unsupported_direction == ("grew",)
    assert HeuristicJudge().judge(statement, passage).label is Label.UNKNOWN
    assert HeuristicJudge(cues=["negation"]).judge(statement, passage).label is Label.ENTAILS


# ----------------------------------------------------------------------- construction


class _RecordingEmbeddings(CosineEmbeddings):
    """CosineEmbeddings that records the texts of each embed_documents call."""

    def __init__(self) -> None:
        super().__init__("s0", 0.5)
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return super().embed_documents(texts)


def test_batch_embeds_64_pairs_per_call_by_default() -> None:
    emb = _RecordingEmbeddings()
    judge = HeuristicJudge(emb)
    out = judge.batch([{"statement": f"s{i}", "passage": "p"} for i in range(65)])
    assert len(out) == 65
    assert all(j.error is None for j in out)
    # The first 64 pairs in one call (each text once, in order), then the 65th pair, whose
    # passage the shared cache already holds.
    assert emb.calls == [["s0", "p", *(f"s{i}" for i in range(1, 64))], ["s64"]]


def test_wrong_embeddings_type_is_named() -> None:
    with pytest.raises(TypeError, match=r"^embeddings must be an Embeddings, not str$"):
        HeuristicJudge("minilm")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"relevance_threshold": 1.5}, r"^relevance_threshold must be in \[0, 1\], got 1.5$"),
        (
            {"contradiction_threshold": -0.5},
            r"^contradiction_threshold must be in \[0, 1\], got -0.5$",
        ),
        ({"embedding_weight": 1.25}, r"^embedding_weight must be in \[0, 1\], got 1.25$"),
        ({"batch_size": 0}, r"^batch_size must be >= 1, got 0$"),
        ({"min_covered": 1.01}, r"^min_covered must be in \[0, 1\], got 1.01$"),
        ({"atomic_items": -1}, r"^atomic_items must be >= 0, got -1$"),
        ({"swap_items": -2}, r"^swap_items must be >= 0, got -2$"),
        ({"polar_items": -3}, r"^polar_items must be >= 0, got -3$"),
    ],
)
def test_out_of_range_parameters_are_named(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HeuristicJudge(**kwargs)  # type: ignore[arg-type]


def test_batch_size_one_judges_one_pair_per_call() -> None:
    emb = _RecordingEmbeddings()
    out = HeuristicJudge(emb, batch_size=1).batch(
        [{"statement": "s0", "passage": "p"}, {"statement": "s1", "passage": "q"}]
    )
    assert [j.error for j in out] == [None, None]
    assert emb.calls == [["s0", "p"], ["s1", "q"]]


class _FailingEmbeddings(CosineEmbeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("embedding service down")


def test_raise_errors_lets_the_failure_propagate() -> None:
    pair = {"statement": "Arctic ice melts.", "passage": "Arctic ice melts fast."}
    recorded = HeuristicJudge(_FailingEmbeddings("x", 0.5)).invoke(pair)
    assert recorded.error == "RuntimeError: embedding service down"
    raising = HeuristicJudge(_FailingEmbeddings("x", 0.5), raise_errors=True)
    with pytest.raises(RuntimeError, match=r"^embedding service down$"):
        raising.invoke(pair)


def _relevant(**fields: Any) -> LexicalFeatures:
    """Features of a pair whose words all match (relevance 1.0), with ``fields`` set."""
    return LexicalFeatures(
        overlap=1.0, negation=False, refutation=False, antonym=False, number=False, **fields
    )


def test_a_short_statement_the_passage_leaves_uncovered_names_every_gap() -> None:
    judge = HeuristicJudge(atomic_items=4, polar_items=4, min_covered=0.7)
    features = _relevant(
        items=3, missing=("Paris", "1889"), covered=0.5, silent=("rose",), denied=("built",)
    )
    out = judge.decide_features(features, None)
    assert out.label is Label.UNKNOWN
    assert out.rationale.startswith(
        "Heuristic: relevant (1.00; word overlap 1.00) but the passage does not cover the "
        "statement: "
        "it lacks Paris; 1889; rose; 50% of its other words; "
        "it negates the statement's words (built). Calibrated confidence "
    )


def test_coverage_counts_only_up_to_the_short_statements_bounds() -> None:
    judge = HeuristicJudge(atomic_items=3, polar_items=3, min_covered=0.7)
    # exactly at the bounds: still short, still covered
    assert judge.decide_features(_relevant(items=3, covered=0.7), None).label is Label.ENTAILS
    gap = judge.decide_features(_relevant(items=3, silent=("rose",)), None)
    assert gap.label is Label.UNKNOWN
    assert "it lacks rose." in gap.rationale
    # past them: the coverage rule does not apply
    past = _relevant(items=4, missing=("Paris",), covered=0.1, silent=("rose",), denied=("x",))
    assert judge.decide_features(past, None).label is Label.ENTAILS


def test_a_swap_counts_only_in_a_short_statement_the_passage_covers() -> None:
    judge = HeuristicJudge(swap_items=3, min_covered=0.7, atomic_items=0, polar_items=0)
    swap = {"swapped": ("Paris vs Berlin",), "cue_words": ("Paris vs Berlin",)}
    at_bounds = judge.decide_features(_relevant(items=3, covered=0.7, **swap), None)
    assert at_bounds.label is Label.CONTRADICTS
    assert "contradiction cues swap: Paris vs Berlin." in at_bounds.rationale
    for past in (_relevant(items=4, covered=1.0, **swap), _relevant(items=2, covered=0.6, **swap)):
        assert judge.decide_features(past, None).label is Label.ENTAILS


def test_the_coverage_rationale_names_only_the_gaps_of_the_rules_that_apply() -> None:
    judge = HeuristicJudge(atomic_items=2, polar_items=4, min_covered=0.7)
    # past the atomic bound, within the polar one: names and word coverage are not asked for
    polar = _relevant(items=3, missing=("Paris",), covered=0.1, denied=("built", "rose"))
    assert "does not cover the statement: it negates the statement's words (built, rose)." in (
        judge.decide_features(polar, None).rationale
    )
    # at the word-coverage bound a missing name is the only gap
    atomic = _relevant(items=2, missing=("Paris",), covered=0.7)
    assert "does not cover the statement: it lacks Paris." in (
        judge.decide_features(atomic, None).rationale
    )
    # without the antonym cue a silent direction is no gap
    no_antonym = HeuristicJudge(atomic_items=2, polar_items=4, cues=("negation", "number"))
    assert no_antonym.decide_features(_relevant(items=3, silent=("rose",)), None).label is (
        Label.ENTAILS
    )
