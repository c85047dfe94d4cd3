"""The package's one tokenizer and stop-word list (langchain_references/text/words.py), and
variants."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_references.core import deeplinks
from langchain_references.services.retrieval import lexical_tokens
from langchain_references.text.words import (
    ANCHOR_STOPWORDS,
    CLAIM_STOPWORDS,
    LUCENE_STOPWORDS,
    NEGATIONS,
    QUESTION_STOPWORDS,
    STOPWORDS,
    WORD,
    claim_words,
    is_negation,
    stem,
    word_pattern,
    words,
)

# Each list as its reader had it before the lists were shared (issue 33 point 5).
OLD_JUDGES = """
    a an the of to in and or is are was were be been being for on at by with as that this
    these those it its from has have had do does did but if than then so such can could
    will would may might shall should must about into over under also which who whom whose
    what when where why how all any both each few other some our their there they them we
    you he she his her i me my us your
"""
OLD_POLARITY_MORE = """
    since per than very just only even still much many also yet however while whereas although
    though because due according said says say such same most least like well one two three
    it's there's between during until within across among through against
"""
OLD_DEMO = """
a about after all also an and any are as at be been before being but by can could did do does
doing for from get got had has have how i if in into is it its me more most my no not of on or
our out over please so some such tell than that the their them then there these they this
those to up us was we were what when where which while who whom why will with would you your
"""
OLD_LUCENE = """
    a an and are as at be but by for if in into is it no not of on or such that the their then
    there these they this to was will with
"""
TEXT = st.text(alphabet="aZé1_ß'’.,- İ\u0307\tx", max_size=40)


# ---------------------------------------------------------------------------------- tokens


def test_words_are_case_folded_word_runs_in_order() -> None:
    assert words("The Ice-sheets MELT, don't they? Straße 2 °C") == [
        "the",
        "ice",
        "sheets",
        "melt",
        "don",
        "t",
        "they",
        "strasse",
        "2",
        "c",
    ]
    assert words("") == []


def test_words_keep_only_long_enough_words_counted_after_folding() -> None:
    assert words("a bb ccc ß", min_chars=2) == ["bb", "ccc", "ss"]
    assert words("a bb ccc dddd", min_chars=3) == ["ccc", "dddd"]
    with pytest.raises(ValueError, match=r"^min_chars must be at least 1, got 0$"):
        words("a", min_chars=0)


def test_words_leave_the_stop_words_out_after_folding() -> None:
    assert words("The cat AND the Dog", stopwords={"the", "and"}) == ["cat", "dog"]
    assert words("no No NOT", min_chars=2, stopwords=LUCENE_STOPWORDS) == []


def test_word_pattern_is_compiled_once_per_length() -> None:
    assert word_pattern() is WORD
    assert word_pattern(1) is WORD
    assert word_pattern(3) is word_pattern(3)
    assert word_pattern(3).pattern == r"\w{3,}"
    assert word_pattern(2).findall("a bc def_g") == ["bc", "def_g"]
    with pytest.raises(ValueError, match=r"^min_chars must be at least 1, got -1$"):
        word_pattern(-1)


@given(TEXT, st.integers(1, 4))
def test_a_long_word_is_a_whole_word_never_a_part(text: str, least: int) -> None:
    assert word_pattern(least).findall(text) == [w for w in WORD.findall(text) if len(w) >= least]


def test_claim_words_keep_numbers_and_contractions_whole() -> None:
    assert claim_words("Sea level isn’t up 1.5 m since 2,000 BC") == [
        "sea",
        "level",
        "isn't",
        "up",
        "1.5",
        "m",
        "since",
        "2,000",
        "bc",
    ]
    assert claim_words("1,000,000 café CO2 x.y don't") == [
        "1,000",
        "000",
        "caf",
        "co2",
        "x",
        "y",
        "don't",
    ]
    # Where the package's words differ: numbers and contractions are cut there.
    assert words("isn’t 1.5") == ["isn", "t", "1", "5"]


# ------------------------------------------------------------------ each reader's tokens


@given(TEXT)
def test_the_readers_tokenize_as_before(text: str) -> None:
    from langchain_references.demo.answerer import _terms
    from langchain_references.factcheck.search.local import tokenize

    folded = text.casefold()
    old_lucene = set(OLD_LUCENE.split())
    assert lexical_tokens(text) == [w for w in re.findall(r"\w\w+", folded) if w not in old_lucene]
    assert tokenize(text) == re.findall(r"\w+", folded)
    old_demo = set(OLD_DEMO.split())
    assert _terms(text) == [w for w in re.findall(r"\w+", folded) if w not in old_demo]
    assert deeplinks._words(text) == set(re.findall(r"\w{3,}", text.lower()))


def test_deep_links_lower_case_rather_than_fold() -> None:
    assert deeplinks._words("STRASSE Straße") == {"strasse", "straße"}
    assert set(words("STRASSE Straße", min_chars=3)) == {"strasse"}


def test_the_tracker_counts_words_in_the_raw_text() -> None:
    from langchain_references.citations.sentences import CitedSentence, is_verification_worthy

    # Case folding would cut "İzmir" in two ("i", a dot mark, "zmir"): three words, not four.
    sentence = CitedSentence(index=0, text="İzmir is large", doc_ids=())
    assert not is_verification_worthy(sentence)
    assert len(words("İzmir is large")) == 4


# ------------------------------------------------------------------------------- stop words


def test_each_list_is_the_one_its_reader_had() -> None:
    assert frozenset(OLD_JUDGES.split()) == CLAIM_STOPWORDS
    assert frozenset(OLD_JUDGES.split()) | frozenset(OLD_POLARITY_MORE.split()) == ANCHOR_STOPWORDS
    assert frozenset(OLD_DEMO.split()) == QUESTION_STOPWORDS
    assert frozenset(OLD_LUCENE.split()) == LUCENE_STOPWORDS


def test_lucene_stop_words_are_bm25s_list() -> None:
    stopwords = pytest.importorskip("bm25s.stopwords")
    assert frozenset(w.casefold() for w in stopwords.STOPWORDS_EN) == LUCENE_STOPWORDS


def test_the_lists_are_the_shared_one_and_named_extras() -> None:
    assert len(STOPWORDS) == 71
    assert sorted(CLAIM_STOPWORDS - STOPWORDS) == sorted(
        [
            "both",
            "each",
            "few",
            "he",
            "her",
            "his",
            "may",
            "might",
            "must",
            "other",
            "shall",
            "she",
            "should",
            "under",
            "whose",
        ]
    )
    assert sorted(QUESTION_STOPWORDS - STOPWORDS) == sorted(
        [
            "after",
            "before",
            "doing",
            "get",
            "got",
            "more",
            "most",
            "no",
            "not",
            "out",
            "please",
            "tell",
            "up",
            "while",
        ]
    )
    assert {"no", "not"} == LUCENE_STOPWORDS - STOPWORDS
    assert len(STOPWORDS - LUCENE_STOPWORDS) == 40
    assert CLAIM_STOPWORDS < ANCHOR_STOPWORDS
    assert len(ANCHOR_STOPWORDS - CLAIM_STOPWORDS) == 39


def test_the_judges_stop_words_hold_no_negation() -> None:
    assert not (CLAIM_STOPWORDS & NEGATIONS)
    assert not any(is_negation(w) for w in ANCHOR_STOPWORDS)
    assert {"no", "not"} <= QUESTION_STOPWORDS


# --------------------------------------------------------------------- negations and stems


def test_negations() -> None:
    assert sorted(NEGATIONS) == sorted(
        ["no", "not", "never", "none", "nothing", "nobody", "nor", "neither", "cannot", "without"]
    )
    assert [w for w in ("not", "isn't", "don't", "know", "nt", "no") if is_negation(w)] == [
        "not",
        "isn't",
        "don't",
        "no",
    ]


def test_stem_strips_the_first_matching_suffix_when_four_letters_remain() -> None:
    assert [stem(w) for w in ("melting", "warmed", "glaciers", "quickly", "nation")] == [
        "melt",
        "warm",
        "glacier",
        "quick",
        "nation",
    ]
    assert [stem(w) for w in ("matches", "boxes", "sings", "sing", "bed", "ices", "higher")] == [
        "match",
        "boxe",
        "sing",
        "sing",
        "bed",
        "ices",
        "high",
    ]
    assert stem("information") == "inform"
