"""Word-level helpers shared by the heuristic judge and its polarity check (sans-IO).

One crude suffix stripper (no real stemmer), one stop-word list and one notion of negation word,
so that the word overlap and the polarity check agree on what a content word is.
"""

from __future__ import annotations

from typing import Final

__all__ = ["NEGATIONS", "STOPWORDS", "is_negation", "stem"]

#: Words that negate what follows them (``n't`` contractions are recognised by their ending).
NEGATIONS: Final = frozenset(
    {"not", "no", "never", "none", "nothing", "nobody", "nor", "neither", "cannot", "without"}
)
_STOPWORD_TEXT: Final = """
    a an the of to in and or is are was were be been being for on at by with as that this
    these those it its from has have had do does did but if than then so such can could
    will would may might shall should must about into over under also which who whom whose
    what when where why how all any both each few other some our their there they them we
    you he she his her i me my us your
"""
#: Function words left out of the word overlap.
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
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
