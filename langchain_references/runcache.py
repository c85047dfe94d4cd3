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
_BUSY_TIMEOUT_MS: Final = 30_000


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

    Raises:
        RunCacheError: If the file cannot be opened as a database.
    """

    def __init__(self, path: str | os.PathLike[str], *, reuse: bool = True) -> None:
        self.path = str(path)
        self.reuse = reuse
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
                timeout=_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,  # autocommit: each statement is its own transaction
                check_same_thread=not self._memory,
            )
            if not self._memory:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            connection.execute(_SCHEMA)
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
        if not self.reuse:
            return None
        rows = self._execute(
            "SELECT value FROM entries WHERE namespace = ? AND key = ?", (namespace, key)
        )
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
        self._execute(
            "INSERT OR REPLACE INTO entries (namespace, key, value, stored_at) VALUES (?, ?, ?, ?)",
            (namespace, key, text, time.time()),
        )

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
