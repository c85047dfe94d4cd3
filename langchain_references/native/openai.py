"""OpenAI Responses API citations (through ``langchain-openai``) as native pieces.

Shapes read (``langchain-openai`` 1.x, ``output_version`` ``"responses/v1"`` (the default) and
``"v0"``; messages converted to LangChain's standard ``"v1"`` content are not claimed):

* whole message (``invoke``): one block per ``output_text`` part,
  ``{"type": "text", "text": ..., "annotations": [...], "id": "msg_..."}`` (``v0`` drops the
  ``id``), next to ``reasoning`` / ``web_search_call`` / ``file_search_call`` /
  ``function_call`` blocks. Annotation dicts are the SDK's, except that a ``file_citation``'s
  ``index`` is renamed ``file_index`` (``index`` is LangChain's merge key).
* stream: ``response.output_text.delta`` gives ``[{"type": "text", "text": ..., "index": i}]``;
  ``response.output_text.annotation.added`` gives
  ``[{"type": "text", "annotations": [annotation], "index": i}]`` after the text it points
  at; ``response.output_text.done`` gives ``[{"type": "text", "text": "", "id": item_id,
  "index": i}]`` (``v0``: without ``id``); ``response.completed`` gives an empty chunk with
  ``chunk_position="last"``. ``i`` is LangChain's content index (one per output text part);
  annotation positions count characters in that part's text.
* Chat Completions messages (also ``model_provider == "openai"``) have string content; it
  carries no annotations through ``langchain-openai`` and only has leaked markers removed.

Placement: a ``url_citation`` (or ``container_file_citation``) replaces its
``[start_index, end_index)`` span, which is the model's own inline link ``([domain](url))``;
if that span does not look like a link (no ``(``/``[`` opening it, no ``](`` and no ``http``)
the text is kept and the citation inserted at ``end_index``. A ``file_citation`` is inserted
at its index. Leaked ``【…†…】`` markers and private-use ``U+E200 cite … U+E201`` runs are
replaced by the citations whose span overlaps them or whose index touches them, and dropped
(with the blank space before them) otherwise. ``file_path`` annotations are not citations.

Hold-back policy: annotations arrive after the text they point at and may point anywhere in
the part, so the text of the current output text part is held until the part is done (its
``done`` chunk, a chunk for another content index, the final chunk, or :meth:`finish`).
String content streams through with only a possible marker's beginning held back.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from typing_extensions import override

from langchain_references.native._blocks import IndexedBlockAdapter
from langchain_references.native._markers import (
    Cut,
    MarkerStripper,
    apply_cuts,
    find_marker_runs,
    optional_int,
    optional_str,
)
from langchain_references.native.base import NativeCitation, Piece, normalize_url

__all__ = ["OpenAIAdapter", "citation_from_openai", "resolve_annotations"]

logger = logging.getLogger(__name__)

PROVIDER: Final = "openai"

#: Annotation types that are citations (``file_path`` is a download link, not a source).
CITATION_TYPES: Final = frozenset({"url_citation", "file_citation", "container_file_citation"})


def citation_from_openai(raw: dict[str, Any]) -> NativeCitation | None:
    """Turn one Responses API annotation (a dict) into a :class:`NativeCitation`.

    Args:
        raw: The annotation as it appears in a text block's ``annotations`` list.

    Returns:
        The record, or None for an annotation that is not a citation.

    Examples:
        >>> citation_from_openai(
        ...     {"type": "url_citation", "url": "https://a.org/x?utm_source=openai",
        ...      "title": "A", "start_index": 3, "end_index": 9}
        ... ).source
        'https://a.org/x'
    """
    kind = raw.get("type")
    if kind in ("file_citation", "container_file_citation"):
        file_id = optional_str(raw, "file_id")
        if file_id is None:
            logger.debug("skipping a %s without file_id", kind)
            return None
        return NativeCitation(
            provider=PROVIDER, source=file_id, title=optional_str(raw, "filename")
        )
    url = optional_str(raw, "url")
    if url is not None and kind not in ("file_path",):
        return NativeCitation(
            provider=PROVIDER,
            source=normalize_url(url),
            url=url,
            title=optional_str(raw, "title"),
        )
    logger.debug("skipping an OpenAI annotation of type %r", kind)
    return None


def _looks_like_link(span: str) -> bool:
    """Return True when ``span`` is plausibly the model's inline link (safe to replace)."""
    stripped = span.strip()
    return stripped.startswith(("(", "[")) or "](" in stripped or "http" in stripped


def resolve_annotations(text: str, annotations: list[dict[str, Any]]) -> list[Piece]:
    """Place a finished output text part's annotations; remove leaked citation markers.

    Args:
        text: The part's whole text.
        annotations: Its annotations (LangChain's dicts), in order.

    Returns:
        Text and citations in order.

    Examples:
        >>> text = "Paris is big ([a.org](https://a.org/?utm_source=openai))."
        >>> link = {"type": "url_citation", "url": "https://a.org/?utm_source=openai",
        ...         "title": "A", "start_index": 13, "end_index": 56}
        >>> [p if isinstance(p, str) else p.source for p in resolve_annotations(text, [link])]
        ['Paris is big ', 'https://a.org/', '.']
    """
    markers = find_marker_runs(text)
    cuts: list[Cut] = list(markers)
    for raw in annotations:
        citation = citation_from_openai(raw)
        if citation is None:
            continue
        start = optional_int(raw, "start_index")
        end = optional_int(raw, "end_index")
        if start is not None and end is not None and raw.get("type") != "file_citation":
            overlaps_marker = any(m.start < end and start < m.end for m in markers)
            if start < end and (overlaps_marker or _looks_like_link(text[start:end])):
                cuts.append(Cut(start, end, [citation]))
            else:
                cuts.append(Cut(end, end, [citation]))
            continue
        point = optional_int(raw, "file_index", "index")
        if point is None:
            point = end if end is not None else len(text)
        marker = next((m for m in markers if m.start <= point <= m.end), None)
        if marker is not None:
            marker.citations.append(citation)
        else:
            cuts.append(Cut(point, point, [citation]))
    return apply_cuts(text, cuts)


class OpenAIAdapter(IndexedBlockAdapter):
    """Reads the citations of one OpenAI answer (see the module docstring for the shapes).

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> adapter = OpenAIAdapter()
        >>> pieces = adapter.feed(AIMessage(content=[{"type": "text", "text": "See it.",
        ...     "annotations": [{"type": "file_citation", "file_id": "file-1",
        ...                      "filename": "a.pdf", "file_index": 6}]}]))
        >>> [p if isinstance(p, str) else p.source for p in pieces]
        ['See it', 'file-1', '.']
    """

    provider: str = PROVIDER
    citation_field = "annotations"
    citation_types = CITATION_TYPES

    def __init__(self) -> None:
        super().__init__()
        self._stripper = MarkerStripper()

    @override
    def _block_pieces(self, text: str, raw: list[dict[str, Any]]) -> list[Piece]:
        """Place the part's annotations (see :func:`resolve_annotations`)."""
        return resolve_annotations(text, raw)

    @override
    def _closes_block(self, item: dict[str, Any]) -> bool:
        """``response.output_text.done`` (an ``id``): no annotation can follow for this part."""
        return "id" in item

    @override
    def _stream_text(self, text: str) -> str:
        """Release string content with leaked markers removed (a marker's start held)."""
        return self._stripper.feed(text)

    @override
    def _flush(self) -> list[Piece]:
        """Close the held part and the held string text; return their pieces."""
        return [self._stripper.close(), *self._flush_block()]
