"""The one pysbd sentence splitter: exact offsets, no text lost."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langchain_references.citations import sentences
from langchain_references.citations.sentences import (
    SEGMENT_WINDOW,
    sentence_segmenter,
    sentence_spans,
)


def test_spans_are_exact_and_stripped() -> None:
    text = "  Sea level rises. Ice melts fast!  Why? "
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == ["Sea level rises.", "Ice melts fast!", "Why?"]


def test_blank_text_has_no_sentence() -> None:
    assert sentence_spans("") == []
    assert sentence_spans(" \n ") == []


def test_text_pysbd_leaves_out_is_kept_as_one_sentence() -> None:
    # pysbd drops sentences holding the symbols it uses internally (here U+222E).
    text = "A first sentence. Hey \u222e there. The last one."
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == [
        "A first sentence.",
        "Hey \u222e there. The last one.",
    ]


def test_a_failing_segmenter_keeps_the_text_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    class Failing:
        def __init__(self, **_: object) -> None:
            pass

        def processor(self, text: str) -> object:
            raise RuntimeError("boom")

    import pysbd

    monkeypatch.setattr(pysbd, "Segmenter", Failing)
    assert sentence_spans(" One. Two. ") == [(1, 10)]


def test_an_unsupported_language_is_refused() -> None:
    with pytest.raises(ValueError, match="does not support language 'xx'"):
        sentence_segmenter("xx")


# ---------------------------------------------------------------- windows: linear time


class _CountingSegmenter:
    """Wraps pysbd's segmenter and records the length of every text it is given."""

    calls: list[int] = []  # noqa: RUF012 - shared by the instances of one test

    def __init__(self, language: str = "en") -> None:
        self._inner = sentence_segmenter(language)

    def processor(self, text: str) -> Any:
        _CountingSegmenter.calls.append(len(text))
        return self._inner.processor(text)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    _CountingSegmenter.calls = []
    monkeypatch.setattr(sentences, "sentence_segmenter", _CountingSegmenter)
    return _CountingSegmenter.calls


def test_a_long_text_reaches_pysbd_in_windows(counting: list[int]) -> None:
    text = "a. " * 3_000  # pysbd's time is quadratic in the sentences of one call
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == ["a."] * 3_000
    assert max(counting) <= SEGMENT_WINDOW
    assert sum(counting) <= 2 * len(text)  # each character reaches pysbd about once


def test_windows_give_the_sentences_of_one_call() -> None:
    text = " ".join(
        f"Sentence {i} says Dr. Smith saw 3.5 m of ice in the U.S. today." for i in range(60)
    )
    whole = sentences._segment(sentence_segmenter(), text)
    assert len(text) > 3 * SEGMENT_WINDOW
    assert sentence_spans(text) == whole


def test_a_sentence_longer_than_the_window_is_cut_at_a_blank() -> None:
    long = " ".join(["word"] * 600)  # 2,999 characters, no sentence end
    text = f"First one. {long}. Last one."
    pieces = [text[a:b] for a, b in sentences.iter_sentence_spans(text, window=1_000)]
    assert pieces[0] == "First one."
    assert pieces[-1] == "Last one."
    assert " ".join(pieces[1:-1]) == long + "."
    assert all(len(piece) <= 1_000 for piece in pieces)


def test_iterating_stops_early(counting: list[int]) -> None:
    spans = sentences.iter_sentence_spans("a. " * 100_000)
    assert [next(spans) for _ in range(3)] == [(0, 2), (3, 5), (6, 8)]
    assert counting == [SEGMENT_WINDOW]


# ------------------------------------------------ linear inside a window: no re-search per sentence


def _pysbd_segment_spans(text: str) -> list[tuple[int, int]]:
    """The old splitter (pysbd's ``segment``, which re-searches the text per sentence)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in sentence_segmenter().segment(text):
        stripped = piece.strip()
        if not stripped:
            continue
        start = text.find(stripped, cursor)
        if start < 0 or text[cursor:start].strip():
            break
        spans.append((start, start + len(stripped)))
        cursor = start + len(stripped)
    rest = text[cursor:]
    if rest.strip():
        start = cursor + len(rest) - len(rest.lstrip())
        spans.append((start, start + len(rest.strip())))
    return spans


def test_pysbd_never_searches_the_text_again_per_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # pysbd's segment() finds each sentence again with re.finditer over the whole text
    # (quadratic in the sentences); the splitter locates them itself, from a moving cursor.
    import pysbd

    searched: list[int] = []

    def spy(self: Any, sents: list[str]) -> list[Any]:
        searched.append(len(sents))
        raise AssertionError("pysbd's per-sentence search ran")

    monkeypatch.setattr(pysbd.Segmenter, "sentences_with_char_spans", spy)
    text = "a. " * 300 + "Sea level rises. Ice melts!"
    pieces = [text[a:b] for a, b in sentence_spans(text)]
    assert pieces == ["a."] * 300 + ["Sea level rises.", "Ice melts!"]
    assert searched == []


_WORDS = [
    "the", "sea", "ice", "melts", "Dr.", "Smith", "U.S.", "e.g.", "3.5", "Jan.", "Mr.",
    "St.", "(he said)", '"Quote."', "[1]", "...", "fig.", "2", "p.m.", "approx.", "1.",
    "a)", "www.x.com", "file.pdf", "10%", "café", "😀",
]  # fmt: skip
_ENDS = [". ", "! ", "? ", '." ', ".) ", "... ", "\n", ".\n", " ", "\t", ": "]


@st.composite
def _prose(draw: st.DrawFn) -> str:
    sentences = draw(
        st.lists(
            st.tuples(
                st.lists(st.sampled_from(_WORDS), min_size=1, max_size=10),
                st.booleans(),
                st.sampled_from(_ENDS),
            ),
            min_size=1,
            max_size=25,
        )
    )
    out = []
    for words, capital, end in sentences:
        first = words[0].capitalize() if capital else words[0]
        out.append(" ".join([first, *words[1:]]) + end)
    return "".join(out)[:SEGMENT_WINDOW]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_prose())
def test_same_sentences_as_pysbd_segment_on_prose(text: str) -> None:
    assert sentences._segment(sentence_segmenter(), text) == _pysbd_segment_spans(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=st.sampled_from(list("aB .!?\n\"'()[]…,:01*【<sup>\t")), max_size=400))
def test_offsets_slice_back_and_no_text_is_lost(text: str) -> None:
    spans = list(sentences.iter_sentence_spans(text, window=64))
    pieces = [text[a:b] for a, b in spans]
    assert all(piece and piece == piece.strip() for piece in pieces)
    bounds = [0, *(x for span in spans for x in span), len(text)]
    gaps = [text[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2)]
    assert bounds == sorted(bounds)
    assert all(not gap.strip() for gap in gaps)  # only blanks between the sentences
