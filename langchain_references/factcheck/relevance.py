"""Select the passages most relevant to a statement: dense (cosine), BM25, or both fused.

The :data:`~langchain_references.services.retrieval.Retrieval` mode decides the ranking: ``"dense"``
ranks by the cosine of the embeddings (below), ``"bm25"`` by Okapi BM25 over the passages
(:class:`~langchain_references.services.retrieval.BM25Index`), and ``"hybrid"`` (the default) fuses
the two full rankings with :func:`~langchain_references.services.retrieval.reciprocal_rank_fusion`,
the same function as the evidence index's. Whatever the mode, each selected passage comes with its
cosine similarity to the statement.

The embeddings go through :func:`~langchain_references.services.embedding_cache.shared_cache`: a
judge that holds the same embeddings object (the offline
:class:`~langchain_references.judges.HeuristicJudge`) reuses the passages' vectors instead of
embedding them again.

For the dense ranking, by default the passages and the statement are embedded (through the
shared cache) and ranked here by their exact cosine
(:func:`~langchain_references.services._vectors.top_cosines`): most similar first, equal cosines in
passage order; no collection is made.

An existing :class:`langchain_chroma.Chroma` store can be used instead (e.g. a persistent or
remote one): the passages are added under a unique run tag, read back with their vectors, and
deleted again afterwards; the store's own documents are never returned or touched. With an
existing store, the passages are ranked by cosine similarity computed from the vectors Chroma
returns, whatever distance the collection was built with, in the same order.

:func:`chroma_client` is the process's one in-memory Chroma client (created once, under a lock,
telemetry off), for an application that wants an in-memory store to pass as ``store``.
Passages are written to a store in batches no larger than its client's maximum batch size.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Final, TypedDict, Unpack

from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor

from langchain_references._optional import importing
from langchain_references.factcheck.types import Passage
from langchain_references.services._chroma import SHARED_EPHEMERAL, ephemeral_client
from langchain_references.services._vectors import cosine, top_cosines
from langchain_references.services.embedding_cache import shared_cache
from langchain_references.services.retrieval import (
    DEFAULT_RETRIEVAL,
    BM25Index,
    Retrieval,
    check_retrieval,
    reciprocal_rank_fusion,
)

with importing("chromadb", "chroma", feature="Passage selection"):
    from chromadb.api import ClientAPI
    from langchain_chroma import Chroma

__all__ = [
    "DEFAULT_K",
    "RelevanceOptions",
    "aselect_relevant",
    "chroma_client",
    "select_relevant",
]

DEFAULT_K: Final = 20
_RUN_KEY: Final = "lcr_run"
_INDEX_KEY: Final = "lcr_index"
#: Batch size used when a store's client is unknown (Chroma's in-memory limit is 5,461).
_FALLBACK_BATCH_SIZE: Final = 1000


#: The process's in-memory client (tests reset it).
_shared_client: Final = SHARED_EPHEMERAL


def chroma_client() -> ClientAPI:
    """Return the process's in-memory Chroma client, with anonymized telemetry off.

    The client is created once per process, under a lock, so that concurrent first calls from
    several threads (executor threads of ``abatch``, a server's request handlers) do not race
    through Chroma's set-up; later calls return the same client. A client closed by its user is
    replaced by a new one.

    Chroma keeps one in-memory system per process and refuses a second one with other
    settings; if the application already made one (e.g. ``Chroma()`` with default settings),
    that one is reused.

    Returns:
        The shared ephemeral client.

    Raises:
        ValueError: If an in-memory Chroma with non-default settings already exists; use a
            client of your own then.
    """
    return ephemeral_client()


def _max_batch_size(client: ClientAPI | None) -> int:
    """The most records Chroma accepts in one write (at least 1)."""
    if client is None:
        return _FALLBACK_BATCH_SIZE
    return max(1, int(client.get_max_batch_size()))


def _batches(count: int, size: int) -> list[range]:
    return [range(start, min(count, start + size)) for start in range(0, count, size)]


def _ids(run: str, count: int) -> list[str]:
    return [f"{run}-{i}" for i in range(count)]


def _add(store: Chroma, passages: Sequence[Passage], run: str, batch_size: int) -> None:
    """Add the passages under ``run``, in writes of at most ``batch_size`` records."""
    ids = _ids(run, len(passages))
    for batch in _batches(len(passages), batch_size):
        store.add_texts(
            [passages[i].text for i in batch],
            metadatas=[{_RUN_KEY: run, _INDEX_KEY: i} for i in batch],
            ids=ids[batch.start : batch.stop],
        )


def _delete(store: Chroma, ids: list[str], batch_size: int) -> None:
    for batch in _batches(len(ids), batch_size):
        store.delete(ids=ids[batch.start : batch.stop])


def _index_of(metadata: dict[str, Any]) -> int:
    return int(metadata[_INDEX_KEY])


class RelevanceOptions(TypedDict, total=False):
    """The keyword options of :func:`select_relevant`, which :func:`aselect_relevant` passes on.

    Attributes:
        embeddings: Embeddings of the statement and the passages.
        k: Number of passages to return (default :data:`DEFAULT_K`).
        store: An existing Chroma store that embeds and holds the passages instead.
        retrieval: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (the default).
    """

    embeddings: Embeddings | None
    k: int
    store: Chroma | None
    retrieval: Retrieval


def select_relevant(
    statement: str,
    passages: Sequence[Passage],
    *,
    embeddings: Embeddings | None = None,
    k: int = DEFAULT_K,
    store: Chroma | None = None,
    retrieval: Retrieval = DEFAULT_RETRIEVAL,
) -> list[tuple[Passage, float]]:
    """Return the ``k`` passages most relevant to ``statement`` with their cosine similarity.

    Args:
        statement: The statement to find evidence for.
        passages: Candidate passages.
        embeddings: Embeddings of the statement and the passages.
        k: Number of passages to return (fewer if there are fewer passages).
        store: An existing Chroma store to add the passages to for the run instead (then
            ``embeddings`` must be omitted: the store embeds with its own function).
        retrieval: How to rank: ``"dense"`` (cosine), ``"bm25"`` or ``"hybrid"`` (both,
            fused by reciprocal rank).

    Returns:
        ``(passage, similarity)`` pairs, most relevant first (in ``dense`` mode, most similar
        first, equal similarities in passage order).

    Raises:
        ValueError: If ``k`` < 1, or neither or both of ``embeddings`` and ``store`` are given,
            or the store has no embedding function, or ``retrieval`` is not a mode.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    retrieval = check_retrieval(retrieval)
    if store is not None:
        if embeddings is not None:
            raise ValueError("pass either embeddings or store, not both: the store embeds itself")
        source = store.embeddings
        if source is None:
            raise ValueError("the Chroma store needs an embedding function")
    elif embeddings is None:
        raise ValueError("pass embeddings or an existing Chroma store")
    else:
        source = embeddings
    if not passages:
        return []
    if retrieval == "bm25":
        chosen = _lexical_ranking(statement, passages)[:k]
        embedder = shared_cache(source)
        query = embedder.embed_query(statement)
        vectors = embedder.embed_documents([passages[i].text for i in chosen])
        return [(passages[i], cosine(query, v)) for i, v in zip(chosen, vectors, strict=True)]
    depth = k if retrieval == "dense" else len(passages)
    if store is not None:
        dense = _select_in_store(statement, passages, store, depth, uuid.uuid4().hex)
    else:
        dense = _select_by_vectors(statement, passages, shared_cache(source), depth)
    if retrieval == "dense":
        return [(passages[i], similarity) for i, similarity in dense]
    similarity = dict(dense)
    fused = reciprocal_rank_fusion([[i for i, _ in dense], _lexical_ranking(statement, passages)])
    return [(passages[i], similarity[i]) for i, _ in fused[:k]]


def _lexical_ranking(statement: str, passages: Sequence[Passage]) -> list[int]:
    """The passages (positions) that share words with the statement, best BM25 score first."""
    index = BM25Index.build([str(i) for i in range(len(passages))], (p.text for p in passages))
    return [int(i) for i, _ in index.top(statement, len(passages))]


def _select_by_vectors(
    statement: str, passages: Sequence[Passage], embeddings: Embeddings, k: int
) -> list[tuple[int, float]]:
    """The ``k`` passages (positions) nearest the statement, with their cosine."""
    vectors = embeddings.embed_documents([p.text for p in passages])
    return top_cosines(embeddings.embed_query(statement), vectors, k)


def _select_in_store(
    statement: str, passages: Sequence[Passage], store: Chroma, k: int, run: str
) -> list[tuple[int, float]]:
    """The ``k`` nearest passages (positions), added to ``store`` for the run, with their cosine."""
    embedder = store.embeddings
    assert embedder is not None
    batch_size = _max_batch_size(getattr(store, "_client", None))
    try:
        _add(store, passages, run, batch_size)
        query = embedder.embed_query(statement)
        # Fetch every passage of this run with its vector (an exact read, not an approximate
        # nearest-neighbour search) and rank by cosine here: the collection's own distance
        # (l2, ip) may order them differently.
        stored = store.get(where={_RUN_KEY: run}, include=["metadatas", "embeddings"])
    finally:
        _delete(store, _ids(run, len(passages)), batch_size)
    by_position = {
        _index_of(dict(metadata)): [float(x) for x in vector]
        for metadata, vector in zip(stored["metadatas"], stored["embeddings"], strict=True)
    }
    positions = sorted(by_position)
    ranked = top_cosines(query, [by_position[i] for i in positions], k)
    return [(positions[i], similarity) for i, similarity in ranked]


async def aselect_relevant(
    statement: str, passages: Sequence[Passage], **options: Unpack[RelevanceOptions]
) -> list[tuple[Passage, float]]:
    """Async :func:`select_relevant`, run in the default executor; same arguments and result."""
    return await run_in_executor(None, select_relevant, statement, passages, **options)
