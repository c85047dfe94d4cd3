"""Embed each text once: a bounded memo of any LangChain embeddings, shared per model object.

The fact-check chain embeds its passages to rank them (the relevance stage) and the offline
judge embeds the same passages again to weigh them. :func:`shared_cache` gives every component
that holds the same :class:`~langchain_core.embeddings.Embeddings` object one
:class:`CachedEmbeddings` in front of it, so the second stage reuses the vectors of the first
(documents and queries are kept apart: a model may embed them differently).

The memo is a least-recently-used map of at most ``max_entries`` texts per kind; a vector is
stored as a tuple and handed out as a new list, so a caller cannot change what others get.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from langchain_core.embeddings import Embeddings

__all__ = ["DEFAULT_MAX_ENTRIES", "CachedEmbeddings", "shared_cache"]

#: Texts remembered per kind (documents, queries) by default: about 6 MB of MiniLM vectors.
DEFAULT_MAX_ENTRIES: Final = 2048


class _Memo:
    """A thread-safe LRU map text -> vector."""

    def __init__(self, max_entries: int) -> None:
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._max = max_entries

    def get(self, texts: Sequence[str]) -> dict[str, tuple[float, ...]]:
        with self._lock:
            found = {}
            for text in texts:
                vector = self._vectors.get(text)
                if vector is not None:
                    self._vectors.move_to_end(text)
                    found[text] = vector
            return found

    def put(self, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._vectors[text] = tuple(vector)
                self._vectors.move_to_end(text)
            while len(self._vectors) > self._max:
                self._vectors.popitem(last=False)


class CachedEmbeddings(Embeddings):
    """Embeddings that remember the vectors of another :class:`Embeddings`, by text.

    A call embeds only the texts it has not seen (each distinct text once, in one call of the
    wrapped model) and answers the others from memory.

    Args:
        inner: The embeddings to remember.
        max_entries: Texts remembered per kind (documents, queries); the least recently used
            are forgotten first.

    Raises:
        ValueError: If ``max_entries`` is below 1.
    """

    def __init__(self, inner: Embeddings, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.inner = inner
        self._documents = _Memo(max_entries)
        self._queries = _Memo(max_entries)

    @staticmethod
    def _plan(memo: _Memo, texts: Sequence[str]) -> tuple[dict[str, tuple[float, ...]], list[str]]:
        known = memo.get(texts)
        return known, [t for t in dict.fromkeys(texts) if t not in known]

    @staticmethod
    def _answer(
        memo: _Memo,
        texts: Sequence[str],
        known: dict[str, tuple[float, ...]],
        missing: list[str],
        vectors: Sequence[Sequence[float]],
    ) -> list[list[float]]:
        if len(vectors) != len(missing):
            raise ValueError(f"embeddings returned {len(vectors)} vectors for {len(missing)} texts")
        memo.put(missing, vectors)
        known.update(zip(missing, (tuple(v) for v in vectors), strict=True))
        return [list(known[t]) for t in texts]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts, each distinct unseen one once.

        Args:
            texts: The texts.

        Returns:
            One vector per text, in order.
        """
        known, missing = self._plan(self._documents, texts)
        vectors = self.inner.embed_documents(missing) if missing else []
        return self._answer(self._documents, texts, known, missing, vectors)

    def embed_query(self, text: str) -> list[float]:
        """Embed a query, unless it was seen.

        Args:
            text: The query.

        Returns:
            Its vector.
        """
        known, missing = self._plan(self._queries, [text])
        vectors = [self.inner.embed_query(text)] if missing else []
        return self._answer(self._queries, [text], known, missing, vectors)[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Async :meth:`embed_documents` (the wrapped model's async method)."""
        known, missing = self._plan(self._documents, texts)
        vectors = await self.inner.aembed_documents(missing) if missing else []
        return self._answer(self._documents, texts, known, missing, vectors)

    async def aembed_query(self, text: str) -> list[float]:
        """Async :meth:`embed_query` (the wrapped model's async method)."""
        known, missing = self._plan(self._queries, [text])
        vectors = [await self.inner.aembed_query(text)] if missing else []
        return self._answer(self._queries, [text], known, missing, vectors)[0]


_SHARED_LOCK: Final = threading.RLock()  # re-entrant: a weakref callback may run inside
_SHARED: dict[int, tuple[weakref.ref[Embeddings], CachedEmbeddings]] = {}


def shared_cache(embeddings: Embeddings) -> CachedEmbeddings:
    """The process's :class:`CachedEmbeddings` of an embeddings object (made on first use).

    Components that hold the same object get the same cache, so each text is embedded once
    between them. A :class:`CachedEmbeddings` is its own cache; an object that cannot be
    referenced weakly gets a cache of its own on every call (nothing shared, nothing leaked).

    Args:
        embeddings: The embeddings.

    Returns:
        Its cache.
    """
    if isinstance(embeddings, CachedEmbeddings):
        return embeddings
    key = id(embeddings)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is not None and entry[0]() is embeddings:
            return entry[1]
        cache = CachedEmbeddings(embeddings)
        try:
            ref = weakref.ref(embeddings, _forget(key))
        except TypeError:
            return cache
        _SHARED[key] = (ref, cache)
        return cache


def _forget(key: int) -> Callable[[weakref.ref[Embeddings]], None]:
    # bound now: at interpreter exit the module's globals may already be gone
    lock, shared = _SHARED_LOCK, _SHARED

    def forget(ref: weakref.ref[Embeddings]) -> None:
        with lock:
            entry = shared.get(key)
            if entry is not None and entry[0] is ref:
                del shared[key]

    return forget
