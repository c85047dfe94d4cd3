"""Hostile URLs and titles through every style and fact-check report, read back by real parsers.

Markdown is parsed with ``markdown_it`` (CommonMark) with its own link filter switched off, so
the tests check what the styles write rather than the renderer's safety net; HTML is parsed with
:class:`html.parser.HTMLParser`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from markdown_it import MarkdownIt
from markdown_it.token import Token

from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import (
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
    UnsupportedClaim,
    safe_url,
)
from langchain_references.factcheck.report import render_report
from langchain_references.factcheck.result import Evidence, FactCheckCounts, FactCheckResult
from langchain_references.factcheck.verdict import Verdict
from langchain_references.failures import Failure
from langchain_references.judges import Label

SAFE_SCHEMES = {"http", "https", "mailto", "ftp"}
#: Scheme variants that must be linked, and disguised dangerous ones that must never be.
SAFE_PREFIXES = ["https://ex.org/", "http://ex.org/p?", "HTTPS://ex.org/", "mailto:a@ex.org?"]
DANGEROUS_PREFIXES = [
    "javascript:",
    "JaVaScRiPt:",
    "javascript&#58;",
    "javascript&#58",
    "javascript&#x3a;",
    "javascript&#X3A",
    "javascript&colon;",
    "javascript&colon",
    "java&#115;cript:",
    "java&Tab;script:",
    "&#106;avascript:",
    "&amp;#106;avascript:",
    "%6Aavascript:",
    "%256Aavascript:",
    "&#37;6Aavascript:",
    "javascript%3A",
    " javascript:",
    "\x00javascript:",
    "java\tscript:",
    "java\nscript:",
    "\u202ejavascript:",
    "jav\u200bascript:",
    "data:text/html,",
    "vbscript:",
    "file:///",
]
HOSTILE_PIECES = [
    "a",
    "Z",
    "/",
    ":",
    "&",
    "&#58;",
    "&colon;",
    "&amp;",
    "&lt;",
    "%",
    "%0A",
    "%3A",
    "%256A",
    "\n",
    "\r\n",
    "\t",
    " ",
    "\x00",
    "\x07",
    "\x1b",
    "\x1b[31m",
    "\x1b]8;;http://evil.example\x07",
    "\x85",
    "\x9b2J",
    "\u2028",
    "\u200b",
    "\u200e",
    "\u202e",
    "\u2066",
    "\u061c",
    "\ufeff",
    "[",
    "]",
    "(",
    ")",
    "<",
    ">",
    '"',
    "'",
    "`",
    "\\",
    "*",
    "_",
    "#",
    "!",
    "|",
    "~",
    "=",
    "-",
    "1.",
    "javascript:alert(1)",
    "<script>alert(1)</script>",
    "<https://evil.example>",
    "](javascript:alert(1))",
    "\n# Forged heading\n",
    "\n[x]: http://evil.example\n",
    "\n\n[y]: javascript:alert(1)\n\n",
    "\n- forged item",
]
hostile_text = st.lists(st.sampled_from(HOSTILE_PIECES), max_size=8).map("".join)


@st.composite
def hostile_urls(draw: st.DrawFn) -> tuple[str, bool | None]:
    """A URL and whether it must be linked (True), never (False) or either (None)."""
    kind = draw(st.sampled_from(["safe", "dangerous", "any"]))
    tail = draw(hostile_text)
    if kind == "safe":
        return draw(st.sampled_from(SAFE_PREFIXES)) + tail, True
    if kind == "dangerous":
        # A digit (or, after a hex entity, a letter a-f) right after an entity without ";"
        # ("&#58" + "1.", "&#X3A" + "a") would change the entity (to "&#581", "&#x3AA": not a
        # colon): such a URL is not dangerous, so keep any letter or digit apart.
        return draw(st.sampled_from(DANGEROUS_PREFIXES)) + (
            " " + tail if tail[:1].isalnum() else tail
        ), False
    return tail or "a", None


def _browser_scheme(href: str) -> str:
    """The scheme a browser sees, resolving relative URLs against an https page."""
    cleaned = re.sub(r"[\t\n\r]", "", href).strip("\x00- ")
    try:
        return urlsplit(urljoin("https://page.example/dir/", cleaned)).scheme.lower()
    except ValueError:  # e.g. "//[x]" (a bracketed host that is no IP): a relative URL with
        # an invalid host, which a browser refuses to resolve: no scheme can run from it
        return "https"


def assert_safe_links(hrefs: list[str], cited: list[tuple[str, bool | None]]) -> None:
    """One link per linkable citation and per linkable distinct source; every link safe.

    Args:
        hrefs: The links found in the output.
        cited: ``(URL, must be linked)`` of each citation, in order.
    """
    distinct = {url: must for url, must in reversed(cited)}
    expected = sum(_expect_linked(u, m) for u, m in cited)
    expected += sum(_expect_linked(u, m) for u, m in distinct.items())
    assert len(hrefs) == expected
    for href in hrefs:
        for form in (href, unquote(href), unquote(unquote(href))):
            assert _browser_scheme(form) in SAFE_SCHEMES, href


def assert_clean_text(text: str) -> None:
    for char in text:
        if char == "\n":
            continue
        assert unicodedata.category(char) not in {"Cc", "Cf", "Cs", "Zl", "Zp"}, repr(char)


def _expect_linked(url: str, must_link: bool | None) -> bool:
    linked = safe_url(url) is not None
    if must_link is not None:
        assert linked == must_link, url
    return linked


# --- Markdown -----------------------------------------------------------------------------


def _markdown(src: str) -> tuple[list[Token], dict[str, Any]]:
    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True  # type: ignore[method-assign]  # see the module doc
    env: dict[str, Any] = {}
    return md.parse(src, env), env


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        yield from _walk(token.children or [])


def _markdown_links(tokens: list[Token]) -> list[str]:
    return [str(t.attrs["href"]) for t in _walk(tokens) if t.type == "link_open"]


def _headings(tokens: list[Token]) -> list[str]:
    return [t.tag for t in tokens if t.type == "heading_open"]


# --- HTML ---------------------------------------------------------------------------------


class _HTMLReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: set[str] = set()
        self.hrefs: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.stack.append(tag)
        self.attrs |= {f"{tag}.{name}" for name, _ in attrs}
        self.hrefs += [value or "" for name, value in attrs if name == "href"]

    def handle_endtag(self, tag: str) -> None:
        assert self.stack, f"unbalanced </{tag}>"
        assert self.stack.pop() == tag, f"unbalanced </{tag}>"


def _read_html(text: str) -> _HTMLReader:
    reader = _HTMLReader()
    reader.feed(text)
    reader.close()
    assert reader.stack == []
    return reader


# --- the styles ---------------------------------------------------------------------------

references = st.lists(st.tuples(hostile_urls(), hostile_text), min_size=1, max_size=4)


def _render(style: ReferenceStyle, refs: list[tuple[tuple[str, bool | None], str]]) -> str:
    docs = [
        Document(f"d{i}", metadata={"source": url, "title": t})
        for i, ((url, _), t) in enumerate(refs)
    ]
    rewriter = ReferenceRewriter(docs, style)
    answer = " ".join(f"Claim {i} [{i}](id={i})." for i in range(1, len(docs) + 1))
    return rewriter.feed(answer) + rewriter.finish()


def _sources(refs: list[tuple[tuple[str, bool | None], str]]) -> int:
    """How many distinct sources ``refs`` has (documents of one source share a number)."""
    return len({url for (url, _), _ in refs})


@settings(max_examples=150, deadline=None)
@given(references)
def test_markdown_style_writes_only_its_own_links_and_blocks(
    refs: list[tuple[tuple[str, bool | None], str]],
) -> None:
    out = _render(MarkdownReferenceStyle(), refs)
    tokens, env = _markdown(out)

    assert "references" not in env  # no link definition was smuggled in
    assert _headings(tokens) == []
    items = [t for t in tokens if t.type == "list_item_open"]
    assert len(items) == _sources(refs)  # one list item per reference
    assert_safe_links(_markdown_links(tokens), [url for url, _ in refs])


@settings(max_examples=150, deadline=None)
@given(references)
def test_html_style_writes_only_its_own_tags_and_safe_links(
    refs: list[tuple[tuple[str, bool | None], str]],
) -> None:
    reader = _read_html(_render(HTMLReferenceStyle(), refs))

    assert set(reader.tags) <= {"sup", "a", "ol", "li"}
    assert reader.attrs <= {"a.href"}
    assert reader.tags.count("li") == _sources(refs)
    assert_safe_links(reader.hrefs, [url for url, _ in refs])


@settings(max_examples=150, deadline=None)
@given(references)
def test_text_style_writes_clean_text_one_line_per_reference(
    refs: list[tuple[tuple[str, bool | None], str]],
) -> None:
    out = _render(TextReferenceStyle(), refs)

    assert_clean_text(out)
    _answer, blank, *lines = out.split("\n")
    assert blank == ""
    assert len(lines) == _sources(refs)
    for number, line in enumerate(lines, start=1):
        assert line.startswith(f"- [{number}] ")


@settings(max_examples=100, deadline=None)
@given(st.lists(hostile_text, min_size=1, max_size=3))
def test_citation_checks_write_one_clean_item_per_sentence(sentences: list[str]) -> None:
    claims = [UnsupportedClaim(s, (i,), supported=False) for i, s in enumerate(sentences, 1)]

    text = TextReferenceStyle().format_citation_check(claims)
    assert_clean_text(text)
    assert len(text.strip().split("\n")) == 1 + len(claims)

    tokens, env = _markdown(MarkdownReferenceStyle().format_citation_check(claims))
    assert "references" not in env
    assert _headings(tokens) == []
    assert _markdown_links(tokens) == []
    assert sum(t.type == "list_item_open" for t in tokens) == len(claims)

    reader = _read_html(HTMLReferenceStyle().format_citation_check(claims))
    assert set(reader.tags) <= {"aside", "p", "ul", "li", "sup", "em"}
    assert reader.attrs <= {"aside.class"}


# --- the fact-check reports ---------------------------------------------------------------


@st.composite
def hostile_results(draw: st.DrawFn) -> tuple[FactCheckResult, list[tuple[str, bool | None]]]:
    def items(label: Label) -> list[Evidence]:
        found = []
        for _ in range(draw(st.integers(0, 3))):
            url, must = draw(hostile_urls())
            cited.append((url, must))
            found.append(
                Evidence(
                    text=draw(hostile_text) or "x",
                    url=url,
                    title=draw(hostile_text),
                    rank=0,
                    relevance_rank=0,
                    similarity=0.5,
                    label=label,
                    confidence=0.9,
                    rationale=draw(hostile_text),
                )
            )
        return found

    cited: list[tuple[str, bool | None]] = []
    supporting, contradicting = items(Label.ENTAILS), items(Label.CONTRADICTS)
    failures = [
        Failure(url=draw(hostile_text), stage="fetch", reason=draw(hostile_text))
        for _ in range(draw(st.integers(0, 2)))
    ]
    result = FactCheckResult(
        statement=draw(hostile_text) or "s",
        verdict=Verdict.DISPUTED,
        confidence=0.5,
        score=0.0,
        supporting=supporting,
        contradicting=contradicting,
        neutral_count=1,
        failed_sources=failures,
        counts=FactCheckCounts(neutral=1),
    )
    assert [url for url, _ in cited] == [e.url for e in result.evidence]
    return result, cited


@settings(max_examples=100, deadline=None)
@given(hostile_results())
def test_markdown_report_writes_only_its_own_headings_and_links(
    case: tuple[FactCheckResult, list[tuple[str, bool | None]]],
) -> None:
    result, cited = case
    tokens, env = _markdown(render_report(result, fmt="markdown"))

    assert "references" not in env
    written = (
        ["h3", "h4", "h4"] + ["h4"] * bool(result.failed_sources) + ["h4"] * bool(result.evidence)
    )
    assert _headings(tokens) == written
    assert_safe_links(_markdown_links(tokens), cited)


@settings(max_examples=100, deadline=None)
@given(hostile_results())
def test_text_report_is_clean_with_one_line_per_reference(
    case: tuple[FactCheckResult, list[tuple[str, bool | None]]],
) -> None:
    result, _ = case
    report = render_report(result, fmt="text")

    assert_clean_text(report)
    lines = report.split("\n")
    distinct = list(dict.fromkeys(e.url for e in result.evidence))
    if distinct:
        references = lines[lines.index("References:") + 1 :]
        assert len(references) == len(distinct)
        for number, line in enumerate(references, start=1):
            assert line.startswith(f"- [{number}] ")
    else:
        assert "References:" not in lines
    evidence_lines = [line for line in lines if re.match(r"  \d+\. \"", line)]
    assert len(evidence_lines) == len(result.evidence)  # each snippet on one line
    failure_lines = [line for line in lines if line.startswith("  - ")]
    assert len(failure_lines) == len(result.failed_sources)


@settings(max_examples=100, deadline=None)
@given(hostile_results())
def test_html_report_writes_only_its_own_tags_and_safe_links(
    case: tuple[FactCheckResult, list[tuple[str, bool | None]]],
) -> None:
    result, cited = case
    reader = _read_html(render_report(result, fmt="html"))

    tags = {"section", "h2", "h3", "p", "strong", "ul", "ol", "li", "blockquote", "sup", "a"}
    assert set(reader.tags) <= tags | {"code"}
    assert reader.attrs <= {"section.class", "p.class", "ul.class", "a.href"}
    assert_safe_links(reader.hrefs, cited)
