"""Renumber and restyle citations in a stream of text (pure, no I/O).

:class:`ReferenceRewriter` drives a :class:`~langchain_references._parser.CitationParser`:
text goes in fragment by fragment, rewritten text comes out, and :meth:`ReferenceRewriter.finish`
returns the last held-back text followed by the reference list. The runnable wrapper
(:mod:`langchain_references.manager`) is a thin I/O shell around this class, shared by its
sync and async paths.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple

from langchain_core.documents import Document

from langchain_references._parser import DEFAULT_MARKERS, Citation, CitationParser
from langchain_references.deeplinks import QuoteFinder
from langchain_references.numbering import SourceNumbering, UsedReference
from langchain_references.styles import ReferenceStyle

__all__ = ["CitedSpan", "ReferenceRewriter", "UsedReference"]

logger = logging.getLogger(__name__)

_CITING_CHARS = 400  # how much recent text is searched for the citing sentence
# A sentence end inside the answer's recent text (the citing sentence starts after the last).
_SENTENCE_END_RE = re.compile(r"[.!?][\"')\]]*\s+")


class CitedSpan(NamedTuple):
    """Where a rendered citation marker stands in the rewritten answer.

    Attributes:
        start: Offset of the marker's first character in the answer text as written.
        end: Offset just past the marker.
        document: The cited document.
        quote: The passage the citation quotes (a provider's ``cited_text``), if known.
    """

    start: int
    end: int
    document: Document
    quote: str | None


class ReferenceRewriter:
    r"""Rewrite the citations (``[N](id=K)`` by default) of one answer in a reference style.

    Numbers go by order of first citation, one per distinct source id; documents without a
    source id are distinct sources. Citations of unknown documents are dropped (with a
    warning), and so are those the style formats as None.

    Args:
        documents: The documents that were put in the prompt; citation ids are 1-based
            positions in this list.
        style: The reference style.
        markers: The citation dialects the answer uses, some of
            :data:`~langchain_references._parser.MARKER_DIALECTS` (``"id"`` for ``[N](id=K)``,
            ``"source"`` for ``【K†source】``, ``"bracket"`` for ``[K]`` and ``[K, L]``); by
            default :data:`~langchain_references._parser.DEFAULT_MARKERS`, ``"id"`` only.

    Raises:
        ValueError: If ``markers`` names an unknown dialect, or none.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_references.styles import TextReferenceStyle
        >>> docs = [Document("a", metadata={"source": "https://a"})]
        >>> r = ReferenceRewriter(docs, TextReferenceStyle())
        >>> r.feed("Yes [7](id=1)") + r.finish()
        'Yes [1]\\n\\n- [1] https://a'
    """

    __slots__ = (
        "_cited",
        "_deep",
        "_documents",
        "_finished",
        "_numbering",
        "_others",
        "_parser",
        "_quoted",
        "_quotes",
        "_recent",
        "_spans",
        "_style",
        "_written",
    )

    def __init__(
        self,
        documents: Sequence[Document],
        style: ReferenceStyle,
        *,
        markers: Collection[str] = DEFAULT_MARKERS,
        track_spans: bool = False,
    ) -> None:
        self._documents = documents
        self._style = style
        self._parser = CitationParser(markers=markers)
        # The characters but "[" a citation may begin with ("【"), for feed's fast path.
        self._others = self._parser.starts.replace("[", "")
        self._numbering = SourceNumbering(documents, style)
        self._cited: dict[int, str] = {}
        self._finished = False
        # Deep links quote, for each [n](id=k), the cited chunk's sentence closest to the
        # sentence that cites it: the recent text is kept (only then) to know that sentence.
        self._deep = bool(style.deep_links)
        self._recent: list[str] = []
        self._quotes: dict[int, QuoteFinder] = {}
        self._quoted: dict[tuple[int, str | None], str] = {}
        # Where each marker stands in the answer (v1 citation annotations), only if asked.
        self._spans: list[CitedSpan] | None = [] if track_spans else None
        self._written = 0  # characters of answer returned so far (counted only then)

    @property
    def spans(self) -> list[CitedSpan]:
        """Where each rendered citation marker stands in the answer text, in order.

        Kept only with ``track_spans=True`` (empty otherwise): the offsets count every
        character :meth:`feed` and :meth:`cite` returned, so every piece of the answer's text
        must go through them.
        """
        return list(self._spans or ())

    @property
    def references(self) -> list[UsedReference]:
        """The sources cited so far, in number order."""
        return self._numbering.references

    def feed(self, text: str) -> str:
        """Consume a fragment of the answer and return the rewritten text now certain.

        Args:
            text: The next fragment.

        Returns:
            Rewritten text (possibly empty while a citation may be forming).

        Raises:
            RuntimeError: If called after :meth:`finish`.
        """
        parser = self._parser
        if (
            not parser.pending
            and "[" not in text
            and not (self._others and any(c in text for c in self._others))
        ):
            if self._deep:
                self.record(text)
            if self._spans is not None:
                self._written += len(text)
            return text  # fast path: plain text, untouched
        if self._finished:
            raise RuntimeError("ReferenceRewriter.feed() called after finish()")
        events = parser.feed(text)
        if not events:
            return ""  # a citation is forming
        if len(events) == 1 and not self._deep and self._spans is None:  # text or a citation
            event = events[0]
            return event if isinstance(event, str) else self._cited_text(event)
        return self._render(events)

    def finish(self) -> str:
        """End the answer: return held-back text verbatim and the reference list.

        Returns:
            The remaining text, followed by the style's reference list.
        """
        if self._finished:
            raise RuntimeError("ReferenceRewriter.finish() called twice")
        self._finished = True
        tail = self._render(self._parser.close())
        return tail + self._numbering.format_references()

    @property
    def deep(self) -> bool:
        """Whether the style links to quotes, so the text must be :meth:`record`-ed."""
        return self._deep

    @property
    def record(self) -> Callable[[str], None]:
        """Remember answer text that bypassed :meth:`feed` (the citing sentence of deep links).

        The drivers call it on each chunk they pass through untouched, so it is the bare
        ``list.append`` of the recent text; the list is cut back at each citation.
        """
        return self._recent.append

    def _citing_sentence(self) -> str:
        """The answer's sentence being written (the text since the last sentence end)."""
        recent = self._recent
        tail = "".join(recent)[-_CITING_CHARS:]
        recent[:] = (tail,)  # what the next citation looks back on: this tail, then new text
        end = 0
        for match in _SENTENCE_END_RE.finditer(tail):
            end = match.end()
        return tail[end:]

    def cite(self, document: Document, *, quote: str | None = None) -> str:
        """Cite a document that is not in the documents list (a provider's own citation).

        It is numbered like a ``[n](id=k)`` citation: the number of its source if that source
        was cited already (by either kind of citation), else the next number. Text held back
        by the parser comes first, as text, so the marker lands after everything fed so far.

        Args:
            document: The cited document (its source id keys the number).
            quote: The cited passage, passed to the style under
                :data:`~langchain_references.styles.QUOTE_KEY` (deep links).

        Returns:
            The held-back text, then the styled marker.

        Raises:
            RuntimeError: If called after :meth:`finish`.
        """
        if self._finished:
            raise RuntimeError("ReferenceRewriter.cite() called after finish()")
        held = self._render(self._parser.close())
        marker = self._numbering.cite_document(document, quote=quote)
        if self._spans is not None and marker:
            self._spans.append(
                CitedSpan(self._written, self._written + len(marker), document, quote)
            )
            self._written += len(marker)
        return held + marker

    @property
    def style(self) -> ReferenceStyle:
        """The reference style."""
        return self._style

    @property
    def parser(self) -> CitationParser:
        """The underlying parser (its ``pending`` tells whether text is held back)."""
        return self._parser

    @property
    def numbering(self) -> SourceNumbering:
        """The numbering registry the citations go through (numbers, used references)."""
        return self._numbering

    def _render(self, events: list[str | Citation]) -> str:
        parts = []
        for event in events:
            if isinstance(event, str):
                parts.append(event)
                if self._deep:
                    self.record(event)
            elif self._deep:  # each citation quotes its own sentence: no cache
                parts.append(self._cite(event))
            else:
                parts.append(self._cited_text(event))
            if self._spans is not None:
                self._track(event, parts[-1])
        return "".join(parts)

    def _track(self, event: str | Citation, text: str) -> None:
        """Count the answer text rendered for one event; remember where a marker stands."""
        spans = self._spans
        if spans is not None and text and isinstance(event, Citation):
            document = self._documents[event.doc_id - 1]
            spans.append(CitedSpan(self._written, self._written + len(text), document, None))
        self._written += len(text)

    def _cited_text(self, citation: Citation) -> str:
        """The text of a citation without deep links, the same for every citation of a document.

        A document cited again gets the text of its first citation: same number, same document,
        so the style's answer is the same (citations by position carry no quote).
        """
        text = self._cited.get(citation.doc_id)
        if text is None:
            text = self._cite(citation)
            if text:
                self._cited[citation.doc_id] = text
        return text

    def _cite(self, citation: Citation) -> str:
        position = citation.doc_id
        if not 1 <= position <= len(self._documents):
            logger.warning(
                "Dropped citation %s: document id %d is not in 1..%d",
                citation.raw,
                position,
                len(self._documents),
            )
            return ""
        if self._deep:
            finder = self._quotes.get(position)
            if finder is None:
                chunk = self._documents[position - 1].page_content
                finder = self._quotes[position] = QuoteFinder(chunk)
            quote = finder.best(self._citing_sentence())
            key = (position, quote)
            text = self._quoted.get(key)
            if text is None:  # same chunk, same quote: same number, same marker
                text = self._numbering.cite(position, quote=quote)
                if text:
                    self._quoted[key] = text
            return text
        return self._numbering.cite(position)
