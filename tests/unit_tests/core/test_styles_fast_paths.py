"""The fast paths of ``clean_text`` and Markdown text escaping give what the general ones give.

``clean_text`` skips its two regular expressions for printable ASCII text, and Markdown text is
escaped with one ``str.translate`` instead of ``html.escape`` then a regex substitution: both
are compared here with the formulas they replace, on any text.
"""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_references.core.styles import (
    _ESCAPE_SEQ_RE,
    _MD_BLOCK_START,
    _UNSAFE_TEXT_RE,
    MarkdownReferenceStyle,
    _markdown_text,
    _markdown_url,
    clean_text,
    safe_url,
)

_MD_TEXT_SPECIAL = re.compile(r"([\\`*_\[\]])")


def general_clean_text(text: str) -> str:
    """``clean_text`` without its fast path."""
    return " ".join(_UNSAFE_TEXT_RE.sub("", _ESCAPE_SEQ_RE.sub("", text)).split())


def general_markdown_text(text: str) -> str:
    """``_markdown_text`` as it was written before ``str.translate``."""
    escaped = _MD_TEXT_SPECIAL.sub(r"\\\1", html.escape(general_clean_text(text), quote=False))
    return _MD_BLOCK_START.sub(r"\1\\\2", escaped)


#: Text that mixes printable ASCII, whitespace, controls, escape sequences, entities-to-be and
#: any other character.
TEXTS = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(max_codepoint=0x7F)),
    st.lists(
        st.sampled_from(
            [
                *("a", " ", "  ", "\t", "\n", "\x1b[31m", "\x1b]0;t\x07", "\x9b2J", "\u200b"),
                *("\u202e", "&", "<", ">", "&amp;", "\\", "`", "*", "_", "[", "]", "#", "-", "1."),
                *("2)", "é"),
            ]
        ),
        max_size=20,
    ).map("".join),
)


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_clean_text_is_the_general_formula(text: str) -> None:
    assert clean_text(text) == general_clean_text(text)


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_markdown_text_is_the_general_formula(text: str) -> None:
    assert _markdown_text(text) == general_markdown_text(text)


def test_every_ascii_character_and_pair_takes_either_path_alike() -> None:
    ascii_chars = [chr(i) for i in range(128)]
    for a in ascii_chars:
        for b in ascii_chars:
            assert clean_text(a + b) == general_clean_text(a + b), repr(a + b)
            assert _markdown_text(a + b) == general_markdown_text(a + b), repr(a + b)


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_clean_text_is_idempotent(text: str) -> None:
    # The reference lists escape their labels, clean already, without cleaning them again.
    assert clean_text(clean_text(text)) == clean_text(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), TEXTS), st.one_of(st.none(), TEXTS)), max_size=6))
def test_markdown_list_is_the_general_formula(
    sources_and_titles: list[tuple[str | None, str | None]],
) -> None:
    style = MarkdownReferenceStyle()
    refs = [
        (n, Document("x", metadata={"source": source, "title": title}))
        for n, (source, title) in enumerate(sources_and_titles, start=1)
    ]
    lines = []
    for n, doc in refs:  # the list as it was written before _links() returned clean labels
        source = style.get_source_id(doc)
        url = None if source is None else safe_url(source)
        shown = None if source is None else clean_text(source)
        text = general_markdown_text(style.get_title(doc) or shown or f"Document {n}")
        lines.append(f"- **{n}** [{text}]({_markdown_url(url)})" if url else f"- **{n}** {text}")
    assert style.format_all_references(refs) == ("\n\n" + "\n".join(lines) if refs else "")
