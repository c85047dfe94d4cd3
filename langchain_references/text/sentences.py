r"""Where a sentence ends: the package's one rule, its characters and pysbd's input bound (sans-IO).

**The rule.** A sentence ends after a sentence-ending character (:data:`TERMINALS`), optionally
closed by quotes or brackets (:data:`CLOSERS`), where a blank (the *gap*) follows:
``'He left." Then'`` ends after ``."``. :class:`SentenceEnd` writes the rule as a regular
expression whose ``gap`` group is the blank, so a reader cuts the text at ``match.start("gap")``
and starts the next sentence at ``match.end()`` (:func:`split_sentences`).

**Its readers**, each a named variant of the rule, built here from the shared characters:

* the citation check's :class:`~langchain_references.citations.sentences.SentenceCitationTracker`
  reads the answer one character at a time (it sees partial text and refines the rule with
  abbreviations, a lower-case test and line breaks), with :data:`TRACKER_TERMINALS` and
  :data:`TRACKER_CLOSERS`;
* the rewriter's citing sentence (:data:`CITING_END`: where the sentence a deep link quotes for
  starts, in the answer's recent text);
* deep links' sentences of a cited chunk (:data:`QUOTE_END`: the quotes a deep link may use);
* passages' linear pre-split of long paragraphs (:data:`PASSAGE_GAP`).

Whole texts (documents, articles, pages) are split by pysbd
(:func:`~langchain_references.citations.sentences.sentence_spans`), which reads at most
:data:`PYSBD_WINDOW` characters at once.

Where a variant differs from the rule, its definition says why. Three differences are
structural (deep links' capital after the gap, passages' clause ends and one-space gap, the
tracker's refinements); the others are narrower character sets kept so that what each reader
produced stays as it was (a refactor, issue 33 point 5): widening them changes output and is a
separate decision.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CITING_END",
    "CJK_TERMINALS",
    "CLAUSE_ENDS",
    "CLOSERS",
    "CURLY_CLOSERS",
    "ELLIPSIS",
    "GUILLEMET",
    "LATIN_TERMINALS",
    "MARKDOWN_CLOSERS",
    "OPENERS",
    "PASSAGE_GAP",
    "PYSBD_WINDOW",
    "QUOTE_END",
    "STRAIGHT_CLOSERS",
    "TERMINALS",
    "TRACKER_CLOSERS",
    "TRACKER_TERMINALS",
    "SentenceEnd",
    "char_class",
    "split_sentences",
]

# ------------------------------------------------------------------------ the shared characters

#: Sentence-ending punctuation of Latin-script text.
LATIN_TERMINALS: Final = ".!?"
#: The horizontal ellipsis (one character, ``…``).
ELLIPSIS: Final = "\u2026"
#: Full-width CJK sentence ends: ideographic full stop, exclamation and question marks.
CJK_TERMINALS: Final = "\u3002\uff01\uff1f"
#: Every sentence-ending character.
TERMINALS: Final = LATIN_TERMINALS + ELLIPSIS + CJK_TERMINALS
#: Clause ends: not sentence ends, but where a long text may be cut when no sentence end is near.
CLAUSE_ENDS: Final = ";:"
#: Closing quotes and brackets of a keyboard.
STRAIGHT_CLOSERS: Final = "\"')]"
#: Typographic closing quotes (``”``, ``’``).
CURLY_CLOSERS: Final = "\u201d\u2019"
#: The closing guillemet (``»``).
GUILLEMET: Final = "\u00bb"
#: Everything that may close a sentence after its end: ``He left.")``.
CLOSERS: Final = STRAIGHT_CLOSERS + CURLY_CLOSERS + GUILLEMET
#: Markdown emphasis and code marks, which close a sentence of Markdown: ``**Done.** Next``.
MARKDOWN_CLOSERS: Final = "*_`"
#: What may open a sentence before its first letter: ``(See below.)``, ``"Yes," he said``.
OPENERS: Final = "\"'(["

#: Characters pysbd reads at once: the one bound of its input. Its processor's time grows faster
#: than the text on long prose (its abbreviation rules rescan the text: x3.9 per doubling at
#: 32,000 characters, ``benchmarks/bench_splitter.py``), so a longer text is segmented in windows
#: of about this size (:func:`~langchain_references.citations.sentences.iter_sentence_spans`).
PYSBD_WINDOW: Final = 1_000


def char_class(chars: str) -> str:
    r"""A regular-expression character class matching any one of ``chars``.

    Args:
        chars: The characters (at least one).

    Returns:
        ``[...]`` with each character escaped (``]``, ``\``, ``^`` and ``-`` included).

    Raises:
        ValueError: If ``chars`` is empty (an empty class matches nothing).

    Examples:
        >>> char_class(".!?")
        '[\\.!\\?]'
    """
    if not chars:
        raise ValueError("a character class needs at least one character")
    return "[" + "".join(re.escape(char) for char in chars) + "]"


@dataclass(frozen=True)
class SentenceEnd:
    r"""One variant of the rule: a terminal, closers, a gap, and what the next sentence opens with.

    Attributes:
        terminals: The characters that end a sentence.
        closers: The characters that may follow a terminal before the gap ("" for none).
        most_closers: How many closers may follow at most (None: any number).
        gap: The blank after the sentence, a regular expression (``\s+``: any blanks).
        openers: What may come before the capital of :attr:`capital_next`.
        capital_next: Whether the next sentence must start with an upper-case ASCII letter
            or a digit (after one of :attr:`openers`), checked without reading it.
    """

    terminals: str
    closers: str = ""
    most_closers: int | None = None
    gap: str = r"\s+"
    openers: str = ""
    capital_next: bool = False

    def regex(self) -> str:
        """The rule as a regular expression; its group ``gap`` is the blank after the sentence.

        Returns:
            The expression's source.
        """
        source = char_class(self.terminals)
        if self.closers:
            repeat = "*" if self.most_closers is None else f"{{0,{self.most_closers}}}"
            source += char_class(self.closers) + repeat
        source += f"(?P<gap>{self.gap})"
        if self.capital_next:
            opener = char_class(self.openers) + "?" if self.openers else ""
            source += f"(?={opener}[A-Z0-9])"
        return source

    def compile(self) -> re.Pattern[str]:
        """The compiled :meth:`regex`.

        Returns:
            The pattern.
        """
        return re.compile(self.regex())


def split_sentences(pattern: re.Pattern[str], text: str) -> Iterator[str]:
    """Cut a text into sentences at each match of a :meth:`SentenceEnd.compile` pattern.

    A sentence runs to its gap (its terminal and closers kept); the gap itself is left out.
    Joining the sentences with their gaps gives the text back.

    Args:
        pattern: A compiled :class:`SentenceEnd`.
        text: The text.

    Yields:
        The non-empty sentences, in order.

    Examples:
        >>> list(split_sentences(QUOTE_END.compile(), "See e.g. this. It works."))
        ['See e.g. this.', 'It works.']
    """
    start = 0
    for match in pattern.finditer(text):
        yield text[start : match.start("gap")]  # never empty: a terminal ends it
        start = match.end()
    if start < len(text):
        yield text[start:]


# ------------------------------------------------------------------------------------ variants

#: The tracker's sentence ends. No CJK ends: kept so that the citation check cuts answers where
#: it did (with them, a CJK end followed by a citation or a blank would end a sentence).
TRACKER_TERMINALS: Final = LATIN_TERMINALS + ELLIPSIS
#: The tracker's closers: Markdown marks too, since the answer it reads is Markdown and the
#: rewriter's output keeps them (``**Seattle.** Next`` is two sentences). Only
#: :data:`CLOSERS` close a sentence right after an abbreviation's period (``Jr.)``).
TRACKER_CLOSERS: Final = CLOSERS + MARKDOWN_CLOSERS

#: The rewriter's citing sentence starts after the last match in the answer's recent text.
#: Simpler than the tracker (no abbreviations, no lower-case test): it runs on each citation
#: over partial text and only shortens the words matched against the cited chunk when it cuts
#: too early. Latin ends and keyboard closers only: kept so that the quote each citation links to
#: stays the same (an ellipsis, often inside a sentence, "It was… big", would cut it short).
CITING_END: Final = SentenceEnd(LATIN_TERMINALS, STRAIGHT_CLOSERS)

#: Deep links' sentences of a cited chunk (whitespace collapsed). A capital or a digit must open
#: the next sentence: chunk text gets no abbreviation test, and this keeps ``e.g. foo`` and
#: ``approx. five`` whole. No closers and Latin ends only: kept so that the quotes a chunk
#: offers stay the same.
QUOTE_END: Final = SentenceEnd(LATIN_TERMINALS, openers=OPENERS, capital_next=True)

#: Passages' pre-split of a long paragraph cuts at the last match within its limit. Clause ends
#: count too: the cut only bounds what pysbd and tiktoken read (pysbd then finds the sentences),
#: and a clause end is a better cut than a space. The gap is the one space of the
#: whitespace-collapsed paragraph, which the cut drops. One closer at most and no guillemet:
#: kept so that long paragraphs are cut where they were.
PASSAGE_GAP: Final = SentenceEnd(
    TERMINALS + CLAUSE_ENDS, STRAIGHT_CLOSERS + CURLY_CLOSERS, most_closers=1, gap=" "
)
