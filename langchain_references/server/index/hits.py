"""Search hits: the entries a ranking found, read from the snapshot or Chroma, with their cosine.

The collection uses cosine distance ``d = 1 - c``. A hit carries its cosine ``c`` as it is
(:func:`cosine_of`), for the fact-check API, and the compatible API's ``similarity``,
``(c + 1) / 2`` in ``[0, 1]`` (:func:`similarity`), both from the distance: the cosine is
never mapped back from the similarity. Every hit carries them whichever ranking found it: an
entry whose distance to its query is not known (found by BM25 alone) gets it from its stored
vector, from the generation's saved snapshot
(:mod:`~langchain_references.server.index.snapshot`) when it has them, else read from Chroma
with the hits. With the snapshot's entries too, a search that queried the collection (dense or
hybrid) reads nothing more from Chroma.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from langchain_references._optional import require
from langchain_references.server.index.errors import EvidenceIndexError
from langchain_references.server.index.fields import Bibliography, stored_bibliography
from langchain_references.server.index.records import GRANULARITIES, Granularity, Scalar
from langchain_references.server.index.snapshot import Saved

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

__all__ = ["EvidenceHit", "cosine", "cosine_distances", "cosine_of", "read_hits", "similarity"]

# An entry as read with the hits: its document, metadata and (when asked for) stored vector.
_Row: TypeAlias = tuple[Any, Any, Any]


@dataclass(frozen=True, slots=True)
class EvidenceHit(Bibliography):
    """One search result, with its record's :class:`Bibliography` fields.

    Attributes:
        id: The entry's id (``"{record_id}:abstract"`` or ``"{record_id}:phrase:{i}"``).
        record_id: The corpus record it comes from.
        title: The record's title.
        text: The entry's text (the abstract, or one sentence of it).
        similarity: ``(cosine + 1) / 2``, in ``[0, 1]`` (the compatible API's score).
        granularity: ``"abstract"`` or ``"phrase"``.
        metadata: Every metadata key stored with the entry (the record's extra keys included).
        cosine: The cosine similarity to the query, in ``[-1, 1]``, as the index found it
            (``1 - distance``); None for a hit built without one, whose cosine is
            ``2 * similarity - 1`` (:meth:`cosine_similarity`).
    """

    id: str
    record_id: str
    title: str
    text: str
    similarity: float
    granularity: Granularity
    metadata: Mapping[str, Scalar] = field(default_factory=dict)
    cosine: float | None = None

    def cosine_similarity(self) -> float:
        """The hit's cosine: :attr:`cosine`, or for a hit built without one its similarity's."""
        return self.cosine if self.cosine is not None else cosine(self.similarity)


def similarity(distance: float) -> float:
    """A hit's similarity: ``(cosine + 1) / 2`` of its cosine distance, clamped to ``[0, 1]``.

    Args:
        distance: The cosine distance ``1 - cosine``.

    Returns:
        ``1 - distance / 2``, clamped (a non-number gives 0).
    """
    return min(1.0, max(0.0, 1.0 - float(distance) / 2.0))


def cosine_of(distance: float) -> float:
    """A hit's cosine: ``1 - distance``, clamped to ``[-1, 1]``.

    Args:
        distance: The cosine distance ``1 - cosine``.

    Returns:
        The cosine; 0 (no evidence of closeness) when the distance is not a finite number.
    """
    value = 1.0 - float(distance)
    return max(-1.0, min(1.0, value)) if math.isfinite(value) else 0.0


def cosine(similarity: float) -> float:
    """The cosine of a hit's :func:`similarity`: ``2 * similarity - 1``, clamped to ``[-1, 1]``.

    Args:
        similarity: ``(cosine + 1) / 2``.

    Returns:
        The cosine; 0 (no evidence of closeness) when the similarity is not a finite number.
    """
    value = 2.0 * similarity - 1.0
    return max(-1.0, min(1.0, value)) if math.isfinite(value) else 0.0


def _hit(
    entry_id: str, doc: str | None, meta: Mapping[str, Any] | None, distance: float
) -> EvidenceHit:
    """One hit from a Chroma entry and its cosine distance to the query."""
    meta = dict(meta or {})
    granularity = meta.get("granularity")
    return EvidenceHit(
        id=entry_id,
        record_id=str(meta.get("record_id", entry_id.rsplit(":", 2)[0])),
        title=str(meta.get("title", "")),
        text=doc or "",
        similarity=similarity(distance),
        granularity=granularity if granularity in GRANULARITIES else "phrase",
        **stored_bibliography(meta),
        metadata=cast("dict[str, Scalar]", meta),
        cosine=cosine_of(distance),
    )


def cosine_distances(query: Sequence[float], vectors: Any) -> list[float]:
    """``1 - cosine`` of the query with each vector (1 when one of the two is zero).

    Args:
        query: The query's vector.
        vectors: The vectors (a sequence of them, or a 2-D array).

    Returns:
        One distance per vector, in order.
    """
    if len(vectors) == 0:
        return []
    numpy: Any = require("numpy", "server", feature="The evidence index")
    a = numpy.asarray(query, dtype=numpy.float64)
    b = numpy.asarray(vectors, dtype=numpy.float64)
    norms = numpy.linalg.norm(b, axis=1) * numpy.linalg.norm(a)
    dots = b @ a
    safe = numpy.where(norms > 0, norms, 1.0)
    return [float(d) for d in numpy.where(norms > 0, 1.0 - dots / safe, 1.0)]


def _snapshot_distances(
    unknown: Sequence[Sequence[str]],
    vectors: Sequence[Sequence[float]],
    distances: Sequence[Mapping[str, float]],
    saved: Saved,
) -> list[Mapping[str, float]]:
    """Each query's distances, with those of its unknown entries from the snapshot's vectors."""
    return [
        {**known, **dict(zip(ids, cosine_distances(vector, saved.take(ids)), strict=True))}
        if ids
        else known
        for ids, vector, known in zip(unknown, vectors, distances, strict=True)
    ]


def _snapshot_rows(wanted: Sequence[str], saved: Saved) -> dict[str, _Row]:
    """The documents and metadata of entries, from the snapshot (no vectors)."""
    assert saved.entries is not None
    rows: dict[str, _Row] = {}
    for entry_id in wanted:
        doc, meta = saved.entries.row(saved.rows[entry_id])
        rows[entry_id] = (doc, meta, None)
    return rows


def _chroma_rows(
    collection: Collection, wanted: list[str], *, with_vectors: bool, name: str
) -> dict[str, _Row]:
    """The documents and metadata of entries (and their vectors) read from Chroma.

    An entry deleted since the ranking is not among them.
    """
    include = ["documents", "metadatas", *(["embeddings"] if with_vectors else [])]
    try:
        got = collection.get(ids=wanted, include=cast("Any", include))
    except Exception as exc:  # chromadb's errors share no base class
        raise EvidenceIndexError(f"search failed in index {name!r}: {exc}") from exc
    nothing: list[Any] = [None] * len(got["ids"])
    docs: list[Any] = got.get("documents") or nothing
    metas: list[Any] = got.get("metadatas") or nothing
    stored = got.get("embeddings")
    embedded: list[Any] = nothing if stored is None else list(stored)
    return {
        entry_id: (doc, meta, vector)
        for entry_id, doc, meta, vector in zip(got["ids"], docs, metas, embedded, strict=True)
    }


def _query_hits(
    ids: Sequence[str],
    vector: Sequence[float],
    known: Mapping[str, float],
    missing: Sequence[str],
    rows: Mapping[str, _Row],
) -> list[EvidenceHit]:
    """One query's hits, in ranked order; a ``missing`` distance from the row's vector."""
    if missing:  # read with the hits: their stored vectors (1.0 without one)
        found = [e for e in missing if e in rows and rows[e][2] is not None]
        read = cosine_distances(vector, [rows[e][2] for e in found])
        known = {**known, **dict(zip(found, read, strict=True))}
    hits = []
    for entry_id in ids:
        if entry_id not in rows:  # deleted since the search: left out
            continue
        doc, meta, _ = rows[entry_id]
        hits.append(_hit(entry_id, doc, meta, known.get(entry_id, 1.0)))
    return hits


def read_hits(
    ranked: Sequence[Sequence[str]],
    vectors: Sequence[Sequence[float]],
    distances: Sequence[Mapping[str, float]],
    saved: Saved | None,
    *,
    queried: bool,
    collection: Collection,
    name: str,
) -> list[list[EvidenceHit]]:
    """The hits of ranked entry ids: from the generation's saved snapshot, else one ``get``.

    Args:
        ranked: Each query's entry ids, best first.
        vectors: Each query's vector.
        distances: Each query's known cosine distances (of the entries the dense ranking found).
        saved: The snapshot of the granularity searched, if the generation has one.
        queried: Whether the search queried the collection (dense or hybrid): only then do
            the snapshot's entries answer (a generation deleted by a build then fails the
            search, and a :class:`~langchain_references.server.live.LiveIndex` moves on).
        collection: The generation.
        name: The index name, for errors.

    Returns:
        Each query's hits, in ranked order (an entry deleted since the ranking left out).

    Raises:
        EvidenceIndexError: If Chroma fails.
    """
    wanted = list(dict.fromkeys(entry_id for ids in ranked for entry_id in ids))
    if not wanted:
        return [[] for _ in ranked]
    unknown = [
        [e for e in ids if e not in known] for ids, known in zip(ranked, distances, strict=True)
    ]
    snapshot = saved if saved is not None and all(e in saved.rows for e in wanted) else None
    if snapshot is not None:
        distances = _snapshot_distances(unknown, vectors, distances, snapshot)
        unknown = [[] for _ in ranked]
    if snapshot is not None and snapshot.entries is not None and queried:
        rows = _snapshot_rows(wanted, snapshot)
    else:
        rows = _chroma_rows(collection, wanted, with_vectors=any(unknown), name=name)
    return [
        _query_hits(ids, vector, known, missing, rows)
        for ids, vector, known, missing in zip(ranked, vectors, distances, unknown, strict=True)
    ]
