"""Sans-IO incremental parser for citation markers such as ``[N](id=K)``.

The parser knows nothing about LangChain, documents or output formats: it turns a stream of
text fragments into a stream of events, plain text (``str``) and :class:`Citation` objects, in
the spirit of h11. Its one guarantee is *split invariance*: however the same text is cut into
fragments, the concatenated events are identical, and no character is lost, added or
reordered.

The markers it looks for are chosen by *dialect* (see :data:`MARKER_DIALECTS`; the default is
:data:`DEFAULT_MARKERS`, ``"id"`` and ``"source"``). Grammar of each (ASCII digits, nothing
else in between)::

    id       "[" LABEL "](id=" DOC_ID ")"
    source   "【" DOC_ID [":" SUB] ["†" NOTE] "】"
    bracket  "[" DOC_ID *15("," [" "] DOC_ID) "]"     ; not followed by "("
    LABEL  = 1*9DIGIT / "NUMBER"
    DOC_ID = 1*9DIGIT
    SUB    = 1*9DIGIT                                   ; ignored
    NOTE   = any characters but "【", "】" and newlines; at most 64 characters lie
             between "【" and "】"

``source`` reads the markers of pprados' langchain-references (``【2†source】``), OpenAI's
(``【2†L1-L5】``, ``【2】``) and those of the OpenAI Assistants / Azure file search
(``【4:0†source】``: document 4, its sub-index ignored). ``【`` does not occur in prose, so
``source`` is read by default; plain ``[k]`` is common in text, so ``bracket`` is opt-in.

A ``bracket`` list (``[1, 3]``) cites each document in turn: it yields one :class:`Citation`
per id, the first carrying the whole marker as ``raw`` and the others an empty ``raw``, so
that the text is still the concatenation of text events and raws.
A bracket followed by ``(`` is a Markdown link, not a citation, so ``[1]`` at the end of a
fragment waits for the next character (and is a citation at :meth:`CitationParser.close`).

Anything else, including Markdown links, ``[1]`` alone (unless ``"bracket"`` is chosen),
``[1](id=abc)`` or ``【】``, is plain text and is passed through byte for byte. Only the
characters that could still begin a citation are held back, so the buffer never exceeds
:attr:`CitationParser.max_citation_length` characters (:data:`MAX_CITATION_LENGTH` for the
default dialects).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Collection, Iterable, Iterator
from typing import Final, NamedTuple, TypeVar, cast

__all__ = [
    "DEFAULT_MARKERS",
    "MARKER_DIALECTS",
    "MAX_CITATION_LENGTH",
    "Citation",
    "CitationParser",
    "Event",
    "check_markers",
    "coalesce",
]

#: The citation marker dialects a :class:`CitationParser` can read (see the module docstring).
MARKER_DIALECTS: Final = ("id", "source", "bracket")

#: The dialects read by default: ``[N](id=K)`` and ``【K†source】`` (``【K】``, ``【K:M†source】``).
DEFAULT_MARKERS: Final = ("id", "source")

_MAX_DIGITS: Final = 9

_DIGITS: Final = "[0-9]{1,%s}".replace("%s", str(_MAX_DIGITS))

CITATION_RE: Final = re.compile(rf"\[(?P<label>{_DIGITS}|NUMBER)\]\(id=(?P<doc>{_DIGITS})\)")

#: The longest ``[N](id=K)`` citation.
_MAX_ID_LENGTH: Final = len("[](id=)") + 2 * _MAX_DIGITS


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
            Dialects without a label (``"source"``, ``"bracket"``) repeat the id's digits.
        doc_id: The 1-based position of the cited document, as written by the model.
        raw: The marker exactly as it appeared in the text. A ``"bracket"`` list such as
            ``[1, 3]`` yields one citation per id: the first carries the whole marker, the
            others ``""``, so text events and raws still concatenate to the input.
    """

    label: str
    doc_id: int
    raw: str


Event = str | Citation

_T = TypeVar("_T")


def coalesce(pieces: Iterable[str | _T]) -> list[str | _T]:
    """Merge adjacent text pieces and drop empty ones (the other pieces are kept as they are).

    Args:
        pieces: Text and other pieces (citations), in order.

    Returns:
        The same content with no two consecutive strings and no empty string (in linear time).
    """
    out: list[str | _T] = []
    for is_text, run in itertools.groupby(pieces, key=lambda piece: isinstance(piece, str)):
        if not is_text:
            out.extend(run)
        elif text := "".join(cast("Iterator[str]", run)):
            out.append(text)
    return out


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
    if len(text) > _MAX_ID_LENGTH:
        return False
    kind: Citation | bool = True
    if not _PREFIX_RE.fullmatch(text):
        match = CITATION_RE.fullmatch(text)
        kind = False if match is None else Citation(match["label"], int(match["doc"]), text)
    if len(_HELD) >= _HELD_SIZE:
        _HELD.clear()
    _HELD[text] = kind
    return kind


_MAX_NOTE: Final = 64  # most characters between "【" and "】"
_MAX_LIST: Final = 16  # most ids in a bracket list
_LIST_SEP: Final = ", ?"
_SOURCE_NOTE: Final = "†[^【】\n]*"

#: The longest text a citation of the default dialects can span (a ``【K†source】`` one);
#: also the bound of the buffer of a parser of the default dialects.
MAX_CITATION_LENGTH: Final = max(_MAX_ID_LENGTH, _MAX_NOTE + 2)


class _Dialect(NamedTuple):
    """The regexes of one dialect (see the module docstring), alternatives of a grammar."""

    start: str  # the character its citations begin with
    streaming: str  # a citation, the stream going on (a bracket must see the next character)
    final: str  # a citation at the end of the stream
    prefix: str  # every proper prefix (and a whole bracket: the next character decides)
    max_length: int  # the longest citation


_DIALECTS: Final = {
    "id": _Dialect(
        "[", CITATION_RE.pattern, CITATION_RE.pattern, _PREFIX_RE.pattern, _MAX_ID_LENGTH
    ),
    "source": _Dialect(
        "【",
        rf"【(?=[^【】]{{1,{_MAX_NOTE}}}】)(?P<source>{_DIGITS})(?::{_DIGITS})?(?:{_SOURCE_NOTE})?】",
        rf"【(?=[^【】]{{1,{_MAX_NOTE}}}】)(?P<source>{_DIGITS})(?::{_DIGITS})?(?:{_SOURCE_NOTE})?】",
        # every proper prefix: "【4", "【4:", "【4:0", "【4:0†so", "【4†so"
        rf"【(?![^【】]{{{_MAX_NOTE + 1}}})"
        rf"(?:{_DIGITS}(?::(?:{_DIGITS}(?:{_SOURCE_NOTE})?)?|{_SOURCE_NOTE})?)?",
        _MAX_NOTE + 2,
    ),
    "bracket": _Dialect(
        "[",
        rf"\[(?P<list>{_DIGITS}(?:{_LIST_SEP}{_DIGITS}){{0,{_MAX_LIST - 1}}})\](?=[^(])",
        rf"\[(?P<list>{_DIGITS}(?:{_LIST_SEP}{_DIGITS}){{0,{_MAX_LIST - 1}}})\](?!\()",
        rf"\[(?:{_DIGITS}(?:{_LIST_SEP}{_DIGITS}){{0,{_MAX_LIST - 1}}}\]?"
        rf"|{_DIGITS}(?:{_LIST_SEP}{_DIGITS}){{0,{_MAX_LIST - 2}}},[ ]?)?",
        2 + _MAX_LIST * _MAX_DIGITS + (_MAX_LIST - 1) * 2,
    ),
}
_LIST_ID_RE: Final = re.compile(_DIGITS)
_DEFAULT: Final = frozenset(DEFAULT_MARKERS)
#: The start characters of the dialects other than ``"id"`` and ``"bracket"``.
_OTHER_STARTS: Final = "".join(d.start for d in _DIALECTS.values() if d.start != "[")


class _Grammar(NamedTuple):
    """The regexes of one set of dialects (built once per set by :func:`_grammar`)."""

    markers: frozenset[str]
    starts: str  # the characters a citation may begin with
    start_re: re.Pattern[str]
    streaming_re: re.Pattern[str]  # a citation, the stream going on
    final_re: re.Pattern[str]  # a citation at the end of the stream
    prefix_re: re.Pattern[str]  # what may still grow into a citation
    max_length: int


@functools.cache
def _grammar(markers: frozenset[str]) -> _Grammar:
    """Build the regexes reading the dialects ``markers`` (validated names)."""
    dialects = [_DIALECTS[name] for name in MARKER_DIALECTS if name in markers]
    starts = "".join(dict.fromkeys(d.start for d in dialects))
    return _Grammar(
        markers,
        starts,
        re.compile("[" + re.escape(starts) + "]"),
        re.compile("|".join(f"(?:{d.streaming})" for d in dialects)),
        re.compile("|".join(f"(?:{d.final})" for d in dialects)),
        re.compile("|".join(f"(?:{d.prefix})" for d in dialects)),
        max(d.max_length for d in dialects),
    )


def check_markers(markers: Collection[str]) -> frozenset[str]:
    """Validate a ``markers`` option (a dialect name, or a collection of them).

    Args:
        markers: Some of :data:`MARKER_DIALECTS` (a collection of names, or one name).

    Returns:
        The names, as a set.

    Raises:
        ValueError: If a name is not in :data:`MARKER_DIALECTS`, or none is given.
    """
    chosen = frozenset((markers,) if isinstance(markers, str) else markers)
    unknown = chosen.difference(MARKER_DIALECTS)
    if unknown or not chosen:
        what = f"unknown marker dialect(s) {sorted(unknown)!r}" if unknown else "no dialect"
        raise ValueError(f"{what}: markers must name some of {MARKER_DIALECTS!r}")
    return chosen


def _citations(match: re.Match[str]) -> list[Citation]:
    """The citation event(s) of one citation ``match`` of a :class:`_Grammar` regex."""
    kind = match.lastgroup
    if kind == "doc":
        return [Citation(match["label"], int(match["doc"]), match.group())]
    if kind == "source":
        return [Citation(match["source"], int(match["source"]), match.group())]
    ids = _LIST_ID_RE.findall(match["list"])
    raw = match.group()
    return [Citation(ids[0], int(ids[0]), raw)] + [Citation(i, int(i), "") for i in ids[1:]]


class CitationParser:
    """Incremental, split-invariant citation scanner.

    Feed it text fragments with :meth:`feed` and call :meth:`close` once at the end of the
    stream. Each call returns the events that are now certain; text that could still be the
    beginning of a citation is held back until the next fragment decides it.

    Args:
        markers: The citation dialects to read, some of :data:`MARKER_DIALECTS` (a collection
            of names, or one name); :data:`DEFAULT_MARKERS` (``[N](id=K)`` and ``【K†source】``)
            by default.

    Raises:
        ValueError: If ``markers`` names an unknown dialect, or none.

    Examples:
        >>> p = CitationParser()
        >>> p.feed("Seattle [1](i")
        ['Seattle ']
        >>> p.feed("d=5).")
        [Citation(label='1', doc_id=5, raw='[1](id=5)'), '.']
        >>> p.close()
        []
        >>> p = CitationParser(markers=("source", "bracket"))
        >>> p.feed("Rain【2†source】, sun [1, 3]")
        ['Rain', Citation(label='2', doc_id=2, raw='【2†source】'), ', sun ']
        >>> p.close()
        [Citation(label='1', doc_id=1, raw='[1, 3]'), Citation(label='3', doc_id=3, raw='')]
    """

    __slots__ = ("_alt", "_grammar", "_other", "pending")

    def __init__(self, *, markers: Collection[str] = DEFAULT_MARKERS) -> None:
        #: The text held back because it may still begin a citation (read-only).
        self.pending = ""
        self._grammar = _grammar(_DEFAULT if markers is DEFAULT_MARKERS else check_markers(markers))
        # The "id" dialect has fast paths; text where another dialect's citation may start,
        # and any text of a set with "bracket" (which starts with "[" too), goes through _scan.
        chosen = self._grammar.markers
        self._other = "id" not in chosen or "bracket" in chosen
        #: the start character of the other dialect read besides "id" ("" if none)
        self._alt = "".join(c for c in self._grammar.starts if c in _OTHER_STARTS)

    @property
    def markers(self) -> frozenset[str]:
        """The dialects read (names in :data:`MARKER_DIALECTS`)."""
        return self._grammar.markers

    @property
    def starts(self) -> str:
        """The characters a citation may begin with (``"["`` for the default dialect).

        Text without any of them, while nothing is :attr:`pending`, is plain text.
        """
        return self._grammar.starts

    @property
    def max_citation_length(self) -> int:
        """The longest citation of the dialects read; :attr:`pending` is never longer."""
        return self._grammar.max_length

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
        if self._other or (self._alt and (self._alt in text or self._alt in self.pending)):
            return self._scan(self.pending + text, final=False)
        if self.pending:
            text, self.pending = self.pending + text, ""
            events = self._after_pending(text)
        else:
            events = self._known(text)
        return self._scan_id(text) if events is None else events

    # The "id" dialect alone: three quick answers (a citation still forming, a citation or
    # beginning seen before, text with one "[" at most), else one scan of the text.

    def _after_pending(self, text: str) -> list[Event] | None:
        """The events of held text and its continuation ``text``, if quick; else None."""
        held = _HELD.get(text)
        if held is None:
            held = _classify(text)
        if held is True:
            self.pending = text  # still only the beginning of a citation
            return []
        if isinstance(held, Citation):
            return [held]  # the held citation, now complete
        return None

    def _known(self, text: str) -> list[Event] | None:
        """The events of ``text`` (nothing held before it), if quick; else None."""
        held = _HELD.get(text)
        if held is True:
            self.pending = text  # the beginning of a citation seen before
            return []
        if isinstance(held, Citation):
            return [held]  # a whole citation seen before
        cut = text.find("[")
        if cut < 0:
            return [text] if text else []
        if cut != text.rfind("["):
            return None
        tail = text[cut:]
        held = _HELD.get(tail)
        if held is None:
            held = _classify(tail)
        if held is True:
            # One "[", starting a citation still incomplete: the text before it is certain.
            self.pending = tail
            return [text[:cut]] if cut else []
        if isinstance(held, Citation):
            return [text[:cut], held] if cut else [held]  # ends with a citation
        return None

    def _scan_id(self, text: str) -> list[Event]:
        """The events of ``text`` (nothing held before it): every citation in it, in order."""
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
        if pending and (self._other or self._alt):
            return self._scan(pending, final=True)
        return [pending] if pending else []

    def _scan(self, text: str, *, final: bool) -> list[Event]:
        """Find the citations of ``text`` (any dialects), leftmost first.

        The first start character that may still begin a citation (if not ``final``) holds
        back the rest of the text in :attr:`pending`: a citation beginning there would take
        precedence over any after it.
        """
        self.pending = ""
        grammar = self._grammar
        search = grammar.start_re.search
        match_at = (grammar.final_re if final else grammar.streaming_re).match
        events: list[Event] = []
        pos = 0  # the text before pos is decided
        end = len(text)
        start = search(text)
        while start is not None:
            at = start.start()
            match = match_at(text, at)
            if match is not None:
                if at > pos:
                    events.append(text[pos:at])
                events.extend(_citations(match))
                pos = match.end()
                start = search(text, pos)
            elif not final and grammar.prefix_re.fullmatch(text, at):
                self.pending = text[at:]
                end = at
                break
            else:
                start = search(text, at + 1)
        if end > pos:
            events.append(text[pos:end])
        return events
