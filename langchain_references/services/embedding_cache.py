"""Embed each text once: a bounded memo of any LangChain embeddings, shared per model object.

The fact-check chain embeds its passages to rank them (the relevance stage) and the offline
judge embeds the same passages again to weigh them (and the statement, which the relevance
stage embedded as a query: one vector for both when the model declares
:data:`QUERIES_ARE_DOCUMENTS`). :func:`shared_cache` gives every component
that holds the same :class:`~langchain_core.embeddings.Embeddings` object one
:class:`CachedEmbeddings` in front of it, so the second stage reuses the vectors of the first
(documents and queries are kept apart: a model may embed them differently).

The memo is a least-recently-used map of at most ``max_entries`` texts per kind; a vector is
stored as a tuple and handed out as a new list, so a caller cannot change what others get.
Concurrent calls (a batch of statements sharing pages, on threads or asyncio tasks) embed a
text once: a call that finds a text being embedded by another waits for its vector
(:class:`_Flight`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, NamedTuple

from langchain_core.embeddings import Embeddings

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "QUERIES_ARE_DOCUMENTS",
    "CachedEmbeddings",
    "embeds_queries_as_documents",
    "shared_cache",
]

#: Texts remembered per kind (documents, queries) by default: about 6 MB of MiniLM vectors.
DEFAULT_MAX_ENTRIES: Final = 2048


class _Flight:
    """A text being embedded by one caller: other callers wait for its vector, not embed it.

    The owner is a thread (a sync call) or an asyncio task (an async call). Waiting works
    for both kinds of waiter: a thread waits on an event, a task on a future its loop is
    told about when the vector lands.
    """

    __slots__ = ("_done", "_futures", "owner_task", "owner_thread", "vector")

    def __init__(self) -> None:
        self.owner_thread = threading.get_ident()
        self.owner_task = _current_task()
        self.vector: tuple[float, ...] | None = None  # None until done, and if it failed
        self._done = threading.Event()
        self._futures: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def land(self, vector: tuple[float, ...] | None) -> None:
        """The owner is done (``vector`` None: it failed); wake every waiter. Under the lock."""
        self.vector = vector
        self._done.set()
        for loop, future in self._futures:
            loop.call_soon_threadsafe(_resolve, future)
        self._futures.clear()

    def awaitable(self) -> asyncio.Future[None] | None:
        """A future done when the flight lands (None if it has). Under the memo's lock."""
        if self._done.is_set():
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._futures.append((loop, future))
        return future

    def wait(self) -> tuple[float, ...] | None:
        """Block until the flight lands (sync waiters); its vector, or None if it failed."""
        self._done.wait()
        return self.vector

    def waits_for(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether a caller (the current thread, in ``task`` if async) may wait for this flight.

        Never for its own flight (same thread for a sync caller, same task for an async one),
        and a sync caller never for an async owner: a blocked thread could be the one whose
        event loop runs that owner. A caller that may not wait embeds the text itself.
        """
        if task is not None:
            return self.owner_task is not task
        return self.owner_task is None and self.owner_thread != threading.get_ident()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running event loop: a sync caller
        return None


class _Plan(NamedTuple):
    """What one call does with its texts: vectors known, texts it embeds, flights it waits for.

    Attributes:
        known: Vectors remembered or landed, by text.
        mine: The distinct texts this call embeds (claimed: others wait for them).
        theirs: Texts another caller is embedding, with its flight.
        own: Texts in flight that this call embeds again itself (it may not wait for them).
    """

    known: dict[str, tuple[float, ...]]
    mine: list[str]
    theirs: dict[str, _Flight]
    own: list[str]


class _Memo:
    """A thread-safe LRU map text -> vector, with the texts being embedded (in flight)."""

    def __init__(self, max_entries: int) -> None:
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._flights: dict[str, _Flight] = {}
        self._max = max_entries

    def plan(self, texts: Sequence[str], task: asyncio.Task[Any] | None) -> _Plan:
        """Split ``texts`` into known vectors, texts to embed (claimed) and flights to wait for.

        Args:
            texts: The call's texts.
            task: The calling task (async callers), None for a sync caller.

        Returns:
            The plan.
        """
        known: dict[str, tuple[float, ...]] = {}
        mine: list[str] = []
        theirs: dict[str, _Flight] = {}
        own: list[str] = []
        with self._lock:
            for text in dict.fromkeys(texts):
                vector = self._vectors.get(text)
                if vector is not None:
                    self._vectors.move_to_end(text)
                    known[text] = vector
                elif (flight := self._flights.get(text)) is None:
                    self._flights[text] = _Flight()
                    mine.append(text)
                elif flight.waits_for(task):
                    theirs[text] = flight
                else:
                    own.append(text)
        return _Plan(known, mine, theirs, own)

    def awaitables(self, theirs: dict[str, _Flight]) -> list[asyncio.Future[None]]:
        """Futures of the flights not landed yet (async waiters)."""
        with self._lock:
            return [f for f in (flight.awaitable() for flight in theirs.values()) if f is not None]

    def land(
        self, texts: Sequence[str], vectors: Sequence[Sequence[float]] | None
    ) -> list[tuple[float, ...]]:
        """Remember the vectors of ``texts`` and land this caller's flights of them.

        Args:
            texts: The texts embedded.
            vectors: Their vectors, or None: the call failed (the flights land without a
                vector, and their waiters embed the texts themselves).

        Returns:
            The vectors, as stored.

        Raises:
            ValueError: If there is not one vector per text (the flights land as failed).
        """
        if vectors is not None and len(vectors) != len(texts):
            self.land(texts, None)
            raise ValueError(f"embeddings returned {len(vectors)} vectors for {len(texts)} texts")
        landed = [tuple(v) for v in vectors] if vectors is not None else []
        with self._lock:
            for i, text in enumerate(texts):
                flight = self._flights.get(text)
                if vectors is not None:
                    self._vectors[text] = landed[i]
                    self._vectors.move_to_end(text)
                if (
                    flight is not None
                    and flight.owner_thread == threading.get_ident()
                    and (flight.owner_task is _current_task())
                ):
                    del self._flights[text]
                    flight.land(landed[i] if vectors is not None else None)
            while len(self._vectors) > self._max:
                self._vectors.popitem(last=False)
        return landed


#: The class attribute by which an :class:`Embeddings` says that ``embed_query(text)`` is
#: ``embed_documents([text])[0]`` for every text (a symmetric model such as MiniLM): its cache
#: then keeps one memo for both, so a statement embedded as a query by one stage is not
#: embedded again as a document by another.
QUERIES_ARE_DOCUMENTS: Final = "queries_are_documents"


def embeds_queries_as_documents(embeddings: Embeddings) -> bool:
    """Whether ``embeddings`` declares queries and documents embedded alike.

    Args:
        embeddings: The embeddings.

    Returns:
        True only when it has :data:`QUERIES_ARE_DOCUMENTS` set to True.
    """
    return getattr(embeddings, QUERIES_ARE_DOCUMENTS, False) is True


class CachedEmbeddings(Embeddings):
    """Embeddings that remember the vectors of another :class:`Embeddings`, by text.

    A call embeds only the texts it has not seen (each distinct text once, in one call of the
    wrapped model) and answers the others from memory. A text that another call is embedding
    at the same moment is not embedded twice: the call waits for that vector (threads and
    asyncio tasks alike; a sync call does not wait for an async one, see
    :meth:`_Flight.waits_for`, and embeds that text itself). When the call that embeds a text
    fails, those waiting for it embed it themselves.

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
        # one memo for both kinds when the model embeds a query as it embeds a document
        self._queries = (
            self._documents if embeds_queries_as_documents(inner) else _Memo(max_entries)
        )

    # -- the drivers: the same steps, sync and async ---------------------------------------

    def _embed(self, memo: _Memo, texts: Sequence[str], embed: _Embed) -> list[list[float]]:
        plan = memo.plan(texts, None)
        known = plan.known
        _remember(known, plan.mine, _call(memo, plan.mine, embed))
        landed = {text: flight.wait() for text, flight in plan.theirs.items()}
        _remember(known, *_landed(landed))
        again = [*plan.own, *(t for t, v in landed.items() if v is None)]
        _remember(known, again, memo.land(again, embed(again)) if again else [])
        return [list(known[t]) for t in texts]

    async def _aembed(
        self, memo: _Memo, texts: Sequence[str], embed: _AsyncEmbed
    ) -> list[list[float]]:
        plan = memo.plan(texts, _current_task())
        known = plan.known
        try:
            vectors = await embed(plan.mine) if plan.mine else []
        except BaseException:
            memo.land(plan.mine, None)
            raise
        _remember(known, plan.mine, memo.land(plan.mine, vectors))
        futures = memo.awaitables(plan.theirs)
        if futures:
            await asyncio.gather(*futures)
        landed = {text: flight.vector for text, flight in plan.theirs.items()}
        _remember(known, *_landed(landed))
        again = [*plan.own, *(t for t, v in landed.items() if v is None)]
        _remember(known, again, memo.land(again, await embed(again)) if again else [])
        return [list(known[t]) for t in texts]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts, each distinct unseen one once.

        Args:
            texts: The texts.

        Returns:
            One vector per text, in order.
        """
        return self._embed(self._documents, texts, self.inner.embed_documents)

    def embed_query(self, text: str) -> list[float]:
        """Embed a query, unless it was seen.

        Args:
            text: The query.

        Returns:
            Its vector.
        """
        return self._embed(self._queries, [text], self._one_query)[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Async :meth:`embed_documents` (the wrapped model's async method)."""
        return await self._aembed(self._documents, texts, self.inner.aembed_documents)

    async def aembed_query(self, text: str) -> list[float]:
        """Async :meth:`embed_query` (the wrapped model's async method)."""
        return (await self._aembed(self._queries, [text], self._aone_query))[0]

    def _one_query(self, texts: list[str]) -> list[list[float]]:
        return [self.inner.embed_query(text) for text in texts]

    async def _aone_query(self, texts: list[str]) -> list[list[float]]:
        return [await self.inner.aembed_query(text) for text in texts]


_Embed = Callable[[list[str]], list[list[float]]]
_AsyncEmbed = Callable[[list[str]], Awaitable[list[list[float]]]]


def _call(memo: _Memo, texts: list[str], embed: _Embed) -> list[tuple[float, ...]]:
    """Embed the texts this call claimed and land them (as failed if the model raises)."""
    if not texts:
        return []
    try:
        vectors = embed(texts)
    except BaseException:
        memo.land(texts, None)
        raise
    return memo.land(texts, vectors)


def _landed(
    landed: dict[str, tuple[float, ...] | None],
) -> tuple[list[str], list[tuple[float, ...]]]:
    """The texts whose flights landed with a vector, and their vectors."""
    done = [(text, vector) for text, vector in landed.items() if vector is not None]
    return [t for t, _ in done], [v for _, v in done]


def _remember(
    known: dict[str, tuple[float, ...]], texts: Sequence[str], vectors: Sequence[tuple[float, ...]]
) -> None:
    known.update(zip(texts, vectors, strict=True))


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
