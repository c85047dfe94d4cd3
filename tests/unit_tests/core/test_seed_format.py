"""Issue 18, point 2: the seed's output is the default; deep links are opt-in and never weak.

``MarkdownReferenceStyle()``, ``HTMLReferenceStyle()`` and ``TextReferenceStyle()`` write the
original README's format, an inline link to the source URL. With ``deep_links=True`` a text
fragment is made only from a quote of a few words that occurs in the cited chunk: a one-letter
or one-word "quote" would highlight whatever matches first on the page.
"""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

import langchain_references.cli.demo as demo
from langchain_references import (
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    TextReferenceStyle,
    manage_references,
)
from langchain_references.core.deeplinks import (
    MIN_QUOTE_CHARS,
    MIN_QUOTE_WORDS,
    QuoteFinder,
    choose_quote,
    usable_quote,
)
from langchain_references.core.numbering import SourceNumbering
from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import QUOTE_KEY, ReferenceStyle
from langchain_references.factcheck import report
from langchain_references.server import article

MATHEMATICS = "https://en.wikipedia.org/wiki/Mathematics"
GAME = "https://en.wikipedia.org/wiki/Mathematical_game"
SEED_DOCS = [
    Document(
        "Mathematical games are structured activities such as tic-tac-toe or chess. "
        "Mathematics is an area of knowledge.",
        metadata={"source": MATHEMATICS, "title": "Mathematics"},
    ),
    Document(
        "Mathematics competitions, like the International Mathematical Olympiad, ask for proofs.",
        metadata={"source": GAME, "title": "Mathematical game"},
    ),
]
#: The seed README's answer, as the model writes it.
SEED_ANSWER = (
    "Mathematical games are structured activities defined by clear mathematical parameters, "
    "focusing on strategy and skills without requiring deep mathematical knowledge, such as "
    "tic-tac-toe or chess [1](id=1). In contrast, mathematics competitions, like the "
    "International Mathematical Olympiad, involve participants solving complex mathematical "
    "problems, often requiring proof or detailed solutions [2](id=2)."
)


def rewrite(style: ReferenceStyle, answer: str, documents: list[Document]) -> str:
    rewriter = ReferenceRewriter(documents, style)
    return rewriter.feed(answer) + rewriter.finish()


def test_markdown_default_writes_the_seed_format_exactly() -> None:
    out = manage_references(RunnableLambda(lambda _: SEED_ANSWER)).invoke({"documents": SEED_DOCS})
    assert out == (
        "Mathematical games are structured activities defined by clear mathematical "
        "parameters, focusing on strategy and skills without requiring deep mathematical "
        f"knowledge, such as tic-tac-toe or chess <sup>[[1]({MATHEMATICS})]</sup>. In "
        "contrast, mathematics competitions, like the International Mathematical Olympiad, "
        "involve participants solving complex mathematical problems, often requiring proof or "
        f"detailed solutions <sup>[[2]({GAME})]</sup>.\n\n"
        f"- **1** [Mathematics]({MATHEMATICS})\n"
        f"- **2** [Mathematical game]({GAME})"
    )
    assert "tic-tac-toe or chess <sup>[[1](https://en.wikipedia.org/wiki/Mathematics)]</sup>" in out
    assert "#:~:" not in out


def test_every_built_in_style_links_the_source_url_by_default() -> None:
    assert MarkdownReferenceStyle().deep_links is False
    assert HTMLReferenceStyle().deep_links is False
    assert TextReferenceStyle().deep_links is False
    html = rewrite(HTMLReferenceStyle(), SEED_ANSWER, SEED_DOCS)
    assert f'tic-tac-toe or chess <sup><a href="{MATHEMATICS}">1</a></sup>.' in html
    assert "#:~:" not in html
    text = rewrite(TextReferenceStyle(), SEED_ANSWER, SEED_DOCS)
    assert "tic-tac-toe or chess [1]. In contrast" in text
    assert text.endswith(f"- [1] Mathematics ({MATHEMATICS})\n- [2] Mathematical game ({GAME})")


def test_deep_links_are_opt_in_and_quote_the_cited_sentence() -> None:
    out = rewrite(MarkdownReferenceStyle(deep_links=True), SEED_ANSWER, SEED_DOCS)
    assert (
        f"chess <sup>[[1]({MATHEMATICS}#:~:text=Mathematical%20games%20are%20structured%20"
        "activities%20such%20as%20tic%2Dtac%2Dtoe%20or%20chess.)]</sup>"
    ) in out
    assert f"- **1** [Mathematics]({MATHEMATICS})" in out  # the list keeps the plain URL


@pytest.mark.parametrize("style_class", [MarkdownReferenceStyle, HTMLReferenceStyle])
@pytest.mark.parametrize("chunk", ["m", "Mathematics", "Mathematics, games.", "Yes. No. Maybe."])
def test_a_chunk_without_a_long_enough_sentence_never_makes_a_text_fragment(
    style_class: type[ReferenceStyle], chunk: str
) -> None:
    documents = [Document(chunk, metadata={"source": MATHEMATICS})]
    out = rewrite(
        style_class(deep_links=True), "such as tic-tac-toe or chess [1](id=1).", documents
    )
    assert "#:~:" not in out
    assert "Mathematics" in out


@pytest.mark.parametrize(
    "quote", ["m", "Mathematics", "tic-tac-toe", "  chess  ", "a b c", "Sea level rose."]
)
def test_a_one_letter_or_one_word_quote_never_makes_a_text_fragment(quote: str) -> None:
    document = Document(
        "m Mathematics tic-tac-toe chess a b c. Sea level rose.",
        metadata={"source": MATHEMATICS, QUOTE_KEY: quote},
    )
    for style in (MarkdownReferenceStyle(deep_links=True), HTMLReferenceStyle(deep_links=True)):
        marker = style.format_reference(1, document)
        assert marker is not None
        assert "#:~:" not in marker
        assert MATHEMATICS in marker
    numbering = SourceNumbering([document], MarkdownReferenceStyle(deep_links=True))
    assert numbering.cite(1, quote=quote) == f"<sup>[[1]({MATHEMATICS})]</sup>"


def test_a_quote_that_is_not_in_the_chunk_makes_no_text_fragment() -> None:
    quote = "Sea level rose 20 cm since 1900."
    style = MarkdownReferenceStyle(deep_links=True)
    elsewhere = Document("Glaciers retreat worldwide.", metadata={"source": MATHEMATICS})
    here = Document(f"Intro. {quote.upper()}  More.", metadata={"source": MATHEMATICS})
    assert style.format_reference(1, _quoted(elsewhere, quote)) == (
        f"<sup>[[1]({MATHEMATICS})]</sup>"
    )
    # case and blanks aside, the quote is in the chunk: it is linked
    assert "#:~:text=Sea%20level%20rose%2020%20cm%20since%201900." in str(
        style.format_reference(1, _quoted(here, quote))
    )


def _quoted(document: Document, quote: str) -> Document:
    return Document(document.page_content, metadata={**document.metadata, QUOTE_KEY: quote})


def test_usable_quote_needs_a_few_words_found_in_the_chunk() -> None:
    assert MIN_QUOTE_WORDS >= 3
    assert MIN_QUOTE_CHARS >= 15
    assert usable_quote("m") is None
    assert usable_quote("Mathematics") is None
    assert usable_quote("one two three") is None  # three words
    assert usable_quote("a b c d e f g h i") is None  # words, but under 20 characters
    assert usable_quote("Sea level rose 20 cm.") == "Sea level rose 20 cm."
    assert usable_quote("Sea  level rose\n20 cm.", "sea level rose 20 cm. x") == (
        "Sea level rose 20 cm."
    )
    assert usable_quote("Sea level rose 20 cm.", "Sea level fell 20 cm.") is None


def test_quote_finder_skips_sentences_too_short_to_find_one_place() -> None:
    chunk = "Yes. The tower opened to visitors in 1962. No."
    assert QuoteFinder(chunk).sentences == ["The tower opened to visitors in 1962."]
    assert choose_quote(chunk, None) == "The tower opened to visitors in 1962."
    assert choose_quote(chunk, "Yes") == "The tower opened to visitors in 1962."
    assert choose_quote("m", None) is None


def test_the_demo_the_server_and_the_fact_check_report_turn_deep_links_on() -> None:
    for styles in (demo.STYLES, article.STYLES):
        assert styles["markdown"]().deep_links is True
        assert styles["html"]().deep_links is True
    for fmt in ("markdown", "html"):
        style, _ = report._resolve(None, fmt)
        assert style.deep_links is True
    style, chosen = report._resolve(None, None)
    assert (chosen, style.deep_links) == ("markdown", True)
    # a style the caller gives is used as given
    given = MarkdownReferenceStyle()
    assert report._resolve(given, None) == (given, "markdown")
