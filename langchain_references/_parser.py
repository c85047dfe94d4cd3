"""Sans-IO incremental parser for ``[N](id=K)`` citation markers.

The parser knows nothing about LangChain, documents or output formats: it turns a stream of
text fragments into a stream of events, plain text (``str``) and :class:`Citation` objects, in
the spirit of h11. Its one guarantee is *split invariance*: however the same text is cut into
fragments, the concatenated events are identical, and no character is lost, added or
reordered.

Grammar of a citation (ASCII only, nothing else in between)::

    "[" LABEL "](id=" DOC_ID ")"
    LABEL  = 1*9DIGIT / "NUMBER"
    DOC_ID = 1*9DIGIT

Anything else, including Markdown links, ``[1]`` alone or ``[1](id=abc)``, is plain text and
is passed through byte for byte. Only the characters that could still begin a citation are
held back, so the buffer never exceeds :data:`MAX_CITATION_LENGTH` characters.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__ = ["MAX_CITATION_LENGTH", "Citation", "CitationParser", "Event"]

_MAX_DIGITS: Final = 9

_DIGITS: Final = "[0-9]{1,%s}".replace("%s", str(_MAX_DIGITS))

CITATION_RE: Final = re.compile(rf"\[(?P<label>{_DIGITS}|NUMBER)\]\(id=(?P<doc>{_DIGITS})\)")

#: The longest text a citation can span; also the bound of the parser's buffer.
MAX_CITATION_LENGTH: Final = len("[](id=)") + 2 * _MAX_DIGITS


def _prefix_pattern() -> re.Pattern[str]:
    """Build a regex matching every proper prefix of a citation that starts with ``[``."""
    partial_number = r"N(?:U(?:M(?:B(?:E(?:R)?)?)?)?)?"
    # Each later piece is optional, but only once the previous one is complete.
    doc_id = "[0-9]{0,%s}".replace("%s", str(_MAX_DIGITS))
    after_label = rf"(?:\](?:\((?:i(?:d(?:={doc_id})?)?)?)?)?"
    return re.compile(rf"\[(?:{_DIGITS}{after_label}|NUMBER{after_label}|{partial_number})?")


_PREFIX_RE: Final = _prefix_pattern()


class Citation(NamedTuple):
    """A citation marker found in the text.

    Attributes:
        label: The number the model wrote (digits or ``"NUMBER"``); it carries no meaning.
        doc_id: The 1-based position of the cited document, as written by the model.
        raw: The marker exactly as it appeared in the text.
    """

    label: str
    doc_id: int
    raw: str


Event = str | Citation


#: What held-back texts are (see :func:`_classify`), cached: the text a parser holds back
#: between fragments is at most a few characters out of a small set, and streams repeat the
#: same token cuts. Cleared when full.
_HELD: dict[str, Citation | bool] = {}
_HELD_SIZE: Final = 1024


def _classify(text: str) -> Citation | bool:
    """What text starting with ``[`` is: a citation prefix (True), one citation, or neither.

    The answer is cached in :data:`_HELD`, where the parser looks first.

    Args:
        text: The text, starting with ``[``.

    Returns:
        True if it is a proper prefix of a citation, the :class:`Citation` if it is exactly
        one citation, else False.
    """
    if len(text) > MAX_CITATION_LENGTH:
        return False
    kind: Citation | bool = True
    if not _PREFIX_RE.fullmatch(text):
        match = CITATION_RE.fullmatch(text)
        kind = False if match is None else Citation(match["label"], int(match["doc"]), text)
    if len(_HELD) >= _HELD_SIZE:
        _HELD.clear()
    _HELD[text] = kind
    return kind


class CitationParser:
    """Incremental, split-invariant citation scanner.

    Feed it text fragments with :meth:`feed` and call :meth:`close` once at the end of the
    stream. Each call returns the events that are now certain; text that could still be the
    beginning of a citation is held back until the next fragment decides it.

    Example:
        >>> p = CitationParser()
        >>> p.feed("Seattle [1](i")
        ['Seattle ']
        >>> p.feed("d=5).")
        [Citation(label='1', doc_id=5, raw='[1](id=5)'), '.']
        >>> p.close()
        []
    """

    __slots__ = ("pending",)

    def __init__(self) -> None:
        #: The text held back because it may still begin a citation (read-only).
        self.pending = ""

    def feed(self, text: str) -> list[Event]:
        """Consume a fragment of text.

        Args:
            text: The next fragment of the stream (may be empty).

        Returns:
            The events that are certain now, in order. Adjacent text is merged.

        Raises:
            TypeError: If ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise TypeError(f"CitationParser.feed() takes str, not {type(text).__name__}")
        if self.pending:
            text = self.pending + text
            held = _HELD.get(text)
            if held is None:
                held = _classify(text)
            if held is True:
                self.pending = text  # still only the beginning of a citation
                return []
            self.pending = ""
            if isinstance(held, Citation):
                return [held]  # the held citation, now complete
        elif (held := _HELD.get(text)) is not None and held is not False:
            if held is True:
                self.pending = text  # the beginning of a citation seen before
                return []
            return [held]  # a whole citation seen before
        else:
            cut = text.find("[")
            if cut < 0:
                return [text] if text else []
            if cut == text.rfind("["):
                tail = text[cut:]
                held = _HELD.get(tail)
                if held is None:
                    held = _classify(tail)
                if held is True:
                    # One "[", starting a citation still incomplete: the text before it is
                    # certain.
                    self.pending = tail
                    return [text[:cut]] if cut else []
                if isinstance(held, Citation):
                    return [text[:cut], held] if cut else [held]  # ends with a citation
        events: list[Event] = []
        pos = 0
        for match in CITATION_RE.finditer(text):
            if match.start() > pos:
                events.append(text[pos : match.start()])
            events.append(Citation(match["label"], int(match["doc"]), match.group()))
            pos = match.end()
        # Hold back the tail only if it may still grow into a citation. A citation holds a
        # single "[", so only the last "[" can start one.
        cut = text.rfind("[", pos)
        if cut >= 0 and _PREFIX_RE.fullmatch(text, cut):
            self.pending = text[cut:]
        else:
            cut = len(text)
        if cut > pos:
            events.append(text[pos:cut])
        return events

    def close(self) -> list[Event]:
        """End the stream: text left mid-citation is returned verbatim.

        Returns:
            The held-back text as a single text event, or nothing.
        """
        pending, self.pending = self.pending, ""
        return [pending] if pending else []
