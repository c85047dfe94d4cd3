r"""Generic helpers shared by the provider adapters: text cuts, marker runs, message reading.

Nothing here knows a provider. The adapters describe what to do with a finished text as
:class:`Cut` objects (remove ``text[start:end]`` and put citations there; ``start == end``
is a pure insertion) and :func:`apply_cuts` turns text plus cuts into pieces. Citation
markup that some models leak into their text (the ``【4:0†source】`` file-search markers and
the private-use ``\ue200cite\ue202turn0search0\ue201`` runs) is found by
:func:`find_marker_runs`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_references.core._parser import coalesce
from langchain_references.native.base import (
    NativeCitation,
    Piece,
    UnsupportedMessageError,
    as_message,
)

__all__ = [
    "MARKER_RUN_RE",
    "Cut",
    "MarkerStripper",
    "UnsupportedMessageError",
    "apply_cuts",
    "as_dicts",
    "coalesce",
    "content_items",
    "find_marker_runs",
    "has_provider_citations",
    "is_final_chunk",
    "optional_int",
    "optional_str",
    "text_block_cites",
]

logger = logging.getLogger(__name__)

#: A leaked citation marker: ``【4:0†source】`` (file search) or a private-use citation run
#: such as ``\ue200cite\ue202turn0search0\ue201`` (``\ue200`` opens, ``\ue202`` separates the
#: fields, ``\ue201`` closes; the first field names the run: ``cite``, ``filecite``...). Only
#: runs whose name ends in ``cite`` are citations; other private-use runs are left alone.
MARKER_RUN_RE: Final = re.compile(
    "【[^【】\n†]{0,200}†[^【】\n]{0,200}】"
    "|\ue200[a-z_]{0,12}cite\ue202[^\ue200\ue201\n]{0,500}\ue201"
)

# Every proper prefix of a marker run (and nothing that cannot still become one).
_VIABLE_PREFIX_RE: Final = re.compile(
    "【[^【】\n†]{0,200}(?:†[^【】\n]{0,200})?"
    "|\ue200(?:[a-z_]{0,16}|[a-z_]{0,12}cite\ue202[^\ue200\ue201\n]{0,500})"
)
_MARKER_OPENERS: Final = re.compile("[【\ue200]")

_HORIZONTAL_SPACE: Final = " \t"


@dataclass(slots=True)
class Cut:
    """Remove ``text[start:end]`` and put ``citations`` there.

    Attributes:
        start: First removed character (or the insertion point when ``start == end``).
        end: One past the last removed character.
        citations: The citations that take the removed text's place, in order.
        marker: True when the cut is leaked citation markup; a marker left without a
            citation is dropped together with the blank space before it.
    """

    start: int
    end: int
    citations: list[NativeCitation] = field(default_factory=list)
    marker: bool = False


def find_marker_runs(text: str) -> list[Cut]:
    r"""Return a marker :class:`Cut` (with no citation yet) for every leaked marker in ``text``.

    Args:
        text: A finished answer text.

    Returns:
        The cuts in text order.

    Examples:
        >>> [(c.start, c.end) for c in find_marker_runs("a【4:0†x】 b\ue200cite\ue202t0\ue201")]
        [(1, 8), (10, 19)]
    """
    return [Cut(m.start(), m.end(), marker=True) for m in MARKER_RUN_RE.finditer(text)]


def _merge(cuts: Iterable[Cut]) -> list[Cut]:
    """Sort cuts by position and merge the ones whose removed ranges overlap.

    An insertion strictly inside a removed range joins that range; an insertion at a range's
    edge stays separate (before the range's citations at its start, after them at its end).
    """
    ordered = sorted(cuts, key=lambda cut: (cut.start, cut.end))
    merged: list[Cut] = []
    for cut in ordered:
        last = merged[-1] if merged else None
        if last is not None and cut.start < last.end and last.start < last.end:
            last.end = max(last.end, cut.end)
            last.citations.extend(cut.citations)
            last.marker = last.marker and cut.marker
        else:
            merged.append(Cut(cut.start, cut.end, list(cut.citations), cut.marker))
    return merged


def apply_cuts(text: str, cuts: Iterable[Cut]) -> list[Piece]:
    """Apply ``cuts`` to ``text`` and return the resulting pieces.

    Positions are clamped into ``[0, len(text)]``; overlapping removals are merged (their
    citations kept in position order). A marker cut that carries no citation is dropped with
    the spaces and tabs just before it, so ``"in 2023 【1†a】."`` becomes ``"in 2023."``.

    Args:
        text: The finished text the cut positions refer to.
        cuts: What to remove and where to put citations.

    Returns:
        Text and citations in order, adjacent text merged, no empty strings.

    Examples:
        >>> c = NativeCitation(provider="x", source="s")
        >>> apply_cuts("ab([l](u)).", [Cut(2, 10, [c])]) == ["ab", c, "."]
        True
    """
    size = len(text)
    clamped: list[Cut] = []
    for cut in cuts:
        start = min(max(cut.start, 0), size)
        end = min(max(cut.end, 0), size)
        if (start, end) != (cut.start, cut.end):
            logger.debug("citation span %d:%d clamped into a text of %d", cut.start, cut.end, size)
        clamped.append(Cut(min(start, end), end, list(cut.citations), cut.marker))
    pieces: list[Piece] = []
    position = 0
    for cut in _merge(clamped):
        segment = text[position : cut.start]
        if cut.marker and not cut.citations:
            segment = segment.rstrip(_HORIZONTAL_SPACE)
        pieces.append(segment)
        pieces.extend(cut.citations)
        position = max(position, cut.end)
    pieces.append(text[position:])
    return coalesce(pieces)


def content_items(message: Any) -> list[str | dict[str, Any]]:
    """Return a message's content as a list of strings and block dicts.

    Args:
        message: A LangChain message (or chunk).

    Returns:
        ``[content]`` for string content, the list items otherwise (anything that is neither
        a string nor a dict is skipped).

    Raises:
        UnsupportedMessageError: If ``message`` is not a LangChain message.
    """
    content = as_message(message).content
    if isinstance(content, str):
        return [content] if content else []
    return [item for item in content if isinstance(item, str | dict)]


def is_final_chunk(message: BaseMessage) -> bool:
    """Return True when a chunk says the answer is over (nothing more will follow).

    Args:
        message: A message chunk.

    Returns:
        True for a chunk with ``chunk_position == "last"`` or a stop reason in its metadata.
    """
    if getattr(message, "chunk_position", None) == "last":
        return True
    metadata = message.response_metadata
    return bool(metadata.get("stop_reason") or metadata.get("finish_reason"))


def optional_str(mapping: dict[str, Any], *keys: str) -> str | None:
    """Return the first non-empty string value among ``keys`` of ``mapping``, if any."""
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def optional_int(mapping: dict[str, Any], *keys: str) -> int | None:
    """Return the first integer value (not a bool) among ``keys`` of ``mapping``, if any."""
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def as_dicts(values: Any) -> Sequence[dict[str, Any]]:
    """Return the dict items of ``values`` when it is a list, else an empty tuple."""
    if not isinstance(values, list):
        return ()
    return [value for value in values if isinstance(value, dict)]


class MarkerStripper:
    """Incremental, split-invariant removal of leaked citation markers from plain text.

    For string content that streams without annotations (nothing can resolve a marker), so
    every marker is dropped as :func:`apply_cuts` would drop it. Only a possible marker's
    beginning (at most a few hundred characters, never past a newline) and the blank space
    before it are held back; the output does not depend on how the text was split.

    Examples:
        >>> s = MarkerStripper()
        >>> s.feed("in 2023 【4:0")
        'in 2023'
        >>> s.feed("†a】.")
        '.'
        >>> s.close()
        ''
    """

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> str:
        """Add ``text``; return the text now certain, markers removed."""
        buffer = self._pending + text
        hold = len(buffer)
        position = 0
        while (opener := _MARKER_OPENERS.search(buffer, position)) is not None:
            start = opener.start()
            if (match := MARKER_RUN_RE.match(buffer, start)) is not None:
                position = match.end()
            elif _VIABLE_PREFIX_RE.fullmatch(buffer, start) is not None:
                hold = start
                break
            else:
                position = start + 1
        # The blank space before a possible marker goes with it if the marker is dropped.
        release = len(buffer[:hold].rstrip(_HORIZONTAL_SPACE))
        self._pending = buffer[release:]
        return _strip(buffer[:release])

    def close(self) -> str:
        """End the text; return everything still held back, markers removed."""
        rest, self._pending = self._pending, ""
        return _strip(rest)


def _strip(text: str) -> str:
    """Return ``text`` with every leaked marker dropped (as :func:`apply_cuts` drops them)."""
    return "".join(
        piece for piece in apply_cuts(text, find_marker_runs(text)) if isinstance(piece, str)
    )


def has_provider_citations(
    message: BaseMessage, provider: str, field: str, types: Collection[str]
) -> bool:
    """Tell whether a message is ``provider``'s own output with its raw citation shapes.

    LangChain v1 output (``output_version="v1"``) is never claimed (the v1 adapter reads it);
    otherwise ``response_metadata["model_provider"] == provider`` or a text block whose
    ``field`` list holds an item of one of ``types`` claims it.

    Args:
        message: A message or chunk.
        provider: The ``model_provider`` value of the provider.
        field: The text-block key of its citations (``"citations"``, ``"annotations"``).
        types: The ``type`` values of its citation items.

    Returns:
        Whether the provider's adapter reads this message.
    """
    metadata = message.response_metadata
    if metadata.get("output_version") == "v1":
        return False
    if metadata.get("model_provider") == provider:
        return True
    return text_block_cites(message, field, types)


def text_block_cites(message: BaseMessage, field: str, types: Collection[str]) -> bool:
    """Tell whether a text block of ``message`` has a ``field`` item of one of ``types``.

    Args:
        message: A message or chunk.
        field: The text-block key of the citations (``"citations"``, ``"annotations"``).
        types: The ``type`` values that make an item of that list a citation.

    Returns:
        True when some ``{"type": "text"}`` block of the content lists such an item (dict
        items of a list only); False for string content.
    """
    content = message.content
    if isinstance(content, str):
        return False
    return any(
        isinstance(block, dict)
        and block.get("type") == "text"
        and any(raw.get("type") in types for raw in as_dicts(block.get(field)))
        for block in content
    )
