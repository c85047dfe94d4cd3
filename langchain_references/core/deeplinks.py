"""Links to the exact passage a citation used: text fragments and PDF pages (pure, no I/O).

A citation that links to a 40-page document does not help a reader; a link that opens the page
scrolled to the quoted passage does. Two kinds of deep link are built here:

* a *text fragment* (``url#:~:text=...``, the URL Fragment Text Directives of the WICG spec,
  supported by Chromium-based browsers and Safari; other browsers simply open the page), built
  from the quoted text: the whole quote when it is short, ``start,end`` (its first and last
  words) when it is long. ``-``, ``&`` and ``,`` are percent-encoded inside each term, as the
  spec requires, and so is everything that is not a URL-safe character;
* ``url#page=N`` for a PDF whose chunk carries a page number (PDF viewers open that page; they
  do not read text fragments).

:func:`choose_quote` picks, for a ``[n](id=k)`` citation, the sentence(s) of the cited chunk
most similar to the sentence that cites it, so deep links work without provider help.

A text fragment is worth making only from a quote that finds one place on the page: the styles
link to a quote only when :func:`usable_quote` accepts it (at least :data:`MIN_QUOTE_WORDS`
words and :data:`MIN_QUOTE_CHARS` characters, found in the cited chunk); :func:`choose_quote`
only picks such sentences.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final
from urllib.parse import quote as _percent_quote
from urllib.parse import urlsplit

from langchain_references.text.sentences import QUOTE_END, split_sentences
from langchain_references.text.words import WORD, word_pattern

__all__ = [
    "MIN_QUOTE_CHARS",
    "MIN_QUOTE_WORDS",
    "QuoteFinder",
    "choose_quote",
    "deep_link",
    "page_number",
    "text_fragment",
    "usable_quote",
]

#: A quote of more words than this is linked by its first and last words (``start,end``).
MAX_EXACT_WORDS: Final = 10
#: Words taken from each end of a long quote.
EDGE_WORDS: Final = 4
#: Longest quote kept (characters), whatever the source gave.
MAX_QUOTE_CHARS: Final = 600
#: Fewest words of a quote a style links to (a shorter one may match anywhere on the page).
MIN_QUOTE_WORDS: Final = 4
#: Fewest characters of a quote a style links to.
MIN_QUOTE_CHARS: Final = 20

# The words quotes are matched on: the package's words of 3+ characters, lower-cased (not
# case-folded, as text.words.words does: kept so that the quote picked stays the same).
_LONG_WORD_RE = word_pattern(3)
# Citation markup that must not end up in a quote: ``[1](id=2)``, ``[3]``, ``<sup>..</sup>``
# (on one line), ``【..】`` and private-use marker characters. The openers are found by this
# expression and their closers by :class:`_Closers`, so that text with many openers and no
# closer costs linear time (``<sup>.*?</sup>`` as a regular expression is quadratic there).
_MARKUP_START_RE = re.compile(r"\[\d+\](?:\(id=\d+\))?|<sup>|【|[\ue200-\ue2ff]")
_CLOSERS: Final = {"<sup>": "</sup>", "【": "】"}
_SENTENCE_END_RE = QUOTE_END.compile()
_PDF_PATH_RE = re.compile(r"\.pdf$", re.IGNORECASE)
_HTTP_RE = re.compile(r"https?://[^\s#]", re.IGNORECASE)


def _encode_term(term: str) -> str:
    """Percent-encode one term of a text directive (``-``, ``&`` and ``,`` included)."""
    return _percent_quote(term, safe="").replace("-", "%2D")


class _Closers:
    """The first occurrence of a string at or after a position, each string's scan shared.

    The first ``needle`` after ``p`` is also the first after any ``q`` in ``(p, found]``, so
    every search starts where the last one of that needle stopped: linear over a whole text.
    """

    __slots__ = ("_found", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._found: dict[str, tuple[int, int]] = {}  # needle -> (searched from, found at)

    def find(self, needle: str, start: int) -> int:
        """The index of ``needle`` at or after ``start``, or -1."""
        cached = self._found.get(needle)
        if cached is not None and cached[0] <= start and (cached[1] < 0 or cached[1] >= start):
            return cached[1]
        found = self._text.find(needle, start)
        self._found[needle] = (start, found)
        return found


def _strip_markup(text: str) -> str:
    """Replace each citation marker by a blank, in linear time.

    The markers of the expression it replaces (``[1]``, ``[1](id=2)``, ``<sup>`` up to the
    first ``</sup>`` on its line, ``【`` up to the first ``】``, private-use marker
    characters), with the same result; an opener without its closer stays as text.
    """
    closers = _Closers(text)
    parts: list[str] = []
    kept = 0  # text[kept:] is not copied yet
    position = 0
    while (match := _MARKUP_START_RE.search(text, position)) is not None:
        end = match.end()
        closer = _CLOSERS.get(match.group())
        if closer is not None:
            found = closers.find(closer, end)
            newline = closers.find("\n", end) if closer == "</sup>" else -1
            if found < 0 or 0 <= newline < found:
                position = end  # no closer (on its line): the opener is text
                continue
            end = found + len(closer)
        parts.append(text[kept : match.start()])
        parts.append(" ")
        kept = position = end
    parts.append(text[kept:])
    return "".join(parts)


def _clean_quote(text: str) -> str:
    return " ".join(_strip_markup(text).split())[:MAX_QUOTE_CHARS]


def _long_enough(cleaned: str) -> bool:
    """Whether a cleaned quote has enough words and characters to find one place."""
    if len(cleaned) < MIN_QUOTE_CHARS:
        return False
    words = 0
    for word in cleaned.split():
        if WORD.search(word):
            words += 1
            if words >= MIN_QUOTE_WORDS:
                return True
    return False


@lru_cache(maxsize=256)
def _folded(text: str) -> str:
    """Text as quotes are compared with it: markup removed, blanks folded, case folded."""
    return _clean_quote_keep_length(text).casefold()


def usable_quote(quote: str | None, chunk_text: str | None = None) -> str | None:
    """Return the quote cleaned if a deep link may be made from it, else None.

    A quote is usable when it has at least :data:`MIN_QUOTE_WORDS` words and
    :data:`MIN_QUOTE_CHARS` characters (citation markup removed, blanks folded) and, when the
    cited chunk's text is given, occurs in it (case and blanks aside). A shorter quote, one
    letter or one word, would highlight whatever matches first on the page, or nothing.

    Args:
        quote: The quoted passage (untrusted), if any.
        chunk_text: The cited chunk's text, if known.

    Returns:
        The cleaned quote, or None.

    Examples:
        >>> usable_quote("Sea level rose 20 cm.", "Since 1900, sea level rose 20 cm.")
        'Sea level rose 20 cm.'
        >>> usable_quote("m", "m") is None, usable_quote("Sea level rose 20 cm.", "Ice.") is None
        (True, True)
    """
    if not quote:
        return None
    cleaned = _clean_quote(quote)
    if not _long_enough(cleaned):
        return None
    if chunk_text is not None and cleaned.casefold() not in _folded(chunk_text):
        return None
    return cleaned


def text_fragment(quote: str) -> str | None:
    """Return the text directive (``:~:text=...``) that highlights ``quote``, or None.

    Args:
        quote: The passage to link to (untrusted text: it is cleaned and percent-encoded).

    Returns:
        ``":~:text=<quote>"`` for a quote of at most :data:`MAX_EXACT_WORDS` words,
        ``":~:text=<first words>,<last words>"`` for a longer one, or None when the quote has
        no words.

    Examples:
        >>> text_fragment("Sea level rose 20 cm - since 1900, in all")
        ':~:text=Sea%20level%20rose%2020%20cm%20%2D%20since%201900%2C%20in%20all'
    """
    cleaned = _clean_quote(quote)
    words = cleaned.split()
    if not WORD.search(cleaned):
        return None
    if len(words) <= MAX_EXACT_WORDS:
        return ":~:text=" + _encode_term(" ".join(words))
    start = " ".join(words[:EDGE_WORDS])
    end = " ".join(words[-EDGE_WORDS:])
    return f":~:text={_encode_term(start)},{_encode_term(end)}"


def page_number(metadata: Mapping[str, Any]) -> int | None:
    """Return the 1-based page of a chunk, or None.

    ``page_number`` (1-based, as Unstructured and this project's provider adapters write it)
    wins; otherwise ``page`` is read as LangChain's PDF loaders write it (0-based).

    Args:
        metadata: The chunk's metadata.

    Returns:
        The 1-based page number, or None.
    """
    for key, offset in (("page_number", 0), ("page", 1)):
        value = metadata.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value + offset >= 1:
            return value + offset
        if isinstance(value, str) and value.isdigit() and int(value) + offset >= 1:
            return int(value) + offset
    return None


def _is_pdf(url: str, metadata: Mapping[str, Any]) -> bool:
    content_type = str(metadata.get("content_type") or metadata.get("mime_type") or "")
    if "pdf" in content_type.lower():
        return True
    try:
        path = urlsplit(url).path
    except ValueError:
        return False
    return bool(_PDF_PATH_RE.search(path))


def deep_link(
    url: str, *, quote: str | None = None, metadata: Mapping[str, Any] | None = None
) -> str:
    """Return ``url`` with a fragment that opens it at the cited passage.

    A PDF (by its path or its ``content_type``) whose chunk carries a page number gets
    ``#page=N``; otherwise a quote gets a text fragment. An existing fragment is kept (the text
    directive follows it, as the spec allows); an existing text directive is replaced.

    Args:
        url: The source URL (an ``http(s)`` URL; anything else is returned unchanged). The
            result is untrusted like the input: sanitise it (``safe_url``) before emitting.
        quote: The quoted passage, if any.
        metadata: The cited chunk's metadata (page number, content type), if any.

    Returns:
        The deep link, or ``url`` unchanged when there is nothing to point at.

    Examples:
        >>> deep_link("https://a.org/r.pdf", metadata={"page": 3})
        'https://a.org/r.pdf#page=4'
        >>> deep_link("https://a.org/x#top", quote="Warming is unequivocal.")
        'https://a.org/x#top:~:text=Warming%20is%20unequivocal.'
    """
    meta = metadata or {}
    if _HTTP_RE.match(url) is None:
        return url  # only web pages get fragments (not relative or other-scheme URLs)
    base, hash_sign, fragment = url.partition("#")
    fragment = fragment.split(":~:", 1)[0]
    page = page_number(meta)
    if page is not None and _is_pdf(base, meta):
        return f"{base}#page={page}"
    directive = text_fragment(quote) if quote else None
    if directive is None:
        return url
    return f"{base}#{fragment}{directive}" if hash_sign else f"{base}#{directive}"


def _sentences(text: str) -> list[str]:
    return list(split_sentences(_SENTENCE_END_RE, " ".join(text.split())))


def _words(text: str) -> set[str]:
    return set(_LONG_WORD_RE.findall(text.lower()))


class QuoteFinder:
    """The sentences of one cited chunk, ready to be matched against citing sentences.

    Built once per chunk (the rewriter keeps one per cited document of a run), so each
    citation only costs the words of its citing sentence and one pass over the chunk's
    sentences.

    Args:
        chunk_text: The cited chunk's text.
    """

    __slots__ = ("_bags", "_weights", "sentences")

    def __init__(self, chunk_text: str) -> None:
        # Only sentences long enough to find one place on the page are quotes.
        self.sentences = [
            sentence
            for sentence in _sentences(_clean_quote_keep_length(chunk_text))
            if _long_enough(sentence)
        ]
        self._bags = [_words(sentence) for sentence in self.sentences]
        frequency: dict[str, int] = {}
        for bag in self._bags:
            for word in bag:
                frequency[word] = frequency.get(word, 0) + 1
        self._weights = {word: 1.0 / count for word, count in frequency.items()}

    def best(self, citing_sentence: str | None) -> str | None:
        """Return the sentence a citing sentence most likely used (see :func:`choose_quote`).

        Args:
            citing_sentence: The answer's sentence that carries the citation, if known.

        Returns:
            The quote, or None for a chunk without a sentence long enough to quote.
        """
        sentences = self.sentences
        if len(sentences) <= 1 or not citing_sentence:
            return sentences[0] if sentences else None
        wanted = _words(citing_sentence[-MAX_QUOTE_CHARS:])
        weights = self._weights
        best, best_score = 0, 0.0
        for index, bag in enumerate(self._bags):
            score = sum(weights[word] for word in bag & wanted)
            if score > best_score:
                best, best_score = index, score
        return sentences[best]


def choose_quote(chunk_text: str, citing_sentence: str | None) -> str | None:
    """Pick the sentence of a cited chunk that a citing sentence most likely used.

    The chunk is split into sentences, and those too short to find one place on the page
    (see :func:`usable_quote`) are left out; the one sharing the most words (of three letters
    or more, case-insensitive, weighted by rarity in the chunk) with the citing sentence wins,
    ties going to the earliest. With no citing sentence, or no word in common, the chunk's
    first such sentence is the quote (the link then opens the passage at its start).

    Args:
        chunk_text: The cited chunk's text.
        citing_sentence: The answer's sentence that carries the citation, if known.

    Returns:
        The quote, or None for a chunk without a sentence long enough to quote.
    """
    return QuoteFinder(chunk_text).best(citing_sentence)


def _clean_quote_keep_length(text: str) -> str:
    """Citation markup removed and whitespace folded, with no length cap (chunks are long)."""
    return " ".join(_strip_markup(text).split())
