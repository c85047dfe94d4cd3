"""Render a :class:`~langchain_references.factcheck.result.FactCheckResult` for people or programs.

:func:`render_report` writes a report in Markdown, plain text or HTML: a header with the
verdict and its note (:func:`~langchain_references.factcheck.verdict.verdict_note`: confidence
and score, or for *not enough evidence* the score beside the threshold and no confidence), the
judge that made it (``Judge: heuristic (no model) — ...``, from ``FactCheckResult.judge``),
each supporting and contradicting snippet followed by a citation, a line about the neutral
passages, the sources that failed, and the reference list.

Citations go through the package's reference styles: every snippet becomes a
:class:`~langchain_core.documents.Document` (metadata ``source`` = URL, ``title`` = page title)
and is cited through a :class:`~langchain_references.core.numbering.SourceNumbering` (the numbering
the answer rewriter uses), so snippets from the same URL share one reference number and the
style decides how citations and the reference list look. Snippets are cited by position, never
parsed for markers, and their text is escaped separately, so a page cannot forge a citation.

All text taken from the result (statement, snippets, titles, rationales, URLs, reasons) is
treated as untrusted: control and bidirectional-override characters are removed, whitespace is
collapsed, and the text is escaped for the output format (everything in HTML).
:func:`render_json` gives the JSON for programs.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Callable, Sequence
from typing import Final, Literal, TypeAlias, TypedDict, Unpack

from langchain_core.documents import Document

from langchain_references.core.deeplinks import choose_quote
from langchain_references.core.numbering import SourceNumbering
from langchain_references.core.styles import (
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
    clean_text,
)
from langchain_references.factcheck.result import Evidence, FactCheckResult
from langchain_references.factcheck.verdict import Verdict, verdict_note
from langchain_references.failures import Failure

__all__ = [
    "DEFAULT_MAX_SNIPPET_CHARS",
    "REPORT_SEPARATORS",
    "ReportFormat",
    "ReportOptions",
    "render_json",
    "render_report",
    "render_reports",
]

#: Output format of :func:`render_report`.
ReportFormat: TypeAlias = Literal["markdown", "text", "html"]
#: Default maximum length of a snippet in a report (longer passages are shortened).
DEFAULT_MAX_SNIPPET_CHARS: Final = 400

_VERDICT_NAMES: Final = {
    Verdict.SUPPORTED: "Supported",
    Verdict.REFUTED: "Refuted",
    Verdict.NOT_ENOUGH_EVIDENCE: "Not enough evidence",
    Verdict.DISPUTED: "Disputed",
    Verdict.ERROR: "Could not check",
}
#: The style of each format when none is given; inline links open the cited passage.
_DEFAULT_STYLES: Final[dict[ReportFormat, Callable[[], ReferenceStyle]]] = {
    "markdown": lambda: MarkdownReferenceStyle(deep_links=True),
    "text": TextReferenceStyle,
    "html": lambda: HTMLReferenceStyle(deep_links=True),
}
#: What separates two reports of :func:`render_reports`, by format.
REPORT_SEPARATORS: Final[dict[ReportFormat, str]] = {
    "markdown": "\n\n---\n\n",
    "text": "\n\n" + "=" * 72 + "\n\n",
    "html": "\n",
}
_MD_SPECIAL = re.compile(r"([\\`*_\[\]()#|~])")


def _md(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", html.escape(clean_text(text), quote=False))


def _html(text: str) -> str:
    return html.escape(clean_text(text), quote=True)


def _text(text: str) -> str:
    return clean_text(text)


def _shorten(text: str, limit: int | None) -> str:
    text = clean_text(text)
    if limit is None or len(text) <= limit:
        return text
    return textwrap.shorten(text, width=limit, placeholder=" …")


def _format_of(style: ReferenceStyle) -> ReportFormat:
    if isinstance(style, HTMLReferenceStyle):
        return "html"
    if isinstance(style, MarkdownReferenceStyle):
        return "markdown"
    return "text"


def _resolve(
    style: ReferenceStyle | None, fmt: ReportFormat | None
) -> tuple[ReferenceStyle, ReportFormat]:
    if fmt is not None and fmt not in _DEFAULT_STYLES:
        raise ValueError(f"fmt must be one of {sorted(_DEFAULT_STYLES)}, got {fmt!r}")
    if style is None:
        chosen: ReportFormat = fmt or "markdown"
        return _DEFAULT_STYLES[chosen](), chosen
    if not isinstance(style, ReferenceStyle):
        raise TypeError(f"style must be a ReferenceStyle, not {type(style).__name__}")
    return style, fmt or _format_of(style)


def _cite(evidence: Sequence[Evidence], style: ReferenceStyle) -> tuple[list[str], str]:
    """Render one citation per evidence item and the reference list, through the numbering."""
    source_key = style.source_id_key if isinstance(style.source_id_key, str) else "source"
    documents = [
        Document(
            page_content=item.text,
            metadata={source_key: item.url, style.title_key: clean_text(item.title) or None},
        )
        for item in evidence
    ]
    numbering = SourceNumbering(documents, style)
    # A snippet is cited alone, with no citing sentence: a deep link quotes its first sentence.
    deep = style.deep_links
    citations = [
        numbering.cite(i, quote=choose_quote(doc.page_content, None) if deep else None)
        for i, doc in enumerate(documents, start=1)
    ]
    return citations, numbering.format_references()


def _percent(value: float) -> str:
    return f"{value:.0%}"


def _failure_subject(failure: Failure) -> str:
    if failure.url:
        return failure.url
    if failure.query:
        return f"search for {failure.query!r}"
    return failure.stage


def _verdict_note(
    result: FactCheckResult,
    escape: Callable[[str], str],
    markup: Callable[[str], str] = str,
) -> str:
    """What follows the verdict's name, or why the statement could not be checked.

    The note is :func:`~langchain_references.factcheck.verdict.verdict_note` marked up by
    ``markup`` (HTML escapes its ``<``); the reason is escaped by ``escape``.
    """
    if result.verdict is Verdict.ERROR:
        return f"(error: {escape(result.error or 'unknown reason')})"
    note = verdict_note(result.verdict, result.confidence, result.score, result.verdict_details)
    return f"({markup(note)})"


def _judge_line(result: FactCheckResult, escape: Callable[[str], str]) -> str:
    """``Judge: KIND (MODEL) — DESCRIPTION``, escaped (call it when ``result.judge`` is set)."""
    return f"Judge: {escape(str(result.judge))}"


def _neutral_line(result: FactCheckResult) -> str:
    n = result.neutral_count
    line = f"{n} passage{'' if n == 1 else 's'} said nothing about the statement"
    errors = result.counts.judge_errors
    if errors:
        line += f"; the judge failed on {errors}"
    return line + "."


class _Renderer:
    """Lays out one report; subclasses escape and mark up for their format."""

    def __init__(self, result: FactCheckResult, style: ReferenceStyle, limit: int | None) -> None:
        self.result = result
        self.limit = limit
        citations, self.references = _cite(result.evidence, style)
        split = len(result.supporting)
        self.supporting = list(zip(result.supporting, citations[:split], strict=True))
        self.contradicting = list(zip(result.contradicting, citations[split:], strict=True))

    def render(self) -> str:
        raise NotImplementedError


class _MarkdownRenderer(_Renderer):
    def _evidence(self, title: str, items: Sequence[tuple[Evidence, str]]) -> list[str]:
        lines = [f"#### {title} ({len(items)})", ""]
        if not items:
            return [*lines, "_None found._", ""]
        for item, citation in items:
            snippet = _md(_shorten(item.text, self.limit))
            lines.append(f"> {snippet}{citation}")
            lines.append(">")
            note = f"confidence {_percent(item.confidence)}"
            if item.rationale.strip():
                note += f": {_md(item.rationale)}"
            lines.extend([f"> *{note}*", ""])
        return lines

    def render(self) -> str:
        r = self.result
        lines = [
            f"### Fact check: {_md(r.statement)}",
            "",
            f"**Verdict: {_VERDICT_NAMES[r.verdict]}** {_verdict_note(r, _md)}",
            "",
            *([f"*{_judge_line(r, _md)}*", ""] if r.judge is not None else []),
            *self._evidence("Supporting evidence", self.supporting),
            *self._evidence("Contradicting evidence", self.contradicting),
            _neutral_line(r),
        ]
        if r.failed_sources:
            lines.extend(["", f"#### Sources that could not be used ({len(r.failed_sources)})", ""])
            lines.extend(
                f"- {_md(_failure_subject(f))} ({_md(f.stage)}): {_md(f.reason)}"
                for f in r.failed_sources
            )
        if self.references:
            lines.extend(["", "#### References"])
        return "\n".join(lines) + self.references


class _TextRenderer(_Renderer):
    def _evidence(self, title: str, items: Sequence[tuple[Evidence, str]]) -> list[str]:
        if not items:
            return [f"{title}: none found.", ""]
        lines = [f"{title} ({len(items)}):"]
        for number, (item, citation) in enumerate(items, start=1):
            snippet = _text(_shorten(item.text, self.limit))
            lines.append(f'  {number}. "{snippet}"' + (f" {citation}" if citation else ""))
            note = f"confidence {_percent(item.confidence)}"
            if item.rationale.strip():
                note += f": {_text(item.rationale)}"
            lines.append(f"     {note}")
        return [*lines, ""]

    def render(self) -> str:
        r = self.result
        lines = [
            f"Fact check: {_text(r.statement)}",
            f"Verdict: {_VERDICT_NAMES[r.verdict].upper()} {_verdict_note(r, _text)}",
            *([_judge_line(r, _text)] if r.judge is not None else []),
            "",
            *self._evidence("Supporting evidence", self.supporting),
            *self._evidence("Contradicting evidence", self.contradicting),
            _neutral_line(r),
        ]
        if r.failed_sources:
            lines.extend(["", f"Sources that could not be used ({len(r.failed_sources)}):"])
            lines.extend(
                f"  - {_text(_failure_subject(f))} ({_text(f.stage)}): {_text(f.reason)}"
                for f in r.failed_sources
            )
        if self.references:
            lines.extend(["", "References:"])
            return "\n".join(lines) + self.references.removeprefix("\n")
        return "\n".join(lines)


class _HTMLRenderer(_Renderer):
    def _evidence(self, title: str, css: str, items: Sequence[tuple[Evidence, str]]) -> list[str]:
        lines = [f"<h3>{title} ({len(items)})</h3>"]
        if not items:
            return [*lines, '<p class="none">None found.</p>']
        lines.append(f'<ul class="evidence {css}">')
        for item, citation in items:
            snippet = _html(_shorten(item.text, self.limit))
            note = f"confidence {_percent(item.confidence)}"
            if item.rationale.strip():
                note += f": {_html(item.rationale)}"
            lines.append(
                f"<li><blockquote>{snippet}</blockquote>{citation}"
                f'<p class="judgement">{note}</p></li>'
            )
        return [*lines, "</ul>"]

    def render(self) -> str:
        r = self.result
        verdict = r.verdict.value.replace("_", "-")
        lines = [
            '<section class="fact-check">',
            f"<h2>Fact check: {_html(r.statement)}</h2>",
            f'<p class="verdict verdict-{verdict}"><strong>{_VERDICT_NAMES[r.verdict]}</strong> '
            f"{_verdict_note(r, _html, _html)}</p>",
            *(
                []
                if r.judge is None
                else [f'<p class="judge judge-{r.judge.kind}">{_judge_line(r, _html)}</p>']
            ),
            *self._evidence("Supporting evidence", "supporting", self.supporting),
            *self._evidence("Contradicting evidence", "contradicting", self.contradicting),
            f'<p class="neutral">{_html(_neutral_line(r))}</p>',
        ]
        if r.failed_sources:
            lines.append(f"<h3>Sources that could not be used ({len(r.failed_sources)})</h3>")
            lines.append('<ul class="failures">')
            lines.extend(
                f"<li><code>{_html(_failure_subject(f))}</code> ({_html(f.stage)}): "
                f"{_html(f.reason)}</li>"
                for f in r.failed_sources
            )
            lines.append("</ul>")
        if self.references:
            lines.append("<h3>References</h3>" + self.references.lstrip("\n"))
        lines.append("</section>")
        return "\n".join(lines)


_RENDERERS: Final[dict[ReportFormat, type[_Renderer]]] = {
    "markdown": _MarkdownRenderer,
    "text": _TextRenderer,
    "html": _HTMLRenderer,
}


def render_report(
    result: FactCheckResult,
    style: ReferenceStyle | None = None,
    *,
    fmt: ReportFormat | None = None,
    max_snippet_chars: int | None = DEFAULT_MAX_SNIPPET_CHARS,
) -> str:
    """Render a readable report of a fact-check result.

    Args:
        result: The result.
        style: Reference style of the citations and the reference list; defaults to the
            style of ``fmt`` (Markdown if neither is given), with deep links to each snippet.
        fmt: Layout: ``"markdown"``, ``"text"`` or ``"html"``. Defaults to the format of
            ``style`` (HTML for :class:`~langchain_references.core.styles.HTMLReferenceStyle`,
            Markdown for :class:`~langchain_references.core.styles.MarkdownReferenceStyle`, text
            otherwise).
        max_snippet_chars: Shorten longer snippets to this many characters (``None`` = full
            passages).

    Returns:
        The report. HTML output is one well-formed ``<section class="fact-check">`` element.

    Raises:
        TypeError: If ``result`` or ``style`` has the wrong type.
        ValueError: If ``fmt`` is unknown or ``max_snippet_chars`` < 10.
    """
    if not isinstance(result, FactCheckResult):
        raise TypeError(f"result must be a FactCheckResult, not {type(result).__name__}")
    if max_snippet_chars is not None and max_snippet_chars < 10:
        raise ValueError(f"max_snippet_chars must be >= 10 or None, got {max_snippet_chars}")
    chosen_style, chosen_fmt = _resolve(style, fmt)
    return _RENDERERS[chosen_fmt](result, chosen_style, max_snippet_chars).render()


class ReportOptions(TypedDict, total=False):
    """The keyword options of :func:`render_report`, which :func:`render_reports` passes on.

    Attributes:
        fmt: Layout: ``"markdown"``, ``"text"`` or ``"html"`` (default: from the style).
        max_snippet_chars: Shorten longer snippets to this many characters (``None`` = full
            passages).
    """

    fmt: ReportFormat | None
    max_snippet_chars: int | None


def render_reports(
    results: Sequence[FactCheckResult],
    style: ReferenceStyle | None = None,
    **options: Unpack[ReportOptions],
) -> str:
    """Render several results, one report each (each with its own reference numbers).

    Args:
        results: The results.
        style: See :func:`render_report`.
        **options: The options of :func:`render_report` (:class:`ReportOptions`).

    Returns:
        The reports, separated by a rule (Markdown, text) or simply concatenated (HTML).
    """
    chosen_style, chosen_fmt = _resolve(style, options.get("fmt"))
    options["fmt"] = chosen_fmt
    return REPORT_SEPARATORS[chosen_fmt].join(
        render_report(r, chosen_style, **options) for r in results
    )


def render_json(result: FactCheckResult, *, indent: int | None = 2) -> str:
    """The result as JSON, for programs (same as ``result.to_json()``).

    Args:
        result: The result.
        indent: Indentation; ``None`` for one compact line.

    Returns:
        The JSON text.
    """
    return result.to_json(indent=indent)
