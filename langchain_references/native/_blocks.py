"""The reading shared by adapters whose stream sends text blocks by content index.

Anthropic (Messages API) and OpenAI (Responses API) stream an answer as text blocks, each
chunk carrying its block's content ``index``; a block's citations (a ``citations`` or an
``annotations`` list on the block) may arrive before, with or after its text. So the text of
the current block is held until the block is known to be over: a chunk for another index, a
chunk that closes the block (:meth:`IndexedBlockAdapter._closes_block`), the final chunk, or
:meth:`IndexedBlockAdapter.finish`. A whole message (``invoke``) is read at once, and plain
string content streams through (:meth:`IndexedBlockAdapter._stream_text`).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Final

from langchain_core.messages import AIMessageChunk, BaseMessage
from typing_extensions import override

from langchain_references.native._markers import (
    as_dicts,
    coalesce,
    content_items,
    has_provider_citations,
    is_final_chunk,
)
from langchain_references.native.base import BaseNativeAdapter, Piece

__all__ = ["IndexedBlockAdapter"]

_NO_BLOCK: Final = object()


class IndexedBlockAdapter(BaseNativeAdapter):
    """Holds each streamed text block until it is over, then resolves its citations.

    A subclass sets :attr:`provider`, :attr:`citation_field` and :attr:`citation_types`, and
    implements :meth:`_block_pieces` (a finished block's text and raw citation items to
    pieces).
    """

    #: The text-block key of the provider's citation items.
    citation_field: ClassVar[str]
    #: The ``type`` values of the provider's citation items.
    citation_types: ClassVar[frozenset[str]]

    def __init__(self) -> None:
        self._index: object = _NO_BLOCK
        self._text: list[str] = []
        self._raw: list[dict[str, Any]] = []

    @classmethod
    @override
    def matches(cls, message: BaseMessage) -> bool:
        """Return True for the provider's output (not v1) or text blocks with its citations."""
        return has_provider_citations(message, cls.provider, cls.citation_field, cls.citation_types)

    @abstractmethod
    def _block_pieces(self, text: str, raw: list[dict[str, Any]]) -> list[Piece]:
        """Return a finished block's pieces: ``text`` with its citation items ``raw`` placed."""

    def _closes_block(self, item: dict[str, Any]) -> bool:
        """Tell whether a text block fragment says that no citation can follow for its block."""
        return False

    def _stream_text(self, text: str) -> str:
        """Return the releasable part of streamed string content (all of it by default)."""
        return text

    def _whole_block(self, item: dict[str, Any]) -> list[Piece]:
        """Return the pieces of a complete text block."""
        text = str(item.get("text") or "")
        return self._block_pieces(text, list(as_dicts(item.get(self.citation_field))))

    @override
    def _read(self, message: BaseMessage) -> list[Piece]:
        """Hold the text blocks of a chunk; read a whole message at once."""
        items = content_items(message)
        if not isinstance(message, AIMessageChunk):
            pieces = self._flush()
            for item in items:
                if isinstance(item, str):
                    pieces.extend(self._block_pieces(item, []))
                elif item.get("type") == "text":
                    pieces.extend(self._whole_block(item))
            return coalesce(pieces)
        pieces = []
        for item in items:
            if isinstance(item, str):
                pieces.extend(self._flush_block())
                pieces.append(self._stream_text(item))
                continue
            index = item.get("index")
            if item.get("type") != "text":
                if index is None or index != self._index:
                    pieces.extend(self._flush())
                continue
            if index is None:
                # A complete block outside any indexed stream.
                pieces.extend(self._flush())
                pieces.extend(self._whole_block(item))
                continue
            if index != self._index:
                pieces.extend(self._flush())
                self._index = index
            self._text.append(str(item.get("text") or ""))
            self._raw.extend(as_dicts(item.get(self.citation_field)))
            if self._closes_block(item):
                pieces.extend(self._flush_block())
        if is_final_chunk(message):
            pieces.extend(self._flush())
        return coalesce(pieces)

    @override
    def finish(self) -> list[Piece]:
        """End the answer; return the held block and any held string text."""
        return coalesce(self._flush())

    def _flush_block(self) -> list[Piece]:
        """Close the held block and return its pieces."""
        if self._index is _NO_BLOCK and not self._text:
            return []
        pieces = self._block_pieces("".join(self._text), self._raw)
        self._index = _NO_BLOCK
        self._text = []
        self._raw = []
        return pieces

    def _flush(self) -> list[Piece]:
        """Close the held block and anything else held back; return their pieces."""
        return self._flush_block()
