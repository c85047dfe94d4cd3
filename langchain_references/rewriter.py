"""Renumber and restyle citations in a stream of text (pure, no I/O).

:class:`ReferenceRewriter` drives a :class:`~langchain_references._parser.CitationParser`:
text goes in fragment by fragment, rewritten text comes out, and :meth:`ReferenceRewriter.finish`
returns the last held-back text followed by the reference list. The runnable wrapper
(:mod:`langchain_references.manager`) is a thin I/O shell around this class, shared by its
sync and async paths.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from langchain_references._parser import Citation, CitationParser
from langchain_references.styles import ReferenceStyle

__all__ = ["ReferenceRewriter", "UsedReference"]

logger = logging.getLogger(__name__)

_UNSET: Any = object()


@dataclass(slots=True)
class UsedReference:
    """A source the answer cited.

    Attributes:
        number: The reference number shown to the reader.
        source: The source id (e.g. the URL), or None for a document without one.
        document: The first cited document of this source (shown in the list).
        positions: 1-based positions, in the documents list, of every cited chunk of this
            source, in order of first citation.
    """

    number: int
    source: str | None
    document: Document
    positions: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-friendly description (without the document text)."""
        return {
            "number": self.number,
            "source": self.source,
            "title": self.document.metadata.get("title"),
            "positions": list(self.positions),
        }


class ReferenceRewriter:
    r"""Rewrite ``[N](id=K)`` citations of one answer in a reference style.

    Numbers go by order of first citation, one per distinct source id; documents without a
    source id are distinct sources. Citations of unknown documents are dropped (with a
    warning), and so are those the style formats as None.

    Args:
        documents: The documents that were put in the prompt; citation ids are 1-based
            positions in this list.
        style: The reference style.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_references.styles import TextReferenceStyle
        >>> docs = [Document("a", metadata={"source": "https://a"})]
        >>> r = ReferenceRewriter(docs, TextReferenceStyle())
        >>> r.feed("Yes [7](id=1)") + r.finish()
        'Yes [1]\\n\\n- [1] https://a'
    """

    __slots__ = (
        "_by_key",
        "_documents",
        "_finished",
        "_parser",
        "_references",
        "_sources",
        "_style",
    )

    def __init__(self, documents: Sequence[Document], style: ReferenceStyle) -> None:
        self._documents = documents
        self._style = style
        self._parser = CitationParser()
        self._by_key: dict[object, UsedReference] = {}
        self._sources: dict[int, Any] = {}
        self._references: list[UsedReference] = []
        self._finished = False

    @property
    def references(self) -> list[UsedReference]:
        """The sources cited so far, in number order."""
        return list(self._references)

    def feed(self, text: str) -> str:
        """Consume a fragment of the answer and return the rewritten text now certain.

        Args:
            text: The next fragment.

        Returns:
            Rewritten text (possibly empty while a citation may be forming).

        Raises:
            RuntimeError: If called after :meth:`finish`.
        """
        if "[" not in text and not self._parser.pending:
            return text  # fast path: plain text, untouched
        if self._finished:
            raise RuntimeError("ReferenceRewriter.feed() called after finish()")
        return self._render(self._parser.feed(text))

    def finish(self) -> str:
        """End the answer: return held-back text verbatim and the reference list.

        Returns:
            The remaining text, followed by the style's reference list.
        """
        if self._finished:
            raise RuntimeError("ReferenceRewriter.finish() called twice")
        self._finished = True
        tail = self._render(self._parser.close())
        refs = [(ref.number, ref.document) for ref in self._references]
        return tail + self._style.format_all_references(refs)

    @property
    def style(self) -> ReferenceStyle:
        """The reference style."""
        return self._style

    @property
    def parser(self) -> CitationParser:
        """The underlying parser (its ``pending`` tells whether text is held back)."""
        return self._parser

    def _render(self, events: list[str | Citation]) -> str:
        if len(events) <= 1:
            if not events:
                return ""
            only = events[0]
            if isinstance(only, str):
                return only
        parts = []
        for event in events:
            if isinstance(event, str):
                parts.append(event)
            else:
                parts.append(self._cite(event))
        return "".join(parts)

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
        document = self._documents[position - 1]
        source = self._sources.get(position, _UNSET)
        if source is _UNSET:
            source = self._sources[position] = self._style.get_source_id(document)
        key: object = source if source is not None else (position,)
        used = self._by_key.get(key)
        number = used.number if used is not None else len(self._references) + 1
        text = self._style.format_reference(number, document)
        if text is None:
            return ""
        if used is None:
            used = UsedReference(number, source, document)
            self._by_key[key] = used
            self._references.append(used)
        if position not in used.positions:
            used.positions.append(position)
        return text
