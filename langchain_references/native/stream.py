"""One run's provider citations, rendered through the run's rewriter (sans-IO).

:class:`NativeRun` sits between a chat model's message chunks and the references rewriter:
it picks the adapter (``native="auto"``: from the first chunk that tells the provider),
feeds it each chunk, and renders the adapter's pieces: text goes through the rewriter (so
``[n](id=k)`` citations the model wrote are still handled), each :class:`NativeCitation`
is numbered by the same rewriter, so both kinds share one numbering and one reference list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage

from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.native.base import NativeAdapter, NativeCitation, Piece
from langchain_references.native.registry import select_adapter

__all__ = ["NativeRun"]

# Content blocks whose text the adapter renders (the rest, tool calls, search results,
# images, are kept as they are).
_TEXT_TYPES = frozenset({"text", "output_text"})


class NativeRun:
    """Render one answer's provider-native citations in the run's numbering and style.

    Args:
        native: ``"auto"`` or an adapter name (see
            :data:`~langchain_references.native.registry.ADAPTER_NAMES`).
        rewriter: The run's rewriter.
        documents: The run's documents (document-index citations map into them).
        feed: How answer text is fed (the rewriter's ``feed``, or the session's, which also
            feeds the streaming citation check).
        cite: How a provider's citation is rendered, ``cite(document, quote)`` (by default
            the rewriter's ``cite``; the session's keeps it in order with held text).
    """

    __slots__ = (
        "_adapter",
        "_cite_document",
        "_decided",
        "_documents",
        "_feed",
        "_last_index",
        "_native",
        "_rewriter",
    )

    def __init__(
        self,
        native: str,
        rewriter: ReferenceRewriter,
        documents: Sequence[Document],
        feed: Callable[[str], str],
        cite: Callable[[Document, str | None], str] | None = None,
    ) -> None:
        self._native = native
        self._cite_document = cite if cite is not None else self._rewriter_cite
        self._rewriter = rewriter
        self._documents = documents
        self._feed = feed
        self._adapter: NativeAdapter | None = None
        self._decided = False  # True once the run is known to have no adapter
        self._last_index: Any = None

    @property
    def idle(self) -> bool:
        """Whether the run is known to have no adapter (it renders nothing, ever)."""
        return self._adapter is None and self._decided

    def rewrite(self, message: BaseMessage) -> str | list[Any] | None:
        """Return the new content of ``message``, or None when no adapter reads it.

        Args:
            message: A message chunk, or the whole message of a non-streaming model.

        Returns:
            The content with the provider's citation markup replaced by styled markers
            (a string for string content; for list content, the non-text blocks and one text
            block), or None when no adapter reads this run (the caller then rewrites the
            content as usual). With ``native="auto"`` the adapter is picked from the first
            chunk that names its provider or shows its citation shapes; once text has gone
            by without one, the run has none.
        """
        if self._adapter is None:
            if self._decided:
                return None
            self._adapter = select_adapter(message, self._native)
            if self._adapter is None:
                self._decided = _has_text(message.content)
                return None
        text = self.render(self._adapter.feed(message))
        content = message.content
        if isinstance(content, str):
            return text
        blocks: list[Any] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") in _TEXT_TYPES:
                if "index" in block:
                    self._last_index = block["index"]
                continue
            if isinstance(block, str):
                continue
            blocks.append(block)
        if text:
            text_block: dict[str, Any] = {"type": "text", "text": text}
            if self._last_index is not None:
                text_block["index"] = self._last_index
            blocks.insert(0, text_block)
        return blocks

    def render(self, pieces: list[Piece]) -> str:
        """Render adapter pieces: text through the rewriter, citations as numbered markers.

        Args:
            pieces: What the adapter returned.

        Returns:
            The rendered text.
        """
        parts: list[str] = []
        for piece in pieces:
            if isinstance(piece, str):
                if piece:
                    parts.append(self._feed(piece))
            else:
                parts.append(self._cite(piece))
        return "".join(parts)

    def finish(self) -> str:
        """Render what the adapter still held back (call once, before the rewriter's finish).

        Returns:
            The rendered text (empty when no adapter was picked).
        """
        if self._adapter is None:
            return ""
        return self.render(self._adapter.finish())

    def _cite(self, citation: NativeCitation) -> str:
        document = citation.to_document(self._documents)
        return self._cite_document(document, citation.cited_text)

    def _rewriter_cite(self, document: Document, quote: str | None) -> str:
        return self._rewriter.cite(document, quote=quote)


def _has_text(content: str | list[Any]) -> bool:
    if isinstance(content, str):
        return bool(content)
    return any(
        (isinstance(block, str) and block)
        or (isinstance(block, dict) and block.get("type") in _TEXT_TYPES and block.get("text"))
        for block in content
    )
