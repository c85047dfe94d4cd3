"""The one pysbd sentence splitter: exact offsets, no text lost."""

from __future__ import annotations

import pytest

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

        def segment(self, text: str) -> list[str]:
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

    def segment(self, text: str) -> list[str]:
        _CountingSegmenter.calls.append(len(text))
        return list(self._inner.segment(text))


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
