"""The offline judge on the labelled obvious pairs (``data/obvious_pairs.jsonl``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_references.judges.base import Label
from langchain_references.judges.heuristic import HeuristicJudge

PAIRS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "obvious_pairs.jsonl").read_text().splitlines()
    if line.strip()
]


def _labels() -> list[Label]:
    judge = HeuristicJudge()
    return [judge.judge(p["statement"], p["passage"]).label for p in PAIRS]


def test_the_set_has_every_kind_and_a_held_out_part() -> None:
    assert len(PAIRS) >= 150
    assert len({p["kind"] for p in PAIRS}) == 11
    assert sum(p["split"] == "heldout" for p in PAIRS) == 46


def test_no_false_statement_is_judged_entails() -> None:
    false_entails = {
        p["id"]
        for p, got in zip(PAIRS, _labels(), strict=True)
        if got is Label.ENTAILS and p["label"] != "entails"
    }
    assert false_entails == set()


@pytest.mark.parametrize("split", ["dev", "heldout", None])
def test_at_least_85_percent_exact(split: str | None) -> None:
    chosen = [
        (p, got)
        for p, got in zip(PAIRS, _labels(), strict=True)
        if split is None or p["split"] == split
    ]
    right = sum(got.value == p["label"] for p, got in chosen)
    assert right / len(chosen) >= 0.85


@pytest.mark.parametrize(
    ("statement", "passage", "label"),
    [
        (
            "Paris is the capital of Germany.",
            "Berlin is the capital of Germany.",
            Label.CONTRADICTS,
        ),
        ("Berlin is the capital of Germany.", "Berlin is the capital of Germany.", Label.ENTAILS),
        (
            "Sea otters use rocks as tools.",
            "Sea otters live along the northern Pacific coasts.",
            Label.UNKNOWN,
        ),
        ("The Berlin Wall fell in 1979.", "The Berlin Wall fell in 1989.", Label.CONTRADICTS),
        (
            "Jupiter is the smallest planet in the Solar System.",
            "Jupiter is the largest planet in the Solar System.",
            Label.CONTRADICTS,
        ),
        (
            "Mars is closer to the Sun than Earth is.",
            "Mars is farther from the Sun than Earth is.",
            Label.CONTRADICTS,
        ),
        ("Saturn is denser than Jupiter.", "Jupiter is denser than Saturn.", Label.CONTRADICTS),
        ("Penguins can fly.", "Penguins cannot fly.", Label.CONTRADICTS),
        (
            "The Sun rises in the west.",
            "The Sun rises in the east and sets in the west.",
            Label.CONTRADICTS,
        ),
        (
            "Venus is hotter than Mercury.",
            "Venus is the second planet from the Sun.",
            Label.UNKNOWN,
        ),
        # The demo's top passage: the Moon orbits Earth.
        (
            "The Moon orbits the Earth.",
            "The Moon is Earth's only natural satellite. It orbits at an average distance of "
            "about 384,400 kilometers.",
            Label.ENTAILS,
        ),
        # Names the passage has, but not next to the statement's words: no swap.
        (
            "The Moon orbits the Earth.",
            "On July 20, 1969, Apollo 11 astronauts Neil Armstrong and Buzz Aldrin became the "
            "first people to walk on the Moon. Orbiting spacecraft have since found signs of "
            "water ice inside permanently shadowed craters near the lunar poles.",
            Label.UNKNOWN,
        ),
        # The passage negates a clause with the statement's words.
        (
            "Goldfish have a memory span of only three seconds.",
            "Experiments show that goldfish do not have a three-second memory; they can "
            "remember things for months.",
            Label.UNKNOWN,
        ),
        # A direction word ("increased") the passage never states, in a 10-item statement.
        (
            "The ozone hole over Antarctica has been shrinking since 2000 because "
            "ozone-depleting emissions increased.",
            "The ozone hole has been shrinking since 2000 because emissions of ozone-depleting "
            "substances fell after the Montreal Protocol.",
            Label.UNKNOWN,
        ),
        # Another year in the date's slot.
        (
            "Pike Place Market opened in 1917.",
            "Pike Place Market opened on August 17, 1907.",
            Label.CONTRADICTS,
        ),
    ],
)
def test_rules_give_exact_labels(statement: str, passage: str, label: Label) -> None:
    assert HeuristicJudge().judge(statement, passage).label is label


@given(st.sampled_from(PAIRS), st.sampled_from([" ", "  ", "\t"]))
def test_label_does_not_depend_on_spacing(pair: dict[str, str], space: str) -> None:
    judge = HeuristicJudge()
    spaced = pair["statement"].replace(" ", space)
    assert (
        judge.judge(spaced, pair["passage"]).label
        is judge.judge(pair["statement"], pair["passage"]).label
    )


@given(st.sampled_from(["Madrid", "Lisbon", "Vienna", "Prague", "Dublin", "Oslo"]))
def test_another_name_in_the_subject_slot_is_never_entailed(city: str) -> None:
    got = HeuristicJudge().judge(
        f"{city} is the capital of Germany.", "Berlin is the capital of Germany."
    )
    assert got.label is not Label.ENTAILS
