"""Where an embedded evidence index keeps its BM25 indexes: one directory per generation.

An index in ``persist_dir`` keeps, next to Chroma's files, ``lr_bm25/{generation}/{granularity}/``
(a :class:`~langchain_references.retrieval.BM25Index` each). A build writes its generation's
directory before it switches the pointer, so the BM25 index is switched with the vectors; the
generations that a build deletes lose their directory too (:func:`prune`). A directory is
replaced atomically (written beside it, then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Final, TypeVar

from langchain_references.retrieval import BM25Index, LexicalIndexError

__all__ = ["BM25_DIR", "bm25_root", "drop", "load_generation", "prune", "save_generation"]

logger = logging.getLogger(__name__)

#: The folder of ``persist_dir`` that holds the BM25 indexes of its evidence indexes.
BM25_DIR: Final = "lr_bm25"
_PARTIAL: Final = ".partial-"

G = TypeVar("G", bound=str)


def bm25_root(persist_dir: str | Path) -> Path:
    """The BM25 folder of an embedded Chroma directory.

    Args:
        persist_dir: The Chroma directory.

    Returns:
        ``persist_dir / "lr_bm25"`` (not created).
    """
    return Path(persist_dir) / BM25_DIR


def save_generation(root: Path, generation: str, indexes: Mapping[G, BM25Index]) -> None:
    """Write the BM25 indexes of a generation, replacing its directory in one rename.

    Args:
        root: :func:`bm25_root`.
        generation: The generation's collection name.
        indexes: Granularity -> its index.

    Raises:
        LexicalIndexError: If they cannot be written.
    """
    final = root / generation
    partial = root / f"{generation}{_PARTIAL}{uuid.uuid4().hex}"
    try:
        for granularity, index in indexes.items():
            index.save(partial / granularity)
        old = None
        if final.exists():
            old = root / f"{generation}{_PARTIAL}{uuid.uuid4().hex}"
            final.rename(old)
        partial.rename(final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except (OSError, LexicalIndexError) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise LexicalIndexError(f"cannot save the BM25 index of {generation!r}: {exc}") from exc


def load_generation(
    root: Path, generation: str, granularities: Iterable[str]
) -> dict[str, BM25Index]:
    """Read the BM25 indexes of a generation.

    Args:
        root: :func:`bm25_root`.
        generation: The generation's collection name.
        granularities: The granularities to read.

    Returns:
        Granularity -> its index.

    Raises:
        LexicalIndexError: If one is missing, damaged or made with another tokeniser.
    """
    return {g: BM25Index.load(root / generation / g) for g in granularities}


def drop(root: Path, generation: str) -> None:
    """Delete a generation's BM25 directory (nothing if there is none).

    Args:
        root: :func:`bm25_root`.
        generation: The generation's collection name.
    """
    shutil.rmtree(root / generation, ignore_errors=True)


def prune(root: Path, index_name: str, keep: Collection[str]) -> list[str]:
    """Delete the BM25 directories of an index's generations not in ``keep`` (and partial ones).

    Args:
        root: :func:`bm25_root`.
        index_name: The index name (its generations are ``"{index_name}__g{N}"``).
        keep: The generations that still exist.

    Returns:
        The directory names deleted.
    """
    if not root.is_dir():
        return []
    deleted = []
    prefix = f"{index_name}__g"
    for path in sorted(root.iterdir()):
        if path.name.startswith(prefix) and path.name not in keep:
            shutil.rmtree(path, ignore_errors=True)
            deleted.append(path.name)
    if deleted:
        logger.debug("deleted the BM25 indexes %s", ", ".join(deleted))
    return deleted
