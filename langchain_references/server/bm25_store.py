"""Where an embedded evidence index keeps its BM25 indexes: one directory per generation.

An index in ``persist_dir`` keeps, next to Chroma's files, ``lr_bm25/{generation}/{granularity}/``
(a :class:`~langchain_references.retrieval.BM25Index` each), and in each granularity's folder
``vectors.npy``: the stored vector of each entry, in the BM25 index's order (float32), from
which a hybrid search takes the cosine of the hits that BM25 alone found, instead of reading
them from Chroma. A build writes its generation's directory before it switches the pointer,
so both are switched with the collection; the generations that a build deletes lose their
directory too (:func:`prune`). A directory is
replaced atomically (written beside it, then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from langchain_references._optional import require
from langchain_references.retrieval import BM25Index, LexicalIndexError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BM25_DIR",
    "VECTORS_FILE",
    "bm25_root",
    "drop",
    "load_generation",
    "load_vectors",
    "prune",
    "save_generation",
]

logger = logging.getLogger(__name__)

#: The folder of ``persist_dir`` that holds the BM25 indexes of its evidence indexes.
BM25_DIR: Final = "lr_bm25"
#: The file of a granularity's stored vectors (rows in its BM25 index's order).
VECTORS_FILE: Final = "vectors.npy"
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


def save_generation(
    root: Path,
    generation: str,
    indexes: Mapping[G, BM25Index],
    vectors: Mapping[G, npt.NDArray[np.float32]] | None = None,
) -> None:
    """Write the BM25 indexes of a generation, replacing its directory in one rename.

    Args:
        root: :func:`bm25_root`.
        generation: The generation's collection name.
        indexes: Granularity -> its index.
        vectors: Granularity -> the stored vectors of its entries, one row per id of its
            index, in the same order (written as :data:`VECTORS_FILE`); ``None``: none.

    Raises:
        LexicalIndexError: If they cannot be written.
        ValueError: If a granularity's vectors do not have one row per id of its index.
    """
    for granularity, matrix in (vectors or {}).items():
        if len(matrix) != len(indexes[granularity]):
            raise ValueError(
                f"{len(matrix)} vectors for the {len(indexes[granularity])} {granularity} entries"
            )
    final = root / generation
    partial = root / f"{generation}{_PARTIAL}{uuid.uuid4().hex}"
    try:
        for granularity, index in indexes.items():
            index.save(partial / granularity)
            if vectors is not None and granularity in vectors:
                numpy: Any = require("numpy", "server", feature="The evidence index")
                numpy.save(partial / granularity / VECTORS_FILE, vectors[granularity])
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


def load_vectors(
    root: Path, generation: str, indexes: Mapping[G, BM25Index]
) -> dict[G, npt.NDArray[np.float32]] | None:
    """Map the stored vectors of a generation's granularities from disk (read-only).

    Args:
        root: :func:`bm25_root`.
        generation: The generation's collection name.
        indexes: Granularity -> its BM25 index (as loaded by :func:`load_generation`).

    Returns:
        Granularity -> its vectors (one row per id of its index), or ``None`` when one is
        missing, unreadable or not of the index's size (a generation saved by an older
        version, or only BM25 saved): searches then read the vectors they need from Chroma.
    """
    numpy: Any = require("numpy", "server", feature="The evidence index")
    found: dict[G, npt.NDArray[np.float32]] = {}
    for granularity, index in indexes.items():
        if not len(index):  # nothing to map (an empty file cannot be)
            found[granularity] = numpy.zeros((0, 0), dtype=numpy.float32)
            continue
        path = root / generation / granularity / VECTORS_FILE
        try:
            matrix = numpy.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            logger.debug("no stored vectors for %s of %r: %s", granularity, generation, exc)
            return None
        if matrix.ndim != 2 or len(matrix) != len(index):
            logger.warning(
                "the stored vectors of %s in %r do not match its BM25 index (%s rows, %d "
                "entries): not used",
                granularity,
                generation,
                matrix.shape[0] if matrix.ndim else "no",
                len(index),
            )
            return None
        found[granularity] = matrix
    return found


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
