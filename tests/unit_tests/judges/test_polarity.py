"""The offline heuristic judge respects polarity (problem: a reversed claim came out supported).

"Arctic summer sea ice has grown by 13 percent per decade since 1979" was judged *supported*
(confidence 0.58) on the passage "Arctic summer sea ice extent has declined by roughly 13
percent per decade". Each test below fails with the judge before the polarity check: its
antonym cue was silenced whenever the passage also used the other word of the pair, its
negation cue only compared the parity of all negations, and its number cue ignored units,
comparisons and years.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from langchain_references.factcheck.verdict import Verdict, WeightedVoteAggregator
from langchain_references.judges import HeuristicJudge, Label
from langchain_references.judges._polarity import MAX_CHARS, analyze, compare
from langchain_references.judges.heuristic import lexical_features
from tests.unit_tests.fakes import CosineEmbeddings

ARCTIC_CLAIM = "Arctic summer sea ice has grown by 13 percent per decade since 1979"
ARCTIC_PASSAGE = "Arctic summer sea ice extent has declined by roughly 13 percent per decade"


def _label(statement: str, passage: str) -> Label:
    return HeuristicJudge().judge(statement, passage).label


# ------------------------------------------------------------------ the reported case


@pytest.mark.parametrize("cosine", [None, 0.84])  # 0.84: what MiniLM gives this pair
def test_arctic_ice_grown_is_contradicted_by_declined(cosine: float | None) -> None:
    judge = (
        HeuristicJudge()
        if cosine is None
        else HeuristicJudge(CosineEmbeddings(ARCTIC_CLAIM, cosine))
    )
    judgement = judge.judge(ARCTIC_CLAIM, ARCTIC_PASSAGE)
    assert judgement.label is Label.CONTRADICTS
    assert "grown vs declined" in judgement.rationale
    verdict = WeightedVoteAggregator().aggregate([(judgement, 0, None)]).verdict
    assert verdict is not Verdict.SUPPORTED
    # The claim with the passage's direction is still entailed.
    same = ARCTIC_CLAIM.replace("grown", "declined")
    assert judge.judge(same, ARCTIC_PASSAGE).label is Label.ENTAILS


# ------------------------------------------------------------------ opposites

# (template, up word, down word): the claim says one, the passage the other about the Arctic,
# and also the claim's word about the Antarctic (so both words of the pair are in the passage).
OPPOSITES = [
    ("Arctic sea ice extent has {} over the last decade", "increased", "decreased"),
    ("Arctic sea ice extent has {} over the last decade", "risen", "fallen"),
    ("Arctic sea ice extent has {} over the last decade", "grown", "declined"),
    ("Arctic sea ice extent has {} over the last decade", "expanded", "shrunk"),
    ("Arctic sea ice has {} mass over the last decade", "gained", "lost"),
    ("The survey recorded a {} of Arctic sea ice over the last decade", "gain", "loss"),
    ("The survey recorded {} Arctic sea ice than in the last decade", "more", "less"),
    ("Arctic sea ice extent was {} than in the last decade", "higher", "lower"),
    ("Arctic sea ice extent was {} than in the last decade", "larger", "smaller"),
    ("Arctic sea ice extent stayed {} the long-term average", "above", "below"),
    ("Arctic ocean waters are {} over the last decade", "warming", "cooling"),
    ("Arctic summers were {} over the last decade", "hotter", "colder"),
    ("The loss of Arctic sea ice has {} over the last decade", "accelerated", "slowed"),
    ("The Arctic jet stream has {} over the last decade", "strengthened", "weakened"),
    ("Arctic sea ice has {} over the last decade", "thickened", "thinned"),
    ("Arctic permafrost is {} over the last decade", "thawing", "freezing"),
    ("Conditions for Arctic wildlife got {} over the last decade", "better", "worse"),
]


@pytest.mark.parametrize(("template", "up", "down"), OPPOSITES)
@pytest.mark.parametrize("claim_up", [True, False])
def test_each_opposite_pair_is_a_contradiction(
    template: str, up: str, down: str, claim_up: bool
) -> None:
    said, other = (up, down) if claim_up else (down, up)
    claim = template.format(said) + "."
    passage = (
        template.format(other)
        + ", while Antarctic "
        + template.format(said).split(" ", 1)[1].replace("Arctic ", "")
        + "."
    )
    judgement = HeuristicJudge().judge(claim, passage)
    assert judgement.label is Label.CONTRADICTS, judgement.rationale
    assert f"{said} vs {other}" in judgement.rationale


@pytest.mark.parametrize(("template", "up", "down"), OPPOSITES)
def test_each_opposite_pair_keeps_the_same_direction(template: str, up: str, down: str) -> None:
    for word in (up, down):
        claim = template.format(word) + "."
        passage = "Satellite records show that " + template.format(word)[0].lower()
        passage += template.format(word)[1:] + "."
        assert _label(claim, passage) is Label.ENTAILS


# ------------------------------------------------------------------ negation


@pytest.mark.parametrize(
    ("claim", "passage"),
    [
        (
            "Arctic sea ice is not melting.",
            "Arctic sea ice is melting faster than ever, and it is not recovering in winter.",
        ),
        (
            "CO2 does not cause global warming.",
            "CO2 causes global warming, scientists say, and the effect is not small.",
        ),
        (
            "Sea levels aren't rising along the Atlantic coast.",
            "Sea levels are rising along the Atlantic coast, though not everywhere at one rate.",
        ),
        (
            "Greenland has never lost ice mass.",
            "Greenland has lost ice mass every year since 1998; no year was an exception.",
        ),
    ],
)
def test_a_negation_inserted_is_a_contradiction(claim: str, passage: str) -> None:
    judgement = HeuristicJudge().judge(claim, passage)
    assert judgement.label is Label.CONTRADICTS, judgement.rationale
    assert "negation" in judgement.rationale


def test_a_negation_the_passage_does_not_share_is_never_entailed() -> None:
    claim = "Deforestation does not affect the Amazon rainfall."
    passage = "Deforestation affects the Amazon rainfall; the forest is not recovering."
    assert _label(claim, passage) is Label.CONTRADICTS
    # A negated predicate the passage never mentions: not entailed either.
    quiet = "The Amazon rainfall is not driven by deforestation."
    judgement = HeuristicJudge().judge(quiet, passage)
    assert judgement.label is not Label.ENTAILS
    assert "does not state" in judgement.rationale


# ------------------------------------------------------------------ numbers, dates, comparisons


@pytest.mark.parametrize(
    ("claim", "passage", "cue"),
    [
        (
            "Arctic sea ice has declined by 31 percent per decade.",
            "Arctic sea ice has declined by 13 % per decade since 1979.",
            "31 percent vs 13 %",
        ),
        (
            "Arctic sea ice has declined since 1997.",
            "Arctic sea ice has declined since 1979, satellite records show.",
            "1997 vs 1979",
        ),
        (
            "Sea levels rose 20 cm last century.",
            "Sea levels rose 150 mm last century.",
            "20 cm vs 150 mm",
        ),
        (
            "The world has warmed by 2 °C since 1880.",
            "The world has warmed by about 1 degree Celsius since 1880.",
            "2 ° c vs about 1 degree celsius",
        ),
        (
            "Global emissions reached 40 billion tonnes of CO2 in 2019.",
            "Global emissions reached 36 billion tonnes of CO2 in 2019.",
            "40 billion tonnes vs 36 billion tonnes",
        ),
    ],
)
def test_a_changed_number_or_year_is_a_contradiction(claim: str, passage: str, cue: str) -> None:
    judgement = HeuristicJudge().judge(claim, passage)
    assert judgement.label is Label.CONTRADICTS, judgement.rationale
    assert cue in judgement.rationale


@pytest.mark.parametrize(
    ("claim", "passage", "cue"),
    [
        (
            "More than 50 % of the warming since 1950 is man-made.",
            "Less than 50 % of the warming since 1950 is man-made; more study is needed.",
            "more than 50 % vs less than 50 %",
        ),
        (
            "Arctic sea ice extent is larger than it was in 1979.",
            "Arctic sea ice extent is smaller than it was in 1979, while Antarctic extent is "
            "larger.",
            "larger vs smaller",
        ),
        (
            "Global temperatures are above the 20th century average.",
            "Global temperatures are below the 20th century average, while ocean heat is above it.",
            "above vs below",
        ),
    ],
)
def test_a_reversed_comparison_is_a_contradiction(claim: str, passage: str, cue: str) -> None:
    judgement = HeuristicJudge().judge(claim, passage)
    assert judgement.label is Label.CONTRADICTS, judgement.rationale
    assert cue in judgement.rationale


# ------------------------------------------------------------------ no over-triggering


@pytest.mark.parametrize(
    ("claim", "passage"),
    [
        (
            "Arctic sea ice extent has declined over the last decade.",
            "Arctic sea ice extent has decreased over the last decade.",
        ),
        (
            "Global temperatures rose in the 20th century.",
            "Global temperatures increased in the 20th century.",
        ),
        ("The oceans have warmed since 1970.", "Ocean temperatures have risen since 1970."),
        ("It is not true that Arctic sea ice is not melting.", "Arctic sea ice is melting."),
        (
            "Arctic sea ice has not declined this winter.",
            "Arctic sea ice has increased this winter.",
        ),
        ("CO2 does not cool the planet.", "CO2 does not cool the planet; it warms it."),
        (
            "Warming is not only raising sea levels but also acidifying oceans.",
            "Warming is raising sea levels and acidifying oceans.",
        ),
        ("Sea levels rose 20 cm last century.", "Sea levels rose 200 mm last century."),
        (
            "Arctic sea ice has declined by 13 percent per decade.",
            "Arctic sea ice declined 13 % per decade.",
        ),
        (
            "Arctic sea ice has declined by about 13 percent per decade.",
            "Arctic sea ice declined 13.4 % per decade.",
        ),
        ("More than 50 % of the warming is man-made.", "About 60 % of the warming is man-made."),
        ("Arctic sea ice has declined since 1979.", "Arctic sea ice declined from 1979 to 2012."),
        (
            "Python was created by Guido van Rossum.",
            "Python was created by Guido van Rossum; its name comes from Monty Python, not from "
            "the snake.",
        ),
    ],
)
def test_paraphrases_with_the_same_polarity_still_entail(claim: str, passage: str) -> None:
    judgement = HeuristicJudge().judge(claim, passage)
    assert judgement.label is Label.ENTAILS, judgement.rationale


def test_a_claim_stating_both_directions_is_not_reversed_by_one() -> None:
    claim = "Arctic sea ice declined while Antarctic sea ice increased."
    passage = "Arctic sea ice declined sharply; Antarctic sea ice increased slightly."
    f = lexical_features(claim, passage)
    assert (f.antonym, f.negation, f.number) == (False, False, False)
    assert _label(claim, passage) is Label.ENTAILS


def test_polarity_reads_only_the_first_max_chars() -> None:
    filler = "Arctic sea ice is measured by satellites. " * (MAX_CHARS // 40 + 1)
    statement = analyze("Arctic sea ice has grown.")
    assert compare(statement, analyze("Arctic sea ice has declined.")).conflicts
    assert len(filler) > MAX_CHARS
    assert not compare(statement, analyze(filler + "Arctic sea ice has declined.")).conflicts


# ------------------------------------------------------------------ property: negation

_SUBJECTS = [
    "Arctic sea ice",
    "the global sea level",
    "the Greenland ice sheet",
    "ocean heat content",
    "coral bleaching",
    "the Amazon rainforest",
    "atmospheric methane",
]
_PREDICATES = [
    "melting",
    "rising",
    "measured by satellites",
    "linked to emissions",
    "driven by human activity",
    "observed worldwide",
    "accelerating",
    "increasing",
    "shrinking",
    "affected by drought",
]
_AUXILIARIES = ["is", "was", "has been", "will be", "can be"]
_TAILS = ["", " since 1979", " every year", " in the Arctic", " according to NASA"]
_NOISE = [
    "",
    " Bananas are not blue.",
    " The report was published in 2019.",
    " Scientists do not agree on the cost of adaptation.",
]


def _negated(aux: str, form: str) -> str:
    first, _, rest = aux.partition(" ")
    if form == "n't":
        word = {"will": "won't", "can": "cannot"}.get(first, first + "n't")
    else:
        word = f"{first} {form}"
    return f"{word} {rest}".strip()


@settings(deadline=None, max_examples=200)  # a behaviour, not a timing: no deadline
@given(
    st.sampled_from(_SUBJECTS),
    st.sampled_from(_AUXILIARIES),
    st.sampled_from(_PREDICATES),
    st.sampled_from(_TAILS),
    st.sampled_from(_NOISE),
    st.sampled_from(["not", "never", "n't"]),
    st.one_of(st.none(), st.floats(0.0, 1.0)),
)
def test_negating_an_entailed_claim_never_leaves_it_entailed(
    subject: str,
    aux: str,
    predicate: str,
    tail: str,
    noise: str,
    form: str,
    cosine: float | None,
) -> None:
    claim = f"{subject[0].upper()}{subject[1:]} {aux} {predicate}{tail}."
    passage = f"Scientists report that {subject} {aux} {predicate}{tail}.{noise}"
    judge = HeuristicJudge() if cosine is None else HeuristicJudge(CosineEmbeddings(claim, cosine))
    assume(judge.judge(claim, passage).label is Label.ENTAILS)
    negated = claim.replace(f" {aux} ", f" {_negated(aux, form)} ", 1)
    assert negated != claim
    if cosine is not None:
        judge = HeuristicJudge(CosineEmbeddings(negated, cosine))
    judgement = judge.judge(negated, passage)
    assert judgement.label is not Label.ENTAILS, (negated, passage, judgement.rationale)


# ------------------------------------------------------------------ synonym classes


@pytest.mark.parametrize("cosine", [None, 0.8])
@pytest.mark.parametrize(
    ("claim", "passage", "label"),
    [
        # Melting ice is a loss of ice, thawing permafrost a loss of permafrost.
        (
            "Arctic sea ice has grown over the last decade.",
            "Over the last decade Arctic sea ice has been melting.",
            Label.CONTRADICTS,
        ),
        (
            "Arctic sea ice has shrunk over the last decade.",
            "Over the last decade Arctic sea ice has been melting.",
            Label.ENTAILS,
        ),
        (
            "Permafrost is expanding across Siberia.",
            "Permafrost is thawing across Siberia.",
            Label.CONTRADICTS,
        ),
        # A change the passage states only with a comparative ("more", "higher") the other way.
        (
            "The number of hot days in the city will decrease.",
            "The city will see more hot days, says the report.",
            Label.UNKNOWN,
        ),
        (
            "Snowfall in the Alps is declining every winter.",
            "Every winter the Alps get warmer and wetter, with higher snowfall.",
            Label.UNKNOWN,
        ),
        (
            "Snowfall in the Alps is increasing every winter.",
            "Every winter the Alps get warmer and wetter, with higher snowfall.",
            Label.ENTAILS,
        ),
    ],
)
def test_a_direction_is_read_through_its_synonyms(
    claim: str, passage: str, label: Label, cosine: float | None
) -> None:
    judge = HeuristicJudge() if cosine is None else HeuristicJudge(CosineEmbeddings(claim, cosine))
    assert judge.judge(claim, passage).label is label


def test_co2_and_carbon_dioxide_are_the_same_anchor() -> None:
    check = compare(analyze("Carbon dioxide fell."), analyze("CO2 rose."))
    assert [(c.kind, c.text) for c in check.conflicts] == [("direction", "fell vs rose")]
    assert compare(analyze("Carbon dioxide rose."), analyze("CO2 rose.")).conflicts == ()


@pytest.mark.parametrize(
    ("passage", "conflicts"),
    [
        ("Since 1950, CO 2 has increased.", ("decreased vs increased",)),  # extracted subscript
        ("Since 1950, CO₂ has increased.", ("decreased vs increased",)),
        ("Since 1950, CO2 has increased.", ("decreased vs increased",)),
        ("Since 1950, CO has increased.", ()),  # carbon monoxide: another gas
    ],
)
def test_co2_written_with_a_space_or_a_subscript_is_carbon_dioxide(
    passage: str, conflicts: tuple[str, ...]
) -> None:
    check = compare(analyze("Since 1950, carbon dioxide has decreased."), analyze(passage))
    assert tuple(c.text for c in check.conflicts) == conflicts


@pytest.mark.parametrize(
    ("statement", "passage", "conflicts", "unsupported"),
    [
        # "melting" is read on two axes (phase and amount): one conflict, not one per axis.
        (
            "Sea ice isn't melting.",
            "Sea ice is melting.",
            [("negation", "not melting vs melting")],
            [],
        ),
        # The passage's side says what the passage says: its negation is kept.
        (
            "Sea ice is melting.",
            "Sea ice isn't melting.",
            [("negation", "melting vs not melting")],
            [],
        ),
        ("Sea ice is not melting.", "Glaciers are large.", [], [("negation", "not melting")]),
    ],
)
def test_a_word_read_on_two_axes_is_reported_once_as_each_text_states_it(
    statement: str,
    passage: str,
    conflicts: list[tuple[str, str]],
    unsupported: list[tuple[str, str]],
) -> None:
    check = compare(analyze(statement), analyze(passage))
    assert [(c.kind, c.text) for c in check.conflicts] == conflicts
    assert [(u.kind, u.text) for u in check.unsupported] == unsupported


def test_a_reversal_rationale_names_the_conflict_once() -> None:
    judgement = HeuristicJudge().judge("Sea ice isn't melting.", "Sea ice is melting.")
    assert judgement.rationale.count("not melting vs melting") == 1
