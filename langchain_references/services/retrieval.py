"""Lexical retrieval and rank fusion: BM25 (``bm25s``), one tokeniser, reciprocal-rank fusion.

Both retrieval stages of the package rank with these pieces: the evidence index
(:mod:`langchain_references.server.index`) and the fact-check relevance stage
(:mod:`langchain_references.factcheck.relevance`). Each ranks candidates in one of three
:data:`Retrieval` modes:

* ``"dense"`` — by the cosine of the embeddings;
* ``"bm25"`` — by Okapi BM25 over :func:`lexical_tokens` (:class:`BM25Index`);
* ``"hybrid"`` (the default) — both rankings fused by :func:`reciprocal_rank_fusion`.

**Tokens.** :func:`lexical_tokens` is the one tokeniser of BM25, for documents and queries
alike: the package's tokenizer (:func:`~langchain_references.text.words.words`), case-folded runs
of two or more Unicode word characters (``bm25s``'s default pattern), without Lucene's English
stop words (:data:`~langchain_references.text.words.LUCENE_STOPWORDS`, ``bm25s``'s list). It
does not stem: ``bm25s``'s stemmer is PyStemmer, which is not a dependency of this package, and
a stemmer's presence must not change what a saved index means. :data:`TOKENIZER` names this
tokenisation; a saved :class:`BM25Index` records it and refuses to load under another.

**Fusion.** :func:`reciprocal_rank_fusion` scores an item ``sum(1 / (k + rank))`` over the
rankings it appears in (``rank`` from 1, ``k`` = :data:`RRF_K` = 60 as in Cormack et al. 2009);
no score scale needs calibrating, so a cosine and a BM25 score fuse without tuning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, get_args

from langchain_references._optional import require
from langchain_references.errors import LangchainReferencesError
from langchain_references.text.words import LUCENE_STOPWORDS, words

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEFAULT_RETRIEVAL",
    "RETRIEVAL_MODES",
    "RRF_K",
    "TOKENIZER",
    "BM25Index",
    "LexicalIndexError",
    "Retrieval",
    "check_retrieval",
    "lexical_tokens",
    "reciprocal_rank_fusion",
]

#: How candidates are ranked: by embeddings, by BM25, or both fused.
Retrieval: TypeAlias = Literal["dense", "bm25", "hybrid"]
#: The modes, in the order the command line lists them.
RETRIEVAL_MODES: Final[tuple[Retrieval, ...]] = get_args(Retrieval)
#: The mode used when none is given.
DEFAULT_RETRIEVAL: Final[Retrieval] = "hybrid"
#: The ``k`` of reciprocal-rank fusion (the value of Cormack, Clarke and Büttcher, 2009).
RRF_K: Final = 60
#: The name of :func:`lexical_tokens`' tokenisation, recorded with a saved index.
TOKENIZER: Final = "casefold-words-nostop-en/1"

_META: Final = "lr_bm25.json"
_IDS: Final = "ids.json"

K = TypeVar("K", bound=Hashable)


class LexicalIndexError(LangchainReferencesError, RuntimeError):
    """A saved BM25 index is missing, damaged or made with another tokenisation."""


def check_retrieval(value: object) -> Retrieval:
    """Return ``value`` as a :data:`Retrieval` mode.

    Args:
        value: ``"dense"``, ``"bm25"`` or ``"hybrid"``.

    Returns:
        The mode.

    Raises:
        ValueError: If it is none of them.
    """
    for mode in RETRIEVAL_MODES:
        if value == mode:
            return mode
    raise ValueError(f"retrieval must be one of {', '.join(RETRIEVAL_MODES)}, got {value!r}")


def _bm25s(module: str = "bm25s") -> ModuleType:
    """Import ``bm25s`` (or one of its modules): the one place this package imports it.

    ``bm25s`` sets its own logger to DEBUG when imported, so its ``Building index from
    tokens`` lines would reach any handler of the application's; its logger is given back to
    the application's logging (level unset) after the import, whoever imported it first.
    """
    imported = require(module, "factcheck", feature="BM25 retrieval")
    bm25s_logger = logging.getLogger("bm25s")
    if bm25s_logger.level == logging.DEBUG:  # what bm25s sets, not an application's choice
        bm25s_logger.setLevel(logging.NOTSET)
    return imported


def lexical_tokens(text: str) -> list[str]:
    """The BM25 tokens of a text: case-folded words of 2+ characters, stop words left out.

    Args:
        text: A document or a query.

    Returns:
        The tokens, in order (repeats kept: BM25 counts them).
    """
    return words(text, min_chars=2, stopwords=LUCENE_STOPWORDS)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]], *, k: int = RRF_K
) -> list[tuple[K, float]]:
    """Fuse rankings: each item scores ``sum(1 / (k + rank))`` over the rankings it is in.

    Ranks start at 1; an item repeated within one ranking counts at its first place. Ties keep
    the order in which the items are first met reading the rankings rank by rank (rank 1 of
    each ranking in turn, then rank 2...), so the result does not depend on set or hash order.

    Args:
        rankings: Rankings, best first (e.g. the dense one, then the BM25 one).
        k: The fusion constant (> 0): larger values flatten the top ranks' advantage.

    Returns:
        ``(item, score)`` pairs, best first.

    Raises:
        ValueError: If ``k`` is not positive.

    Examples:
        >>> reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=1)
        [('a', 0.8333333333333333), ('c', 0.75), ('b', 0.3333333333333333)]
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    scores: dict[K, float] = {}
    first_met: dict[K, tuple[int, int]] = {}
    for which, ranking in enumerate(rankings):
        seen: set[K] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            if item in scores:
                scores[item] += 1.0 / (k + rank)
                if rank < first_met[item][0]:  # an earlier ranking wins at equal rank
                    first_met[item] = (rank, which)
            else:
                scores[item] = 1.0 / (k + rank)
                first_met[item] = (rank, which)
    return sorted(scores.items(), key=lambda pair: (-pair[1], first_met[pair[0]]))


def _top(scores: npt.NDArray[Any], n: int) -> list[tuple[int, float]]:
    """The ``n`` best positive scores, best first, ties by position."""
    numpy: Any = require("numpy", "factcheck", feature="BM25 retrieval")
    candidates = numpy.flatnonzero(scores > 0)
    if len(candidates) > n:
        # keep every candidate tied with the n-th best, then order exactly
        cut = numpy.partition(scores[candidates], len(candidates) - n)[len(candidates) - n]
        candidates = candidates[scores[candidates] >= cut]
    order = numpy.lexsort((candidates, -scores[candidates]))[:n]
    return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]


class BM25Index:
    """An Okapi BM25 index (``bm25s``, Lucene's variant) over texts with string ids.

    Build one with :meth:`build`, rank with :meth:`top`, persist with :meth:`save` and
    :meth:`load` (a directory of ``bm25s`` files plus the ids and the tokeniser's name).

    Args:
        model: The ``bm25s.BM25`` model (``None`` for an empty index).
        ids: The id of each indexed text, in index order.
    """

    def __init__(self, model: Any, ids: Sequence[str]) -> None:
        self._model = model
        self.ids: tuple[str, ...] = tuple(ids)

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def build(cls, ids: Sequence[str], texts: Iterable[str]) -> BM25Index:
        """Index texts.

        Args:
            ids: One id per text.
            texts: The texts, tokenised with :func:`lexical_tokens`.

        Returns:
            The index.

        Raises:
            ValueError: If there are not as many ids as texts.
            MissingDependencyError: If ``bm25s`` is not installed.
        """
        corpus = [lexical_tokens(text) for text in texts]
        if len(corpus) != len(ids):
            raise ValueError(f"{len(ids)} ids for {len(corpus)} texts")
        if not corpus:
            return cls(None, ())
        bm25s = _bm25s()
        model = bm25s.BM25()
        model.index(corpus, show_progress=False)
        return cls(model, ids)

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """The BM25 score of every indexed text for ``query`` (index order).

        Args:
            query: The query.

        Returns:
            One score per text (0 when it shares no token with the query).
        """
        numpy: Any = require("numpy", "factcheck", feature="BM25 retrieval")
        tokens = lexical_tokens(query)
        known = [t for t in tokens if self._model is not None and t in self._model.vocab_dict]
        if not known:
            return numpy.zeros(len(self.ids), dtype=numpy.float32)  # type: ignore[no-any-return]
        return self._model.get_scores(known)  # type: ignore[no-any-return]

    def top(self, query: str, n: int) -> list[tuple[str, float]]:
        """The ``n`` texts that score best for ``query`` (texts scoring 0 are left out).

        Args:
            query: The query.
            n: How many at most.

        Returns:
            ``(id, score)`` pairs, best first; equal scores in index order.
        """
        if n < 1 or not self.ids:
            return []
        return [(self.ids[i], score) for i, score in _top(self.scores(query), n)]

    def save(self, directory: str | Path) -> None:
        """Write the index into ``directory`` (created; files already there are replaced).

        Args:
            directory: Where to write.

        Raises:
            LexicalIndexError: If it cannot be written.
        """
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
            if self._model is not None:
                self._model.save(str(path), show_progress=False)
            (path / _IDS).write_text(json.dumps(list(self.ids)), encoding="utf-8")
            meta = {"tokenizer": TOKENIZER, "entries": len(self.ids)}
            (path / _META).write_text(json.dumps(meta), encoding="utf-8")  # last: complete
        except OSError as exc:
            raise LexicalIndexError(f"cannot save the BM25 index in {path}: {exc}") from exc

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = False) -> BM25Index:
        """Read an index written by :meth:`save`.

        Args:
            directory: Where it was saved.
            mmap: Map the score matrix from disk instead of reading it into memory.

        Returns:
            The index.

        Raises:
            LexicalIndexError: If it is missing or incomplete, or was made with another
                tokenisation than :data:`TOKENIZER`.
        """
        path = Path(directory)
        try:
            meta = json.loads((path / _META).read_text(encoding="utf-8"))
            ids = json.loads((path / _IDS).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LexicalIndexError(f"no complete BM25 index in {path}: {exc}") from exc
        if not isinstance(meta, dict) or meta.get("tokenizer") != TOKENIZER:
            found = meta.get("tokenizer") if isinstance(meta, dict) else None
            raise LexicalIndexError(
                f"the BM25 index in {path} was made with tokenizer {found!r}, not {TOKENIZER!r}"
            )
        if not isinstance(ids, list) or len(ids) != meta.get("entries"):
            raise LexicalIndexError(f"the BM25 index in {path} has a damaged id list")
        if not ids:
            return cls(None, ())
        bm25s = _bm25s()
        try:
            model = bm25s.BM25.load(str(path), mmap=mmap, show_progress=False)
        except (OSError, ValueError, KeyError) as exc:
            raise LexicalIndexError(f"cannot load the BM25 index in {path}: {exc}") from exc
        return cls(model, [str(i) for i in ids])
