"""Reference styles: how a citation and the final reference list are written.

A style decides two things: the text that replaces a citation marker in the answer
(:meth:`ReferenceStyle.format_reference`) and the reference list appended at the end
(:meth:`ReferenceStyle.format_all_references`). Subclass :class:`ReferenceStyle` (or one of the
built-in styles) to write your own.

Every built-in style escapes titles and URLs for its output format and never emits a link to a
URL whose scheme can run code (``javascript:``, ``data:``, ``vbscript:``...), however it is
disguised. :func:`safe_url` is the one URL sanitiser of every style and fact-check report, and
:func:`clean_text` the one cleaner of untrusted text (control, escape and bidi characters
removed, one line); :func:`clean_title` is it for titles, capped at :data:`MAX_TITLE_CHARS`.
"""

from __future__ import annotations

import html
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from html.entities import html5 as html5_entities
from typing import Any, Final
from urllib.parse import unquote

from langchain_core.documents import Document

from langchain_references.core.deeplinks import deep_link, usable_quote

__all__ = [
    "MAX_TITLE_CHARS",
    "QUOTE_KEY",
    "EmptyReferenceStyle",
    "HTMLReferenceStyle",
    "MarkdownReferenceStyle",
    "ReferenceStyle",
    "TextReferenceStyle",
    "UnsupportedClaim",
    "clean_text",
    "clean_title",
    "is_safe_url",
    "safe_url",
]

SourceIdKey = str | Callable[[Document], Any]

_SAFE_SCHEMES = frozenset({"http", "https", "mailto", "ftp"})
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
# Control (Cc), format (Cf: bidi marks, embeddings, overrides and isolates, zero-width
# characters...) and surrogate (Cs) characters, and the non-characters U+FFFE / U+FFFF.
_INVISIBLE = (
    "\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff"
    "\ufff9-\ufffb\ufffe\uffff\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
# Terminal escape sequences (CSI, OSC, other ESC sequences), removed whole.
_ESCAPE_SEQ_RE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_WHITESPACE_CONTROLS = "\t\n\x0b\x0c\r\x1c-\x1f\x85"
_UNSAFE_TEXT_RE = re.compile(f"(?![{_WHITESPACE_CONTROLS}])[{_INVISIBLE}]")
# What browsers (and, to be safe, we) ignore when reading a URL's scheme.
_IGNORED_IN_URL_RE = re.compile(f"[{_INVISIBLE}\\s]+")
# Characters percent-encoded in an emitted URL: whitespace, invisible characters and what
# ends or breaks a Markdown link or an HTML attribute.
_URL_ENCODE_RE = re.compile(f'[{_INVISIBLE}\\s<>"`\\[\\]()\\\\]')
_ENTITY_RE = re.compile(r"&(?:#[xX]([0-9a-fA-F]+)|#([0-9]+)|([A-Za-z][A-Za-z0-9]{0,31}));?")
_MAX_DECODE_ROUNDS = 8

#: Metadata key under which the rewriter passes each citation's quoted passage to
#: :meth:`ReferenceStyle.format_reference` (the cited text a provider gave, or the sentence of
#: the chunk closest to the citing sentence). Styles with ``deep_links`` link to it when it is
#: long enough to find one place on the page (see
#: :func:`~langchain_references.core.deeplinks.usable_quote`).
QUOTE_KEY = "cited_text"


def clean_text(text: str) -> str:
    """Make untrusted text safe to show on one line of text, Markdown or HTML.

    Removes terminal escape sequences, control characters (C0, C1) and invisible format
    characters (bidirectional marks, embeddings, overrides and isolates, zero-width
    characters), and folds every run of whitespace, newlines included, to one space.

    Args:
        text: Untrusted text (a title, a URL shown as text, a snippet...).

    Returns:
        The text on one line, without leading or trailing blanks.
    """
    if text.isascii() and text.isprintable():  # " " to "~": nothing to remove, only to fold
        return " ".join(text.split())
    return " ".join(_UNSAFE_TEXT_RE.sub("", _ESCAPE_SEQ_RE.sub("", text)).split())


#: Longest title shown (:func:`clean_title`); a longer one is cut and ends with ``…``.
MAX_TITLE_CHARS: Final = 300


def clean_title(text: str, *, max_chars: int = MAX_TITLE_CHARS) -> str:
    """:func:`clean_text` of an untrusted title, at most ``max_chars`` characters.

    Only the title's start is read (a few times ``max_chars``), so the work is bounded
    whatever its size; a title longer than ``max_chars`` once cleaned is cut and ends with
    ``…`` (``max_chars`` characters in all).

    Args:
        text: The untrusted title.
        max_chars: The longest result (at least 1).

    Returns:
        The title on one line, safe to show, at most ``max_chars`` characters.

    Examples:
        >>> clean_title("\u202egnp.exe\u202c  Report")
        'gnp.exe Report'
        >>> clean_title("A very long title", max_chars=10)
        'A very lo…'
    """
    cleaned = clean_text(text[: 4 * max_chars + 64])
    if len(cleaned) <= max_chars:
        return cleaned
    return cleaned[: max_chars - 1].rstrip() + "…"


def _decode_entity(match: re.Match[str]) -> str:
    hex_digits, decimal, name = match.groups()
    if name is None:
        digits = (hex_digits or decimal).lstrip("0") or "0"  # any number of leading zeros
        code = int(digits, 16 if hex_digits is not None else 10) if len(digits) <= 8 else -1
        return chr(code) if 0 <= code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
    # With or without the semicolon, and the longest known prefix (``&colonx`` -> ``:x``).
    for end in range(len(name), 0, -1):
        for key in (name[:end] + ";", name[:end]):
            if key in html5_entities:
                return html5_entities[key] + name[end:]
    return match.group(0)


def _decodings(url: str) -> list[str]:
    """``url`` and each form a renderer may turn it into: entities, then percent-escapes."""
    forms = [url]
    for _ in range(_MAX_DECODE_ROUNDS):
        decoded = unquote(_ENTITY_RE.sub(_decode_entity, forms[-1]))
        if decoded == forms[-1]:
            return forms
        forms.append(decoded)
    raise ValueError("too deeply encoded")


def _safe_form(form: str) -> bool:
    cleaned = _IGNORED_IN_URL_RE.sub("", form)
    if not cleaned:
        return False
    match = _SCHEME_RE.match(cleaned)
    if match is None:
        # No scheme: a relative reference, unless a colon hides in the first path segment.
        first = re.split(r"[/?#\\]", cleaned)[0]
        return ":" not in first
    return match.group(1).lower() in _SAFE_SCHEMES


def _percent_encode(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group(0).encode(errors="replace"))


@lru_cache(maxsize=1024)
def safe_url(url: str) -> str | None:
    r"""Return a URL ready to be emitted as a link target, or None if it must not be linked.

    The one URL sanitiser of every style and report. A URL is refused when any form a browser
    or Markdown renderer may read it as (after decoding HTML entities, named, decimal or hex,
    with or without ``;``, and percent-escapes, also nested like ``%256A``, and after dropping
    blanks, control and invisible characters) has a scheme other than http, https, mailto or
    ftp, or when it is empty. Relative URLs are kept. In the returned URL, whitespace, control
    and invisible characters and ``<>"`[]()\`` are percent-encoded, so it cannot end a
    Markdown link or an HTML attribute.

    Args:
        url: The URL (untrusted).

    Returns:
        The URL to emit, or None.
    """
    try:
        forms = _decodings(url)
    except ValueError:
        return None
    if not all(_safe_form(form) for form in forms):
        return None
    return _URL_ENCODE_RE.sub(_percent_encode, url.strip())


def is_safe_url(url: str) -> bool:
    """Tell whether a URL may be emitted as a link (see :func:`safe_url`).

    Relative URLs and the schemes http, https, mailto and ftp are safe; any other scheme
    (``javascript:``, ``data:``, ``vbscript:``, ``file:``...) is not, however it is disguised
    with case, blanks, control characters, HTML entities or percent-escapes.

    Args:
        url: The URL to check.

    Returns:
        True if the URL can be used as a link target.
    """
    return safe_url(url) is not None


def _markdown_url(url: str) -> str:
    """A :func:`safe_url` result as a Markdown link destination (renderers decode ``&``)."""
    return url.replace("&", "&amp;")


# What opens a block (heading, list item) at the start of a line: ``#``, ``-``, ``+``, ``1.``.
_MD_BLOCK_START = re.compile(r"^(\d{1,9}(?=[.)])|)([#+\-.)])")


#: One pass of ``str.translate`` for ``html.escape(text, quote=False)`` and a backslash before
#: each Markdown special character (``\\`*_[]``); the entities hold none of them.
_MD_TEXT_TABLE = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", **{c: "\\" + c for c in "\\`*_[]"}}
)


def _markdown_text(text: str) -> str:
    """Escape text shown inside Markdown (and the HTML a Markdown renderer lets through)."""
    return _markdown_escape(clean_text(text))


def _markdown_escape(clean: str) -> str:
    """:func:`_markdown_text` of text that :func:`clean_text` returned already."""
    escaped = clean.translate(_MD_TEXT_TABLE)
    if _MD_BLOCK_START.match(escaped) is None:  # the common case, without sub()'s template
        return escaped
    return _MD_BLOCK_START.sub(r"\1\\\2", escaped)


@dataclass(frozen=True, slots=True)
class UnsupportedClaim:
    """A sentence whose citations do not (all) support it, as shown to the reader.

    Attributes:
        sentence: The sentence, without its citation markers.
        numbers: Reference numbers of its citations that do not support it.
        supported: Whether its citations, taken together, fully support it.
    """

    sentence: str
    numbers: tuple[int, ...]
    supported: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "sentence": self.sentence,
            "numbers": list(self.numbers),
            "supported": self.supported,
        }


def _check_reason(claim: UnsupportedClaim) -> str:
    if not claim.supported:
        return "not supported by its citations"
    return "some citations do not support it"


def _section(head: str, items: Sequence[str], tail: str = "", *, separator: str = "\n") -> str:
    """Return ``head``, the ``items`` joined by ``separator``, and ``tail``; "" without items."""
    return head + separator.join(items) + tail if items else ""


def _text_check_line(claim: UnsupportedClaim) -> str:
    """One plain-text line of the citation check."""
    refs = "".join(f"[{n}]" for n in claim.numbers)
    return f'- "{clean_text(claim.sentence)}" {refs}'.rstrip() + f" ({_check_reason(claim)})"


class ReferenceStyle:
    """Base class of reference styles.

    Attributes:
        source_id_key: How to tell which source a document comes from: a metadata key (default
            ``"source"``) or a callable ``Document -> str``. Documents with the same source id
            share one reference number. It may be a plain function or a ``staticmethod`` set on
            the class, or any callable set on the instance.
        title_key: Metadata key of the document title shown in the reference list.
        deep_links: Whether inline citations link to the exact passage they used (a text
            fragment ``#:~:text=`` built from the quote, or ``#page=N`` for a PDF chunk with a
            page number); the reference list keeps the plain source URL. Off by default: the
            inline link is the plain source URL. A text fragment is made only from a quote of
            a few words found in the cited chunk
            (:func:`~langchain_references.core.deeplinks.usable_quote`). Set it on the class or
            the instance.
    """

    source_id_key: SourceIdKey = "source"
    title_key: str = "title"
    deep_links: bool = False

    def __init__(self, *, deep_links: bool | None = None) -> None:
        if deep_links is not None:
            self.deep_links = deep_links

    def _raw_source_id_key(self) -> Any:
        """``source_id_key`` as set, not bound: a plain function on the class stays unbound."""
        key = inspect.getattr_static(self, "source_id_key")
        return key.__get__(self) if isinstance(key, staticmethod | classmethod) else key

    def get_source_id(self, document: Document) -> str | None:
        """Return the source id of a document, or None if it has none.

        Args:
            document: A document that was put in the prompt.

        Returns:
            The source id as a string, or None when the document lacks it.

        Raises:
            TypeError: If ``source_id_key`` is neither a string nor a callable.
        """
        key = self.source_id_key  # a metadata key reads as itself, bound or not
        if not isinstance(key, str):
            key = self._raw_source_id_key()  # a function, unbound as set
        if isinstance(key, str):
            value = document.metadata.get(key)
        elif callable(key):
            value = key(document)
        else:
            raise TypeError(
                f"source_id_key must be a metadata key or a callable, not {type(key).__name__}"
            )
        if value is None or value == "":
            return None
        return str(value)

    def get_title(self, document: Document) -> str | None:
        """Return the document title shown in the reference list, or None.

        Args:
            document: The first cited document of a source.

        Returns:
            The title (:func:`clean_title`: one line, capped), or None when the document has
            none.
        """
        title = document.metadata.get(self.title_key)
        if title is None:
            return None
        return clean_title(str(title)) or None

    def format_reference(self, ref: int, media: Document) -> str | None:
        """Return the text that replaces a citation in the answer.

        Args:
            ref: The reference number, dense and in order of first use.
            media: The cited document.

        Returns:
            The replacement text, or None to drop this citation (it then takes no number).
        """
        raise NotImplementedError

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        """Return the reference list appended at the end of the answer.

        Called exactly once, when the stream ends, even when nothing was cited.

        Args:
            refs: ``(number, first cited document)`` for each source, in number order.

        Returns:
            The text to append (empty for no list).
        """
        raise NotImplementedError

    def format_citation_check(self, unsupported: list[UnsupportedClaim]) -> str:
        """Return the note appended after the list when ``mark_unsupported=True``.

        Args:
            unsupported: Sentences whose citations do not (all) support them, in order.

        Returns:
            The text to append (plain text here; each built-in style writes its own form).
        """
        return _section("\n\nCitation check:\n", [_text_check_line(claim) for claim in unsupported])

    #: The word :meth:`format_unsupported` writes after an unsupported citation.
    unsupported_label: str = "unsupported"

    def format_unsupported(self) -> str:
        """Return the flag written right after a citation its document does not support.

        With ``manage_references(..., on_unsupported="flag")`` each rendered citation the
        verifier finds unsupported (not precise) is followed by it.

        Returns:
            The flag (plain text here, `` (unsupported)``; each built-in style writes its form).
        """
        return f" ({clean_text(self.unsupported_label)})"

    def _links(self, refs: Sequence[tuple[int, Document]]) -> list[tuple[int, str | None, str]]:
        """Return ``(number, safe URL or None, clean label)`` for each reference."""
        rows = []
        for ref, doc in refs:
            source = self.get_source_id(doc)
            url = None if source is None else safe_url(source)
            shown = None if source is None else clean_text(source)
            rows.append((ref, url, self.get_title(doc) or shown or f"Document {ref}"))
        return rows

    def _inline_url(self, media: Document) -> str | None:
        """The link target of an inline citation: the safe source URL, deep when asked."""
        source = self.get_source_id(media)
        if source is None:
            return None
        if not self.deep_links:
            return safe_url(source)
        quote = media.metadata.get(QUOTE_KEY)
        usable = usable_quote(quote, media.page_content) if isinstance(quote, str) else None
        deep = deep_link(source, quote=usable, metadata=media.metadata)
        return safe_url(deep)  # the link is sanitised whole, fragment included


class EmptyReferenceStyle(ReferenceStyle):
    """Remove citations and the reference list.

    Subclass it and override :meth:`format_all_references` to learn which documents the answer
    used without showing anything.
    """

    def format_reference(self, ref: int, media: Document) -> str | None:
        """Remove the citation from the text."""
        return ""

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        """Append nothing."""
        return ""

    def format_citation_check(self, unsupported: list[UnsupportedClaim]) -> str:
        """Append nothing (the check stays in the metadata)."""
        return ""


class TextReferenceStyle(ReferenceStyle):
    """Plain text: ``[1]`` in the answer and ``- [1] Title (URL)`` lines at the end."""

    def format_reference(self, ref: int, media: Document) -> str | None:
        """Write ``[ref]``."""
        return f"[{ref}]"

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        """Write one ``- [n] Title (URL)`` line per source."""
        return _section("\n\n", [self._reference_line(ref, doc) for ref, doc in refs])

    def _reference_line(self, ref: int, doc: Document) -> str:
        """One ``- [n] Title (URL)`` line (the title or the source alone when one is missing)."""
        source_id = self.get_source_id(doc)
        source = None if source_id is None else clean_text(source_id)
        title = self.get_title(doc)
        if title and source:
            return f"- [{ref}] {title} ({source})"
        return f"- [{ref}] {title or source or f'Document {ref}'}"


def _markdown_link_line(ref: int, url: str | None, label: str) -> str:
    """One ``- **n** [Title](URL)`` line of the Markdown list (``label`` is clean text)."""
    text = _markdown_escape(label)
    return f"- **{ref}** [{text}]({_markdown_url(url)})" if url else f"- **{ref}** {text}"


def _markdown_check_line(claim: UnsupportedClaim) -> str:
    """One bullet of the Markdown citation check."""
    refs = " ".join(f"**{n}**" for n in claim.numbers)
    return f"- {_markdown_text(claim.sentence)} {refs}".rstrip() + f" *({_check_reason(claim)})*"


class _LinkingStyle(ReferenceStyle):
    """A style whose inline citations link to their source (Markdown, HTML)."""

    def format_reference(self, ref: int, media: Document) -> str | None:
        """Write a superscript link to the source (to the quoted passage with deep links)."""
        return self._mark(ref, self._inline_url(media))

    def _mark(self, ref: int, url: str | None) -> str:
        """The inline citation ``ref``, linked to ``url`` (None: no safe URL, not linked)."""
        raise NotImplementedError


class MarkdownReferenceStyle(_LinkingStyle):
    """Markdown: ``<sup>[[1](URL)]</sup>`` in the answer and ``- **1** [Title](URL)`` at the end.

    A source without a title is listed by its URL; a source without a safe URL is not linked.
    Inline links go to the source URL; with ``deep_links=True``, to the quoted passage.
    """

    def _mark(self, ref: int, url: str | None) -> str:
        if url is None:
            return f"<sup>[{ref}]</sup>"
        return f"<sup>[[{ref}]({_markdown_url(url)})]</sup>"

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        """Write one ``- **n** [Title](URL)`` line per source."""
        return _section("\n\n", [_markdown_link_line(*link) for link in self._links(refs)])

    def format_unsupported(self) -> str:
        """Write `` *(unsupported)*`` (emphasis)."""
        return f" *({_markdown_text(self.unsupported_label)})*"

    def format_citation_check(self, unsupported: list[UnsupportedClaim]) -> str:
        """Write a bold heading and one bullet per unsupported sentence."""
        lines = [_markdown_check_line(claim) for claim in unsupported]
        return _section("\n\n**Citation check**\n\n", lines)


def _html_link_item(url: str | None, label: str) -> str:
    """One ``<li>`` of the HTML list: a link to a safe URL, else the escaped label."""
    text = html.escape(label)
    if url:
        return f'<li><a href="{html.escape(url)}">{text}</a></li>'
    return f"<li>{text}</li>"


def _html_check_item(claim: UnsupportedClaim) -> str:
    """One ``<li>`` of the HTML citation check; everything escaped."""
    refs = "".join(f"<sup>{n}</sup>" for n in claim.numbers)
    reason = html.escape(_check_reason(claim))
    return f"<li>{html.escape(clean_text(claim.sentence))}{refs} <em>({reason})</em></li>"


class HTMLReferenceStyle(_LinkingStyle):
    """HTML: ``<sup><a href="URL">1</a></sup>`` in the answer and an ``<ol>`` list at the end.

    Every title and URL is escaped; unsafe URLs are shown as text, never as links. Inline links
    go to the source URL; with ``deep_links=True``, to the quoted passage.
    """

    def _mark(self, ref: int, url: str | None) -> str:
        if url is None:
            return f"<sup>{ref}</sup>"
        return f'<sup><a href="{html.escape(url)}">{ref}</a></sup>'

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        """Write an ordered list of links to the sources."""
        items = [_html_link_item(url, label) for _, url, label in self._links(refs)]
        return _section("\n\n<ol>", items, "</ol>", separator="")

    def format_unsupported(self) -> str:
        """Write `` <em class="unsupported">(unsupported)</em>``, the label escaped."""
        label = html.escape(clean_text(self.unsupported_label))
        return f' <em class="unsupported">({label})</em>'

    def format_citation_check(self, unsupported: list[UnsupportedClaim]) -> str:
        """Write an ``<aside class="citation-check">`` list; everything escaped."""
        items = [_html_check_item(claim) for claim in unsupported]
        head = '\n\n<aside class="citation-check"><p>Citation check</p><ul>'
        return _section(head, items, "</ul></aside>", separator="")
