"""LangChain v1 output: ``citation`` annotations on standard text blocks.

A chat model built with ``output_version="v1"`` yields standard content blocks. Citations
are ``{"type": "citation", "url", "title", "start_index", "end_index", "cited_text",
"extras"}`` annotations on ``{"type": "text"}`` blocks; ``start_index``/``end_index``
locate the cited claim in that block's text. The reference marker goes after
``end_index`` (at the end of the block when the provider gives no span, as Anthropic's
translator does).

While streaming, a block's annotations may arrive after its text (OpenAI's
``response.output_text.annotation.added``, Anthropic's ``citations_delta``), so each text
block is held back until it is complete: until a text block with another ``index`` begins,
a chunk says the answer is over, or the stream ends. Blocks are short for Anthropic; an
OpenAI answer is one block, released whole at its end.

Some providers have no v1 translator for their citations, or one that loses data, so the
v1 adapter hands such runs to the provider's own adapter, which reads the raw fields the
integration keeps next to the v1 content: Perplexity's ``[k]`` markers
(``additional_kwargs["citations"]``), Cohere's spans (``additional_kwargs["citations"]``)
and Gemini's grounding metadata (``response_metadata["grounding_metadata"]``, whose
offsets are UTF-8 bytes of the whole answer, while its v1 annotations carry those bytes as
if they were characters of the first block).

The span helpers it shares with the Perplexity, Gemini and Cohere adapters are in
:mod:`~langchain_references.native._spans`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from typing_extensions import override

from langchain_references.native._markers import (
    Cut,
    apply_cuts,
    coalesce,
    is_final_chunk,
    optional_int,
    optional_str,
    text_block_cites,
)
from langchain_references.native._spans import SpanLocator, as_int
from langchain_references.native.base import (
    BaseNativeAdapter,
    NativeAdapter,
    NativeCitation,
    Piece,
    normalize_url,
)
from langchain_references.native.cohere import CohereAdapter
from langchain_references.native.gemini import GeminiAdapter
from langchain_references.native.perplexity import PerplexityAdapter

__all__ = ["V1Adapter"]

logger = logging.getLogger(__name__)

_GEMINI_EXTRAS = "google_ai_metadata"
_CITATION_TYPES = frozenset({"citation"})

#: An inline Markdown link the model wrote for a citation, ``([title](url))`` (OpenAI's
#: web-search answers: the annotation's span is exactly this link).
_LINK_SPAN_RE = re.compile(r"\(?\[[^\]\n]*\]\([^()\s]+\)\)?")


def _citation_from_annotation(annotation: Mapping[str, Any]) -> NativeCitation:
    """Turn a v1 ``citation`` annotation into a :class:`NativeCitation`."""
    extras_value = annotation.get("extras")
    extras: dict[str, Any] = dict(extras_value) if isinstance(extras_value, Mapping) else {}
    url = optional_str(dict(annotation), "url")
    title = optional_str(dict(annotation), "title") or optional_str(extras, "document_title")
    document_index = optional_int(extras, "document_index")
    source: str | None
    if url:
        source = normalize_url(url)
    elif document_index is not None:
        source = None
    else:
        source = optional_str(extras, "file_id", "source") or title
    cited_text = optional_str(dict(annotation), "cited_text")
    if _GEMINI_EXTRAS in extras:
        cited_text = None  # Gemini's v1 cited_text is the answer's own segment
    return NativeCitation(
        provider="v1",
        source=source,
        url=url,
        title=title,
        cited_text=cited_text,
        page=optional_int(extras, "start_page_number", "page_number", "page"),
        document_index=document_index,
        start=optional_int(extras, "start_char_index"),
        end=optional_int(extras, "end_char_index"),
    )


class _Block:
    """One text block being assembled from chunks."""

    __slots__ = ("annotations", "parts", "text")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.text = ""
        self.annotations: list[Mapping[str, Any]] = []

    def pieces(self) -> list[Piece]:
        self.text = "".join(self.parts)
        locator = SpanLocator(self.text)
        cuts: list[Cut] = []
        for annotation in self.annotations:
            link = self._link_cut(annotation)
            if link is not None:
                cuts.append(link)
                continue
            extras = annotation.get("extras")
            utf8 = isinstance(extras, Mapping) and _GEMINI_EXTRAS in extras
            quoted = annotation.get("cited_text") if utf8 else None
            position = locator.span_end(
                annotation.get("start_index"),
                annotation.get("end_index"),
                quoted if isinstance(quoted, str) else None,
                utf8=utf8,
            )
            cuts.append(Cut(position, position, [_citation_from_annotation(annotation)]))
        return apply_cuts(self.text, cuts)

    def _link_cut(self, annotation: Mapping[str, Any]) -> Cut | None:
        """A cut replacing the Markdown link to the cited URL that the span covers, if any."""
        start, end = as_int(annotation.get("start_index")), as_int(annotation.get("end_index"))
        url = annotation.get("url")
        if start is None or end is None or not isinstance(url, str) or not url:
            return None
        if not 0 <= start < end <= len(self.text):
            return None
        span = self.text[start:end]
        if url not in span or not _LINK_SPAN_RE.fullmatch(span):
            return None
        while start > 0 and self.text[start - 1] in " \t":
            start -= 1
        return Cut(start, end, [_citation_from_annotation(annotation)])


def _delegate_for(message: BaseMessage) -> NativeAdapter | None:
    """The provider adapter that reads this v1 run better than its annotations, if any."""
    for adapter in (GeminiAdapter, PerplexityAdapter, CohereAdapter):
        if adapter.matches(message):
            return adapter()
    return None


class V1Adapter(BaseNativeAdapter):
    """Reads LangChain v1 content blocks and their ``citation`` annotations.

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> message = AIMessage(
        ...     content=[
        ...         {
        ...             "type": "text",
        ...             "text": "Paris is in France. It is big.",
        ...             "annotations": [
        ...                 {"type": "citation", "url": "https://a.org/p", "end_index": 19}
        ...             ],
        ...         }
        ...     ],
        ...     response_metadata={"output_version": "v1"},
        ... )
        >>> adapter = V1Adapter()
        >>> pieces = adapter.feed(message) + adapter.finish()
        >>> [p if isinstance(p, str) else p.source for p in pieces]
        ['Paris is in France.', 'https://a.org/p', ' It is big.']
    """

    provider: str = "v1"

    __slots__ = ("_blocks", "_current", "_delegate", "_fed", "_serial")

    def __init__(self) -> None:
        self._blocks: dict[Any, _Block] = {}
        self._current: Any = None
        self._serial = 0
        self._fed = False
        self._delegate: NativeAdapter | None = None

    @classmethod
    @override
    def matches(cls, message: BaseMessage) -> bool:
        """Return True for v1 output: ``output_version="v1"`` or ``citation`` annotations."""
        if message.response_metadata.get("output_version") == "v1":
            return True
        return text_block_cites(message, "annotations", _CITATION_TYPES)

    @override
    def _read(self, message: BaseMessage) -> list[Piece]:
        """Hold each text block until it is complete; return the completed ones' pieces."""
        if not self._fed:
            self._fed = True
            self._delegate = _delegate_for(message)
        if self._delegate is not None:
            return self._delegate.feed(message)
        out: list[Piece] = []
        content = message.content
        items: list[Any] = [content] if isinstance(content, str) else list(content)
        for item in items:
            if isinstance(item, str):
                if item:
                    out.extend(self._add("__str__", item, ()))
                continue
            if not isinstance(item, dict) or item.get("type") != "text":
                continue
            if "index" in item:
                key: Any = ("index", item["index"])
            else:
                self._serial += 1  # an unindexed block merges with nothing
                key = ("serial", self._serial)
            text = item.get("text")
            annotations = [
                a
                for a in item.get("annotations") or ()
                if isinstance(a, Mapping) and a.get("type") == "citation"
            ]
            out.extend(self._add(key, text if isinstance(text, str) else "", annotations))
        if is_final_chunk(message):
            out.extend(self._close_all())
        return coalesce(out)

    @override
    def finish(self) -> list[Piece]:
        """End the answer; return the blocks still open."""
        if self._delegate is not None:
            return self._delegate.finish()
        return coalesce(self._close_all())

    def _add(self, key: Any, text: str, annotations: Any) -> list[Piece]:
        out: list[Piece] = []
        block = self._blocks.get(key)
        if block is None:
            if self._current is not None and self._current != key:
                out.extend(self._close(self._current))
            block = self._blocks[key] = _Block()
        elif self._current != key and self._current is not None:
            logger.debug("text block %r resumed after block %r", key, self._current)
        self._current = key
        block.parts.append(text)
        block.annotations.extend(annotations)
        return out

    def _close(self, key: Any) -> list[Piece]:
        block = self._blocks.pop(key, None)
        if self._current == key:
            self._current = None
        return block.pieces() if block is not None else []

    def _close_all(self) -> list[Piece]:
        out: list[Piece] = []
        for key in list(self._blocks):
            out.extend(self._close(key))
        return out
