"""The one Chroma client factory of the package: in-memory, a directory, or a server.

Chroma's first set-up in a process is not thread-safe (concurrent first calls fail with
``KeyError: 'ephemeral'`` or ``'RustBindingsAPI' object has no attribute 'bindings'``), so every
client of the package is made here, under one process-wide lock, with anonymized telemetry off:

* :func:`ephemeral_client`: the process's in-memory client (the relevance stage's temporary
  collections), made once and shared; a new one after a fork or once the cached one was closed.
* :func:`persistent_client`: an embedded Chroma directory (the evidence index); ``fresh=True``
  loads it anew, with what other processes wrote since (a serving index reopened).
* :func:`http_client`: a Chroma server (``chroma run``), from an ``http(s)://host:port`` URL.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlsplit

from langchain_references._optional import require

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

__all__ = ["SharedEphemeralClient", "ephemeral_client", "http_client", "persistent_client"]

logger = logging.getLogger(__name__)

#: Held while any Chroma client is made in this process.
_LOCK: Final = threading.RLock()


def _chromadb(feature: str) -> Any:
    return require("chromadb", "chroma", feature=feature)


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def persistent_client(
    path: str | os.PathLike[str], *, feature: str = "Chroma", fresh: bool = False
) -> ClientAPI:
    """An embedded Chroma in ``path`` (created if missing).

    Chroma keeps one system per directory in a process, and every client made on the directory
    shares it, with the vector indexes it loaded: what another process wrote there since (an
    in-place ``add_records``) is in the SQLite file but not in the vectors searched. With
    ``fresh``, the client is made on a new system, which loads the directory as it is now; it
    then replaces the cached one, so that the later clients of the directory share it. The
    previous system is not stopped: the clients and collections made on it (the generation a
    service still searches in flight) keep working on it, and it is freed with them.

    Args:
        path: The directory.
        feature: What needs Chroma, named when it is not installed.
        fresh: Load the directory anew rather than share the process's system on it.

    Returns:
        The client.
    """
    chromadb = _chromadb(feature)
    directory = str(Path(path))
    with _LOCK:
        if fresh:
            _forget_system(directory)
        return cast("ClientAPI", chromadb.PersistentClient(path=directory, settings=_settings()))


def _forget_system(directory: str) -> None:
    """Under the lock: the next client of ``directory`` gets a new Chroma system.

    Only the cache entry goes (``PersistentClient`` names a directory's system by its path);
    its reference count stays, so that closing a client of the old system never stops the new
    one.
    """
    try:
        from chromadb.api.shared_system_client import SharedSystemClient
    except ImportError:  # a chromadb without the cache: every client has a system of its own
        return
    systems = getattr(SharedSystemClient, "_identifier_to_system", None)
    if isinstance(systems, dict):
        systems.pop(directory, None)


def http_client(url: str, *, feature: str = "Chroma") -> ClientAPI:
    """A client of the Chroma server at ``url``.

    Args:
        url: ``http://host:port`` or ``https://host:port``.
        feature: What needs Chroma, named when it is not installed.

    Returns:
        The client.

    Raises:
        ValueError: If ``url`` is not an http(s) URL with a host.
        Exception: Whatever chromadb raises when the server cannot be reached.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    ssl = parts.scheme == "https"
    port = parts.port or (443 if ssl else 80)
    chromadb = _chromadb(feature)
    with _LOCK:
        return cast(
            "ClientAPI",
            chromadb.HttpClient(host=parts.hostname, port=port, ssl=ssl, settings=_settings()),
        )


def _new_ephemeral() -> ClientAPI:
    chromadb = _chromadb("Passage selection")
    try:
        return cast("ClientAPI", chromadb.EphemeralClient(settings=_settings()))
    except ValueError as exc:
        if "different settings" not in str(exc):
            raise
        logger.warning("Reusing the in-memory Chroma created with other settings in this process")
        try:
            return cast("ClientAPI", chromadb.EphemeralClient())
        except ValueError:
            raise ValueError(
                "An in-memory Chroma with custom settings exists in this process: "
                "use a client of your own (a store on it as select_relevant's store=)"
            ) from exc


class SharedEphemeralClient:
    """The process's in-memory Chroma client, created once, under the factory's lock."""

    def __init__(self) -> None:
        self._client: ClientAPI | None = None
        self._pid = 0

    def get(self) -> ClientAPI:
        """The client; a new one after a fork or once the cached one was closed."""
        with _LOCK:
            client = self._client
            if client is None or self._pid != os.getpid() or getattr(client, "_closed", False):
                client = self._client = _new_ephemeral()
                self._pid = os.getpid()
            return client

    def reset(self) -> None:
        """Forget the cached client (the next :meth:`get` creates one)."""
        with _LOCK:
            self._client = None


#: The one shared in-memory client of the process.
SHARED_EPHEMERAL: Final = SharedEphemeralClient()


def ephemeral_client() -> ClientAPI:
    """The process's shared in-memory client (see :class:`SharedEphemeralClient`).

    Returns:
        The client.

    Raises:
        ValueError: If an in-memory Chroma with non-default settings already exists.
    """
    return SHARED_EPHEMERAL.get()
