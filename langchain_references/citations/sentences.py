r"""Incremental sentence splitting of a cited answer, citations attached to their sentence.

:class:`SentenceCitationTracker` is sans-IO and pure: feed it the raw answer text as it
streams (``"Seattle is in Washington [1](id=2). It rains."``), get back each
:class:`CitedSentence` as soon as it is complete, with its text stripped of the markers and
the ids of the documents it cites. Markers are found by the core
:class:`~langchain_references.core._code.CodeAwareParser` (a marker inside Markdown code is text,
as the rewriter leaves it), so a marker split across fragments
(``"[1](i"`` + ``"d=2)"``) is handled, and the tracker inherits the parser's guarantee:
**the sentences are the same however the text is cut into fragments**.

Sentence boundaries (the package's rule, :mod:`langchain_references.text.sentences`, refined and
applied one character at a time):

* a *terminal* run (``.``, ``!``, ``?``, ``…``, optionally followed by closing quotes,
  brackets or Markdown emphasis ``"'”’»)]*_```) ends a sentence when whitespace or a citation
  follows it and the next *text* character is not a lower-case letter
  (``"approx. five"`` and ``"e.g. this"`` do not end a sentence; ``"3.5"`` and
  ``"Seattle.Next"`` neither, since no blank follows the period);
* a period does not end a sentence after a known abbreviation (``Dr.``, ``Jr.``, ``St.``,
  ``vs.``, month names...), a single letter (initials: ``J. R. R. Tolkien``), a dotted
  abbreviation (``e.g.``, ``U.S.``) or a list enumerator that opens the sentence
  (``1.``). The price: ``"... in the U.S. Then"`` stays one sentence. Three exceptions:

  - a closing bracket or quote right after the abbreviation's period ends the sentence
    like any terminal run: ``"(Roger Pielke Jr.) In those days"`` is two sentences (a
    parenthesis closed after an abbreviation has no period of its own);
  - a unit after a number is not an abbreviation: ``"rose by 20 C. He said"`` (a
    temperature, not an initial; a four-digit year before a letter still reads as a
    year and an initial: ``"in 1950 C. S. Lewis"``), ``"5 ft."``, ``"1100 A.D."``,
    ``"at 5 p.m."``; the period ends the sentence unless a lower-case word follows;
  - ``et al.`` ends the sentence before an upper-case letter
    (``"... similar to Moberg et al. CO2 constitutes"``), not before a year or a bracket
    (``"Smith et al. (2005) found"``);
* a line break ends the sentence (Markdown list items, headings and paragraphs);
* citations between a sentence end and the next text belong to the sentence that ended:
  ``"Seattle. [1](id=2) Next"`` and ``"Seattle [1](id=2). Next"`` both cite document 2
  from the first sentence. Citations at the very start of the answer stay with the first
  sentence.

A boundary is decided only once the next text character has arrived, so a sentence is
emitted one character late (or at :meth:`SentenceCitationTracker.close`). The tracker keeps
the word being written and the one before it (bounded), never re-reads the sentence, so its
time is linear in the text. General-purpose segmenters (pysbd, NLTK's Punkt) are not used
because they segment a whole text at once: their decision about a prefix can change when
more text arrives, which would break split invariance in a stream.

Whole texts that are not streamed (documents, articles, pages) are split by pysbd, an optional
dependency, with :func:`sentence_spans`: the one pysbd splitter of the package.
"""

from __future__ import annotations

import importlib
import logging
import re
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any, Final

from langchain_references.core._code import CodeAwareParser
from langchain_references.core._parser import DEFAULT_MARKERS, Citation, Event, check_markers
from langchain_references.text.sentences import (
    CLOSERS,
    PYSBD_WINDOW,
    TRACKER_CLOSERS,
    TRACKER_TERMINALS,
)
from langchain_references.text.words import WORD

__all__ = [
    "SEGMENT_WINDOW",
    "CitedSentence",
    "SentenceCitationTracker",
    "is_verification_worthy",
    "iter_sentence_spans",
    "sentence_segmenter",
    "sentence_spans",
    "split_cited_sentences",
]

logger = logging.getLogger(__name__)

# The package's sentence-end characters, the tracker's variant
# (langchain_references/text/sentences.py).
_TERMINALS: Final = frozenset(TRACKER_TERMINALS)
_CLOSERS: Final = frozenset(TRACKER_CLOSERS)
#: Closers that end a sentence right after an abbreviation's period ("Jr.)", 'Mr."').
_CLOSING_MARKS: Final = frozenset(CLOSERS)
#: Characters that start a new word; quotes and Markdown emphasis only at the start of a
#: word (``"1970's"`` is one word, ``"**Dr."`` ends with ``Dr``).
_OPENERS: Final = frozenset("([")
_WORD_OPENERS: Final = frozenset("\"'“‘*_`")
#: Words longer than this are never abbreviations, so the tracked word is capped.
_MAX_WORD: Final = 32
_ABBREVIATIONS: Final = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "messrs",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "vs",
        "cf",
        "al",
        "approx",
        "dept",
        "est",
        "gen",
        "gov",
        "lt",
        "col",
        "sgt",
        "capt",
        "rev",
        "hon",
        "pres",
        "rep",
        "sen",
        "inc",
        "ltd",
        "co",
        "corp",
        "bros",
        "fig",
        "figs",
        "vol",
        "vols",
        "pp",
        "ch",
        "sec",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    }
)
#: Units that end a sentence after a number: temperatures (not after a year: an initial),
#: eras and times of day (dots removed: "A.D" -> "ad").
_TEMPERATURE_UNITS: Final = frozenset({"c", "f", "k"})
_UNITS: Final = frozenset({"ft", "ad", "bc", "bce", "am", "pm"})
#: Abbreviations that end a sentence before an upper-case letter.
_CLAUSE_FINAL: Final = frozenset({"al"})
_NUMBER = re.compile(r"[-+−~±]?[0-9][0-9,.]*(?:[-–][0-9][0-9,.]*)?")
_YEAR = re.compile(r"[12][0-9]{3}")
_DOTTED = re.compile(r"[A-Za-z](?:\.[A-Za-z])+")
_ENUMERATOR = re.compile(r"(?:[0-9]{1,3}|[A-Za-z])")
_BLANK_BEFORE_PUNCT = re.compile(r"^[.,;:!?…)\]]")
_WORD = WORD  # the words counted, in the raw text (case folding can cut one: "İ" gets a dot mark)

# Tracker states.
_IN: Final = 0  # inside a sentence
_AFTER: Final = 1  # right after a terminal run (".", "?!", '."')
_CANDIDATE: Final = 2  # a boundary is possible; waiting for the next text character
_ABBREVIATED: Final = 3  # right after the period of an abbreviation ("Dr.", "J.")

# What a period is, from the word before it.
_END: Final = 0  # a terminal
_INSIDE: Final = 1  # an abbreviation inside the sentence
_FINAL: Final = 2  # an abbreviation that ends the sentence before an upper-case letter

_Piece = str | Citation


@dataclass(frozen=True, slots=True)
class CitedSentence:
    """A complete sentence of an answer, with the documents it cites.

    Attributes:
        index: 0-based position of the sentence in the answer.
        text: The sentence without citation markers, whitespace collapsed, stripped; the
            blank a marker brings before punctuation is removed (``"Seattle [1](id=2)."``
            gives ``"Seattle."``), the writer's own blanks kept (``"wait  [1](id=2)..."``
            gives ``"wait ..."``).
        doc_ids: Ids of the cited documents (1-based positions in the prompt's document
            list), distinct, in order of first citation.
        citations: Every citation marker of the sentence, in order (repeats kept).
        raw: The sentence as written, markers included (stripped of surrounding blanks;
            markers that followed the sentence end are appended).
    """

    index: int
    text: str
    doc_ids: tuple[int, ...]
    citations: tuple[Citation, ...] = ()
    raw: str = ""


def _join_text(pieces: Iterable[_Piece]) -> str:
    """Concatenate the text pieces, dropping markers and the blank a marker leaves."""
    out = ""
    after_marker = False
    for piece in pieces:
        if isinstance(piece, Citation):
            after_marker = True
            continue
        if after_marker:
            if _BLANK_BEFORE_PUNCT.match(piece.lstrip()):
                # only the one blank the marker brought: "wait  [1](id=2)..." -> "wait ..."
                out = out[:-1] if out[-1:].isspace() else out
                piece = piece.lstrip()
            elif not piece or piece[0].isspace():
                out = out.rstrip()
        after_marker = False
        out += piece
    return " ".join(out.split())


def _period_kind(word: str | None, previous: str | None, opens: bool) -> int:
    """What a period right after ``word`` is (``_END``, ``_INSIDE`` or ``_FINAL``).

    Args:
        word: The word the period ends (periods inside it kept: ``"U.S"``); None if longer
            than any abbreviation.
        previous: The word before it, None if unknown or too long.
        opens: Whether ``word`` opens the sentence (only blanks before it).

    Returns:
        The kind of the period.
    """
    if not word:
        return _END
    bare = word.rstrip(".")
    lower = bare.lower()
    if previous and _NUMBER.fullmatch(previous):
        unit = lower.replace(".", "")
        if unit in _UNITS or (unit in _TEMPERATURE_UNITS and not _YEAR.fullmatch(previous)):
            return _END
    if lower in _CLAUSE_FINAL:
        return _FINAL
    if lower in _ABBREVIATIONS or _DOTTED.fullmatch(bare):
        return _INSIDE
    if len(lower) == 1 and lower.isalpha():
        return _INSIDE  # an initial
    # A list enumerator opening the sentence ("1.", "a.").
    return _INSIDE if opens and _ENUMERATOR.fullmatch(word) else _END


class SentenceCitationTracker:
    """Split a streamed, cited answer into sentences as they complete (pure, sans-IO).

    Call :meth:`feed` with each fragment and :meth:`close` once at the end. Both return the
    sentences completed by that call, in order; the concatenation of everything returned is
    the same for every way of cutting the answer into fragments.

    A caller that parses the answer already (the references wrapper: one parser per run feeds
    the rewriter and the check) gives the parser's events to :meth:`feed_events` and
    :meth:`close_events` instead; the tracker then parses nothing. The two ways are not mixed
    on one tracker.

    Args:
        markers: The citation dialects of the answer read by :meth:`feed` (see
            :data:`~langchain_references.core._parser.MARKER_DIALECTS`); by default
            :data:`~langchain_references.core._parser.DEFAULT_MARKERS`.

    Raises:
        ValueError: If ``markers`` names an unknown dialect, or none.

    Examples:
        >>> t = SentenceCitationTracker()
        >>> t.feed("Seattle is in Washington [1](i")
        []
        >>> [(s.text, s.doc_ids) for s in t.feed("d=2). It rains a lot. [2](id=3)")]
        [('Seattle is in Washington.', (2,))]
        >>> [(s.text, s.doc_ids) for s in t.close()]
        [('It rains a lot.', (3,))]
        >>> t.ends
        [36, 61]
    """

    __slots__ = (
        "_closed",
        "_ends",
        "_final",
        "_has_text",
        "_index",
        "_markers",
        "_offset",
        "_opens",
        "_parser",
        "_pieces",
        "_previous",
        "_run",
        "_state",
        "_tail",
        "_word",
    )

    def __init__(self, *, markers: Collection[str] = DEFAULT_MARKERS) -> None:
        self._markers = markers if markers is DEFAULT_MARKERS else check_markers(markers)
        self._parser: CodeAwareParser | None = None  # made by the first feed() of text
        self._pieces: list[_Piece] = []  # the sentence so far, but for ``_run``
        self._run: list[str] = []  # characters of the text after the last piece
        self._tail: list[_Piece] = []
        self._state = _IN
        self._final = False  # in _CANDIDATE: only an upper-case letter ends the sentence
        self._has_text = False
        self._index = 0
        self._closed = False
        # The word being written (None once longer than _MAX_WORD), the word before it, and
        # whether only blanks precede the word in the sentence.
        self._word: str | None = ""
        self._previous: str | None = ""
        self._opens = True
        self._offset = 0  # characters of the answer read (markers as written)
        self._ends: list[int] = []

    @property
    def sentences_emitted(self) -> int:
        """Number of sentences returned so far."""
        return self._index

    @property
    def ends(self) -> list[int]:
        """Where each sentence returned so far ends in the answer as written (read-only).

        ``ends[i]`` is the offset of the first character after sentence ``i``: the character
        that decided its end (the blanks and markers after its last word belong to it), or
        the answer's length for the last one. The answer's text is cut there into sentences
        whatever the fragments were.
        """
        return self._ends

    @property
    def pending(self) -> str:
        """The raw text of the sentence in progress (markers included)."""
        pieces = [*self._flushed(), *self._tail]
        held = self._parser.pending if self._parser is not None else ""
        return "".join(p.raw if isinstance(p, Citation) else p for p in pieces) + held

    def feed(self, text: str) -> list[CitedSentence]:
        """Consume the next fragment of the answer.

        Args:
            text: The fragment (may be empty; may cut a marker or a word anywhere).

        Returns:
            The sentences completed by this fragment, in order.

        Raises:
            TypeError: If ``text`` is not a string.
            ValueError: If the tracker was closed.
        """
        if self._closed:
            raise ValueError("feed() after close(): use a new SentenceCitationTracker")
        return self.feed_events(self._text_parser().feed(text))

    def feed_events(self, events: Iterable[Event]) -> list[CitedSentence]:
        """Consume the next events of the answer, as a citation parser returns them.

        Args:
            events: Text and :class:`~langchain_references.core._parser.Citation` events, in order.

        Returns:
            The sentences completed by these events, in order.

        Raises:
            ValueError: If the tracker was closed.
        """
        if self._closed:
            raise ValueError("feed() after close(): use a new SentenceCitationTracker")
        out: list[CitedSentence] = []
        for event in events:
            self._consume(event, out)
        return out

    def close(self) -> list[CitedSentence]:
        """End the answer: flush the last sentence (and any text held by the parser).

        Returns:
            The remaining sentences (at most one, possibly with empty ``text`` when the
            answer ends with markers only). Closing twice returns nothing.
        """
        if self._closed:
            return []
        return self.close_events(self._parser.close() if self._parser is not None else ())

    def close_events(self, events: Iterable[Event] = ()) -> list[CitedSentence]:
        """End the answer after its last events (a parser's ``close()``).

        Args:
            events: The last events.

        Returns:
            The remaining sentences, as :meth:`close` does. Closing twice returns nothing.
        """
        if self._closed:
            return []
        out = self.feed_events(events)
        self._closed = True
        if self._started() or any(isinstance(p, Citation) for p in self._tail):
            out.append(self._emit())
        return out

    # ------------------------------------------------------------------ internals

    def _text_parser(self) -> CodeAwareParser:
        if self._parser is None:
            self._parser = CodeAwareParser(markers=self._markers)
        return self._parser

    def _started(self) -> bool:
        return bool(self._pieces or self._run)

    def _flushed(self) -> list[_Piece]:
        """The sentence's pieces, the pending characters joined into the last one."""
        if self._run:
            self._pieces.append("".join(self._run))
            self._run = []
        return self._pieces

    def _consume(self, event: str | Citation, out: list[CitedSentence]) -> None:
        if isinstance(event, Citation):
            if self._state == _IN or (self._state == _ABBREVIATED and not self._final):
                self._flushed().append(event)
            else:  # right after a sentence end: the marker belongs to that sentence
                self._state = _CANDIDATE
                self._tail.append(event)
            self._offset += len(event.raw)
            return
        for char in event:
            self._char(char, out)
            self._track(char)
            self._offset += 1

    def _track(self, char: str) -> None:
        """Follow the words of the text (citations are not text)."""
        if char.isspace():
            if self._word != "":
                self._previous, self._word, self._opens = self._word, "", False
        elif char in _OPENERS or (char in _WORD_OPENERS and self._word == ""):
            self._previous, self._word, self._opens = None, "", False
        elif self._word is not None:
            self._word = self._word + char if len(self._word) < _MAX_WORD else None

    def _char(self, char: str, out: list[CitedSentence]) -> None:
        """Read one character of text: its state's step (:data:`_STEPS`), then ``_IN``'s.

        A step returns whether it took the character; if not (it ended or continued the
        sentence) the character is read inside the sentence, here: the common case, with no
        step to call.
        """
        state = self._state
        if state != _IN and _STEPS[state](self, char, out):
            return
        if char == "\n":
            if self._has_text:
                self._state = _CANDIDATE
                self._final = False
                self._tail = [char, ""]
            elif self._started():
                self._run.append(char)
            return
        if char.isspace() and not self._started():
            return  # leading blanks
        if char in _TERMINALS and self._has_text:
            kind = _period_kind(self._word, self._previous, self._opens) if char == "." else _END
            self._state = _AFTER if kind == _END else _ABBREVIATED
            self._final = kind == _FINAL
        elif not char.isspace():
            self._has_text = True
        self._run.append(char)

    def _candidate(self, char: str, out: list[CitedSentence]) -> bool:
        """``_CANDIDATE``: blanks wait; text ends the sentence or continues it (then ``_IN``)."""
        if char.isspace():
            self._tail.append(char)
            if char == "\n":
                self._tail.append("")  # marks a strong (line-break) boundary
            return True
        if "" in self._tail or (char.isupper() if self._final else not char.islower()):
            out.append(self._emit())
        else:  # a continuation: the blanks and markers stay in the sentence
            for piece in self._tail:
                if isinstance(piece, Citation):
                    self._flushed().append(piece)
                elif piece:
                    self._run.append(piece)
            self._tail = []
        self._state = _IN
        return False

    def _after(self, char: str, out: list[CitedSentence]) -> bool:
        """``_AFTER``: more terminals and closers stay; a blank makes the end a candidate."""
        if char in _TERMINALS or char in _CLOSERS:
            self._run.append(char)
            return True
        if char.isspace():
            self._state = _CANDIDATE
            self._final = False
            self._tail = [char, ""] if char == "\n" else [char]
            return True
        self._state = _IN
        return False

    def _abbreviated(self, char: str, out: list[CitedSentence]) -> bool:
        """``_ABBREVIATED``: a terminal after the period ends; "et al. " may end before capitals."""
        if char in _TERMINALS or char in _CLOSING_MARKS:  # "Jr.)", "U.S.?"
            self._state = _AFTER
            self._final = False
            self._run.append(char)
            return True
        if char in _CLOSERS:  # Markdown emphasis: "**Dr.** Smith"
            self._run.append(char)
            return True
        if self._final and char.isspace() and char != "\n":  # "et al. " then?
            self._state = _CANDIDATE
            self._tail = [char]
            return True
        self._state = _IN
        return False

    def _emit(self) -> CitedSentence:
        own = self._flushed()
        tail_citations = [p for p in self._tail if isinstance(p, Citation)]
        pieces = [*own, *tail_citations]
        citations = tuple(p for p in pieces if isinstance(p, Citation))
        raw = "".join(p.raw if isinstance(p, Citation) else p for p in own).strip()
        if tail_citations:
            raw = " ".join([raw, *(c.raw for c in tail_citations)]).strip()
        sentence = CitedSentence(
            index=self._index,
            text=_join_text(pieces),
            doc_ids=tuple(dict.fromkeys(c.doc_id for c in citations)),
            citations=citations,
            raw=raw,
        )
        self._index += 1
        self._ends.append(self._offset)
        self._pieces = []
        self._tail = []
        self._has_text = False
        self._state = _IN
        self._final = False
        self._word, self._previous, self._opens = "", "", True
        return sentence


def _inside(tracker: SentenceCitationTracker, char: str, out: list[CitedSentence]) -> bool:
    """``_IN``'s step: it takes nothing (``_char`` reads the character inside the sentence)."""
    return False


_Step = Callable[[SentenceCitationTracker, str, list[CitedSentence]], bool]
#: The step of each tracker state, by state (:meth:`SentenceCitationTracker._char`): whether it
#: took the character.
_STEPS: Final[tuple[_Step, ...]] = (
    _inside,
    SentenceCitationTracker._after,
    SentenceCitationTracker._candidate,
    SentenceCitationTracker._abbreviated,
)


def split_cited_sentences(
    text: str, *, markers: Collection[str] = DEFAULT_MARKERS
) -> list[CitedSentence]:
    """Split a complete answer into cited sentences (``feed(text)`` then ``close()``).

    Args:
        text: The whole answer, with citation markers.
        markers: Its citation dialects (see :class:`SentenceCitationTracker`).

    Returns:
        Its sentences, in order.

    Raises:
        ValueError: If ``markers`` names an unknown dialect, or none.
    """
    tracker = SentenceCitationTracker(markers=markers)
    return [*tracker.feed(text), *tracker.close()]


def is_verification_worthy(sentence: CitedSentence, *, min_words: int = 4) -> bool:
    """Default test of whether a sentence makes a claim worth checking.

    Liu et al. (2023) check only *verification-worthy* statements (statements about the
    external world). This approximation keeps sentences of at least ``min_words`` words
    that are not questions; headings, greetings and short list labels are left out.

    Args:
        sentence: The sentence.
        min_words: Minimum number of words.

    Returns:
        Whether the sentence should be verified.
    """
    text = sentence.text.strip()
    return len(_WORD.findall(text)) >= min_words and not text.rstrip("*_\"'”’)").endswith("?")


@cache
def _pysbd() -> ModuleType:
    with warnings.catch_warnings():
        # pysbd 0.3.4 has regex literals with invalid escapes; Python warns when it compiles them.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", SyntaxWarning)
        return importlib.import_module("pysbd")


def sentence_segmenter(language: str = "en") -> Any:
    """A new pysbd segmenter that keeps the text as it is (``clean=False``).

    A new one per text: pysbd keeps per-text state on the instance. A module that splits
    sentences calls it once at import, so that without pysbd it fails to import with the
    ``ImportError`` of ``pysbd`` (which the command line turns into the extra to install).

    Args:
        language: pysbd language code.

    Returns:
        The ``pysbd.Segmenter``.

    Raises:
        ImportError: If pysbd is not installed.
        ValueError: If pysbd does not support the language.
    """
    try:
        return _pysbd().Segmenter(language=language, clean=False)
    except ValueError as exc:
        raise ValueError(f"pysbd does not support language {language!r}") from exc


_BLANKS: Final = re.compile(r"\s*")
#: Characters pysbd segments at once: the package's one bound of pysbd's input
#: (:data:`~langchain_references.text.sentences.PYSBD_WINDOW`). A longer text is segmented in
#: windows of about this size: linear in the text, and a caller with a budget stops after one
#: window.
SEGMENT_WINDOW: Final = PYSBD_WINDOW


def _segment(segmenter: Any, text: str) -> list[tuple[int, int]]:
    """The sentences pysbd finds in ``text``, as offsets (what it drops or changes: one).

    pysbd's own ``segment`` locates each sentence it found by searching the whole text again
    from its start (``re.finditer`` per sentence, even without ``char_span``): quadratic in
    the sentences. Its processor gives the same sentences without that step, and each one
    is located here with ``str.find`` from the end of the previous one: linear.
    """
    try:
        pieces: list[str] = segmenter.processor(text).process() if text else []
    except Exception:  # pysbd is a heuristic: keep the text whole rather than fail
        logger.debug("Sentence splitting failed; keeping the text as one sentence", exc_info=True)
        pieces = []
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in pieces:
        stripped = piece.strip()
        if not stripped:
            continue
        start = text.find(stripped, cursor)
        if start < 0 or text[cursor:start].strip():
            logger.debug("Sentence splitter left out or changed text; keeping the rest whole")
            break
        spans.append((start, start + len(stripped)))
        cursor = start + len(stripped)
    rest = text[cursor:]
    if rest.strip():
        start = cursor + len(rest) - len(rest.lstrip())
        spans.append((start, start + len(rest.strip())))
    return spans


def iter_sentence_spans(
    text: str, *, language: str = "en", window: int = SEGMENT_WINDOW
) -> Iterator[tuple[int, int]]:
    """Split a whole text into sentences with pysbd, as offsets, one window at a time.

    pysbd reads at most ``window`` characters at once: of each window's sentences all but
    the last are kept (pysbd saw the text after them) and the next window starts at the last
    one. A window that holds a single sentence (one longer than the window) is cut at its
    last blank. The time is linear in the text, and a caller may stop early (a budget of
    sentences).

    Args:
        text: The text (a line, a paragraph, a document).
        language: pysbd language code.
        window: Characters given to pysbd at once.

    Yields:
        ``(start, end)`` of each non-blank sentence, in order: ``text[start:end]`` is the
        sentence, stripped.

    Raises:
        ImportError: If pysbd is not installed.
        ValueError: If pysbd does not support the language, or ``window`` is below 2.
    """
    if window < 2:
        raise ValueError(f"window must be at least 2, got {window}")
    sentence_segmenter(language)  # fail now for an unknown language or without pysbd
    cursor = 0
    while cursor < len(text):
        stop = min(len(text), cursor + window)
        spans = _segment(sentence_segmenter(language), text[cursor:stop])
        if stop == len(text):
            for start, end in spans:
                yield cursor + start, cursor + end
            return
        if len(spans) >= 2:
            for start, end in spans[:-1]:
                yield cursor + start, cursor + end
            cursor += spans[-1][0]
            continue
        blank = max(text.rfind(" ", cursor + 1, stop), text.rfind("\n", cursor + 1, stop))
        cut = blank if blank > cursor else stop
        piece = text[cursor:cut]
        if piece.strip():
            start = cursor + len(piece) - len(piece.lstrip())
            yield start, start + len(piece.strip())
        cursor = _BLANKS.match(text, cut).end()  # type: ignore[union-attr] # always matches


def sentence_spans(text: str, *, language: str = "en") -> list[tuple[int, int]]:
    """Split a whole text into sentences with pysbd, as offsets in the text.

    Each sentence is located in the text from the end of the previous one, so the offsets are
    exact and the blanks around a sentence are left out. No text is lost: when pysbd leaves
    part of the text out (it drops what it cannot find again, e.g. text holding the symbols
    it uses internally), changes it, or fails, the text from there to the end of the window
    is one sentence. Long texts are segmented in windows (:func:`iter_sentence_spans`), so
    the time is linear in the text.

    Args:
        text: The text (a line, a paragraph, a document).
        language: pysbd language code.

    Returns:
        ``(start, end)`` of each non-blank sentence, in order: ``text[start:end]`` is the
        sentence, stripped.

    Raises:
        ImportError: If pysbd is not installed.
        ValueError: If pysbd does not support the language.
    """
    return list(iter_sentence_spans(text, language=language))
