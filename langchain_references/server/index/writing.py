"""Writing entries: a build's or an update's batches, embedded and upserted into a generation.

The one way entries are embedded and written, in this process (a build's local engine, an
update) and on Ray actors (:mod:`~langchain_references.server.index.ray_writer`): the same
batches (:func:`batches`), embedded by :func:`embed_and_write` (a text repeated in a slice
embedded once) and written by :func:`upsert`. Within a generation writes are upserts by id,
and :func:`write_batch` with ``prune`` deletes a record's stale sentences (its text got
shorter).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_references.server.index.records import Entry, EvidenceRecord, entries_of

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from langchain_core.embeddings import Embeddings

__all__ = ["batches", "chunks", "embed_and_write", "upsert", "upsert_chunks", "write_batch"]

_T = TypeVar("_T")


def chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    """``items`` in consecutive slices of at most ``size``.

    Args:
        items: The items.
        size: The most items per slice.

    Yields:
        The slices, in order.
    """
    for start in range(0, len(items), size):
        yield items[start : start + size]


def batches(
    records: Iterable[EvidenceRecord], limit: int
) -> Iterator[tuple[list[str], list[Entry]]]:
    """The records' entries in batches of about ``limit``: ``(record ids, entries)``.

    A batch closes after the record that brings it to ``limit`` entries or more (a record's
    entries stay in one batch), so every engine writes the same batches.

    Args:
        records: The records (ids unique).
        limit: The entries a batch reaches before it closes.

    Yields:
        ``(record ids, entries)`` of each batch, in order.
    """
    pending: list[Entry] = []
    pending_records: list[str] = []
    for record in records:
        pending.extend(entries_of(record))
        pending_records.append(record.id)
        if len(pending) >= limit:
            yield pending_records, pending
            pending, pending_records = [], []
    if pending:
        yield pending_records, pending


def upsert(
    collection: Collection, entries: Sequence[Entry], vectors: Sequence[Sequence[float]]
) -> None:
    """Upsert entries with their vectors (at most Chroma's batch limit of them).

    Args:
        collection: The generation.
        entries: The entries.
        vectors: Their vectors, in order.
    """
    collection.upsert(
        ids=[e.id for e in entries],
        embeddings=cast("Any", list(vectors)),
        documents=[e.text for e in entries],
        metadatas=cast("Any", [e.metadata for e in entries]),
    )


def upsert_chunks(
    collection: Collection,
    entries: Sequence[Entry],
    vectors: Sequence[Sequence[float]],
    size: int,
) -> None:
    """Upsert entries embedded elsewhere (by Ray actors), ``size`` at a time.

    Args:
        collection: The generation.
        entries: The entries.
        vectors: Their vectors, in order.
        size: The most entries per upsert (Chroma's batch limit).
    """
    for chunk, chunk_vectors in zip(chunks(entries, size), chunks(vectors, size), strict=True):
        upsert(collection, chunk, chunk_vectors)


def embed_and_write(
    entries: Sequence[Entry],
    embeddings: Embeddings,
    limit: int,
    write: Callable[[Sequence[Entry], list[list[float]]], None],
) -> int:
    """Embed a batch of entries ``limit`` at a time and hand each slice to ``write``.

    A text repeated in a slice (a one-sentence record's phrase is its abstract) is embedded
    once.

    Args:
        entries: The entries.
        embeddings: Their embeddings.
        limit: Entries per slice (at most Chroma's batch limit).
        write: Called with each slice and its vectors, in order (e.g. an upsert).

    Returns:
        The number of entries written.
    """
    for chunk in chunks(entries, limit):
        texts = list(dict.fromkeys(e.text for e in chunk))
        by_text = dict(zip(texts, embeddings.embed_documents(texts), strict=True))
        write(chunk, [by_text[e.text] for e in chunk])
    return len(entries)


def write_batch(
    collection: Collection,
    entries: Sequence[Entry],
    record_ids: Sequence[str],
    embeddings: Embeddings,
    limit: int,
    *,
    prune: bool,
) -> int:
    """Embed and upsert one batch in this process; with ``prune``, delete stale sentences.

    Args:
        collection: The generation.
        entries: The batch's entries.
        record_ids: The records they come from.
        embeddings: Their embeddings.
        limit: Entries per upsert.
        prune: Delete the records' entries that are not in the batch (sentences a record no
            longer has).

    Returns:
        The number of entries written.
    """
    embed_and_write(entries, embeddings, limit, functools.partial(upsert, collection))
    if prune:  # a record's sentences it no longer has
        fresh = {e.id for e in entries}
        owners = {"record_id": {"$in": list(dict.fromkeys(record_ids))}}
        existing = collection.get(where=cast("Any", owners), include=[])
        stale = [i for i in existing["ids"] if i not in fresh]
        if stale:
            collection.delete(ids=stale)
    return len(entries)
