"""Renumber and restyle citations in a stream of text (pure, no I/O).

:class:`ReferenceRewriter` drives a :class:`~langchain_references.core._code.CodeAwareParser` (a
citation parser that leaves Markdown code alone): text goes in fragment by fragment,
rewritten text comes out, and :meth:`ReferenceRewriter.finish` returns the last held-back
text followed by the reference list. The runnable wrapper
(:mod:`langchain_references.manager`) is a thin I/O shell around this class, shared by its
sync and async paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Container, Sequence
from typing import NamedTuple

from langchain_core.documents import Document

from langchain_references.core._code import CodeAwareParser
from langchain_references.core._parser import DEFAULT_MARKERS, Citation, Event
from langchain_references.core.deeplinks import QuoteFinder
from langchain_references.core.numbering import SourceNumbering, UsedReference
from langchain_references.core.styles import ReferenceStyle
from langchain_references.text.sentences import CITING_END

__all__ = ["CitedSpan", "ReferenceRewriter", "UsedReference"]

logger = logging.getLogger(__name__)

_CITING_CHARS = 400  # how much recent text is searched for the citing sentence
# Blanks at the end of the text are held back until what follows is known: a dropped citation
# (rendered as "") followed by punctuation, a blank or the end takes them away with it.
_BLANKS = " \t\u00a0\u202f"
#: Most blanks held back (a longer run keeps the rest, whatever follows).
MAX_HELD_BLANKS = 16
# What may follow a dropped citation without the blanks before it.
_CLOSERS = frozenset(".,;:!?)]}\u2026\u00bb\u201d\u2019")
#: What a run whose answer cites documents it does not have is told to do.
NO_DOCUMENTS_FIX = (
    "pass the documents the model was shown (the documents key of the input dict), or, over "
    "a chat model, have the tools return them as ToolMessage artifacts "
    "(@tool(response_format='content_and_artifact') returning (text, documents))"
)
# A sentence end inside the answer's recent text (the citing sentence starts after the last).
_SENTENCE_END_RE = CITING_END.compile()


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
    warning per unknown id; one warning per run, naming the fix, when there are no documents
    at all), and so are those the style formats as None. A dropped citation takes the blanks
    before it away when punctuation, a blank or the end of the answer follows it (``France
    [1](id=9).`` gives ``France.``): blanks at the end of the text are held back (at most
    :data:`MAX_HELD_BLANKS`) until what follows is known, so the output is the same however
    the answer is split. A marker inside Markdown code (a fenced block or a code span) is
    code, not a citation: it is passed through as it is (see
    :mod:`~langchain_references.core._code`).

    Args:
        documents: The documents that were put in the prompt; citation ids are 1-based
            positions in this list.
        style: The reference style.
        markers: The citation dialects the answer uses, some of
            :data:`~langchain_references.core._parser.MARKER_DIALECTS` (``"id"`` for ``[N](id=K)``,
            ``"source"`` for ``【K†source】``, ``"bracket"`` for ``[K]`` and ``[K, L]``); by
            default :data:`~langchain_references.core._parser.DEFAULT_MARKERS`, ``"id"`` and
            ``"source"``.

    Raises:
        ValueError: If ``markers`` names an unknown dialect, or none.

    Examples:
        >>> from langchain_core.documents import Document
        >>> from langchain_references.core.styles import TextReferenceStyle
        >>> docs = [Document("a", metadata={"source": "https://a"})]
        >>> r = ReferenceRewriter(docs, TextReferenceStyle())
        >>> r.feed("Yes [7](id=1)") + r.finish()
        'Yes [1]\n\n- [1] https://a'
    """

    __slots__ = (
        "_blank",
        "_cited",
        "_deep",
        "_documents",
        "_dropped",
        "_finished",
        "_numbering",
        "_parser",
        "_quoted",
        "_quotes",
        "_recent",
        "_spans",
        "_style",
        "_warned",
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
        self._parser = CodeAwareParser(markers=markers)
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
        self._blank = ""  # blanks at the end of the text so far, not returned yet
        self._dropped = False  # a citation was dropped right after the held blanks
        self._warned: set[int] | None = None  # unknown document ids warned about

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

        It is :meth:`feed_events` of :meth:`parse`, with a fast path for plain text.

        Args:
            text: The next fragment.

        Returns:
            Rewritten text (possibly empty while a citation may be forming).

        Raises:
            RuntimeError: If called after :meth:`finish`.
        """
        if self._finished:
            raise RuntimeError("ReferenceRewriter.feed() called after finish()")
        parser = self._parser
        if parser.quiet and not parser.special(text):
            if self._deep:
                self.record(text)
            if self._blank or (text and text[-1] in _BLANKS):
                text = self._text(text)  # blanks held back, or held ones let through
            if self._spans is not None:
                self._written += len(text)
            return text  # fast path: plain text, untouched
        return self.feed_events(parser.feed(text))

    def parse(self, text: str) -> list[Event]:
        """The events of a fragment of the answer, from this rewriter's parser.

        A caller that also gives the events to someone else (the citation check's sentence
        tracker) parses each fragment once with it, then renders the events with
        :meth:`feed_events`: ``feed_events(parse(text))`` is :meth:`feed`.

        Args:
            text: The next fragment.

        Returns:
            The events now certain (see :meth:`CodeAwareParser.feed`).
        """
        parser = self._parser
        if parser.quiet and not parser.special(text):
            return [text] if text else []
        return parser.feed(text)

    def feed_events(
        self,
        events: Sequence[Event],
        *,
        drop: Container[int] = (),
        flag: Container[int] = (),
    ) -> str:
        """Rewrite events of the answer (from :meth:`parse`, or a parser's ``close``/``flush``).

        Args:
            events: Text and citation events, in order.
            drop: Document ids whose citations are removed here, as a citation of an unknown
                document is (not numbered; blanks before it go with it), without a warning.
            flag: Document ids whose rendered citations are followed by the style's
                :meth:`~langchain_references.core.styles.ReferenceStyle.format_unsupported`.

        Returns:
            The rewritten text now certain.

        Raises:
            RuntimeError: If called after :meth:`finish`.
        """
        if self._finished:
            raise RuntimeError("ReferenceRewriter.feed_events() called after finish()")
        if not events:
            return ""  # a citation is forming
        if len(events) == 1 and not self._deep and self._spans is None and not (drop or flag):
            event = events[0]  # text or a citation
            if isinstance(event, str):
                return self._text(event)
            return self._marker(self._cited_text(event))
        return self._render(events, drop, flag)

    def finish(self) -> str:
        """End the answer: return held-back text verbatim and the reference list.

        Returns:
            The remaining text, followed by the style's reference list.
        """
        if self._finished:
            raise RuntimeError("ReferenceRewriter.finish() called twice")
        self._finished = True
        tail = self._render(self._parser.close())
        if not self._dropped:  # the answer's own trailing blanks (a dropped citation's go)
            tail += self._blank
        return tail + self._numbering.format_references()

    @property
    def deep(self) -> bool:
        """Whether the style links to quotes, so the text must be :meth:`record`-ed."""
        return self._deep

    @property
    def record(self) -> Callable[[str], None]:
        """Remember answer text (the citing sentence of deep links).

        :meth:`feed` calls it on the text it passes through; a caller whose text bypasses
        :meth:`feed` calls it too. It is the bare ``list.append`` of the recent text; the list
        is cut back at each citation.
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
                :data:`~langchain_references.core.styles.QUOTE_KEY` (deep links).

        Returns:
            The held-back text, then the styled marker.

        Raises:
            RuntimeError: If called after :meth:`finish`.
        """
        if self._finished:
            raise RuntimeError("ReferenceRewriter.cite() called after finish()")
        return self._render(self._parser.flush()) + self.render_citation(document, quote=quote)

    def render_citation(self, document: Document, *, quote: str | None = None) -> str:
        """:meth:`cite` without flushing the parser: the caller rendered the text before it.

        Args:
            document: The cited document.
            quote: The cited passage (deep links).

        Returns:
            The styled marker (with the blanks held before it).
        """
        marker = self._numbering.cite_document(document, quote=quote)
        out = self._marker(marker)
        if self._spans is not None and marker:
            start = self._written + len(out) - len(marker)
            self._spans.append(CitedSpan(start, start + len(marker), document, quote))
            self._written += len(out)
        return out

    @property
    def style(self) -> ReferenceStyle:
        """The reference style."""
        return self._style

    @property
    def parser(self) -> CodeAwareParser:
        """The underlying parser (its ``pending`` tells whether text is held back)."""
        return self._parser

    @property
    def numbering(self) -> SourceNumbering:
        """The numbering registry the citations go through (numbers, used references)."""
        return self._numbering

    def _render(
        self, events: Sequence[Event], drop: Container[int] = (), flag: Container[int] = ()
    ) -> str:
        parts = []
        for event in events:
            if isinstance(event, str):
                parts.append(self._text(event))
                if self._deep:
                    self.record(event)
                if self._spans is not None:
                    self._written += len(parts[-1])
                continue
            if event.doc_id in drop:
                parts.append(self._marker(""))
                continue
            # each citation quotes its own sentence with deep links: no cache then
            marker = self._cite(event) if self._deep else self._cited_text(event)
            parts.append(self._marker(marker))
            if self._spans is not None:
                self._track(event, parts[-1], marker)
            if marker and event.doc_id in flag:
                parts.append(self._style.format_unsupported())
                if self._spans is not None:
                    self._written += len(parts[-1])
        return "".join(parts)

    def _track(self, event: Citation, out: str, marker: str) -> None:
        """Count the answer text rendered for a citation; remember where its marker stands."""
        spans = self._spans
        if spans is not None and marker:
            document = self._documents[event.doc_id - 1]
            start = self._written + len(out) - len(marker)  # after the blanks let through
            spans.append(CitedSpan(start, start + len(marker), document, None))
        self._written += len(out)

    def _text(self, text: str) -> str:
        """The answer text to return for ``text``: its trailing blanks are held back.

        The blanks held before it are let through, unless a dropped citation came between
        them and ``text`` and ``text`` starts with a blank or closing punctuation.
        """
        if not text:
            return ""
        blank = self._blank
        if blank and self._dropped and (text[0].isspace() or text[0] in _CLOSERS):
            blank = ""  # "France [1](id=9)." -> "France."
        self._dropped = False
        head = text.rstrip(_BLANKS)
        if len(head) == len(text):
            self._blank = ""
            return blank + text if blank else text
        run = text[len(head) :] if head else blank + text  # the blanks now at the end
        self._blank = run[-MAX_HELD_BLANKS:]
        kept = run[:-MAX_HELD_BLANKS] if len(run) > MAX_HELD_BLANKS else ""
        return blank + head + kept if head else kept

    def _marker(self, marker: str) -> str:
        """The answer text to return for a citation rendered as ``marker`` ("" if dropped)."""
        if not marker:
            self._dropped = True  # what follows decides whether the held blanks stay
            return ""
        blank, self._blank, self._dropped = self._blank, "", False
        return blank + marker

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

    def _warn_unknown(self, citation: Citation) -> None:
        """Log a dropped citation: once per unknown id, once per run without documents."""
        warned = self._warned
        if warned is None:
            warned = self._warned = set()
        # Without documents every citation is dropped: one warning for the run.
        seen = bool(warned) if not self._documents else citation.doc_id in warned
        warned.add(citation.doc_id)
        if seen:
            return
        if not self._documents:
            logger.warning(
                "Dropped citation %s and any other: the answer cites documents but this run "
                "has none. To keep them, %s.",
                citation.raw,
                NO_DOCUMENTS_FIX,
            )
            return
        if 1 <= citation.doc_id <= len(self._documents):  # the numbering's ABSENT_DOCUMENT
            logger.warning(
                "Dropped citation %s: document id %d is no longer in the conversation",
                citation.raw,
                citation.doc_id,
            )
            return
        logger.warning(
            "Dropped citation %s: document id %d is not in 1..%d",
            citation.raw,
            citation.doc_id,
            len(self._documents),
        )

    def _cite(self, citation: Citation) -> str:
        position = citation.doc_id
        if not self._numbering.has(position):
            self._warn_unknown(citation)
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
