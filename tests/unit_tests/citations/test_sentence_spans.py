"""The one pysbd sentence splitter: exact offsets, no text lost."""

from __future__ import annotations

import pytest

from langchain_references.citations.sentences import sentence_segmenter, sentence_spans


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
