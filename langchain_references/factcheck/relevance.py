"""Select the passages most relevant to a statement: dense (Chroma), BM25, or both fused.

The :data:`~langchain_references.retrieval.Retrieval` mode decides the ranking: ``"dense"``
ranks by the cosine of the embeddings (below), ``"bm25"`` by Okapi BM25 over the passages
(:class:`~langchain_references.retrieval.BM25Index`), and ``"hybrid"`` (the default) fuses the
two full rankings with :func:`~langchain_references.retrieval.reciprocal_rank_fusion`, the same
function as the evidence index's. Whatever the mode, each selected passage comes with its
cosine similarity to the statement.

The embeddings go through :func:`~langchain_references.embedding_cache.shared_cache`: a judge
that holds the same embeddings object (the offline
:class:`~langchain_references.judges.HeuristicJudge`) reuses the passages' vectors instead of
embedding them again.

For the dense ranking, by default the passages go into a fresh, uniquely named, in-memory
Chroma collection that uses cosine distance; the ``k`` nearest to the statement are returned
with their cosine similarity (``1 - cosine distance``, in ``[-1, 1]``, higher is closer), and
the collection is deleted.

An existing :class:`langchain_chroma.Chroma` store can be used instead (e.g. a persistent or
remote one): the passages are added under a unique run tag, the search is filtered on that
tag, and they are deleted again afterwards; the store's own documents are never returned or
touched. With an existing store, the passages are ranked by cosine similarity computed from the
vectors Chroma returns, whatever distance the collection was built with.

Chroma is always given an embedding function (without one it would try to download a model),
and telemetry is off.

**Threads and asyncio.** Chroma's in-memory system is one per process and its first-time set-up
is not thread-safe (concurrent ``chromadb.EphemeralClient()`` calls fail with
``KeyError: 'ephemeral'`` or ``'RustBindingsAPI' object has no attribute 'bindings'``), so
:func:`chroma_client` creates the one client of the process under a lock and every temporary
collection lives on it, under its own unique name, deleted after the run. Passages are written
in batches no larger than the client's maximum batch size.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any, Final, TypedDict, Unpack

from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor

from langchain_references._chroma import SHARED_EPHEMERAL, ephemeral_client
from langchain_references._optional import importing
from langchain_references._vectors import cosine
from langchain_references.embedding_cache import shared_cache
from langchain_references.factcheck.types import Passage
from langchain_references.retrieval import (
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

logger = logging.getLogger(__name__)

DEFAULT_K: Final = 20
_RUN_KEY: Final = "lcr_run"
_INDEX_KEY: Final = "lcr_index"
_COSINE: Final[Any] = {"hnsw": {"space": "cosine"}}
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
        ValueError: If an in-memory Chroma with non-default settings already exists; pass
            ``client=`` to :func:`select_relevant` then.
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
        embeddings: Embeddings for a fresh, temporary collection.
        k: Number of passages to return (default :data:`DEFAULT_K`).
        store: An existing Chroma store to use instead of a temporary collection.
        client: Chroma client for the temporary collection.
        retrieval: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (the default).
    """

    embeddings: Embeddings | None
    k: int
    store: Chroma | None
    client: ClientAPI | None
    retrieval: Retrieval


def select_relevant(
    statement: str,
    passages: Sequence[Passage],
    *,
    embeddings: Embeddings | None = None,
    k: int = DEFAULT_K,
    store: Chroma | None = None,
    client: ClientAPI | None = None,
    retrieval: Retrieval = DEFAULT_RETRIEVAL,
) -> list[tuple[Passage, float]]:
    """Return the ``k`` passages most relevant to ``statement`` with their cosine similarity.

    Args:
        statement: The statement to find evidence for.
        passages: Candidate passages.
        embeddings: Embeddings for a fresh, temporary collection.
        k: Number of passages to return (fewer if there are fewer passages).
        store: An existing Chroma store to use instead of a temporary collection (then
            ``embeddings`` must be omitted: the store embeds with its own function).
        client: Chroma client for the temporary collection (default: in-memory, telemetry
            off).
        retrieval: How to rank: ``"dense"`` (cosine), ``"bm25"`` or ``"hybrid"`` (both,
            fused by reciprocal rank).

    Returns:
        ``(passage, similarity)`` pairs, most relevant first (in ``dense`` mode, most similar
        first).

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
        raise ValueError("pass embeddings (for a fresh collection) or an existing Chroma store")
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
        dense = _select_in_collection(
            statement, passages, shared_cache(source), depth, client or chroma_client()
        )
    if retrieval == "dense":
        return [(passages[i], similarity) for i, similarity in dense]
    similarity = dict(dense)
    fused = reciprocal_rank_fusion([[i for i, _ in dense], _lexical_ranking(statement, passages)])
    return [(passages[i], similarity[i]) for i, _ in fused[:k]]


def _lexical_ranking(statement: str, passages: Sequence[Passage]) -> list[int]:
    """The passages (positions) that share words with the statement, best BM25 score first."""
    index = BM25Index.build([str(i) for i in range(len(passages))], (p.text for p in passages))
    return [int(i) for i, _ in index.top(statement, len(passages))]


def _select_in_collection(
    statement: str, passages: Sequence[Passage], embeddings: Embeddings, k: int, client: ClientAPI
) -> list[tuple[int, float]]:
    """The ``k`` nearest passages (positions) in a temporary collection, with their cosine."""
    run = uuid.uuid4().hex
    vectorstore = Chroma(
        collection_name=f"lcr-passages-{run}",
        embedding_function=embeddings,
        client=client,
        collection_configuration=_COSINE,
    )
    try:
        _add(vectorstore, passages, run, _max_batch_size(client))
        # Despite its name, this returns the raw cosine *distance* (0 = identical).
        results = vectorstore.similarity_search_by_vector_with_relevance_scores(
            embeddings.embed_query(statement), k=min(k, len(passages))
        )
    finally:
        vectorstore.delete_collection()
    return [(_index_of(doc.metadata), 1.0 - distance) for doc, distance in results]


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
    scored = [
        (_index_of(dict(metadata)), cosine(query, [float(x) for x in vector]))
        for metadata, vector in zip(stored["metadatas"], stored["embeddings"], strict=True)
    ]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored[:k]


async def aselect_relevant(
    statement: str, passages: Sequence[Passage], **options: Unpack[RelevanceOptions]
) -> list[tuple[Passage, float]]:
    """Async :func:`select_relevant`, run in the default executor; same arguments and result."""
    return await run_in_executor(None, select_relevant, statement, passages, **options)
