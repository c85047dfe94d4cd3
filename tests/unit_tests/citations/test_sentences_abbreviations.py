"""Abbreviations, initials and units in the sentence splitter (issue 11)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.citations.sentences import (
    CitedSentence,
    SentenceCitationTracker,
    split_cited_sentences,
)
from langchain_references.core._parser import CITATION_RE


def split(answer: str) -> list[str]:
    return [s.text for s in split_cited_sentences(answer)]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # The examples: a bracket closed after an abbreviation, a unit after a number.
        (
            "It was said (Roger Pielke Jr.) In those days it was cold.",
            ["It was said (Roger Pielke Jr.)", "In those days it was cold."],
        ),
        (
            "Temperatures rose by 20 C. He said it was hot.",
            ["Temperatures rose by 20 C.", "He said it was hot."],
        ),
        # Climate-FEVER claims that end on an abbreviation, followed by the next claim.
        (
            "It is where it was (as quoted by Ken Ward Jr.) The next claim is here.",
            ["It is where it was (as quoted by Ken Ward Jr.)", "The next claim is here."],
        ),
        (
            "It was very similar to Moberg et al. CO2 constitutes 80% of the forcing.",
            ["It was very similar to Moberg et al.", "CO2 constitutes 80% of the forcing."],
        ),
        (
            "The Medieval Warm Period from 900–1100 A.D. The next claim.",
            ["The Medieval Warm Period from 900–1100 A.D.", "The next claim."],
        ),
        (
            "It began in the mid 1970's. The next one.",
            ["It began in the mid 1970's.", "The next one."],
        ),
        # Abbreviations that stay inside a sentence.
        (
            "Temperatures rose by 20 C. and then fell.",
            ["Temperatures rose by 20 C. and then fell."],
        ),
        ("Roger Pielke Jr. said so. Yes.", ["Roger Pielke Jr. said so.", "Yes."]),
        (
            "The Arland D. Williams Jr. Memorial Bridge opened. Yes.",
            ["The Arland D. Williams Jr. Memorial Bridge opened.", "Yes."],
        ),
        (
            "J. R. R. Tolkien wrote it. The U.S. Army came.",
            ["J. R. R. Tolkien wrote it.", "The U.S. Army came."],
        ),
        ("In 1950 C. S. Lewis wrote it. Done.", ["In 1950 C. S. Lewis wrote it.", "Done."]),
        ("Smith et al. (2005) found it. Done.", ["Smith et al. (2005) found it.", "Done."]),
        ("Smith et al. 2005 found it. Done.", ["Smith et al. 2005 found it.", "Done."]),
        ("Use e.g. salt, i.e. sodium. Done.", ["Use e.g. salt, i.e. sodium.", "Done."]),
        ("A.D. 1100 was a year. Ok.", ["A.D. 1100 was a year.", "Ok."]),
        ("St. Louis and Mt. Hood. Ok.", ["St. Louis and Mt. Hood.", "Ok."]),
        ("It grew 3.5 percent. Then fell.", ["It grew 3.5 percent.", "Then fell."]),
        ("**Dr.** Smith came. Done.", ["**Dr.** Smith came.", "Done."]),
        ('He said "Mr." Then left.', ['He said "Mr."', "Then left."]),
        # Units and times end a sentence unless a lower-case word follows.
        (
            "At 5 p.m. the bell rang. At 5 p.m. The bell rang.",
            [
                "At 5 p.m. the bell rang.",
                "At 5 p.m.",
                "The bell rang.",
            ],
        ),
        ("It is 5 ft. He was 5 ft. tall.", ["It is 5 ft.", "He was 5 ft. tall."]),
        # A line break always ends a sentence; citations after "et al." belong to it.
        ("Moberg et al.\nNext line.", ["Moberg et al.", "Next line."]),
        ("Moberg et al. [1](id=2) The next.", ["Moberg et al.", "The next."]),
        ("1. First item\n2. Second item", ["1. First item", "2. Second item"]),
    ],
)
def test_abbreviation_boundaries(answer: str, expected: list[str]) -> None:
    assert split(answer) == expected


def test_a_citation_after_et_al_belongs_to_its_sentence() -> None:
    first, second = split_cited_sentences("Moberg et al. [1](id=2) The next.")
    assert (first.doc_ids, second.doc_ids) == ((2,), ())
    first, second = split_cited_sentences("Moberg et al.[1](id=2) The next.")
    assert (first.text, first.doc_ids, second.text) == ("Moberg et al.", (2,), "The next.")


def test_only_the_blank_a_marker_brings_is_removed_before_punctuation() -> None:
    assert split("It waits  [1](id=2)... Then.") == ["It waits ...", "Then."]
    assert split("It is warm [1](id=2)… Then.") == ["It is warm…", "Then."]
    assert split("Water vapour[ [1](id=1)…] For decades.") == ["Water vapour[…]", "For decades."]


def test_long_words_and_many_periods_are_one_sentence() -> None:
    word = "x" * 10_000
    assert split(f"{word}. Next.") == [f"{word}.", "Next."]
    dotted = "a.b " * 5_000
    assert split(dotted + "End.") == [(dotted + "End.").strip()]


TOKENS = st.sampled_from(
    [
        "Roger",
        " Pielke",
        " Jr.",
        " Jr",
        ".",
        ")",
        " (",
        " In",
        " in",
        " those",
        " 20",
        " 1950",
        " C.",
        " C",
        " He",
        " et al.",
        " al",
        " A.D.",
        " p.m.",
        " U.S.",
        " e.g.",
        "'s",
        "**",
        '"',
        " ",
        "\n",
        "[1](id=2)",
        " [3](id=1)",
        "[1](id",
        "=4)",
        "…",
        "?",
        " 3.5",
        " x" * 20,
    ]
)


@st.composite
def answers_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    answer = "".join(draw(st.lists(TOKENS, max_size=40)))
    cuts = sorted(draw(st.lists(st.integers(0, len(answer)), max_size=12)))
    return answer, cuts


@settings(max_examples=400, deadline=None)
@given(answers_and_cuts())
def test_the_split_is_the_same_however_the_text_is_streamed(case: tuple[str, list[int]]) -> None:
    answer, cuts = case
    whole = split_cited_sentences(answer)
    tracker = SentenceCitationTracker()
    streamed: list[CitedSentence] = []
    for i, j in zip([0, *cuts], [*cuts, len(answer)], strict=True):
        streamed.extend(tracker.feed(answer[i:j]))
    streamed.extend(tracker.close())
    assert streamed == whole


@settings(max_examples=300, deadline=None)
@given(answers_and_cuts())
def test_no_character_or_citation_is_lost(case: tuple[str, list[int]]) -> None:
    answer, _ = case
    sentences = split_cited_sentences(answer)
    cited = [int(m["doc"]) for m in CITATION_RE.finditer(answer)]
    assert [c.doc_id for s in sentences for c in s.citations] == cited
    plain = re.sub(r"\s", "", CITATION_RE.sub("", answer))
    assert "".join(re.sub(r"\s", "", s.text) for s in sentences) == plain


_END = re.compile(r"[.!?…]+[\"'”’)\]]*$")


def _claims(path: Path) -> list[str]:
    """Climate-FEVER claims as ``eval_citations.py`` writes them: one sentence each."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = " ".join(json.loads(line)["claim"].split())
        text = re.sub(r"([.!?][\"'”’)\]]+)\.$", r"\1", text)
        if not _END.search(text):
            text += "."
        text = text[:1].upper() + text[1:]
        if len(split_cited_sentences(text)) == 1:
            out.append(text)
    return out


def test_consecutive_climate_fever_claims_stay_two_sentences(shared_data: Path) -> None:
    """The gold of the citation evaluation: every claim is one sentence of the answer."""
    path = shared_data / "climate-fever-dev.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    claims = _claims(path)
    missed = []
    for first, second in itertools.pairwise(claims):
        end = _END.search(first)
        cut = end.start() if end is not None else len(first)
        tail = end.group() if end is not None else ""
        for answer in (
            f"{first} {second}",
            f"{first[:cut]} [1](id=1){tail} {second}",
            f"{first} [1](id=1) {second}",
        ):
            if split(answer) != [first, second]:
                missed.append(answer)
    assert len(claims) > 700
    assert missed == []
