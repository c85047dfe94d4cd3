"""On-disk cache of fetched pages, keyed by URL.

Each entry is two files named after the SHA-256 of the requested URL: ``<key>.body`` (the
decoded body, UTF-8) and ``<key>.json`` (metadata: URLs, status, content type, time stored,
SHA-256 of the body). The metadata file is written last, atomically, so a crash leaves no
half entry; an entry whose body does not match its recorded hash is ignored.

The default directory is ``$XDG_CACHE_HOME/langchain-references/pages`` (``~/.cache/...`` when
``XDG_CACHE_HOME`` is unset). Entries older than ``ttl_s`` seconds are ignored.

``PageCache(store=run_cache)`` keeps the entries in a
:class:`~langchain_references.services.runcache.RunCache` instead (namespace ``"page"``, one JSON
value per entry, written in one transaction): the pages of a resumable run live in its cache file,
and are read back only when the run cache reuses (``--resume``).

``PageCache(corpus=...)`` keys the pages of a corpus served on a local port by their stable
form (:class:`~langchain_references.factcheck.served.ServedCorpus`): the port changes with
every run, the pages do not; the entry's final URL is read back on this run's server.

An entry remembers whether any address on its redirect chain was non-public
(``private=True``); a fetcher that does not allow private addresses skips such entries, so the
cache cannot be used to bypass the network guard.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_references.factcheck.served import ServedCorpus
from langchain_references.services.runcache import RunCache, content_key

__all__ = ["CachedPage", "PageCache", "default_cache_dir"]

logger = logging.getLogger(__name__)

_FORMAT_VERSION = 1
#: Namespace of the pages in a run cache.
PAGE_NAMESPACE = "page"


def default_cache_dir() -> Path:
    """Return the default cache directory (not created).

    Returns:
        ``$XDG_CACHE_HOME/langchain-references/pages``, or ``~/.cache/...`` if unset.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "langchain-references" / "pages"


@dataclass(frozen=True)
class CachedPage:
    """A cache entry.

    Attributes:
        url: The requested URL (the cache key).
        final_url: URL after redirects.
        status: HTTP status.
        content_type: Media type.
        body: Decoded body.
        stored_at: Unix time the entry was written.
        private: Whether any hop went to a non-public address.
    """

    url: str
    final_url: str
    status: int
    content_type: str
    body: str
    stored_at: float
    private: bool


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class PageCache:
    """Cache of fetched pages in a directory.

    The methods do blocking file I/O; async callers run them in a thread.

    Args:
        directory: Where to keep entries (created on first write). Defaults to
            :func:`default_cache_dir`.
        ttl_s: Maximum age of a usable entry in seconds; ``None`` keeps entries forever.
        store: A run cache to keep the entries in instead of ``directory``.
        corpus: A corpus served on a local port whose pages are keyed by their stable form.

    Raises:
        ValueError: If ``ttl_s`` is not positive, or both ``directory`` and ``store`` are given.
    """

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        ttl_s: float | None = None,
        store: RunCache | None = None,
        corpus: ServedCorpus | None = None,
    ) -> None:
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive or None, got {ttl_s}")
        if directory is not None and store is not None:
            raise ValueError("pass a directory or a store, not both")
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.ttl_s = ttl_s
        self.store = store
        self.corpus = corpus

    @staticmethod
    def key(url: str) -> str:
        """Return the cache key of a URL (hex SHA-256 of the URL string)."""
        return hashlib.sha256(url.encode("utf-8")).hexdigest()

    def _stable(self, url: str) -> str:
        """The URL as the entries name it (a served corpus's pages by their stable form)."""
        return self.corpus.stable(url) if self.corpus is not None else url

    def _served(self, url: str) -> str:
        """The inverse of :meth:`_stable`: a stored URL on this run's server."""
        return self.corpus.served(url) if self.corpus is not None else url

    def _paths(self, url: str) -> tuple[Path, Path]:
        key = self.key(url)
        return self.directory / f"{key}.json", self.directory / f"{key}.body"

    def _read(self, url: str) -> tuple[dict[str, Any], bytes] | None:
        """The raw metadata and body of an entry, or ``None``."""
        if self.store is not None:
            value = self.store.get(PAGE_NAMESPACE, content_key("page", url))
            if not isinstance(value, dict) or not isinstance(value.get("body"), str):
                return None
            return value, str(value["body"]).encode("utf-8")
        meta_path, body_path = self._paths(url)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            body_bytes = body_path.read_bytes()
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("Ignoring unreadable cache entry for %s: %s", url, exc)
            return None
        return meta, body_bytes

    def get(self, url: str) -> CachedPage | None:
        """Return the entry for ``url``, or ``None`` if missing, expired or damaged.

        Args:
            url: The requested URL.

        Returns:
            The cached page or ``None``.
        """
        name = self._stable(url)
        raw = self._read(name)
        if raw is None:
            return None
        meta, body_bytes = raw
        try:
            if meta["version"] != _FORMAT_VERSION or meta["url"] != name:
                return None
            if hashlib.sha256(body_bytes).hexdigest() != meta["body_sha256"]:
                logger.warning("Ignoring cache entry for %s: body does not match its hash", url)
                return None
            entry = CachedPage(
                url=url,
                final_url=self._served(str(meta["final_url"])),
                status=int(meta["status"]),
                content_type=str(meta["content_type"]),
                body=body_bytes.decode("utf-8"),
                stored_at=float(meta["stored_at"]),
                private=bool(meta["private"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            logger.warning("Ignoring malformed cache entry for %s: %s", url, exc)
            return None
        if self.ttl_s is not None and time.time() - entry.stored_at > self.ttl_s:
            logger.debug("Cache entry for %s expired", url)
            return None
        return entry

    def put(
        self,
        url: str,
        *,
        final_url: str,
        status: int,
        content_type: str,
        body: str,
        private: bool,
    ) -> None:
        """Store a page.

        Args:
            url: The requested URL (the key).
            final_url: URL after redirects.
            status: HTTP status.
            content_type: Media type.
            body: Decoded body.
            private: Whether any hop went to a non-public address.
        """
        body_bytes = body.encode("utf-8")
        url = self._stable(url)
        meta: dict[str, Any] = {
            "version": _FORMAT_VERSION,
            "url": url,
            "final_url": self._stable(final_url),
            "status": status,
            "content_type": content_type,
            "stored_at": time.time(),
            "private": private,
            "body_sha256": hashlib.sha256(body_bytes).hexdigest(),
        }
        if self.store is not None:
            self.store.put(PAGE_NAMESPACE, content_key("page", url), {**meta, "body": body})
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        meta_path, body_path = self._paths(url)
        _atomic_write(body_path, body_bytes)
        _atomic_write(meta_path, json.dumps(meta, ensure_ascii=False).encode("utf-8"))

    def clear(self) -> int:
        """Delete every entry in the directory.

        Returns:
            The number of entries deleted.
        """
        if self.store is not None:
            return self.store.clear(PAGE_NAMESPACE)
        if not self.directory.is_dir():
            return 0
        count = 0
        for meta_path in self.directory.glob("*.json"):
            meta_path.unlink(missing_ok=True)
            meta_path.with_suffix(".body").unlink(missing_ok=True)
            count += 1
        return count
