"""Span helpers shared by the native adapters: payload fields, UTF-8 offsets, marker places.

The Perplexity, Gemini and Cohere adapters and the v1 adapter (which hands runs to them) read
provider payloads and place citation markers with these; they sit below all four, so that no
adapter module imports another's.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from langchain_references.core._parser import CITATION_RE

__all__ = ["SpanLocator", "as_int", "char_offset", "field_of", "span_end"]

logger = logging.getLogger(__name__)


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


def as_int(value: Any) -> int | None:
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
        first, last = as_int(start), as_int(end)
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
