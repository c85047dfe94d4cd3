r"""Incremental sentence splitting of a cited answer, citations attached to their sentence.

:class:`SentenceCitationTracker` is sans-IO and pure: feed it the raw answer text as it
streams (``"Seattle is in Washington [1](id=2). It rains."``), get back each
:class:`CitedSentence` as soon as it is complete, with its text stripped of the markers and
the ids of the documents it cites. Markers are found by the core
:class:`~langchain_references._parser.CitationParser`, so a marker split across fragments
(``"[1](i"`` + ``"d=2)"``) is handled, and the tracker inherits the parser's guarantee:
**the sentences are the same however the text is cut into fragments**.

Sentence boundaries (rules, applied one character at a time):

* a *terminal* run (``.``, ``!``, ``?``, ``…``, optionally followed by closing quotes,
  brackets or Markdown emphasis ``"'”’)]*_```) ends a sentence when whitespace or a citation
  follows it and the next *text* character is not a lower-case letter
  (``"approx. five"`` and ``"e.g. this"`` do not end a sentence; ``"3.5"`` and
  ``"Seattle.Next"`` neither, since no blank follows the period);
* a period does not end a sentence after a known abbreviation (``Dr.``, ``Mr.``, ``St.``,
  ``vs.``, month names...), a single letter (initials: ``J. K. Rowling``), a dotted
  abbreviation (``e.g.``, ``U.S.``) or a list enumerator that opens the sentence
  (``1.``). The price: ``"... in the U.S. Then"`` stays one sentence;
* a line break ends the sentence (Markdown list items, headings and paragraphs);
* citations between a sentence end and the next text belong to the sentence that ended:
  ``"Seattle. [1](id=2) Next"`` and ``"Seattle [1](id=2). Next"`` both cite document 2
  from the first sentence. Citations at the very start of the answer stay with the first
  sentence.

A boundary is decided only once the next text character has arrived, so a sentence is
emitted one character late (or at :meth:`SentenceCitationTracker.close`). General-purpose
segmenters (pysbd, NLTK's Punkt) are not used because they segment a whole text at once:
their decision about a prefix can change when more text arrives, which would break split
invariance in a stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from langchain_references._parser import Citation, CitationParser

__all__ = [
    "CitedSentence",
    "SentenceCitationTracker",
    "is_verification_worthy",
    "split_cited_sentences",
]

_TERMINALS: Final = frozenset(".!?…")
_CLOSERS: Final = frozenset("\"'”’»)]*_`")
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
_LAST_TOKEN = re.compile(r"([^\s(\[\"'“‘]+)$")
_DOTTED = re.compile(r"[A-Za-z](?:\.[A-Za-z])+")
_ENUMERATOR = re.compile(r"(?:[0-9]{1,3}|[A-Za-z])")
_BLANK_BEFORE_PUNCT = re.compile(r"^[.,;:!?)\]]")
_WORD = re.compile(r"\w+")

# Tracker states.
_IN: Final = 0  # inside a sentence
_AFTER: Final = 1  # right after a terminal run (".", "?!", '."')
_CANDIDATE: Final = 2  # a boundary is possible; waiting for the next text character

_Piece = str | Citation


@dataclass(frozen=True, slots=True)
class CitedSentence:
    """A complete sentence of an answer, with the documents it cites.

    Attributes:
        index: 0-based position of the sentence in the answer.
        text: The sentence without citation markers, whitespace collapsed, stripped; a blank
            left by a marker before punctuation is removed (``"Seattle [1](id=2)."`` gives
            ``"Seattle."``).
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
                out, piece = out.rstrip(), piece.lstrip()
            elif not piece or piece[0].isspace():
                out = out.rstrip()
        after_marker = False
        out += piece
    return " ".join(out.split())


def _is_abbreviation(before: str) -> bool:
    """Whether a period right after ``before`` (the sentence so far) is not a sentence end."""
    match = _LAST_TOKEN.search(before)
    if match is None:
        return False
    token = match.group(1)
    word = token.rstrip(".").lower()
    if word in _ABBREVIATIONS or _DOTTED.fullmatch(token.rstrip(".")):
        return True
    if len(word) == 1 and word.isalpha():
        return True  # an initial
    # A list enumerator opening the sentence ("1.", "a.").
    return before.strip() == token and _ENUMERATOR.fullmatch(token) is not None


class SentenceCitationTracker:
    """Split a streamed, cited answer into sentences as they complete (pure, sans-IO).

    Call :meth:`feed` with each fragment and :meth:`close` once at the end. Both return the
    sentences completed by that call, in order; the concatenation of everything returned is
    the same for every way of cutting the answer into fragments.

    Example:
        >>> t = SentenceCitationTracker()
        >>> t.feed("Seattle is in Washington [1](i")
        []
        >>> [(s.text, s.doc_ids) for s in t.feed("d=2). It rains a lot. [2](id=3)")]
        [('Seattle is in Washington.', (2,))]
        >>> [(s.text, s.doc_ids) for s in t.close()]
        [('It rains a lot.', (3,))]
    """

    __slots__ = ("_closed", "_has_text", "_index", "_parser", "_pieces", "_state", "_tail")

    def __init__(self) -> None:
        self._parser = CitationParser()
        self._pieces: list[_Piece] = []
        self._tail: list[_Piece] = []
        self._state = _IN
        self._has_text = False
        self._index = 0
        self._closed = False

    @property
    def sentences_emitted(self) -> int:
        """Number of sentences returned so far."""
        return self._index

    @property
    def pending(self) -> str:
        """The raw text of the sentence in progress (markers included)."""
        pieces = [*self._pieces, *self._tail]
        return "".join(p.raw if isinstance(p, Citation) else p for p in pieces) + (
            self._parser.pending
        )

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
        out: list[CitedSentence] = []
        for event in self._parser.feed(text):
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
        out: list[CitedSentence] = []
        for event in self._parser.close():
            self._consume(event, out)
        self._closed = True
        if self._pieces or any(isinstance(p, Citation) for p in self._tail):
            out.append(self._emit())
        return out

    # ------------------------------------------------------------------ internals

    def _consume(self, event: str | Citation, out: list[CitedSentence]) -> None:
        if isinstance(event, Citation):
            if self._state == _IN:
                self._pieces.append(event)
            else:  # right after a sentence end: the marker belongs to that sentence
                self._state = _CANDIDATE
                self._tail.append(event)
            return
        for char in event:
            self._char(char, out)

    def _append(self, char: str) -> None:
        if self._pieces and isinstance(self._pieces[-1], str):
            self._pieces[-1] += char
        else:
            self._pieces.append(char)

    def _plain(self) -> str:
        return "".join(p for p in self._pieces if isinstance(p, str))

    def _char(self, char: str, out: list[CitedSentence]) -> None:
        if self._state == _CANDIDATE:
            if char.isspace():
                self._tail.append(char)
                if char == "\n":
                    self._tail.append("")  # marks a strong (line-break) boundary
                return
            strong = "" in self._tail
            if strong or not char.islower():
                out.append(self._emit())
            else:  # a continuation: the blanks and markers stay in the sentence
                self._pieces.extend(p for p in self._tail if p != "")
                self._tail = []
            self._state = _IN
            # fall through: process ``char`` inside the (new or continued) sentence
        elif self._state == _AFTER:
            if char in _TERMINALS or char in _CLOSERS:
                self._append(char)
                return
            if char.isspace():
                self._state = _CANDIDATE
                self._tail = [char, ""] if char == "\n" else [char]
                return
            self._state = _IN
        # _IN
        if char == "\n":
            if self._has_text:
                self._state = _CANDIDATE
                self._tail = [char, ""]
            elif self._pieces:
                self._append(char)
            return
        if char.isspace() and not self._pieces:
            return  # leading blanks
        if char in _TERMINALS and self._has_text:
            if not (char == "." and _is_abbreviation(self._plain())):
                self._state = _AFTER
        elif not char.isspace():
            self._has_text = True
        self._append(char)

    def _emit(self) -> CitedSentence:
        tail_citations = [p for p in self._tail if isinstance(p, Citation)]
        pieces = [*self._pieces, *tail_citations]
        citations = tuple(p for p in pieces if isinstance(p, Citation))
        raw = "".join(p.raw if isinstance(p, Citation) else p for p in self._pieces).strip()
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
        self._pieces = []
        self._tail = []
        self._has_text = False
        self._state = _IN
        return sentence


def split_cited_sentences(text: str) -> list[CitedSentence]:
    """Split a complete answer into cited sentences (``feed(text)`` then ``close()``).

    Args:
        text: The whole answer, with ``[n](id=k)`` markers.

    Returns:
        Its sentences, in order.
    """
    tracker = SentenceCitationTracker()
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
