"""Gemini: grounding metadata, with claim spans in UTF-8 bytes, at the end of the answer.

``langchain-google-genai`` copies each candidate's ``grounding_metadata`` (``model_dump``
of ``google.genai.types.GroundingMetadata``) into ``response_metadata["grounding_metadata"]``:
``grounding_chunks`` (``web``/``retrieved_context``/``maps`` with ``uri`` and ``title``) and
``grounding_supports`` (a ``segment`` with ``start_index``/``end_index`` in UTF-8 *bytes*
of the answer and its ``text``, and the ``grounding_chunk_indices`` it cites). On invoke it
is on the message; when streaming it comes with the last chunk(s), after all the text.
Merged chunks concatenate every list, so only the last chunk that carries it is read (and
identical supports are read once).

The marker goes after each supported segment (the segment's offsets converted to
characters, checked against its ``text``). Since the metadata arrives at the end and the
markers go inside the text, **the adapter holds back the whole answer until the stream
ends**: Gemini citations cost streaming latency.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import BaseMessage
from typing_extensions import override

from langchain_references.native._markers import Cut, apply_cuts
from langchain_references.native._spans import SpanLocator, field_of
from langchain_references.native.base import (
    BaseNativeAdapter,
    NativeCitation,
    Piece,
    normalize_url,
)

__all__ = ["GeminiAdapter", "grounding_cuts"]

logger = logging.getLogger(__name__)

_PROVIDERS = frozenset({"google_genai", "google_vertexai", "google", "gemini"})
_CHUNK_KINDS = ("web", "retrieved_context", "maps", "image")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _citation(chunk: Any) -> NativeCitation | None:
    """Turn one grounding chunk into a citation (None when it names no source)."""
    for kind in _CHUNK_KINDS:
        body = field_of(chunk, kind)
        if body is None:
            continue
        url = _str(field_of(body, "uri"))
        title = _str(field_of(body, "title"))
        page = field_of(body, "page_number")
        if url:
            source: str | None = normalize_url(url)
        else:
            source = _str(field_of(body, "document_name")) or title
        if source is None:
            continue
        return NativeCitation(
            provider="gemini",
            source=source,
            url=url,
            title=title,
            cited_text=_str(field_of(body, "text")) if kind == "retrieved_context" else None,
            page=page if isinstance(page, int) and not isinstance(page, bool) else None,
        )
    return None


def _optional(value: Any, kind: type) -> bool:
    return value is None or (isinstance(value, kind) and not isinstance(value, bool))


def _read_support(support: Any) -> tuple[tuple[Any, ...], list[Any]] | None:
    """A support's key (its segment and chunk indices) and indices; None when malformed.

    A segment field of the wrong type (a list where a number or text belongs...) makes the
    support unusable: it is dropped with a warning, and the answer keeps its text.
    """
    segment = field_of(support, "segment")
    part, start, end, quoted = (
        field_of(segment, name) for name in ("part_index", "start_index", "end_index", "text")
    )
    indices = field_of(support, "grounding_chunk_indices")
    if indices is None:
        indices = []
    if not (
        all(_optional(value, int) for value in (part, start, end))
        and _optional(quoted, str)
        and isinstance(indices, list | tuple)
        and all(isinstance(index, int) and not isinstance(index, bool) for index in indices)
    ):
        logger.warning("malformed Gemini grounding support dropped: %.200r", support)
        return None
    return (part, start, end, quoted, tuple(indices)), list(indices)


def grounding_cuts(text: str, metadata: Any) -> list[Cut]:
    """Return a citation insertion after each supported segment of ``text``.

    A malformed support (a segment field or chunk index of the wrong type) is dropped with a
    warning. Time is linear in the text and the metadata (one :class:`SpanLocator` per text).

    Args:
        text: The whole answer text.
        metadata: Gemini grounding metadata (a dict or a ``GroundingMetadata``).

    Returns:
        The insertions, in the metadata's support order.
    """
    chunks = field_of(metadata, "grounding_chunks")
    supports = field_of(metadata, "grounding_supports")
    chunks = chunks if isinstance(chunks, list | tuple) else []
    supports = supports if isinstance(supports, list | tuple) else []
    locator = SpanLocator(text)
    cuts: list[Cut] = []
    seen: set[tuple[Any, ...]] = set()
    read_chunks: dict[int, NativeCitation | None] = {}  # a chunk is read once
    for support in supports:
        read = _read_support(support)
        if read is None:
            continue
        key, indices = read
        if key in seen:
            continue  # merged chunks repeat each support
        seen.add(key)
        citations = []
        for index in indices:
            if 0 <= index < len(chunks):
                if index not in read_chunks:
                    read_chunks[index] = _citation(chunks[index])
                citation = read_chunks[index]
                if citation is not None:
                    citations.append(citation)
            else:
                logger.debug("grounding chunk index %r out of range", index)
        if not citations:
            continue
        _, start, end, quoted, _ = key
        position = locator.span_end(start or 0, end, quoted, utf8=True)
        cuts.append(Cut(position, position, citations))
    return cuts


class GeminiAdapter(BaseNativeAdapter):
    """Places Gemini's grounding citations after the segments they support.

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> metadata = {
        ...     "grounding_chunks": [{"web": {"uri": "https://a.org/", "title": "a.org"}}],
        ...     "grounding_supports": [
        ...         {
        ...             "segment": {"start_index": 0, "end_index": 9, "text": "Zoë ran."},
        ...             "grounding_chunk_indices": [0],
        ...         }
        ...     ],
        ... }
        >>> adapter = GeminiAdapter()
        >>> adapter.feed(AIMessage("Zoë ran. Then?", response_metadata={
        ...     "grounding_metadata": metadata}))
        []
        >>> [p if isinstance(p, str) else p.source for p in adapter.finish()]
        ['Zoë ran.', 'https://a.org/', ' Then?']
    """

    provider: str = "gemini"

    __slots__ = ("_metadata", "_parts")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._metadata: Any = None

    @classmethod
    @override
    def matches(cls, message: BaseMessage) -> bool:
        """Return True for a Gemini message: its provider, or grounding metadata."""
        metadata = message.response_metadata
        provider = metadata.get("model_provider")
        if isinstance(provider, str) and provider.lower() in _PROVIDERS:
            return True
        return bool(metadata.get("grounding_metadata"))

    @override
    def _read(self, message: BaseMessage) -> list[Piece]:
        """Keep the text and the last grounding metadata; return nothing (it comes last)."""
        self._parts.append(message.text)
        metadata = message.response_metadata.get("grounding_metadata")
        if metadata:
            self._metadata = metadata
        return []

    @override
    def finish(self) -> list[Piece]:
        """End the answer; return it with citations after the supported segments."""
        text, self._parts = "".join(self._parts), []
        metadata, self._metadata = self._metadata, None
        if metadata is None:
            return [text] if text else []
        return apply_cuts(text, grounding_cuts(text, metadata))
