"""Anthropic citations (Messages API through ``langchain-anthropic``) as native pieces.

Claude cites by content block: a text block that carries ``citations`` is one cited span, and
each of its citations is a source for the whole block. The reference marker therefore goes at
the end of the cited block (before the block's trailing blank space).

Shapes read (``langchain-anthropic`` 1.x, content of ``AIMessage`` / ``AIMessageChunk``):

* whole message (``invoke``): a list of blocks such as
  ``{"type": "text", "text": "...", "citations": [{"type": "char_location", ...}]}``, next to
  ``server_tool_use`` / ``web_search_tool_result`` / ``thinking`` / ``tool_use`` blocks that carry
  no answer text; a single uncited text block comes as a plain string.
* stream: one chunk per event. ``content_block_start`` of a text block with initial text gives
  ``[{"type": "text", "text": ..., "index": i}]``; ``text_delta`` gives
  ``[{"type": "text", "text": ..., "index": i}]``; ``citations_delta`` gives
  ``[{"type": "text", "citations": [citation], "index": i}]`` (no ``text``);
  ``content_block_stop`` gives no chunk at all; ``message_delta`` gives an empty chunk with
  ``stop_reason`` and ``chunk_position="last"``. Without documents, tools or thinking in the
  request the integration streams plain string content instead, which cannot hold citations.

Citation locations: ``char_location`` (``document_index``, ``start_char_index``,
``end_char_index``), ``page_location`` (``document_index``, ``start_page_number``),
``content_block_location`` (``document_index``), ``search_result_location`` (``source``,
``title``) and ``web_search_result_location`` (``url``, ``title``), all with ``cited_text``.

Hold-back policy: the text of the current text block is held until the block is known to be
over, because a ``citations_delta`` may arrive before or after the block's text. A block is over
when a chunk for another block index arrives, when the final chunk (stop reason) arrives, or at
:meth:`AnthropicAdapter.finish`. Text blocks without citations are held the same way (nothing
tells in advance that no citation will come), so the adapter's output is one block behind the
stream; plain string chunks pass through at once.

In the string mode (a request without tools, thinking or citation-enabled ``document`` blocks,
e.g. one whose sources are ``search_result`` blocks) the integration still sends each
``citations_delta`` as a list chunk, but the text carries no block index: such a citation is
placed where it arrives in the stream (the end of its block when Claude sends it after the
block's text, as in Anthropic's documented example; the start of the block otherwise).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from typing_extensions import override

from langchain_references.native._blocks import IndexedBlockAdapter
from langchain_references.native._markers import coalesce, optional_int, optional_str
from langchain_references.native.base import NativeCitation, Piece, normalize_url

__all__ = ["AnthropicAdapter", "citation_from_anthropic"]

logger = logging.getLogger(__name__)

PROVIDER: Final = "anthropic"

#: The ``type`` of every citation location Anthropic returns on text blocks.
CITATION_TYPES: Final = frozenset(
    {
        "char_location",
        "page_location",
        "content_block_location",
        "search_result_location",
        "web_search_result_location",
    }
)

_DOCUMENT_TYPES: Final = frozenset({"char_location", "page_location", "content_block_location"})
_TRAILING_SPACE: Final = " \t\r\n"


def _is_web_url(value: str) -> bool:
    """Return True for an ``http(s)`` URL."""
    return value.lower().startswith(("http://", "https://"))


def citation_from_anthropic(raw: dict[str, Any]) -> NativeCitation | None:
    """Turn one Anthropic citation location (a dict) into a :class:`NativeCitation`.

    Args:
        raw: The citation as it appears in a text block's ``citations`` list.

    Returns:
        The record, or None for a location this adapter cannot place (logged at debug).

    Examples:
        >>> citation_from_anthropic(
        ...     {"type": "web_search_result_location", "url": "https://a.org/?utm_source=x",
        ...      "title": "A", "cited_text": "a", "encrypted_index": "e"}
        ... ).source
        'https://a.org/'
    """
    kind = raw.get("type")
    cited_text = optional_str(raw, "cited_text")
    if kind in _DOCUMENT_TYPES or (kind not in CITATION_TYPES and "document_index" in raw):
        page = optional_int(raw, "start_page_number") if kind == "page_location" else None
        start = optional_int(raw, "start_char_index") if kind == "char_location" else None
        end = optional_int(raw, "end_char_index") if kind == "char_location" else None
        return NativeCitation(
            provider=PROVIDER,
            source=optional_str(raw, "file_id"),
            title=optional_str(raw, "document_title"),
            cited_text=cited_text,
            page=page,
            document_index=optional_int(raw, "document_index"),
            start=start,
            end=end,
        )
    if kind == "search_result_location":
        source = optional_str(raw, "source")
        is_url = source is not None and _is_web_url(source)
        return NativeCitation(
            provider=PROVIDER,
            source=normalize_url(source) if source is not None and is_url else source,
            url=source if is_url else None,
            title=optional_str(raw, "title"),
            cited_text=cited_text,
        )
    url = optional_str(raw, "url")
    if url is not None:
        return NativeCitation(
            provider=PROVIDER,
            source=normalize_url(url),
            url=url,
            title=optional_str(raw, "title"),
            cited_text=cited_text,
        )
    logger.debug("skipping an Anthropic citation of unknown type %r", kind)
    return None


def _cited_block(text: str, citations: list[NativeCitation]) -> list[Piece]:
    """Return a finished block's pieces: its text with the citations at its end.

    The citations go before the block's trailing blank space, so ``"is green. "`` cited by
    ``c`` gives ``["is green.", c, " "]``.
    """
    if not citations:
        return coalesce([text])
    body = text.rstrip(_TRAILING_SPACE)
    return coalesce([body, *citations, text[len(body) :]])


class AnthropicAdapter(IndexedBlockAdapter):
    """Reads the citations of one Claude answer (see the module docstring for the shapes).

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> adapter = AnthropicAdapter()
        >>> pieces = adapter.feed(AIMessage(content=[
        ...     {"type": "text", "text": "Grass is green. ", "citations": [
        ...         {"type": "char_location", "cited_text": "The grass is green.",
        ...          "document_index": 0, "start_char_index": 0, "end_char_index": 19}]},
        ...     {"type": "text", "text": "Fine."}]))
        >>> [p if isinstance(p, str) else p.document_index for p in pieces]
        ['Grass is green.', 0, ' Fine.']
    """

    provider: str = PROVIDER
    citation_field = "citations"
    citation_types = CITATION_TYPES

    @override
    def _block_pieces(self, text: str, raw: list[dict[str, Any]]) -> list[Piece]:
        """Place the block's citations at its end (see :func:`_cited_block`)."""
        records = (citation_from_anthropic(item) for item in raw)
        return _cited_block(text, [record for record in records if record is not None])
