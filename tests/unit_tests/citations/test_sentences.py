from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.citations.sentences import (
    CitedSentence,
    SentenceCitationTracker,
    is_verification_worthy,
    split_cited_sentences,
)
from langchain_references.core._parser import CITATION_RE


def texts(answer: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(s.text, s.doc_ids) for s in split_cited_sentences(answer)]


@pytest.mark.parametrize(
    "answer",
    [
        "Seattle is in Washington. [1](id=2) It rains a lot.",
        "Seattle is in Washington [1](id=2). It rains a lot.",
        "Seattle is in Washington.[1](id=2) It rains a lot.",
        "Seattle is in Washington. [1](id=2)\nIt rains a lot.",
    ],
)
def test_citation_before_or_after_the_period_belongs_to_the_sentence(answer: str) -> None:
    assert texts(answer) == [("Seattle is in Washington.", (2,)), ("It rains a lot.", ())]


def test_several_citations_and_repeats() -> None:
    (first, second) = split_cited_sentences(
        "Paris is big [1](id=3)[2](id=1) and old [3](id=3). Rome too. [4](id=2)[5](id=2)"
    )
    assert first.text == "Paris is big and old."
    assert first.doc_ids == (3, 1)
    assert [c.doc_id for c in first.citations] == [3, 1, 3]
    assert first.raw == "Paris is big [1](id=3)[2](id=1) and old [3](id=3)."
    assert second.doc_ids == (2,)
    assert len(second.citations) == 2
    assert second.raw == "Rome too. [4](id=2) [5](id=2)"
    assert (first.index, second.index) == (0, 1)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Dr. Smith met Mr. Jones. They talked.", ["Dr. Smith met Mr. Jones.", "They talked."]),
        ("J. K. Rowling wrote it. Yes.", ["J. K. Rowling wrote it.", "Yes."]),
        ("It grew 3.5 percent. Then fell.", ["It grew 3.5 percent.", "Then fell."]),
        ("Use e.g. salt. Done.", ["Use e.g. salt.", "Done."]),
        ("It rained approx. five days. Done.", ["It rained approx. five days.", "Done."]),
        ("He said it. and then left.", ["He said it. and then left."]),
        ("Is it? Yes! Sure...", ["Is it?", "Yes!", "Sure..."]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("It is **bold.** Next.", ["It is **bold.**", "Next."]),
        ("Seattle.Next is glued.", ["Seattle.Next is glued."]),
        ("1. First item\n2. Second item", ["1. First item", "2. Second item"]),
        (
            "## Heading\nBody text here.\n\nMore text.",
            ["## Heading", "Body text here.", "More text."],
        ),
        ("  Leading blanks. Trailing blanks.  ", ["Leading blanks.", "Trailing blanks."]),
    ],
)
def test_boundaries(answer: str, expected: list[str]) -> None:
    assert [t for t, _ in texts(answer)] == expected


def test_marker_removal_leaves_no_blank_before_punctuation() -> None:
    assert texts("a [1](id=1) b, c [2](id=2) , d [3](id=3).") == [("a b, c, d.", (1, 2, 3))]
    assert texts("x[1](id=1)y end.") == [("xy end.", (1,))]


def test_text_that_only_looks_like_a_citation_is_kept() -> None:
    assert texts("See [1] and [a](id=1) here. Next.") == [
        ("See [1] and [a](id=1) here.", ()),
        ("Next.", ()),
    ]


def test_citation_at_the_start_and_answer_of_markers_only() -> None:
    assert texts("[1](id=4) Seattle is wet.") == [("Seattle is wet.", (4,))]
    (only,) = split_cited_sentences("[1](id=4)")
    assert only.text == ""
    assert only.doc_ids == (4,)
    assert split_cited_sentences("") == []
    assert split_cited_sentences("   \n ") == []


def test_sentences_are_emitted_as_soon_as_the_next_text_starts() -> None:
    tracker = SentenceCitationTracker()
    assert tracker.feed("Seattle is wet [1](i") == []
    assert tracker.pending == "Seattle is wet [1](i"
    assert tracker.feed("d=2).") == []  # could still be followed by a citation
    assert tracker.feed(" [2](id=3)") == []
    (done,) = tracker.feed(" It")
    assert (done.text, done.doc_ids) == ("Seattle is wet.", (2, 3))
    assert tracker.sentences_emitted == 1
    assert tracker.feed(" rains") == []
    (last,) = tracker.close()
    assert (last.index, last.text) == (1, "It rains")
    assert tracker.close() == []
    with pytest.raises(ValueError, match="close"):
        tracker.feed("more")


def test_feed_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        SentenceCitationTracker().feed(b"bytes")  # type: ignore[arg-type]


TOKENS = st.sampled_from(
    [
        "Seattle",
        " is",
        " wet",
        " rain",
        ".",
        "!",
        "?",
        " ",
        "  ",
        "\n",
        "\n\n",
        "[1](id=2)",
        "[NUMBER](id=13)",
        " [3](id=1)",
        "[1](id",
        "Dr.",
        " e.g.",
        " 3.5",
        " J.",
        "…",
        '"',
        ")",
        " and",
        " The",
        "1.",
        "[",
    ]
)


@st.composite
def answers_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    answer = "".join(draw(st.lists(TOKENS, max_size=40)))
    cuts = sorted(draw(st.lists(st.integers(0, len(answer)), max_size=12)))
    return answer, cuts


@settings(max_examples=300, deadline=None)
@given(answers_and_cuts())
def test_split_invariance(case: tuple[str, list[int]]) -> None:
    answer, cuts = case
    whole = split_cited_sentences(answer)
    tracker = SentenceCitationTracker()
    pieces = [answer[i:j] for i, j in zip([0, *cuts], [*cuts, len(answer)], strict=True)]
    streamed: list[CitedSentence] = []
    for piece in pieces:
        streamed.extend(tracker.feed(piece))
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
    assert [s.index for s in sentences] == list(range(len(sentences)))


def test_verification_worthy_default() -> None:
    (claim, question, short) = split_cited_sentences(
        "Seattle gets a lot of rain. Is Seattle wet? Thanks!"
    )
    assert is_verification_worthy(claim)
    assert not is_verification_worthy(question)
    assert not is_verification_worthy(short)
    assert is_verification_worthy(short, min_words=1)
