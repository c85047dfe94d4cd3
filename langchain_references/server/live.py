"""The index a running service searches: it follows the index's pointer to new generations.

A build switches an index to a new generation and keeps the previous one; the next build
deletes that one (:mod:`~langchain_references.server.index`). A service that kept searching
the generation it opened would answer from the old records after one build, and fail every
search after two. :class:`LiveIndex` wraps the :class:`EvidenceIndex` the service opened and
moves to the generation the pointer names:

* **checked at most every** ``check_seconds`` (:data:`CHECK_SECONDS` by default): the first
  request after the interval reads the pointer's metadata (one Chroma read, nothing written);
  when it names another complete generation, or the same one after an in-place ``index add``
  completed (its :attr:`~EvidenceIndex.revision` went up), the index is opened again on it
  (:meth:`EvidenceIndex.reopen`, BM25 indexes loaded as at start-up, so the added records are
  found by words too) and replaces the old one. Only one request checks at a time; the others
  go on with the index they have.
* **on a failed search** (its generation deleted by a second build within the interval): the
  pointer is read again. If it names another generation, the index is reopened on it (one
  reopen at a time: requests that failed together wait for it, then use it) and the search is
  retried once there. If it names the generation that failed, the failure stands (Chroma
  failed). If it names no complete generation, the :class:`IncompleteIndexError` that says why
  is raised (the service answers 503 with it) and the next request tries again, so the service
  recovers as soon as a build completes.

Searches in flight on the old object finish there (a build keeps the previous generation) or,
if it was deleted under them, are retried once on the new one. While the pointer names no
complete generation (an in-place ``index add`` running), the service keeps answering from the
generation it has. One log line (INFO) says when the index switches.

A request therefore fails only when Chroma fails, when the index has no complete generation,
or when two more builds finish during that one request (its retry's generation deleted too).

Why an interval rather than a pointer read per request: the read is one Chroma call (a SQLite
query embedded, an HTTP round trip on a Chroma server) that every search would pay, while the
failure path above already keeps a deleted generation from failing requests; the interval
only bounds how long the service answers from the previous generation after a build.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, Generic, Never, Self, TypeVar, overload

from langchain_references.server.index import (
    EvidenceHit,
    EvidenceIndex,
    EvidenceIndexError,
    Granularity,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_references.services.retrieval import Retrieval

__all__ = ["CHECK_SECONDS", "LiveIndex"]

logger = logging.getLogger(__name__)

#: Default seconds between two reads of the pointer by a serving index.
CHECK_SECONDS: Final = 5.0

_T = TypeVar("_T")


class _OfCurrent(Generic[_T]):
    """A read-only attribute of :class:`LiveIndex`: the same attribute of its current index."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, live: None, owner: type | None = None) -> Self: ...

    @overload
    def __get__(self, live: LiveIndex, owner: type | None = None) -> _T: ...

    def __get__(self, live: LiveIndex | None, owner: type | None = None) -> Self | _T:
        if live is None:
            return self
        value: _T = getattr(live.current, self._name)
        return value

    def __set__(self, live: LiveIndex, value: Never) -> None:
        raise AttributeError(f"property {self._name!r} of 'LiveIndex' object has no setter")


class LiveIndex:
    """An :class:`EvidenceIndex` that follows its pointer to the current generation.

    It searches like the index it wraps (:meth:`search`, :meth:`asearch`,
    :meth:`search_many`, :meth:`asearch_many`, :meth:`count`) and never writes to it.

    Args:
        index: The index the service opened (:meth:`EvidenceIndex.open`). One that cannot be
            reopened (built in memory, a test double) is searched as it is.
        check_seconds: Least seconds between two reads of the pointer (0: every request).
        clock: Monotonic seconds (for tests).

    Raises:
        ValueError: If ``check_seconds`` is negative.
    """

    def __init__(
        self,
        index: EvidenceIndex,
        *,
        check_seconds: float = CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if check_seconds < 0:
            raise ValueError(f"check_seconds must be >= 0, got {check_seconds}")
        self._index = index
        self._check_seconds = check_seconds
        self._clock = clock
        self._next_check = clock() + check_seconds
        self._lock = threading.Lock()  # one pointer check or reopen at a time

    @property
    def current(self) -> EvidenceIndex:
        """The index object searched now (replaced when the pointer moves)."""
        return self._index

    #: The index name.
    name: _OfCurrent[str] = _OfCurrent()
    #: Where the index lives (a directory or a URL).
    location: _OfCurrent[str] = _OfCurrent()
    #: The generation searched now.
    generation: _OfCurrent[str] = _OfCurrent()
    #: The embeddings of the entries and the queries (the same across generations).
    embeddings: _OfCurrent[Embeddings] = _OfCurrent()
    #: How searches rank (the same across generations).
    retrieval: _OfCurrent[Retrieval] = _OfCurrent()

    def count(self, granularity: Granularity | None = None) -> int:
        """:meth:`EvidenceIndex.count` of the current generation."""
        return self._run(lambda index: index.count(granularity))

    def search(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
        """:meth:`EvidenceIndex.search` in the current generation."""
        return self._run(lambda index: index.search(query, granularity=granularity, k=k))

    def search_many(
        self, queries: Sequence[str], *, granularity: Granularity, k: int
    ) -> list[list[EvidenceHit]]:
        """:meth:`EvidenceIndex.search_many` in the current generation."""
        return self._run(lambda index: index.search_many(queries, granularity=granularity, k=k))

    async def asearch(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
        """:meth:`EvidenceIndex.asearch` in the current generation."""
        return (await self.asearch_many([query], granularity=granularity, k=k))[0]

    async def asearch_many(
        self, queries: Sequence[str], *, granularity: Granularity, k: int
    ) -> list[list[EvidenceHit]]:
        """:meth:`EvidenceIndex.asearch_many` in the current generation."""
        index = await asyncio.to_thread(self.fresh) if self._due() else self._index
        try:
            return await index.asearch_many(queries, granularity=granularity, k=k)
        except EvidenceIndexError as exc:
            newer = await asyncio.to_thread(self._after_failure, index, exc)
            if newer is None:
                raise
        return await newer.asearch_many(queries, granularity=granularity, k=k)

    def _run(self, call: Callable[[EvidenceIndex], _T]) -> _T:
        """``call`` on the current index; retried once on a newer one if it fails."""
        index = self.fresh()
        try:
            return call(index)
        except EvidenceIndexError as exc:
            newer = self._after_failure(index, exc)
            if newer is None:
                raise
        return call(newer)

    def _due(self) -> bool:
        return self._clock() >= self._next_check

    def fresh(self) -> EvidenceIndex:
        """The index to search now: :attr:`current`, after reading the pointer if that is due.

        At most one caller reads the pointer at a time; the others get :attr:`current` as it
        is. Reading the pointer is blocking I/O (call it in a worker thread from async code).

        Returns:
            The current index (a newer one if the pointer moved to a complete generation).
        """
        if self._due() and self._lock.acquire(blocking=False):
            try:
                if self._due():
                    self._next_check = self._clock() + self._check_seconds
                    self._follow()
            finally:
                self._lock.release()
        return self._index

    def _follow(self) -> None:
        """Under the lock: reopen on the generation the pointer names, if it changed."""
        index = self._index
        try:
            pointed = index.pointed_version()
            if pointed is not None and pointed != (index.generation, index.revision):
                self._switch(index.reopen())
        except EvidenceIndexError as exc:  # the generation it has still answers
            logger.warning(
                "index %r: still on generation %r: %s", index.name, index.generation, exc
            )

    def _after_failure(
        self, failed: EvidenceIndex, exc: EvidenceIndexError
    ) -> EvidenceIndex | None:
        """After ``failed`` failed a search: the index to retry on, or ``None`` (it stands).

        Raises:
            IncompleteIndexError: If the pointer names no complete generation.
            IndexNotFoundError: If the index is gone.
        """
        with self._lock:
            if self._index is not failed:  # another request switched meanwhile
                return self._index
            if not failed.reopenable:
                return None
            try:
                pointed = failed.pointed_generation()
            except EvidenceIndexError:
                return None  # Chroma fails: the search's own error says so
            if pointed == failed.generation:
                return None  # the generation the pointer names failed: not a switch
            logger.warning(
                "index %r: generation %r failed (%s); opening the current one",
                failed.name,
                failed.generation,
                exc,
            )
            self._next_check = self._clock() + self._check_seconds
            return self._switch(failed.reopen())

    def _switch(self, newer: EvidenceIndex) -> EvidenceIndex:
        """Under the lock: search ``newer`` from now on (one log line)."""
        if newer.generation == self._index.generation:
            logger.info(
                "index %r: reopened generation %r after an update (revision %d)",
                newer.name,
                newer.generation,
                newer.revision,
            )
        else:
            logger.info(
                "index %r: switched from generation %r to %r",
                newer.name,
                self._index.generation,
                newer.generation,
            )
        self._index = newer
        return newer
