"""The reversed claims of benchmarks/eval_polarity.py are deterministic and really reversed."""

from __future__ import annotations

import random

from climate_fever import ClaimRecord, EvidenceRecord
from polarity_reversal import SWAPS, reversals, reversed_pairs


def _claim(claim_id: str, text: str, labels: list[str]) -> ClaimRecord:
    return ClaimRecord(
        claim_id=claim_id,
        claim=text,
        claim_label="SUPPORTS",
        evidences=tuple(
            EvidenceRecord(evidence_id=f"{claim_id}:{i}", evidence_label=label, evidence=f"e{i}")
            for i, label in enumerate(labels)
        ),
    )


def test_a_claim_is_negated_and_its_direction_word_swapped() -> None:
    out = reversals("Arctic sea ice has Grown since 1979.", random.Random(0))
    assert [(r.kind, r.text) for r in out] == [
        ("negation", "Arctic sea ice has not Grown since 1979."),
        ("swap", "Arctic sea ice has Shrunk since 1979."),
    ]
    # No auxiliary: the whole claim is negated; no direction word: no swap.
    assert [(r.kind, r.text) for r in reversals("Volcanoes emit CO2.", random.Random(0))] == [
        ("negation", "It is not true that volcanoes emit CO2.")
    ]


def test_swaps_go_both_ways() -> None:
    assert (SWAPS["grown"], SWAPS["shrunk"]) == ("shrunk", "grown")
    assert (SWAPS["warming"], SWAPS["cooling"]) == ("cooling", "warming")
    # Every opposite can be swapped back to a word of its own pair.
    assert all(SWAPS[w] != w and SWAPS[SWAPS[w]] in SWAPS for w in SWAPS)


def test_reversed_pairs_are_the_supports_pairs_and_depend_only_on_the_seed() -> None:
    claims = [
        _claim("1", "Sea levels are rising and glaciers are melting.", ["SUPPORTS", "REFUTES"]),
        _claim("2", "The planet is warming.", ["NOT_ENOUGH_INFO"]),
        _claim("3", "Temperatures rose and ice has declined.", ["SUPPORTS", "SUPPORTS"]),
    ]
    first = reversed_pairs(claims, seed=7)
    assert [(p.claim_id, p.evidence, p.reversal.kind) for p in first] == [
        ("1", "e0", "negation"),
        ("1", "e0", "swap"),
        ("3", "e0", "negation"),
        ("3", "e1", "negation"),
        ("3", "e0", "swap"),
        ("3", "e1", "swap"),
    ]
    assert reversed_pairs(claims, seed=7) == first
    assert all(p.reversal.text != p.original for p in first)
    # One claim gets the same reversal with each of its evidences.
    assert first[2].reversal == first[3].reversal


def test_the_swapped_word_is_swapped_wherever_it_occurs() -> None:
    # Swapping one "warming" of two would leave the claim asserting warming.
    out = reversals("Mars is seeing planetary Warming: Martian warming.", random.Random(0))
    assert (out[1].text, out[1].change) == (
        "Mars is seeing planetary Cooling: Martian cooling.",
        "Warming -> Cooling, warming -> cooling",
    )


def test_grow_up_is_not_a_direction() -> None:
    # "growing up" (being a child) has no opposite; "more" is the only direction word left.
    for seed in range(20):
        claim = "Heat waves are more intense than when I was growing up."
        out = reversals(claim, random.Random(seed))
        assert out[1].text == "Heat waves are less intense than when I was growing up."
