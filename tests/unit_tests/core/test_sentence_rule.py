"""The package's one sentence-end rule (langchain_references/text/sentences.py) and its variants."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_references.citations import sentences as tracker_module
from langchain_references.citations.sentences import SEGMENT_WINDOW, split_cited_sentences
from langchain_references.core import deeplinks, rewriter
from langchain_references.text import sentences as _sentences
from langchain_references.text.sentences import (
    CITING_END,
    CJK_TERMINALS,
    CLAUSE_ENDS,
    CLOSERS,
    CURLY_CLOSERS,
    ELLIPSIS,
    GUILLEMET,
    LATIN_TERMINALS,
    MARKDOWN_CLOSERS,
    OPENERS,
    PASSAGE_GAP,
    PYSBD_WINDOW,
    QUOTE_END,
    STRAIGHT_CLOSERS,
    TERMINALS,
    TRACKER_CLOSERS,
    TRACKER_TERMINALS,
    SentenceEnd,
    char_class,
    split_sentences,
)

# Each reader's expression before the rule was shared (issue 33 point 5): the refactor must
# cut every text where they did.
OLD_CITING = re.compile(r"[.!?][\"')\]]*\s+")
OLD_QUOTE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
OLD_PASSAGE = re.compile(r"[.!?;:\u2026\u3002\uff01\uff1f][\"')\]\u201d\u2019]? ")
ALPHABET = "aZ7 \n\t.!?;:…。！？\"')]”’»([*_`-^\\"


def _split(rule: SentenceEnd, text: str) -> list[str]:
    return list(split_sentences(rule.compile(), text))


# ----------------------------------------------------------------------- shared characters


def test_the_shared_characters() -> None:
    assert (LATIN_TERMINALS, ELLIPSIS, CJK_TERMINALS) == (".!?", "…", "。！？")
    assert TERMINALS == ".!?…。！？"
    assert CLAUSE_ENDS == ";:"
    assert (STRAIGHT_CLOSERS, CURLY_CLOSERS, GUILLEMET) == ("\"')]", "”’", "»")
    assert CLOSERS == "\"')]”’»"
    assert MARKDOWN_CLOSERS == "*_`"
    assert OPENERS == "\"'(["
    assert PYSBD_WINDOW == SEGMENT_WINDOW == 1_000


def test_the_variants_are_built_from_the_shared_characters() -> None:
    assert SentenceEnd(".!?", "\"')]") == CITING_END
    assert SentenceEnd(".!?", openers="\"'([", capital_next=True) == QUOTE_END
    assert SentenceEnd(".!?…。！？;:", "\"')]”’", most_closers=1, gap=" ") == PASSAGE_GAP
    assert TRACKER_TERMINALS == ".!?…"
    assert TRACKER_CLOSERS == "\"')]”’»*_`"


def test_each_reader_uses_its_variant() -> None:
    from langchain_references.factcheck import passages

    assert rewriter._SENTENCE_END_RE.pattern == CITING_END.regex()
    assert deeplinks._SENTENCE_END_RE.pattern == QUOTE_END.regex()
    assert passages._SENTENCE_GAP.pattern == PASSAGE_GAP.regex()
    assert frozenset(TRACKER_TERMINALS) == tracker_module._TERMINALS
    assert frozenset(TRACKER_CLOSERS) == tracker_module._CLOSERS
    assert frozenset(CLOSERS) == tracker_module._CLOSING_MARKS


# ------------------------------------------------------------------------------ char_class


def test_char_class_escapes_what_a_class_would_read_as_syntax() -> None:
    assert char_class(".!?") == r"[\.!\?]"
    pattern = re.compile(char_class("]^-\\a"))
    assert [c for c in "]^-\\abc[" if pattern.fullmatch(c)] == ["]", "^", "-", "\\", "a"]
    with pytest.raises(ValueError, match=r"^a character class needs at least one character$"):
        char_class("")


# ----------------------------------------------------------------------------- SentenceEnd


def test_the_expression_of_each_variant() -> None:
    assert CITING_END.regex() == r"""[\.!\?]["'\)\]]*(?P<gap>\s+)"""
    assert QUOTE_END.regex() == r"""[\.!\?](?P<gap>\s+)(?=["'\(\[]?[A-Z0-9])"""
    assert PASSAGE_GAP.regex() == r"""[\.!\?…。！？;:]["'\)\]”’]{0,1}(?P<gap> )"""
    assert SentenceEnd("!", capital_next=True).regex() == r"[!](?P<gap>\s+)(?=[A-Z0-9])"
    assert SentenceEnd("!", ")", most_closers=2, gap="-").regex() == r"[!][\)]{0,2}(?P<gap>-)"
    assert isinstance(CITING_END.compile(), re.Pattern)


def test_a_sentence_ends_at_a_terminal_its_closers_and_a_gap() -> None:
    rule = SentenceEnd("!", ")")
    assert _split(rule, "Go!) Now!  Then") == ["Go!)", "Now!", "Then"]
    assert _split(rule, "Go!x Now") == ["Go!x Now"]  # no gap right after
    assert _split(rule, "Go)! Now") == ["Go)!", "Now"]
    assert _split(SentenceEnd("!"), "Go!) Now") == ["Go!) Now"]  # no closers allowed


def test_most_closers_bounds_the_closers() -> None:
    assert _split(SentenceEnd(".", ")", most_closers=1), "A.) B.)) C") == ["A.)", "B.)) C"]
    assert _split(SentenceEnd(".", ")", most_closers=2), "A.)) B.))) C") == ["A.))", "B.))) C"]
    assert _split(SentenceEnd(".", ")"), "A.))) B") == ["A.)))", "B"]


def test_capital_next_reads_the_next_sentence_without_taking_it() -> None:
    rule = SentenceEnd(".", capital_next=True, openers="(")
    assert _split(rule, "A. b. C. (D. (e. 1. x") == ["A. b.", "C.", "(D. (e.", "1. x"]
    assert _split(SentenceEnd(".", capital_next=True), "A. (B. C") == ["A. (B.", "C"]


# ------------------------------------------------------------------------- split_sentences


def test_split_sentences_leaves_the_gaps_out_and_no_empty_sentence() -> None:
    pattern = CITING_END.compile()
    assert list(split_sentences(pattern, "One. Two!\n\tThree? ")) == ["One.", "Two!", "Three?"]
    assert list(split_sentences(pattern, "No end here")) == ["No end here"]
    assert list(split_sentences(pattern, "")) == []
    assert list(split_sentences(pattern, ". . x")) == [".", ".", "x"]


@given(
    st.text(alphabet=ALPHABET, max_size=60), st.sampled_from([CITING_END, QUOTE_END, PASSAGE_GAP])
)
def test_splitting_then_joining_with_the_gaps_gives_the_text_back(
    text: str, rule: SentenceEnd
) -> None:
    pattern = rule.compile()
    sentences = list(split_sentences(pattern, text))
    gaps = [match.group("gap") for match in pattern.finditer(text)]
    assert all(sentences)
    assert all(gaps)
    assert len(sentences) in (len(gaps), len(gaps) + 1)
    joined = "".join(s + g for s, g in zip(sentences, gaps, strict=False))
    assert joined + "".join(sentences[len(gaps) :]) == text
    for sentence in sentences[: len(gaps)]:
        assert sentence[-1] in rule.terminals + rule.closers


# ------------------------------------------------------------- the readers cut where they did


@given(st.text(alphabet=ALPHABET, max_size=40))
def test_the_variants_cut_where_the_readers_cut_before(text: str) -> None:
    assert [m.end() for m in CITING_END.compile().finditer(text)] == [
        m.end() for m in OLD_CITING.finditer(text)
    ]
    assert [m.start("gap") for m in PASSAGE_GAP.compile().finditer(text)] == [
        m.end() - 1 for m in OLD_PASSAGE.finditer(text)
    ]
    collapsed = " ".join(text.split())
    assert deeplinks._sentences(text) == [p for p in OLD_QUOTE.split(collapsed) if p]


# ------------------------------------------------------ where the variants disagree, and why


def _tracker(text: str) -> list[str]:
    return [s.text for s in split_cited_sentences(text)]


def test_deep_links_need_a_capital_or_a_digit_after_the_gap() -> None:
    text = "See e.g. this list. 2 items follow."
    assert _split(QUOTE_END, text) == ["See e.g. this list.", "2 items follow."]
    assert _split(CITING_END, text) == ["See e.g.", "this list.", "2 items follow."]


def test_passages_also_cut_at_clause_ends_after_one_space() -> None:
    text = "First part; second part: third.  Fourth"
    assert _split(PASSAGE_GAP, text) == ["First part;", "second part:", "third.", " Fourth"]
    assert _split(CITING_END, text) == ["First part; second part: third.", "Fourth"]


def test_only_passages_cut_at_cjk_ends_and_only_they_and_the_tracker_at_an_ellipsis() -> None:
    cjk, ellipsis = "東京です。 大阪です。", "It waited… Then it rained."
    assert _split(PASSAGE_GAP, cjk) == ["東京です。", "大阪です。"]
    assert _split(CITING_END, cjk) == [cjk]
    assert _tracker(cjk) == [cjk]
    assert _split(PASSAGE_GAP, ellipsis) == ["It waited…", "Then it rained."]
    assert _tracker(ellipsis) == ["It waited…", "Then it rained."]
    assert _split(CITING_END, ellipsis) == [ellipsis]
    assert _split(QUOTE_END, ellipsis) == [ellipsis]


def test_closers_differ_by_reader() -> None:
    quoted = 'He said "Stop." Then he left.'
    assert _split(CITING_END, quoted) == ['He said "Stop."', "Then he left."]
    assert _split(PASSAGE_GAP, quoted) == ['He said "Stop."', "Then he left."]
    assert _tracker(quoted) == ['He said "Stop."', "Then he left."]
    assert _split(QUOTE_END, quoted) == [quoted]  # no closers in deep links
    two = '(He said "Stop.") Then'
    assert _split(CITING_END, two) == ['(He said "Stop.")', "Then"]
    assert _split(PASSAGE_GAP, two) == [two]  # one closer at most
    guillemet = "«Oui.» Alors"
    assert _tracker(guillemet) == ["«Oui.»", "Alors"]
    assert _split(CITING_END, guillemet) == _split(PASSAGE_GAP, guillemet) == [guillemet]
    curly = "He said “Stop.” Then"
    assert _split(PASSAGE_GAP, curly) == ["He said “Stop.”", "Then"]
    assert _split(CITING_END, curly) == [curly]


def test_only_the_tracker_reads_markdown_closers_and_abbreviations() -> None:
    bold = "**Seattle.** It rains."
    assert _tracker(bold) == ["**Seattle.**", "It rains."]
    assert _split(CITING_END, bold) == [bold]
    abbreviated = "Dr. Smith came. He left."
    assert _tracker(abbreviated) == ["Dr. Smith came.", "He left."]
    assert _split(QUOTE_END, abbreviated) == ["Dr.", "Smith came.", "He left."]


def test_the_module_names_every_variant() -> None:
    assert set(_sentences.__all__) >= {
        "CITING_END",
        "QUOTE_END",
        "PASSAGE_GAP",
        "TRACKER_TERMINALS",
        "TRACKER_CLOSERS",
        "PYSBD_WINDOW",
    }
