"""Deep links: text fragments, PDF pages, quote choice, and the styles that use them."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_references.core import deeplinks
from langchain_references.core.deeplinks import (
    MAX_EXACT_WORDS,
    choose_quote,
    deep_link,
    page_number,
    text_fragment,
)
from langchain_references.core.styles import (
    QUOTE_KEY,
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    TextReferenceStyle,
)


def _terms(fragment: str) -> list[str]:
    assert fragment.startswith(":~:text=")
    return fragment[len(":~:text=") :].split(",")


def test_short_quote_is_linked_whole_with_spec_characters_encoded() -> None:
    fragment = text_fragment("Arctic sea-ice extent fell, 13% & more")
    assert fragment == ":~:text=Arctic%20sea%2Dice%20extent%20fell%2C%2013%25%20%26%20more"


def test_long_quote_is_linked_by_its_first_and_last_words() -> None:
    quote = "one two three four five six seven eight nine ten eleven twelve"
    fragment = text_fragment(quote)
    assert fragment is not None
    start, end = _terms(fragment)
    assert unquote(start) == "one two three four"
    assert unquote(end) == "nine ten eleven twelve"


def test_quote_without_words_gives_no_fragment() -> None:
    assert text_fragment("  -- , ") is None
    assert deep_link("https://a.org/x", quote="...") == "https://a.org/x"


def test_citation_markup_never_enters_a_quote() -> None:
    fragment = text_fragment("Warming is unequivocal [2](id=3) 【4†source】 \ue200cite\ue201")
    assert fragment == ":~:text=Warming%20is%20unequivocal%20cite"


@given(st.text(max_size=200))
def test_fragment_terms_are_encoded_and_decode_to_the_quote_words(quote: str) -> None:
    fragment = text_fragment(quote)
    if fragment is None:
        return
    terms = _terms(fragment)
    assert 1 <= len(terms) <= 2
    for term in terms:
        assert re.fullmatch(r"[A-Za-z0-9_.~%]+", term), term  # nothing raw: no - & , # space
    decoded = " ".join(unquote(term) for term in terms).split()
    words = " ".join(
        re.sub(
            r"\[\d+\](?:\(id=\d+\))?|<sup>.*?</sup>|【[^】]*】|[\ue200-\ue2ff]", " ", quote
        ).split()
    ).split()
    if len(terms) == 1:
        assert decoded == words[: len(decoded)]
        assert len(words) <= MAX_EXACT_WORDS or decoded != words


def test_pdf_pages_win_over_quotes() -> None:
    # LangChain's PDF loaders write a 0-based "page"; "page_number" is 1-based.
    assert deep_link("https://a.org/r.PDF", quote="x y", metadata={"page": 0}) == (
        "https://a.org/r.PDF#page=1"
    )
    assert deep_link("https://a.org/r.pdf", metadata={"page_number": 7}) == (
        "https://a.org/r.pdf#page=7"
    )
    assert deep_link("https://a.org/doc", metadata={"page": 2, "content_type": "application/pdf"})
    # Not a PDF: the page is ignored and the quote is used.
    assert deep_link("https://a.org/x", quote="Hello there", metadata={"page": 2}) == (
        "https://a.org/x#:~:text=Hello%20there"
    )


def test_page_number_conventions() -> None:
    assert page_number({"page": 0}) == 1
    assert page_number({"page": "4"}) == 5
    assert page_number({"page_number": 3, "page": 9}) == 3
    assert page_number({"page": True}) is None
    assert page_number({"page": -1}) is None
    assert page_number({}) is None


def test_existing_fragment_is_kept_and_old_directive_replaced() -> None:
    assert deep_link("https://a.org/x#sec-2", quote="Hi there") == (
        "https://a.org/x#sec-2:~:text=Hi%20there"
    )
    assert deep_link("https://a.org/x#:~:text=old", quote="new one") == (
        "https://a.org/x#:~:text=new%20one"
    )


def test_choose_quote_picks_the_sentence_sharing_the_rarest_words() -> None:
    chunk = (
        "The report covers global climate. Sea level rose 20 cm since 1900. "
        "Glaciers are retreating worldwide."
    )
    assert choose_quote(chunk, "Since 1900 the sea level has risen by about 20 cm") == (
        "Sea level rose 20 cm since 1900."
    )
    assert choose_quote(chunk, None) == "The report covers global climate."
    assert choose_quote(chunk, "Unrelated words entirely") == "The report covers global climate."
    assert choose_quote("", "anything") is None


def _doc(content: str = "text", **metadata: object) -> Document:
    return Document(content, metadata={"source": "https://a.org/x?a=1&b=2", **metadata})


def test_markdown_and_html_link_inline_citations_deep_but_not_the_list() -> None:
    doc = _doc("Since 1900, sea level rose 20 cm.", **{QUOTE_KEY: "Sea level rose 20 cm."})
    md = MarkdownReferenceStyle(deep_links=True)
    inline = md.format_reference(1, doc)
    assert (
        inline
        == "<sup>[[1](https://a.org/x?a=1&amp;b=2#:~:text=Sea%20level%20rose%2020%20cm.)]</sup>"
    )
    assert "#:~:" not in md.format_all_references([(1, doc)])
    page = HTMLReferenceStyle(deep_links=True).format_reference(2, doc)
    assert page is not None
    assert html.unescape(page).count("#:~:text=Sea%20level") == 1
    assert "#:~:" not in HTMLReferenceStyle(deep_links=True).format_all_references([(1, doc)])


def test_an_inline_citation_of_a_pdf_chunk_links_to_its_page() -> None:
    """The chunk's page (a PDF by its path or its content type) wins over its quote inline."""
    by_path = Document(
        "Sea level rose 20 cm.",
        metadata={"source": "https://a.org/r.pdf", "page": 3, QUOTE_KEY: "Sea level rose 20 cm."},
    )
    by_type = Document(
        "Sea level rose 20 cm.",
        metadata={
            "source": "https://a.org/report",
            "page_number": 7,
            "content_type": "application/pdf",
        },
    )
    md = MarkdownReferenceStyle(deep_links=True)
    assert [md.format_reference(1, by_path), md.format_reference(2, by_type)] == [
        "<sup>[[1](https://a.org/r.pdf#page=4)]</sup>",
        "<sup>[[2](https://a.org/report#page=7)]</sup>",
    ]
    assert HTMLReferenceStyle(deep_links=True).format_reference(1, by_path) == (
        '<sup><a href="https://a.org/r.pdf#page=4">1</a></sup>'
    )
    assert "#page=" not in md.format_all_references([(1, by_path), (2, by_type)])


@pytest.mark.parametrize("quote", [42, ["Sea level rose 20 cm."], {"text": "Sea level"}])
def test_a_quote_that_is_not_a_string_is_ignored(quote: object) -> None:
    doc = _doc("Since 1900, sea level rose 20 cm.", **{QUOTE_KEY: quote})
    inline = MarkdownReferenceStyle(deep_links=True).format_reference(1, doc)
    assert inline == "<sup>[[1](https://a.org/x?a=1&amp;b=2)]</sup>"


def test_deep_links_are_off_by_default_and_text_style_has_none() -> None:
    doc = _doc("Sea level rose 20 cm since 1900.", **{QUOTE_KEY: "Sea level rose 20 cm"})
    for md in (MarkdownReferenceStyle(), MarkdownReferenceStyle(deep_links=False)):
        assert md.format_reference(1, doc) == "<sup>[[1](https://a.org/x?a=1&amp;b=2)]</sup>"
    assert HTMLReferenceStyle().format_reference(1, doc) == (
        '<sup><a href="https://a.org/x?a=1&amp;b=2">1</a></sup>'
    )
    assert TextReferenceStyle().format_reference(1, doc) == "[1]"
    assert TextReferenceStyle(deep_links=True).format_reference(1, doc) == "[1]"


def test_hostile_quotes_cannot_break_out_of_the_link() -> None:
    quote = '"><script>alert(1)</script> ) ] javascript:x and more words'
    doc = _doc(quote, **{QUOTE_KEY: quote})
    page = HTMLReferenceStyle(deep_links=True).format_reference(1, doc)
    assert page is not None
    match = re.fullmatch(r'<sup><a href="([^"<>]*)">1</a></sup>', page)
    assert match is not None, page
    assert "%3Cscript%3E" in match.group(1)
    md = MarkdownReferenceStyle(deep_links=True).format_reference(1, doc)
    assert md is not None
    target = md[len("<sup>[[1](") : -len(")]</sup>")]
    assert not re.search(r"[\s()<>\[\]\"]", target)


# ---------------------------------------------------------------- markup removal, linear

_OLD_MARKUP = re.compile(r"\[\d+\](?:\(id=\d+\))?|<sup>.*?</sup>|【[^】]*】|[\ue200-\ue2ff]")
_PIECES = ["<sup>", "</sup>", "【", "】", "[1]", "[2](id=3)", "[4](", "\ue201", "\n", "a b", "x"]


class _CountingStr(str):
    """A string that counts the characters its ``find`` calls scan."""

    scanned = 0

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        found = super().find(sub, start, end)
        begin = 0 if start is None else start
        _CountingStr.scanned += (len(self) if found < 0 else found + len(sub)) - begin
        return found


@given(st.lists(st.sampled_from(_PIECES), max_size=60))
def test_markup_removal_matches_the_regular_expression(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert deeplinks._strip_markup(text) == _OLD_MARKUP.sub(" ", text)


@pytest.mark.parametrize(
    ("unit", "tail", "cleaned"),
    [
        ("<sup>", "", "<sup>"),  # no closer: every opener is text
        ("【", "", "【"),
        ("<sup>x\n", "</sup>", "<sup>x\n"),  # the closer is on another line
        ("<sup>a</sup>b", "", " b"),
        ("【a】<sup>\n", "", " <sup>\n"),
    ],
)
def test_markup_removal_scans_each_character_a_bounded_number_of_times(
    unit: str, tail: str, cleaned: str
) -> None:
    _CountingStr.scanned = 0
    text = _CountingStr(unit * 20_000 + tail)
    assert deeplinks._strip_markup(text) == cleaned * 20_000 + tail
    assert _CountingStr.scanned <= 3 * len(text)
