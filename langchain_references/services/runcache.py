"""A content-addressed cache of finished work, in one SQLite file: what makes a run resumable.

:class:`RunCache` stores JSON values under ``(namespace, key)``, where the key is the SHA-256
of the inputs that determine the value (:func:`content_key`): a finished item of a batch (its
statement, settings and judge), a search result (provider, query, ``k``), a fetched page (its
URL), a judgement (judge identity, statement, passage). Changing an input changes the key, so
a changed judge redoes the judging and reuses the searches and pages.

Safety:

* every :meth:`RunCache.put` is one SQLite transaction: an item is in the cache whole or not
  at all; a process killed at any point (Ctrl-C, ``SIGKILL``) leaves a usable file holding
  every item written before;
* the file is in WAL mode with ``synchronous=NORMAL``: committed items survive a crash of the
  process (not necessarily a power loss);
* each thread has its own connection (SQLite connections must not be shared between threads);
  asyncio code calls the methods directly (one small indexed read or write) or in a thread;
  several processes may share one file (SQLite's locking, a busy timeout of 30 s).

A run goes on when its cache fails (``keep_going=True``, the commands' setting: one warning,
then no cache), and the file stays under a size cap (``max_bytes``, 1 GiB by default: the
oldest entries are evicted past it).

Reading and writing are separate decisions: a run always records what it finishes, and reads
back only when resuming (``reuse=True``); a fresh run (``reuse=False``) recomputes everything
and overwrites what it recomputes. :meth:`RunCache.stats` says how many lookups were reused.

Examples:
    >>> cache = RunCache(":memory:")
    >>> key = content_key("judge", {"statement": "s", "passage": "p"})
    >>> cache.put("judgement", key, {"label": "entails"})
    >>> cache.get("judgement", key)
    {'label': 'entails'}
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "RunCache",
    "RunCacheError",
    "content_key",
    "default_run_cache_path",
    "object_settings",
]

logger = logging.getLogger(__name__)

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS entries ("
    " namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, stored_at REAL NOT NULL,"
    " PRIMARY KEY (namespace, key)) WITHOUT ROWID"
)
_INDEX: Final = "CREATE INDEX IF NOT EXISTS entries_by_age ON entries (stored_at)"
_BUSY_TIMEOUT_MS: Final = 30_000
#: The default size cap of a cache file's entries (bytes): past it, the oldest are evicted.
DEFAULT_MAX_BYTES: Final = 1 << 30
#: Writes between two checks of the size cap.
_CHECK_EVERY: Final = 64
#: What an eviction brings the entries down to, as a share of the cap.
_EVICT_TO: Final = 0.9


class RunCacheError(LangchainReferencesError, RuntimeError):
    """The cache file cannot be opened or used (not a database, unwritable directory...)."""


def default_run_cache_path() -> Path:
    """The default cache file (not created).

    Returns:
        ``$XDG_CACHE_HOME/langchain-references/runs.sqlite3`` (``~/.cache/...`` when
        ``XDG_CACHE_HOME`` is unset).
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "langchain-references" / "runs.sqlite3"


def content_key(*parts: Any) -> str:
    """The key of a value computed from ``parts``: the SHA-256 of their canonical JSON.

    Args:
        *parts: JSON-serialisable inputs (dict keys are sorted, so their order does not
            matter; list order does).

    Returns:
        64 hex digits.

    Raises:
        TypeError: If a part is not JSON-serialisable.
    """
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))  # ASCII: lone surrogates too
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def object_settings(obj: object) -> dict[str, Any]:
    """An object's settings, for cache keys: its class and public attributes.

    Numbers, strings, booleans and ``None`` are kept by value, other attributes by class name
    (e.g. the embeddings of a judge), so two objects of one class with equal simple settings
    and parts of the same classes have equal settings.

    Args:
        obj: The object (a judge, an aggregator, a splitter...).

    Returns:
        ``{"class": "module.Class", "settings": {...}}`` (JSON-serialisable).
    """
    settings: dict[str, Any] = {}
    for name, value in sorted(getattr(obj, "__dict__", {}).items()):
        if name.startswith("_"):
            continue
        simple = value is None or isinstance(value, str | int | float | bool)
        settings[name] = value if simple else type(value).__qualname__
    cls = type(obj)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "settings": settings}


class RunCache:
    """Finished work of runs, keyed by content, in one SQLite file (see the module docs).

    Args:
        path: The SQLite file (its directory is created), or ``":memory:"`` for a cache that
            lives as long as the object (one connection shared under a lock).
        reuse: Whether :meth:`get` returns what is stored (resuming); when false, lookups
            miss and the run recomputes and overwrites (a fresh run that still records).
        keep_going: What :meth:`get` and :meth:`put` do when the file fails mid-run (damaged
            pages, another process holding its lock past the busy timeout): raise
            :class:`RunCacheError` (false), or log one warning, remember the error in
            :attr:`failure` and go on without the cache (true: lookups miss, writes are
            skipped), so a run keeps what it finishes.
        max_bytes: The entries' size cap (keys and values): past it (checked every 64
            writes), the oldest entries are evicted down to 90 % of it. ``None``: no cap.
        busy_timeout_s: How long a statement waits for another connection's lock before
            failing (default 30 s).

    Attributes:
        failure: The error that made a ``keep_going`` cache stop, else ``None``.

    Raises:
        RunCacheError: If the file cannot be opened as a database.
        ValueError: If ``max_bytes`` is not positive.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        reuse: bool = True,
        keep_going: bool = False,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        busy_timeout_s: float = _BUSY_TIMEOUT_MS / 1000,
    ) -> None:
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be positive or None, got {max_bytes}")
        self.path = str(path)
        self.reuse = reuse
        self._busy_ms = int(busy_timeout_s * 1000)
        self.keep_going = keep_going
        self.max_bytes = max_bytes
        self.failure: RunCacheError | None = None
        self._writes = 0
        self._bytes: int | None = None  # the entries' size, once summed (see evict)
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._lock = threading.Lock()  # guards the counters (and the shared memory connection)
        self._shared: sqlite3.Connection | None = None
        self._connections: list[sqlite3.Connection] = []
        self._hits: Counter[str] = Counter()
        self._misses: Counter[str] = Counter()
        if not self._memory:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise RunCacheError(f"cannot create the cache directory of {path}: {exc}") from exc
        self._connection()  # open (and check) it now, not mid-run

    def __repr__(self) -> str:
        return f"RunCache({self.path!r}, reuse={self.reuse})"

    # ----------------------------------------------------------------- connections

    def _open(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path,
                timeout=self._busy_ms / 1000,
                isolation_level=None,  # autocommit: each statement is its own transaction
                check_same_thread=not self._memory,
            )
            if not self._memory:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(f"PRAGMA busy_timeout={self._busy_ms}")
            connection.execute(_SCHEMA)
            connection.execute(_INDEX)
        except sqlite3.Error as exc:
            raise RunCacheError(f"cannot open the cache {self.path}: {exc}") from exc
        with self._lock:
            self._connections.append(connection)
        return connection

    def _connection(self) -> sqlite3.Connection:
        if self._memory:
            if self._shared is None:
                self._shared = self._open()
            return self._shared
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open()
            self._local.connection = connection
        return connection

    def _execute(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        connection = self._connection()
        try:
            if self._memory:
                with self._lock:
                    return connection.execute(sql, params).fetchall()
            return connection.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise RunCacheError(f"cache {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close every connection (the object must not be used afterwards)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            try:
                connection.close()
            except sqlite3.ProgrammingError:  # made in another thread: closed with it
                logger.debug("Cache connection of another thread left open")
        self._local = threading.local()
        self._shared = None

    # ----------------------------------------------------------------- entries

    def get(self, namespace: str, key: str) -> Any:
        """The value stored under ``(namespace, key)``; ``None`` if absent or not reusing.

        A value that is not valid JSON (it cannot be, unless the file was edited) is a miss.

        Args:
            namespace: The kind of value (``"factcheck"``, ``"judgement"``...).
            key: Its :func:`content_key`.

        Returns:
            The JSON value, or ``None``.
        """
        if not self.reuse or self.failure is not None:
            return None
        try:
            rows = self._execute(
                "SELECT value FROM entries WHERE namespace = ? AND key = ?", (namespace, key)
            )
        except RunCacheError as exc:
            self._failed(exc)
            return None
        value: Any = None
        if rows:
            try:
                value = json.loads(rows[0][0])
            except ValueError:
                logger.warning("Ignoring a damaged %s entry in %s", namespace, self.path)
        with self._lock:
            (self._hits if value is not None else self._misses)[namespace] += 1
        return value

    def put(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` under ``(namespace, key)`` in one transaction (replacing any).

        Args:
            namespace: The kind of value.
            key: Its :func:`content_key`.
            value: A JSON-serialisable value (not ``None``).

        Raises:
            ValueError: If ``value`` is ``None``.
            TypeError: If it is not JSON-serialisable.
            RunCacheError: If the database refuses the write.
        """
        if value is None:
            raise ValueError("cannot store None: it means 'not cached'")
        text = json.dumps(value, separators=(",", ":"))  # ASCII: lone surrogates are stored too
        if self.failure is not None:
            return
        try:
            self._execute(
                "INSERT OR REPLACE INTO entries (namespace, key, value, stored_at) "
                "VALUES (?, ?, ?, ?)",
                (namespace, key, text, time.time()),
            )
            with self._lock:
                self._writes += 1
                if self._bytes is not None:
                    self._bytes += len(key) + len(text)  # a replaced entry counts twice
                check = self._writes % _CHECK_EVERY == 0
            if check:
                self.evict()
        except RunCacheError as exc:
            self._failed(exc)

    def _failed(self, error: RunCacheError) -> None:
        """A read or write failed: raise, or (``keep_going``) warn once and go on without it."""
        if not self.keep_going:
            raise error
        with self._lock:
            first = self.failure is None
            if first:
                self.failure = error
        if first:
            logger.warning(
                "%s; the run goes on without its cache: what finishes from now on is reported "
                "but not recorded for --resume",
                error,
            )

    def entry_bytes(self) -> int:
        """The size of the entries' keys and values (bytes; reads every entry).

        Returns:
            The size.
        """
        rows = self._execute(
            "SELECT COALESCE(SUM(LENGTH(key) + LENGTH(value)), 0) FROM entries", ()
        )
        return int(rows[0][0])

    def evict(self) -> int:
        """Delete the oldest entries while the entries are past :attr:`max_bytes`.

        The entries' size is summed at the first check and whenever the running count (this
        object's writes, a replaced entry counted twice) says it is past the cap.
        An eviction brings it down to 90 % of the cap; the freed space is reused by the next
        writes (the file does not shrink).

        Returns:
            How many entries were deleted.
        """
        if self.max_bytes is None:
            return 0
        with self._lock:
            known = self._bytes
        if known is None or known > self.max_bytes:  # first check, or over: sum them exactly
            known = self.entry_bytes()
        target = self.max_bytes * _EVICT_TO
        deleted = 0
        while known > self.max_bytes or (deleted and known > target):
            oldest = self._execute(
                "SELECT namespace, key, LENGTH(key) + LENGTH(value) FROM entries "
                "ORDER BY stored_at LIMIT 256",
                (),
            )
            if not oldest:
                break
            for namespace, key, size in oldest:
                self._execute(
                    "DELETE FROM entries WHERE namespace = ? AND key = ?", (namespace, key)
                )
                known -= int(size)
                deleted += 1
                if known <= target:
                    break
        with self._lock:
            self._bytes = known
        if deleted:
            logger.info(
                "evicted the %d oldest entries of %s (cap %d bytes)",
                deleted,
                self.path,
                self.max_bytes,
            )
        return deleted

    def stored_at(self, namespace: str, key: str) -> float | None:
        """When the entry was written (Unix time), whatever ``reuse`` says; ``None`` if absent.

        Args:
            namespace: The kind of value.
            key: Its key.

        Returns:
            The time, or ``None``.
        """
        rows = self._execute(
            "SELECT stored_at FROM entries WHERE namespace = ? AND key = ?", (namespace, key)
        )
        return float(rows[0][0]) if rows else None

    def count(self, namespace: str | None = None) -> int:
        """Number of entries (of one namespace, or all).

        Args:
            namespace: The namespace, or ``None`` for every entry.

        Returns:
            The count.
        """
        if namespace is None:
            rows = self._execute("SELECT COUNT(*) FROM entries", ())
        else:
            rows = self._execute("SELECT COUNT(*) FROM entries WHERE namespace = ?", (namespace,))
        return int(rows[0][0])

    def clear(self, namespace: str | None = None) -> int:
        """Delete entries (of one namespace, or all).

        Args:
            namespace: The namespace, or ``None`` for every entry.

        Returns:
            The number deleted.
        """
        count = self.count(namespace)
        if namespace is None:
            self._execute("DELETE FROM entries", ())
        else:
            self._execute("DELETE FROM entries WHERE namespace = ?", (namespace,))
        return count

    def stats(self) -> dict[str, tuple[int, int]]:
        """Lookups of this object so far: ``{namespace: (reused, missed)}``.

        Returns:
            The counts, by namespace (lookups made while not reusing are not counted).
        """
        with self._lock:
            names = sorted(set(self._hits) | set(self._misses))
            return {n: (self._hits[n], self._misses[n]) for n in names}

    def reused(self, namespace: str) -> int:
        """How many lookups of ``namespace`` were answered from the cache.

        Args:
            namespace: The namespace.

        Returns:
            The count.
        """
        with self._lock:
            return self._hits[namespace]
