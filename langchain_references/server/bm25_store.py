"""Where an embedded evidence index keeps its BM25 indexes: one directory per generation.

An index in ``persist_dir`` keeps, next to Chroma's files, ``lr_bm25/{generation}/{granularity}/``
(a :class:`~langchain_references.services.retrieval.BM25Index` each), and in each granularity's
folder a snapshot of its entries in the BM25 index's order: ``vectors.npy`` (their stored vectors,
float32) and ``entries.jsonl`` (``[document, metadata]`` per line, with the byte offsets of
the lines in ``entries.offsets.npy``). From them a BM25 or hybrid search takes the cosine of
the hits that BM25 alone found and the documents and metadata of its hits, without reading
Chroma again (both are memory-mapped). A build writes its generation's directory before it
switches the pointer, so all of it is switched with the collection; the generations that a
build deletes lose their directory too (:func:`prune`). A directory is replaced atomically
(written beside it, then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import json
import logging
import mmap
import shutil
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from langchain_references._optional import require
from langchain_references.services.retrieval import BM25Index, LexicalIndexError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BM25_DIR",
    "ENTRIES_FILE",
    "VECTORS_FILE",
    "SavedEntries",
    "bm25_root",
    "drop",
    "load_entries",
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
#: The file of a granularity's ``[document, metadata]`` lines (rows in its BM25 index's order).
ENTRIES_FILE: Final = "entries.jsonl"
_OFFSETS_FILE: Final = "entries.offsets.npy"
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
    entries: Mapping[G, Sequence[tuple[str | None, Mapping[str, Any] | None]]] | None = None,
) -> None:
    """Write the BM25 indexes of a generation, replacing its directory in one rename.

    Args:
        root: :func:`bm25_root`.
        generation: The generation's collection name.
        indexes: Granularity -> its index.
        vectors: Granularity -> the stored vectors of its entries, one row per id of its
            index, in the same order (written as :data:`VECTORS_FILE`); ``None``: none.
        entries: Granularity -> the ``(document, metadata)`` of its entries, one per id of
            its index, in the same order (written as :data:`ENTRIES_FILE`); ``None``: none.

    Raises:
        LexicalIndexError: If they cannot be written.
        ValueError: If a granularity's vectors or entries are not one per id of its index.
    """
    for what, rows in (("vectors", vectors or {}), ("entries", entries or {})):
        for granularity, matrix in rows.items():
            if len(matrix) != len(indexes[granularity]):
                raise ValueError(
                    f"{len(matrix)} {what} for the {len(indexes[granularity])} {granularity} "
                    "entries"
                )
    final = root / generation
    partial = root / f"{generation}{_PARTIAL}{uuid.uuid4().hex}"
    try:
        for granularity, index in indexes.items():
            index.save(partial / granularity)
            if vectors is not None and granularity in vectors:
                numpy: Any = require("numpy", "server", feature="The evidence index")
                numpy.save(partial / granularity / VECTORS_FILE, vectors[granularity])
            if entries is not None and granularity in entries:
                _save_entries(partial / granularity, entries[granularity])
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


def _save_entries(
    directory: Path, entries: Sequence[tuple[str | None, Mapping[str, Any] | None]]
) -> None:
    """Write ``[document, metadata]`` lines and their byte offsets into ``directory``."""
    numpy: Any = require("numpy", "server", feature="The evidence index")
    offsets = [0]
    with (directory / ENTRIES_FILE).open("wb") as out:
        for document, metadata in entries:
            line = json.dumps([document, metadata], ensure_ascii=False).encode("utf-8") + b"\n"
            out.write(line)
            offsets.append(offsets[-1] + len(line))
    numpy.save(directory / _OFFSETS_FILE, numpy.asarray(offsets, dtype=numpy.int64))


class SavedEntries:
    """A granularity's saved entries: the document and metadata of each row, memory-mapped.

    Args:
        path: Its :data:`ENTRIES_FILE`.
        offsets: The byte offset of each line, and the file's size last.
    """

    def __init__(self, path: Path, offsets: Any) -> None:
        self._offsets = offsets
        self._map: mmap.mmap | None = None
        if int(offsets[-1]):  # an empty file cannot be mapped (and has no row to read)
            with path.open("rb") as file:
                self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            if len(self._map) != int(offsets[-1]):
                raise ValueError(f"{path} holds {len(self._map)} bytes, not {int(offsets[-1])}")

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def row(self, row: int) -> tuple[str | None, dict[str, Any] | None]:
        """The ``(document, metadata)`` of a row."""
        assert self._map is not None
        start, end = int(self._offsets[row]), int(self._offsets[row + 1])
        document, metadata = json.loads(self._map[start:end])
        return document, metadata


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


def load_entries(
    root: Path, generation: str, indexes: Mapping[G, BM25Index]
) -> dict[G, SavedEntries] | None:
    """Map the saved entries of a generation's granularities from disk (read-only).

    Args:
        root: :func:`bm25_root`.
        generation: The generation's collection name.
        indexes: Granularity -> its BM25 index (as loaded by :func:`load_generation`).

    Returns:
        Granularity -> its entries (one per id of its index), or ``None`` when one is
        missing, unreadable or not of the index's size: searches then read their hits'
        documents and metadata from Chroma.
    """
    numpy: Any = require("numpy", "server", feature="The evidence index")
    found: dict[G, SavedEntries] = {}
    for granularity, index in indexes.items():
        directory = root / generation / granularity
        try:
            offsets = numpy.load(directory / _OFFSETS_FILE, allow_pickle=False)
            entries = SavedEntries(directory / ENTRIES_FILE, offsets)
        except (OSError, ValueError) as exc:
            logger.debug("no saved entries for %s of %r: %s", granularity, generation, exc)
            return None
        if len(entries) != len(index):
            logger.warning(
                "the saved entries of %s in %r do not match its BM25 index (%d rows, %d "
                "entries): not used",
                granularity,
                generation,
                len(entries),
                len(index),
            )
            return None
        found[granularity] = entries
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
