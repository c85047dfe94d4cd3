"""Words: the package's one word tokenizer and stop-word list, and their named variants (sans-IO).

**Tokens.** :func:`words` is the tokenizer of retrieval
(:func:`~langchain_references.services.retrieval.lexical_tokens`, BM25), the local corpus search and
the demo answerer: case-folded runs of Unicode word characters (:data:`WORD`), optionally of a
least length and without stop words. The judges read claims with :func:`claim_words` instead,
which keeps numbers and contractions whole (see there why).

**Stop words.** :data:`STOPWORDS` is the list the judges and the demo share. Each reader that
drops more or fewer words uses a named list built on it, with its reason:
:data:`LUCENE_STOPWORDS` (BM25, a saved index's tokenisation), :data:`CLAIM_STOPWORDS` (the
judges' word overlap), :data:`ANCHOR_STOPWORDS` (the polarity check's anchors) and
:data:`QUESTION_STOPWORDS` (the demo answerer). An extra set repeats no word of the list it
extends.

Also here: one crude suffix stripper (:func:`stem`, no real stemmer) and one notion of negation
word (:func:`is_negation`), so that the judges' word overlap and polarity check agree on what a
content word is.
"""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Final

__all__ = [
    "ANCHOR_STOPWORDS",
    "CLAIM_STOPWORDS",
    "LUCENE_STOPWORDS",
    "NEGATIONS",
    "QUESTION_STOPWORDS",
    "STOPWORDS",
    "WORD",
    "claim_words",
    "is_negation",
    "stem",
    "word_pattern",
    "words",
]

# ------------------------------------------------------------------------------------ tokens

#: A word: a run of Unicode word characters (letters, digits, ``_``).
WORD: Final = re.compile(r"\w+")
_LONG_WORDS: dict[int, re.Pattern[str]] = {1: WORD}
# A claim's word: ASCII letters and digits, a decimal or thousands part, a contraction.
_CLAIM_WORD: Final = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?(?:'[a-z]+)?")


def word_pattern(min_chars: int = 1) -> re.Pattern[str]:
    r"""The words of at least ``min_chars`` characters (``\w{min_chars,}``), compiled once.

    A word shorter than that is skipped whole, never a part of a longer one: the matches are
    the matches of :data:`WORD` that are long enough.

    Args:
        min_chars: Fewest characters of a word (at least 1).

    Returns:
        The pattern (:data:`WORD` itself for 1).

    Raises:
        ValueError: If ``min_chars`` is below 1.
    """
    if min_chars < 1:
        raise ValueError(f"min_chars must be at least 1, got {min_chars}")
    pattern = _LONG_WORDS.get(min_chars)
    if pattern is None:
        pattern = _LONG_WORDS[min_chars] = re.compile(rf"\w{{{min_chars},}}")
    return pattern


def words(text: str, *, min_chars: int = 1, stopwords: Container[str] = frozenset()) -> list[str]:
    """The package's tokenizer: the case-folded words of a text, in order.

    Args:
        text: Any text.
        min_chars: Fewest characters of a word kept (counted after case folding).
        stopwords: Words left out (case-folded).

    Returns:
        The words, repeats kept.

    Raises:
        ValueError: If ``min_chars`` is below 1.

    Examples:
        >>> words("The Ice-sheets MELT, don't they?", min_chars=2, stopwords={"the"})
        ['ice', 'sheets', 'melt', 'don', 'they']
    """
    found = word_pattern(min_chars).findall(text.casefold())
    return [word for word in found if word not in stopwords]


def claim_words(text: str) -> list[str]:
    """The judges' tokenizer: a claim's lower-case words, numbers and contractions whole.

    Why it differs from :func:`words`: the judges compare numbers and negations, so ``1.5``,
    ``2,000`` and ``isn't`` (``’`` read as ``'``) stay one token, where :func:`words` would
    cut them; and the heuristic judge's calibration was fitted on these tokens. Letters
    outside ASCII separate tokens.

    Args:
        text: A statement or a passage.

    Returns:
        The tokens, in order.

    Examples:
        >>> claim_words("Sea level isn’t up 1.5 m since 2,000 BC")
        ['sea', 'level', "isn't", 'up', '1.5', 'm', 'since', '2,000', 'bc']
    """
    return _CLAIM_WORD.findall(text.lower().replace("’", "'"))


# -------------------------------------------------------------------------------- stop words

_PLAIN_NEGATIONS: Final = frozenset({"no", "not"})
#: Words that negate what follows them (``n't`` contractions are recognised by their ending).
NEGATIONS: Final = _PLAIN_NEGATIONS | frozenset(
    {"never", "none", "nothing", "nobody", "nor", "neither", "cannot", "without"}
)
_BASIC_TEXT: Final = """
    a an and are as at be but by for if in into is it of on or such that the their then there
    these they this to was will with
"""
_FUNCTION_TEXT: Final = """
    about all also any been being can could did do does from had has have how i its me my our
    over so some than them those us we were what when where which who whom why would you your
"""
#: The package's stop words: function words that carry no topic (the judges' and the demo's).
STOPWORDS: Final = frozenset(_BASIC_TEXT.split()) | frozenset(_FUNCTION_TEXT.split())

#: BM25's stop words (:func:`~langchain_references.services.retrieval.lexical_tokens`): Lucene's
#: English
#: list, which ``bm25s`` ships as ``STOPWORDS_EN``. Not :data:`STOPWORDS`: a saved BM25 index
#: records its tokenisation by name (``retrieval.TOKENIZER``), so this list cannot change
#: without a new name; it is written here so that a ``bm25s`` upgrade cannot change it either.
#: Fewer words than :data:`STOPWORDS`, plus the negations ``no`` and ``not``.
LUCENE_STOPWORDS: Final = frozenset(_BASIC_TEXT.split()) | _PLAIN_NEGATIONS

_CLAIM_TEXT: Final = """
    may might shall should must under whose both each few other he she his her
"""
#: The judges' stop words (the heuristic judge's word overlap): :data:`STOPWORDS`, modal verbs,
#: third-person pronouns and quantifiers. Negations are not stop words here: the judges read
#: them apart (:func:`is_negation`). The calibration of the heuristic judge was fitted without
#: these extra words.
CLAIM_STOPWORDS: Final = STOPWORDS | frozenset(_CLAIM_TEXT.split())

_ANCHOR_TEXT: Final = """
    since per very just only even still much many yet however while whereas although though
    because due according said says say same most least like well one two three it's there's
    between during until within across among through against
"""
#: Words that anchor no direction, number or negation in the polarity check: the judges' stop
#: words and more (connectives, quantifiers, reporting verbs). The word overlap keeps these
#: extra words: the heuristic judge's calibration was fitted with them counted.
ANCHOR_STOPWORDS: Final = CLAIM_STOPWORDS | frozenset(_ANCHOR_TEXT.split())

_QUESTION_TEXT: Final = """
    after before doing get got more most out please tell up while
"""
#: The demo answerer's stop words: :data:`STOPWORDS`, BM25's negations and the words a
#: question is phrased with (``please tell``, ``what did they get``), so that a sentence
#: sharing only these with the question is not relevant. The judges must read most of them
#: (``more``, ``after``... are direction words of the polarity check, ``while`` a clause word,
#: ``no`` and ``not`` negations). The demo keeps :data:`CLAIM_STOPWORDS`' extra words, so that
#: the sentences it answers with stay the same.
QUESTION_STOPWORDS: Final = STOPWORDS | LUCENE_STOPWORDS | frozenset(_QUESTION_TEXT.split())

_SUFFIXES: Final = ("ing", "ed", "es", "s", "ly", "er", "ation")


def stem(word: str) -> str:
    """Strip one common suffix (``ing``, ``ed``, ``es``, ``s``, ``ly``, ``er``, ``ation``).

    Args:
        word: A lower-case word.

    Returns:
        The word without the first of those suffixes it ends with, if at least four letters
        remain; else the word.
    """
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def is_negation(word: str) -> bool:
    """Whether a lower-case word is a negation (``not``, ``never``, ``isn't``...).

    Args:
        word: A lower-case word.

    Returns:
        ``True`` for a word of :data:`NEGATIONS` or one ending in ``n't``.
    """
    return word in NEGATIONS or word.endswith("n't")
