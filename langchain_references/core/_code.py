"""Sans-IO tracking of Markdown code in streamed text: a marker inside code is not a citation.

An answer that shows code may hold what looks like a citation marker: ``a[1]`` in a Python
snippet, or ``[1](id=2)`` quoted in a tutorial about this very format. Markdown shows code
literally, so such a marker is left as it is: not rewritten, not numbered, not listed.
:class:`MarkdownCode` tells the prose of a stream of fragments from its code, and
:class:`CodeAwareParser` runs a :class:`~langchain_references.core._parser.CitationParser` on the
prose only, with the same interface and the same guarantee (whatever the cuts between
fragments, the events are the same, and no character is lost, added or reordered).

What is code follows CommonMark as far as a stream allows:

* **Fenced blocks.** A line whose first characters other than blanks are three or more
  backticks or tildes opens a block; a later line of at least as many of the same character
  (blanks around them allowed) closes it, else the answer's end does. Unlike CommonMark, any
  indentation opens a fence (fences inside list items are indented), and a backtick fence may
  have a backtick after it on its line.
* **Code spans.** A run of backticks elsewhere opens a span that the next run of exactly as
  many backticks on the same line closes. A run with no such closer on its line is plain text,
  as in CommonMark (which also lets a span go on past a line break inside a paragraph; answers
  do not do that). The characters of a span are passed on at once up to the first one that
  may begin a citation; from there they are held back until the closer (they were code) or
  the line's end (they were prose) decides, at most :data:`MAX_HELD_CODE` characters: the text
  of a longer span is read as prose, up to its closer, which ends it and opens nothing (the
  rest of the line stays as it is).

Other code is prose here: an indented code block (in an answer, indentation is mostly a
list's), a fence inside a block quote, and a backtick escaped with a backslash still opens or
closes a span. Backticks and tildes are never part of a marker, so a fence or a span ends any
marker being written before it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from langchain_references.core._parser import DEFAULT_MARKERS, CitationParser, Event, coalesce

__all__ = ["MAX_HELD_CODE", "CodeAwareParser", "MarkdownCode", "Segment"]

#: Most characters of a code span held back while its closer may still come.
MAX_HELD_CODE: Final = 2_000

#: A piece of the stream: ``(is_code, text)``.
Segment = tuple[bool, str]

_TOKEN_RE: Final = re.compile(r"`+|~+|\n|[^`~\n]+")
_CODE_CHAR: Final = re.compile("[`~\n]").search  # what may open, close or end code
_BLANKS: Final = " \t\r"
_PROSE: Final = 0
_SPAN: Final = 1
_FENCE: Final = 2
_LOST: Final = 3  # in a span too long to hold: its text is prose, its closer ends it
_FENCE_MIN: Final = 3  # characters of the shortest fence


class MarkdownCode:
    r"""Incremental, split-invariant splitter of a text stream into prose and code segments.

    Feed it fragments with :meth:`feed` and call :meth:`close` at the end of the stream. Code
    is only held back inside a code span, from its first character that may begin a citation
    (one of ``starts``) until the span's closer or its line's end decides.

    Args:
        starts: The characters a citation may begin with (``"["`` for ``[n](id=k)``).
        max_held: Most characters held back in a code span (:data:`MAX_HELD_CODE`).

    Examples:
        >>> code = MarkdownCode("[")
        >>> code.feed("Use `a[1]` [2]")
        [(False, 'Use `'), (True, 'a[1]`'), (False, ' [2]')]
        >>> code.feed("\n```\nb[3]\n```\n")
        [(False, '\n```'), (True, '\nb[3]\n```\n')]
    """

    __slots__ = (
        "_closing",
        "_held",
        "_held_chars",
        "_line_start",
        "_max_held",
        "_mode",
        "_open_char",
        "_open_length",
        "_run_at_start",
        "_run_char",
        "_run_length",
        "_starts",
    )

    def __init__(self, starts: str, *, max_held: int = MAX_HELD_CODE) -> None:
        if max_held < 1:
            raise ValueError(f"max_held must be >= 1, got {max_held}")
        self._starts = re.compile("[" + re.escape(starts) + "]") if starts else None
        self._max_held = max_held
        self._mode = _PROSE
        self._line_start = True  # only blanks so far on this line
        self._run_char = ""  # the backtick or tilde run being read (its end is not known)
        self._run_length = 0
        self._run_at_start = False  # the run began a line (after blanks)
        self._open_char = ""  # the character of the fence open
        self._open_length = 0  # the length of the fence or span open
        self._closing = False  # in a fence: this line so far may close it
        self._held: list[str] = []  # in a span: the text from its first possible citation
        self._held_chars = 0

    @property
    def held(self) -> str:
        """The code span text held back, not returned yet."""
        return "".join(self._held)

    @property
    def settled(self) -> bool:
        """Whether text without a special character passes as it is and changes nothing.

        True when nothing is held back, no backtick or tilde run waits for its end, and the
        line has begun (and, in a fence, cannot close it any more). The special characters
        are the backtick, the tilde, the newline and the start characters.
        """
        return not (self._held or self._run_length or self._line_start or self._closing)

    @property
    def in_prose(self) -> bool:
        """Whether the stream is in prose and :attr:`settled`.

        Text without a backtick, tilde or newline is then one prose segment, and changes
        nothing.
        """
        return self._mode in (_PROSE, _LOST) and self.settled

    def feed(self, text: str) -> list[Segment]:
        """Consume a fragment.

        Args:
            text: The next fragment of the stream.

        Returns:
            The segments that are certain now, in order (adjacent ones of a kind merged).
        """
        out: list[Segment] = []
        for token in _TOKEN_RE.findall(text):
            first = token[0]
            if first in "`~":
                if self._run_length and first != self._run_char:
                    self._end_run(out)
                if not self._run_length:
                    self._run_char, self._run_at_start = first, self._line_start
                    self._closing = False  # a fence line that may close has nothing more
                self._run_length += len(token)
                self._line_start = False
                self._pass(out, token)
                continue
            if self._run_length:
                self._end_run(out)
            if first == "\n":
                self._newline(out)
            else:
                self._text(out, token)
        return _joined(out)

    def close(self) -> list[Segment]:
        """End the stream: a code span still open had no closer, so its held text is prose.

        Returns:
            The last segments.
        """
        out: list[Segment] = []
        if self._run_length:
            self._end_run(out)
        if self._mode == _SPAN:
            self._mode = _PROSE
            self._release(out, code=False)
        return _joined(out)

    def flush(self) -> list[Segment]:
        """Return the held code span text now, as code (the stream goes on inside the span).

        Returns:
            The held text as one code segment, or nothing.
        """
        out: list[Segment] = []
        self._release(out, code=True)
        return out

    def _pass(self, out: list[Segment], text: str) -> None:
        """``text`` as the mode places it (held back in a span once holding began)."""
        if self._held:
            self._hold(out, text)
        else:
            _add(out, self._mode in (_SPAN, _FENCE), text)

    def _end_run(self, out: list[Segment]) -> None:
        """The backtick or tilde run just read is whole: what it opens or closes."""
        char, length, at_start = self._run_char, self._run_length, self._run_at_start
        self._run_length = 0
        if self._mode == _PROSE:
            if at_start and length >= _FENCE_MIN:
                self._mode, self._open_char, self._open_length = _FENCE, char, length
            elif char == "`":
                self._mode, self._open_length = _SPAN, length
        elif self._mode == _SPAN:
            if char == "`" and length == self._open_length:
                self._mode = _PROSE
                self._release(out, code=True)
        elif self._mode == _LOST:  # its closer ends it, and opens nothing
            if char == "`" and length == self._open_length:
                self._mode = _PROSE
        elif at_start and char == self._open_char and length >= self._open_length:
            self._closing = True

    def _newline(self, out: list[Segment]) -> None:
        if self._mode == _SPAN:  # no closer on its line: the span's opener was plain text
            self._mode = _PROSE
            self._release(out, code=False)
        elif self._mode == _LOST:
            self._mode = _PROSE
        elif self._mode == _FENCE:
            _add(out, True, "\n")
            if self._closing:
                self._mode, self._closing = _PROSE, False
            self._line_start = True
            return
        _add(out, False, "\n")
        self._line_start = True

    def _text(self, out: list[Segment], text: str) -> None:
        blank = not text.strip(_BLANKS)
        if not blank:
            self._line_start = False
        if self._mode == _SPAN and not self._held and self._starts is not None:
            start = self._starts.search(text)
            if start is not None:
                if start.start():
                    _add(out, True, text[: start.start()])
                self._hold(out, text[start.start() :])
                return
        if self._mode == _FENCE and not blank:
            self._closing = False
        self._pass(out, text)

    def _hold(self, out: list[Segment], text: str) -> None:
        self._held.append(text)
        self._held_chars += len(text)
        if self._held_chars > self._max_held:  # too long to hold: its text is read as prose,
            self._mode = _LOST  # and its closer, if it comes, ends it (opening nothing)
            self._release(out, code=False)

    def _release(self, out: list[Segment], *, code: bool) -> None:
        if self._held:
            _add(out, code, "".join(self._held))
            self._held.clear()
            self._held_chars = 0


def _add(out: list[Segment], code: bool, text: str) -> None:
    """Append a segment (:func:`_joined` merges the ones of a kind at the end)."""
    out.append((code, text))


def _joined(out: list[Segment]) -> list[Segment]:
    """``out`` with adjacent segments of a kind joined, in linear time."""
    if len(out) < 2:
        return out
    joined: list[Segment] = []
    code = out[0][0]
    texts: list[str] = []
    for kind, text in out:
        if kind != code:
            joined.append((code, "".join(texts)))
            code, texts = kind, []
        texts.append(text)
    joined.append((code, "".join(texts)))
    return joined


class CodeAwareParser:
    """A :class:`~langchain_references.core._parser.CitationParser` that leaves Markdown code alone.

    The prose of the stream goes through the citation parser; code (fenced blocks, code
    spans: see the module docstring) comes out as plain text, markers and all. It is fed and
    closed as the citation parser is.

    Args:
        markers: The citation dialects to read (see :class:`CitationParser`).

    Raises:
        ValueError: If ``markers`` names an unknown dialect, or none.

    Examples:
        >>> p = CodeAwareParser(markers=("bracket",))
        >>> p.feed("Index with `a[1]` [2]")
        ['Index with `a[1]` ']
        >>> p.close()
        [Citation(label='2', doc_id=2, raw='[2]')]
    """

    __slots__ = ("_code", "_parser", "quiet", "special")

    def __init__(self, *, markers: Collection[str] = DEFAULT_MARKERS) -> None:
        self._parser = CitationParser(markers=markers)
        self._code = MarkdownCode(self._parser.starts)
        #: Whether a fragment without a :attr:`special` character would come back as it is,
        #: as one text event, and change nothing (read-only; the callers' fast path).
        self.quiet = False  # a line has not begun: a fence may open
        #: ``special(text)``: a match if ``text`` has a backtick, a tilde, a newline or a
        #: character that may begin a citation, else None.
        self.special = re.compile("[" + re.escape(self._parser.starts) + "`~\n]").search

    @property
    def pending(self) -> str:
        """The text held back: a possible citation, then a code span's undecided text."""
        return self._parser.pending + self._code.held

    def feed(self, text: str) -> list[Event]:
        """:meth:`CitationParser.feed` (same argument, events and error), code passed as text."""
        if not isinstance(text, str):
            raise TypeError(f"CodeAwareParser.feed() takes str, not {type(text).__name__}")
        if self._code.in_prose and not _CODE_CHAR(text):  # prose goes on: the parser alone
            events = self._parser.feed(text)
            self.quiet = not self._parser.pending
            return events
        return self._events(self._code.feed(text), final=False)

    def close(self) -> list[Event]:
        """End the stream: text left mid-citation is returned verbatim.

        Returns:
            The last events.
        """
        return self._events(self._code.close(), final=True)

    def flush(self) -> list[Event]:
        """Return everything held back now, the stream going on (before a provider's marker).

        A possible citation is decided as at the stream's end (text, or a ``bracket``
        citation), then a code span's held text comes as text (code).

        Returns:
            The held-back events.
        """
        events = [*self._parser.close(), *(text for _, text in self._code.flush())]
        self.quiet = self._code.settled
        return coalesce(events)

    def _events(self, segments: list[Segment], *, final: bool) -> list[Event]:
        events: list[Event] = []
        parser = self._parser
        for code, text in segments:
            if code:
                events += parser.close()  # a marker cannot go on into code
                events.append(text)
            else:
                events += parser.feed(text)
        if final:
            events += parser.close()
        self.quiet = not parser.pending and self._code.settled
        return coalesce(events)
