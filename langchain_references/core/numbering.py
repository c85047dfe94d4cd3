"""Number cited sources and remember what was cited (pure, no I/O, no text markers).

:class:`SourceNumbering` is the one numbering registry of the package: the streaming
:class:`~langchain_references.core.rewriter.ReferenceRewriter` numbers its ``[n](id=k)`` and
provider-native citations through it, and the fact-check report and the article endpoint cite
their passages through it directly.

Numbers go by order of first citation, one per distinct source id (the style's
:meth:`~langchain_references.core.styles.ReferenceStyle.get_source_id`); documents without a source
id are distinct sources, one per position in the documents list, and, for a document cited
from outside the list (a provider's citation), one per distinct content and metadata: citing
the same unsourced document again reuses its number. A citation the style formats as None
takes no number and is not recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.documents import Document

from langchain_references.core.styles import QUOTE_KEY, ReferenceStyle

__all__ = ["ABSENT_DOCUMENT", "SourceNumbering", "UsedReference"]

_UNSET: Any = object()

#: Stands, in a documents list, for an id whose document is no longer there (an agent's tool
#: result summarized away): a citation of it is dropped as one of an unknown id. Compared by
#: identity.
ABSENT_DOCUMENT: Final = Document(page_content="", metadata={"absent": True})


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


class SourceNumbering:
    r"""Number the sources cited from a list of documents, and style their markers.

    Args:
        documents: The citable documents; a position is a 1-based index in this list.
        style: The reference style (source ids, markers and the reference list).

    Examples:
        >>> from langchain_core.documents import Document
        >>> from langchain_references.core.styles import TextReferenceStyle
        >>> docs = [
        ...     Document("a", metadata={"source": "https://a"}),
        ...     Document("b", metadata={"source": "https://b"}),
        ...     Document("c", metadata={"source": "https://a"}),
        ... ]
        >>> numbering = SourceNumbering(docs, TextReferenceStyle())
        >>> [numbering.cite(2), numbering.cite(3), numbering.cite(1)]
        ['[1]', '[2]', '[2]']
        >>> numbering.number(1), numbering.references[1].positions
        (2, [3, 1])
        >>> numbering.format_references()
        '\n\n- [1] https://b\n- [2] https://a'
    """

    __slots__ = (
        "_by_key",
        "_documents",
        "_numbers",
        "_positions",
        "_references",
        "_sources",
        "_style",
    )

    def __init__(self, documents: Sequence[Document], style: ReferenceStyle) -> None:
        self._documents = documents
        self._style = style
        self._by_key: dict[object, UsedReference] = {}  # source id (or identity) -> reference
        self._sources: dict[int, Any] = {}  # position -> source id, read once per position
        self._numbers: dict[int, int] = {}  # cited position -> its number
        self._positions: dict[int, int] | None = None  # id(document) -> first position, lazily
        self._references: list[UsedReference] = []

    @property
    def documents(self) -> Sequence[Document]:
        """The citable documents."""
        return self._documents

    @property
    def style(self) -> ReferenceStyle:
        """The reference style."""
        return self._style

    @property
    def references(self) -> list[UsedReference]:
        """The sources cited so far, in number order."""
        return list(self._references)

    def has(self, position: int) -> bool:
        """Whether a 1-based position holds a citable document (in range, not absent)."""
        documents = self._documents
        return 1 <= position <= len(documents) and documents[position - 1] is not ABSENT_DOCUMENT

    def number(self, position: int) -> int | None:
        """The number of the document at a 1-based position, or None if it was not cited."""
        return self._numbers.get(position)

    def cite(self, position: int, *, quote: str | None = None) -> str:
        """Cite the document at a 1-based position in the documents list.

        Args:
            position: The document's 1-based position.
            quote: The cited passage, passed to a deep-link style under
                :data:`~langchain_references.core.styles.QUOTE_KEY`.

        Returns:
            The styled marker ("" if the style formats the citation as None: then nothing is
            numbered or recorded).

        Raises:
            IndexError: If ``position`` is not in ``1..len(documents)``, or its document is
                :data:`ABSENT_DOCUMENT`.
        """
        if not self.has(position):
            raise IndexError(f"position {position} is not in 1..{len(self._documents)}")
        return self._cite(self._documents[position - 1], position, quote)

    def cite_document(self, document: Document, *, quote: str | None = None) -> str:
        """Cite a document, listed or not (e.g. a provider's own citation).

        A document of the list (the same object) is cited at its position; any other is
        numbered by its source id, or, if it has none, by its content and metadata: the same
        unsourced document cited again (an equal one, as a provider's citations rebuild it)
        keeps its number.

        Args:
            document: The cited document.
            quote: The cited passage (see :meth:`cite`).

        Returns:
            The styled marker (see :meth:`cite`).
        """
        positions = self._positions
        if positions is None:  # built once: each citation then costs one look-up
            positions = self._positions = {}
            for i, doc in enumerate(self._documents, start=1):
                positions.setdefault(id(doc), i)
        documents = self._documents
        position = positions.get(id(document))
        if position is not None and (
            position > len(documents) or documents[position - 1] is not document
        ):  # the list changed since: look the document up again
            position = next(
                (i for i, doc in enumerate(documents, start=1) if doc is document), None
            )
        return self._cite(document, position, quote)

    def format_references(self) -> str:
        """The style's reference list of the sources cited so far."""
        return self._style.format_all_references(
            [(ref.number, ref.document) for ref in self._references]
        )

    def _cite(self, document: Document, position: int | None, quote: str | None) -> str:
        """Number and style one citation of ``document`` (at 1-based ``position``, if listed)."""
        style = self._style
        if position is not None:
            source = self._sources.get(position, _UNSET)
            if source is _UNSET:
                source = self._sources[position] = style.get_source_id(document)
            key: object = source if source is not None else (position,)
        else:
            source = style.get_source_id(document)
            key = source if source is not None else _content_key(document)
        used = self._by_key.get(key)
        number = used.number if used is not None else len(self._references) + 1
        shown = document
        if quote and style.deep_links:
            shown = Document(
                page_content=document.page_content,
                metadata={**document.metadata, QUOTE_KEY: quote},
                id=document.id,
            )
        text = style.format_reference(number, shown)
        if text is None:
            return ""
        if used is None:
            used = UsedReference(number, source, document, [] if position is None else [position])
            self._by_key[key] = used
            self._references.append(used)
            if position is not None:
                self._numbers[position] = number
        elif position is not None and position not in self._numbers:
            used.positions.append(position)
            self._numbers[position] = number
        return text


def _content_key(document: Document) -> tuple[str, str, str]:
    """The numbering key of an unlisted document without a source id: what it holds.

    Equal documents (content and metadata) share a number however many times, and as however
    many objects, they are cited; a key by object identity gave each citation a new number.
    """
    metadata = document.metadata
    items = sorted(metadata.items(), key=lambda item: str(item[0])) if metadata else ()
    return ("unsourced", document.page_content, repr(items))
