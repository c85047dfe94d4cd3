"""Select the passages closest to a statement, with Chroma and any LangChain embeddings.

By default the passages go into a fresh, uniquely named, in-memory Chroma collection that uses
cosine distance; the ``k`` nearest to the statement are returned with their cosine similarity
(``1 - cosine distance``, in ``[-1, 1]``, higher is closer), and the collection is deleted.

An existing :class:`langchain_chroma.Chroma` store can be used instead (e.g. a persistent or
remote one): the passages are added under a unique run tag, the search is filtered on that
tag, and they are deleted again afterwards; the store's own documents are never returned or
touched. With an existing store, the passages are ranked by cosine similarity computed from the
vectors Chroma returns, whatever distance the collection was built with.

Chroma is always given an embedding function (without one it would try to download a model),
and telemetry is off.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any, Final, TypedDict, Unpack

from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor

from langchain_references._vectors import cosine
from langchain_references.factcheck.types import Passage

try:
    import chromadb
    from chromadb.api import ClientAPI
    from chromadb.config import Settings
    from langchain_chroma import Chroma
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "Passage selection needs chromadb and langchain-chroma: "
        "pip install 'langchain-references[chroma]'"
    ) from exc

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


def chroma_client() -> ClientAPI:
    """Return an in-memory Chroma client with anonymized telemetry off.

    Chroma keeps one in-memory system per process and refuses a second one with other
    settings; if the application already made one (e.g. ``Chroma()`` with default settings),
    that one is reused.

    Returns:
        An ephemeral client.

    Raises:
        ValueError: If an in-memory Chroma with non-default settings already exists; pass
            ``client=`` to :func:`select_relevant` then.
    """
    try:
        return chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    except ValueError as exc:
        if "different settings" not in str(exc):
            raise
        logger.warning("Reusing the in-memory Chroma created with other settings in this process")
        try:
            return chromadb.EphemeralClient()
        except ValueError:
            raise ValueError(
                "An in-memory Chroma with custom settings exists in this process: "
                "pass client=... to select_relevant"
            ) from exc


def _add(store: Chroma, passages: Sequence[Passage], run: str) -> list[str]:
    ids = [f"{run}-{i}" for i in range(len(passages))]
    store.add_texts(
        [p.text for p in passages],
        metadatas=[{_RUN_KEY: run, _INDEX_KEY: i} for i in range(len(passages))],
        ids=ids,
    )
    return ids


def _index_of(metadata: dict[str, Any]) -> int:
    return int(metadata[_INDEX_KEY])


class RelevanceOptions(TypedDict, total=False):
    """The keyword options of :func:`select_relevant`, which :func:`aselect_relevant` passes on.

    Attributes:
        embeddings: Embeddings for a fresh, temporary collection.
        k: Number of passages to return (default :data:`DEFAULT_K`).
        store: An existing Chroma store to use instead of a temporary collection.
        client: Chroma client for the temporary collection.
    """

    embeddings: Embeddings | None
    k: int
    store: Chroma | None
    client: ClientAPI | None


def select_relevant(
    statement: str,
    passages: Sequence[Passage],
    *,
    embeddings: Embeddings | None = None,
    k: int = DEFAULT_K,
    store: Chroma | None = None,
    client: ClientAPI | None = None,
) -> list[tuple[Passage, float]]:
    """Return the ``k`` passages closest to ``statement`` with their cosine similarity.

    Args:
        statement: The statement to find evidence for.
        passages: Candidate passages.
        embeddings: Embeddings for a fresh, temporary collection.
        k: Number of passages to return (fewer if there are fewer passages).
        store: An existing Chroma store to use instead of a temporary collection (then
            ``embeddings`` must be omitted: the store embeds with its own function).
        client: Chroma client for the temporary collection (default: in-memory, telemetry
            off).

    Returns:
        ``(passage, similarity)`` pairs, most similar first.

    Raises:
        ValueError: If ``k`` < 1, or neither or both of ``embeddings`` and ``store`` are given,
            or the store has no embedding function.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    run = uuid.uuid4().hex
    if store is not None:
        if embeddings is not None:
            raise ValueError("pass either embeddings or store, not both: the store embeds itself")
        return _select_in_store(statement, passages, store, k, run)
    if embeddings is None:
        raise ValueError("pass embeddings (for a fresh collection) or an existing Chroma store")
    if not passages:
        return []

    vectorstore = Chroma(
        collection_name=f"lcr-passages-{run}",
        embedding_function=embeddings,
        client=client or chroma_client(),
        collection_configuration=_COSINE,
    )
    try:
        _add(vectorstore, passages, run)
        # Despite its name, this returns the raw cosine *distance* (0 = identical).
        results = vectorstore.similarity_search_by_vector_with_relevance_scores(
            embeddings.embed_query(statement), k=min(k, len(passages))
        )
    finally:
        vectorstore.delete_collection()
    return [(passages[_index_of(doc.metadata)], 1.0 - distance) for doc, distance in results]


def _select_in_store(
    statement: str, passages: Sequence[Passage], store: Chroma, k: int, run: str
) -> list[tuple[Passage, float]]:
    embedder = store.embeddings
    if embedder is None:
        raise ValueError("the Chroma store needs an embedding function")
    if not passages:
        return []
    ids = _add(store, passages, run)
    try:
        query = embedder.embed_query(statement)
        # Fetch every passage of this run with its vector and rank by cosine here: the
        # collection's own distance (l2, ip) may order them differently.
        results = store.similarity_search_with_vectors(
            statement, k=len(passages), filter={_RUN_KEY: run}
        )
    finally:
        store.delete(ids=ids)
    scored = [
        (passages[_index_of(doc.metadata)], cosine(query, [float(x) for x in vector]))
        for doc, vector in results
    ]
    scored.sort(key=lambda pair: pair[1], reverse=True)
    return scored[:k]


async def aselect_relevant(
    statement: str, passages: Sequence[Passage], **options: Unpack[RelevanceOptions]
) -> list[tuple[Passage, float]]:
    """Async :func:`select_relevant`, run in the default executor; same arguments and result."""
    return await run_in_executor(None, select_relevant, statement, passages, **options)
