"""The index's Chroma: its clients (from the package's one factory), collections and batch limit.

One Chroma client per index, created under a process-wide lock
(:mod:`langchain_references.services._chroma`); Chroma's clients are thread-safe, so searches run
concurrently. Several worker processes may open the same embedded directory to read it, or
share a Chroma server (``chroma run``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from langchain_references._optional import MissingDependencyError
from langchain_references.server.index.errors import EvidenceIndexError
from langchain_references.services._chroma import http_client, persistent_client

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = ["COSINE", "client", "collection", "is_not_found", "max_batch"]

#: The configuration of every collection the index creates: cosine distance ``d = 1 - c``.
COSINE: Final[dict[str, Any]] = {"hnsw": {"space": "cosine"}}


def client(persist_dir: Path | None, chroma_url: str | None, *, fresh: bool = False) -> ClientAPI:
    """A client of the package's one factory (:mod:`langchain_references.services._chroma`).

    Args:
        persist_dir: Directory of an embedded Chroma.
        chroma_url: URL of a Chroma server, instead (it wins when both are given).
        fresh: Load an embedded directory anew (see :func:`persistent_client`).

    Returns:
        The client.

    Raises:
        EvidenceIndexError: If the URL is invalid, the server unreachable, or neither
            location is given.
        MissingDependencyError: If Chroma is not installed.
    """
    feature = "The evidence index"
    if chroma_url is not None:
        try:
            return http_client(chroma_url, feature=feature)
        except ValueError as exc:
            raise EvidenceIndexError(str(exc)) from exc
        except MissingDependencyError:
            raise
        except Exception as exc:  # chromadb raises plain exceptions when unreachable
            raise EvidenceIndexError(f"cannot reach Chroma at {chroma_url}: {exc}") from exc
    if persist_dir is None:
        raise EvidenceIndexError("give persist_dir or chroma_url")
    return persistent_client(persist_dir, feature=feature, fresh=fresh)


def is_not_found(exc: Exception) -> bool:
    """Whether a Chroma error says that a collection does not exist.

    Args:
        exc: The error.

    Returns:
        ``True`` for Chroma's ``NotFoundError`` or a message saying "does not exist".
    """
    return type(exc).__name__ == "NotFoundError" or "does not exist" in str(exc).lower()


def collection(chroma: ClientAPI, name: str) -> Collection | None:
    """The collection ``name``, or ``None`` if there is none.

    Args:
        chroma: The client.
        name: The collection's name.

    Returns:
        The collection (no embedding function: the index embeds), or ``None``.

    Raises:
        Exception: Chroma's own errors other than "not found" (they share no base class).
    """
    try:
        return chroma.get_collection(name, embedding_function=None)
    except Exception as exc:  # chromadb's NotFoundError, connection errors...
        if is_not_found(exc):
            return None
        raise


def max_batch(chroma: ClientAPI) -> int:
    """The most entries the client accepts in one write (1000 when it cannot tell).

    Args:
        chroma: The client.

    Returns:
        The limit.
    """
    try:
        return int(chroma.get_max_batch_size())
    except Exception:  # a client that cannot tell: Chroma's smallest limit
        return 1000
