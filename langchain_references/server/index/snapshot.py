"""The BM25 indexes of a generation, and the snapshot of their entries saved beside them.

A search in ``bm25`` or ``hybrid`` mode ranks with a
:class:`~langchain_references.services.retrieval.BM25Index` per granularity. An embedded index keeps
them per generation, written before the switch (:mod:`~langchain_references.server.bm25_store`),
with a snapshot of their entries in BM25 order: the stored vectors (a memory-mapped
``vectors.npy`` per granularity) and the documents and metadata. From it the cosine of a hit
that BM25 alone found is taken, so that a search reads only the documents and metadata of its
hits from Chroma (or nothing, :mod:`~langchain_references.server.index.hits`). An index on a
Chroma server, or one built without them (``index build --retrieval dense``, older versions),
gets its BM25 indexes built in memory from its entries when opened (:func:`bm25_from_entries`),
and reads those vectors with its hits.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from langchain_references._optional import require
from langchain_references.server import bm25_store
from langchain_references.server.index.errors import EvidenceIndexError
from langchain_references.server.index.records import (
    GRANULARITIES,
    EvidenceRecord,
    Granularity,
    entries_of,
)
from langchain_references.services.retrieval import BM25Index, LexicalIndexError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from chromadb.api.models.Collection import Collection

__all__ = [
    "Saved",
    "StoredEntry",
    "bm25_from_entries",
    "bm25_of_records",
    "load_lexical",
    "load_saved",
    "read_snapshot",
]

# one logger name for the whole index (the CLI's log lines name it)
logger = logging.getLogger(__package__)

#: An entry's stored document and metadata.
StoredEntry: TypeAlias = tuple[str | None, dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class Saved:
    """A granularity's saved snapshot (rows in its BM25 order) and the row of each entry id.

    Attributes:
        matrix: The stored vectors, a read-only numpy array (memory-mapped).
        rows: The row of each entry id.
        entries: The documents and metadata, by row; ``None`` when only the vectors were saved.
    """

    matrix: Any
    rows: Mapping[str, int]
    entries: bm25_store.SavedEntries | None = None

    def take(self, ids: Sequence[str]) -> Any:
        """The vectors of these entries, in order."""
        return self.matrix[[self.rows[e] for e in ids]]


def bm25_of_records(records: Iterable[EvidenceRecord]) -> dict[Granularity, BM25Index]:
    """The BM25 index of each granularity of the records' entries.

    Args:
        records: The records (ids unique).

    Returns:
        The BM25 index of each granularity, entries in record order.
    """
    ids: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
    texts: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
    for record in records:
        for entry in entries_of(record):
            granularity = cast("Granularity", entry.metadata["granularity"])
            ids[granularity].append(entry.id)
            texts[granularity].append(entry.text)
    return {g: BM25Index.build(ids[g], texts[g]) for g in GRANULARITIES}


def bm25_from_entries(
    collection: Collection, batch_size: int, name: str
) -> dict[Granularity, BM25Index]:
    """Build the BM25 indexes from a generation's stored entries.

    Args:
        collection: The generation.
        batch_size: Entries read per page.
        name: The index name, for errors.

    Returns:
        The BM25 index of each granularity, entries in stored order.

    Raises:
        EvidenceIndexError: If Chroma cannot be read.
    """
    ids: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
    texts: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
    try:
        offset = 0
        while True:
            page = collection.get(
                include=["documents", "metadatas"], limit=batch_size, offset=offset
            )
            docs = page.get("documents") or []
            metas = page.get("metadatas") or []
            for entry_id, doc, meta in zip(page["ids"], docs, metas, strict=True):
                granularity = (meta or {}).get("granularity")
                if granularity in GRANULARITIES:
                    ids[granularity].append(entry_id)
                    texts[granularity].append(doc or "")
            if len(page["ids"]) < batch_size:
                break
            offset += len(page["ids"])
    except Exception as exc:  # chromadb's errors share no base class
        raise EvidenceIndexError(f"cannot read index {name!r}: {exc}") from exc
    return {g: BM25Index.build(ids[g], texts[g]) for g in GRANULARITIES}


def _read_rows(
    collection: Collection, chunk: Sequence[str], name: str
) -> dict[str, tuple[Any, str | None, Mapping[str, Any] | None]]:
    """The stored ``(vector, document, metadata)`` of some entries, each with a vector."""
    try:
        got = collection.get(ids=list(chunk), include=["documents", "metadatas", "embeddings"])
    except Exception as exc:  # chromadb's errors share no base class
        raise EvidenceIndexError(f"cannot read index {name!r}: {exc}") from exc
    stored = got.get("embeddings")
    blank: list[Any] = [None] * len(got["ids"])
    by_id = {
        entry_id: (vector, doc, meta)
        for entry_id, vector, doc, meta in zip(
            got["ids"],
            blank if stored is None else stored,
            got.get("documents") or blank,
            got.get("metadatas") or blank,
            strict=True,
        )
    }
    missing = [e for e in chunk if e not in by_id or by_id[e][0] is None]
    if missing:
        raise EvidenceIndexError(
            f"index {name!r} has no vector for {len(missing)} entries (first: {missing[0]!r})"
        )
    return by_id


def _read_granularity(
    collection: Collection, ids: Sequence[str], batch_size: int, name: str
) -> tuple[npt.NDArray[np.float32], list[StoredEntry]]:
    """The stored vectors (float32, one row per id) and entries of some ids, in their order."""
    numpy: Any = require("numpy", "server", feature="The evidence index")
    rows: npt.NDArray[np.float32] | None = None
    entries: list[StoredEntry] = []
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        by_id = _read_rows(collection, chunk, name)
        block = numpy.asarray([by_id[e][0] for e in chunk], dtype=numpy.float32)
        if rows is None:
            rows = numpy.empty((len(ids), block.shape[1]), dtype=numpy.float32)
        rows[start : start + len(chunk)] = block
        for entry_id in chunk:
            _, doc, meta = by_id[entry_id]
            entries.append((doc, None if meta is None else dict(meta)))
    return (numpy.zeros((0, 0), dtype=numpy.float32) if rows is None else rows), entries


def read_snapshot(
    collection: Collection, bm25: Mapping[Granularity, BM25Index], batch_size: int, name: str
) -> tuple[dict[Granularity, npt.NDArray[np.float32]], dict[Granularity, list[StoredEntry]]]:
    """The stored vectors, documents and metadata of the BM25 indexes' entries.

    One row per id of each index, in its order (vectors float32, as Chroma keeps them); read
    back from what the generation holds, whichever engine embedded it.

    Args:
        collection: The generation.
        bm25: The BM25 index of each granularity.
        batch_size: Entries read per ``get``.
        name: The index name, for errors.

    Returns:
        The vectors and the ``(document, metadata)`` entries of each granularity.

    Raises:
        EvidenceIndexError: If Chroma cannot be read, or an entry has no vector.
    """
    require("numpy", "server", feature="The evidence index")
    vectors: dict[Granularity, npt.NDArray[np.float32]] = {}
    entries: dict[Granularity, list[StoredEntry]] = {}
    for granularity, lexical in bm25.items():
        vectors[granularity], entries[granularity] = _read_granularity(
            collection, lexical.ids, batch_size, name
        )
    return vectors, entries


def load_saved(
    root: Path, generation: str, bm25: Mapping[Granularity, BM25Index]
) -> dict[Granularity, Saved] | None:
    """A generation's saved snapshot (memory-mapped), if it has one.

    Args:
        root: Where the BM25 indexes are saved.
        generation: The generation.
        bm25: Its BM25 indexes (their ids give the rows).

    Returns:
        The snapshot of each granularity, or ``None`` when no vectors were saved.
    """
    vectors = bm25_store.load_vectors(root, generation, bm25)
    if vectors is None:
        return None
    entries = bm25_store.load_entries(root, generation, bm25)
    return {
        g: Saved(
            matrix,
            {e: i for i, e in enumerate(bm25[g].ids)},
            None if entries is None else entries[g],
        )
        for g, matrix in vectors.items()
    }


def load_lexical(root: Path, generation: str, name: str) -> dict[Granularity, BM25Index] | None:
    """A generation's saved BM25 indexes, or ``None`` (with a warning) when they cannot load.

    Args:
        root: Where the BM25 indexes are saved.
        generation: The generation.
        name: The index name, for the warning.

    Returns:
        The BM25 index of each granularity, or ``None``: build them in memory then.
    """
    try:
        return cast(
            "dict[Granularity, BM25Index]",
            bm25_store.load_generation(root, generation, GRANULARITIES),
        )
    except LexicalIndexError as exc:
        logger.warning(
            "index %r: %s; building the BM25 index in memory (run `index build` to "
            "save it with the index)",
            name,
            exc,
        )
        return None
