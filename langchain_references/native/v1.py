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

This module also holds the span helpers the Perplexity, Gemini and Cohere adapters share.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from langchain_core.messages import BaseMessage
from typing_extensions import override

from langchain_references._parser import CITATION_RE
from langchain_references.native._markers import (
    Cut,
    apply_cuts,
    coalesce,
    is_final_chunk,
    optional_int,
    optional_str,
    text_block_cites,
)
from langchain_references.native.base import (
    BaseNativeAdapter,
    NativeAdapter,
    NativeCitation,
    Piece,
    normalize_url,
)

__all__ = [
    "SpanLocator",
    "V1Adapter",
    "char_offset",
    "field_of",
    "span_end",
]

logger = logging.getLogger(__name__)

_GEMINI_EXTRAS = "google_ai_metadata"
_CITATION_TYPES = frozenset({"citation"})

#: An inline Markdown link the model wrote for a citation, ``([title](url))`` (OpenAI's
#: web-search answers: the annotation's span is exactly this link).
_LINK_SPAN_RE = re.compile(r"\(?\[[^\]\n]*\]\([^()\s]+\)\)?")


def field_of(obj: Any, name: str) -> Any:
    """Return ``obj[name]`` for a mapping, else ``obj.name`` (None when absent).

    Integrations keep provider payloads either as dicts or as the SDK's pydantic objects
    (Perplexity's ``search_results`` on invoke, Cohere's ``citations``); this reads both.

    Args:
        obj: A mapping, an object, or None.
        name: The key or attribute.

    Returns:
        The value, or None.
    """
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def char_offset(text: str, byte_offset: int) -> int:
    """Convert a UTF-8 byte offset into ``text`` to a character offset.

    An offset inside a multi-byte character falls back to that character's start; offsets
    past the end clamp to ``len(text)``. (One conversion reads the whole text: to convert
    many offsets into one text, use a :class:`SpanLocator`.)

    Args:
        text: The text the offset refers to.
        byte_offset: Offset in the UTF-8 encoding of ``text``.

    Returns:
        The character offset.

    Examples:
        >>> char_offset("né x", 4)
        3
    """
    return SpanLocator(text).char_offset(byte_offset)


def _utf8_size(char: str) -> int:
    """Bytes of one character in UTF-8 (a lone surrogate counted as its 3-byte form)."""
    code = ord(char)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


#: Characters the searches for misplaced quoted spans may read per character of the text
#: (beyond :data:`_SEARCH_ALLOWANCE`); past it, a span's own offsets are used.
_SEARCH_FACTOR = 32
_SEARCH_ALLOWANCE = 1_000_000


class SpanLocator:
    """Places citation markers in one finished text, each in logarithmic time.

    Everything a placement needs from the whole text is read once, on first use: the UTF-8
    byte offset where each character ends (only for non-ASCII text), the ``[n](id=k)``
    citations the model wrote, and the occurrences of each quoted span whose offsets missed
    it (the searches are bounded in all to :data:`_SEARCH_FACTOR` times the text's length, plus
    :data:`_SEARCH_ALLOWANCE`). So an answer with many citations costs time linear in its size,
    not in the product of its length and its number of citations.

    Args:
        text: The finished text the offsets refer to.

    Examples:
        >>> locator = SpanLocator("Zoë ran. It rained.")
        >>> locator.span_end(0, 9, "Zoë ran.", utf8=True), locator.char_offset(4)
        (8, 3)
    """

    __slots__ = ("_byte_ends", "_cited", "_occurrences", "_search_left", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._byte_ends: list[int] | None = None
        self._cited: tuple[list[int], list[int]] | None = None
        self._occurrences: dict[str, list[int]] = {}
        self._search_left = _SEARCH_FACTOR * len(text) + _SEARCH_ALLOWANCE

    def char_offset(self, byte_offset: int) -> int:
        """Convert a UTF-8 byte offset into the text to a character offset.

        See :func:`char_offset`.

        Args:
            byte_offset: Offset in the UTF-8 encoding of the text.

        Returns:
            The character offset: how many characters end at or before ``byte_offset``.
        """
        if byte_offset <= 0:
            return 0
        if self.text.isascii():
            return min(byte_offset, len(self.text))
        if self._byte_ends is None:
            self._byte_ends = list(accumulate(map(_utf8_size, self.text)))
        return bisect_right(self._byte_ends, byte_offset)

    def clear_of_model_citations(self, position: int) -> int:
        """Move ``position`` past a ``[n](id=k)`` citation it would cut in two.

        Args:
            position: A character position.

        Returns:
            The position, or the end of the model's citation that strictly contains it.
        """
        if self._cited is None:
            matches = list(CITATION_RE.finditer(self.text))
            self._cited = ([m.start() for m in matches], [m.end() for m in matches])
        starts, ends = self._cited
        before = bisect_left(starts, position) - 1  # the last citation starting before it
        if before >= 0 and position < ends[before]:
            return ends[before]
        return position

    def span_end(
        self, start: Any, end: Any, quoted: str | None = None, *, utf8: bool = False
    ) -> int:
        """Return where a marker goes for a claim spanning ``text[start:end]``.

        The arguments and the answer are :func:`span_end`'s, for this locator's text.
        """
        text = self.text
        size = len(text)
        first, last = _as_int(start), _as_int(end)
        if utf8:
            first = self.char_offset(first) if first is not None else None
            last = self.char_offset(last) if last is not None else None
        if last is not None:
            last = min(max(last, 0), size)
        if quoted:
            if last is not None and first is not None and text[max(first, 0) : last] == quoted:
                return self.clear_of_model_citations(last)
            found = self._nearest_occurrence(quoted, last)
            if found is not None:
                return self.clear_of_model_citations(found)
            logger.debug("cited span %r not found in the answer; using its offsets", quoted[:40])
        return self.clear_of_model_citations(size if last is None else last)

    def _nearest_occurrence(self, quoted: str, near: int | None) -> int | None:
        """End of the occurrence of ``quoted`` whose end is nearest to ``near``.

        The first when ``near`` is None, the earlier of two as near; None when there is none,
        or the search budget is spent.
        """
        ends = self._occurrences.get(quoted)
        if ends is None:
            cost = len(self.text) + len(quoted)
            if cost > self._search_left:
                if self._search_left >= 0:  # said once per text
                    logger.warning(
                        "too many cited spans missed their offsets; the rest use their offsets"
                    )
                    self._search_left = -1
                return None
            self._search_left -= cost
            ends = self._occurrences[quoted] = _occurrence_ends(self.text, quoted)
        if not ends:
            return None
        if near is None:
            return ends[0]
        after = bisect_left(ends, near)
        if after == len(ends):
            return ends[-1]
        if after > 0 and near - ends[after - 1] <= ends[after] - near:
            return ends[after - 1]
        return ends[after]


def _occurrence_ends(text: str, quoted: str) -> list[int]:
    """The end of every occurrence of ``quoted`` in ``text`` (overlapping ones too), in order."""
    ends = []
    index = text.find(quoted)
    while index >= 0:
        ends.append(index + len(quoted))
        index = text.find(quoted, index + 1)
    return ends


def span_end(
    text: str,
    start: Any,
    end: Any,
    quoted: str | None = None,
    *,
    utf8: bool = False,
) -> int:
    """Return where a marker goes for a claim spanning ``text[start:end]``.

    The span is checked against ``quoted`` (the claim's text, when the provider gives it):
    when the offsets do not select it (offsets of another part, stripped whitespace...), the
    occurrence of ``quoted`` nearest to ``end`` is used. Without a usable span the marker
    goes at the end of the text. A position inside a ``[n](id=k)`` citation written by the
    model moves past it. (One call reads the whole text: to place many markers in one text,
    use a :class:`SpanLocator`.)

    Args:
        text: The finished text the offsets refer to.
        start: Start offset (int) or None.
        end: End offset (int) or None.
        quoted: The claim's text, if known.
        utf8: True when the offsets count UTF-8 bytes (Gemini), False for characters.

    Returns:
        A character position in ``[0, len(text)]``.

    Examples:
        >>> span_end("Zoë ran. It rained.", 0, 9, "Zoë ran.", utf8=True)
        8
    """
    return SpanLocator(text).span_end(start, end, quoted, utf8=utf8)


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
        start, end = _as_int(annotation.get("start_index")), _as_int(annotation.get("end_index"))
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
    # Imported here: the provider modules import this module's helpers.
    from langchain_references.native.cohere import CohereAdapter
    from langchain_references.native.gemini import GeminiAdapter
    from langchain_references.native.perplexity import PerplexityAdapter

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
