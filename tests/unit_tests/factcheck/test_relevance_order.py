"""The relevance stage's rankings, pinned in order (ties included) on a fixture with ties.

The expected orders are those of the former implementation (a temporary Chroma collection per
run) wherever that one was deterministic: ``hybrid`` and ``bm25`` at every ``k``, ``dense``
over all passages. Its ``dense`` top-``k`` below all passages broke ties at the cut-off as
HNSW happened to (``[0, 1, 7]`` for three equal passages 1, 3 and 7); now a top-``k`` is the
prefix of the full ranking, equal cosines in passage order.
"""

from __future__ import annotations

from typing import Any

import chromadb
import pytest
from langchain_chroma import Chroma

from langchain_references.factcheck.relevance import chroma_client, select_relevant
from langchain_references.factcheck.types import Passage
from langchain_references.services._vectors import cosine, top_cosines
from tests.unit_tests.factcheck.test_relevance import TEXTS, BagOfWords, passages_of

TIE_TEXTS = [
    TEXTS[2],
    "Turkey restored access to Wikipedia.",
    TEXTS[3],
    "Turkey restored access to Wikipedia.",  # ties with 1
    TEXTS[0],
    "Wikipedia Turkey",
    TEXTS[4],
    "Turkey restored access to Wikipedia.",  # ties with 1 and 3
    "Wikipedia Turkey",  # ties with 5
    TEXTS[1],
    "Bees and honey.",
    "Nothing in common here at all.",
]
WIKI = "Wikipedia access in Turkey was restored"

# (statement, mode, k) -> positions, in order
EXPECTED: dict[tuple[str, str, int], list[int]] = {
    (WIKI, "dense", 3): [0, 1, 3],  # before: [0, 1, 7] (HNSW's pick among 1, 3, 7)
    (WIKI, "dense", 12): [0, 1, 3, 7, 5, 8, 2, 11, 4, 6, 9, 10],
    (WIKI, "hybrid", 3): [1, 0, 3],
    (WIKI, "hybrid", 12): [1, 0, 3, 7, 5, 8, 2, 11, 4, 6, 9, 10],
    (WIKI, "bm25", 3): [1, 3, 7],
    (WIKI, "bm25", 12): [1, 3, 7, 0, 5, 8, 2],
    ("Turkey", "dense", 3): [5, 8, 1],  # before: [5, 8, 7]
    ("Turkey", "dense", 12): [5, 8, 1, 3, 7, 0, 2, 4, 6, 9, 10, 11],
    ("Turkey", "hybrid", 3): [5, 8, 1],
    ("Turkey", "hybrid", 12): [5, 8, 1, 3, 7, 0, 2, 4, 6, 9, 10, 11],
    ("Turkey", "bm25", 12): [5, 8, 1, 3, 7, 0, 2],
    ("honey bees dance", "dense", 3): [10, 6, 0],
    ("honey bees dance", "dense", 12): [10, 6, 0, 1, 2, 3, 4, 5, 7, 8, 9, 11],
    ("honey bees dance", "hybrid", 3): [10, 6, 0],
    ("honey bees dance", "hybrid", 12): [10, 6, 0, 1, 2, 3, 4, 5, 7, 8, 9, 11],
    ("honey bees dance", "bm25", 12): [6, 10],
    ("zzz unknown", "dense", 3): [0, 1, 2],  # before: [2, 6, 7] (all cosines 0)
    ("zzz unknown", "dense", 12): list(range(12)),
    ("zzz unknown", "hybrid", 3): [0, 1, 2],
    ("zzz unknown", "hybrid", 12): list(range(12)),
    ("zzz unknown", "bm25", 12): [],
}


def _passages() -> list[Passage]:
    return passages_of(TIE_TEXTS)


@pytest.mark.parametrize(("statement", "mode", "k"), list(EXPECTED))
def test_ranking_in_order_with_ties(statement: str, mode: Any, k: int) -> None:
    embeddings = BagOfWords()
    results = select_relevant(statement, _passages(), embeddings=embeddings, k=k, retrieval=mode)
    assert [p.rank for p, _ in results] == EXPECTED[statement, mode, k]
    query = embeddings.embed_query(statement)
    for passage, similarity in results:
        assert similarity == cosine(query, embeddings.embed_query(passage.text))


def test_dense_top_k_is_the_prefix_of_the_full_ranking() -> None:
    full = select_relevant(WIKI, _passages(), embeddings=BagOfWords(), k=12, retrieval="dense")
    for k in range(1, 13):
        top = select_relevant(WIKI, _passages(), embeddings=BagOfWords(), k=k, retrieval="dense")
        assert top == full[:k]


def test_an_existing_store_ranks_as_the_default_path() -> None:
    store = Chroma(
        collection_name="lcr-test-order-store",
        embedding_function=BagOfWords(),
        client=chroma_client(),
        collection_configuration={"hnsw": {"space": "l2"}},
    )
    try:
        for statement, mode, k in EXPECTED:
            results = select_relevant(statement, _passages(), store=store, k=k, retrieval=mode)
            assert [p.rank for p, _ in results] == EXPECTED[statement, mode, k]
    finally:
        store.delete_collection()


def test_no_chroma_collection_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a Chroma client or collection was made")

    monkeypatch.setattr(chromadb, "EphemeralClient", refuse)
    monkeypatch.setattr(Chroma, "__init__", refuse)
    for mode in ("dense", "bm25", "hybrid"):
        results = select_relevant(WIKI, _passages(), embeddings=BagOfWords(), k=3, retrieval=mode)
        assert [p.rank for p, _ in results] == EXPECTED[WIKI, mode, 3]


def test_top_cosines_orders_ties_by_position_and_cuts_at_k() -> None:
    query = [1.0, 0.0]
    vectors = [[0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]
    assert top_cosines(query, vectors, 10) == [
        (2, 1.0),
        (4, 1.0),
        (1, cosine(query, [1.0, 1.0])),
        (3, cosine(query, [1.0, 1.0])),
        (0, 0.0),
        (5, 0.0),
    ]
    assert top_cosines(query, vectors, 3) == [(2, 1.0), (4, 1.0), (1, cosine(query, [1, 1]))]
    assert top_cosines(query, vectors, 0) == []
    with pytest.raises(ValueError, match="is longer than"):
        top_cosines(query, [[1.0, 0.0, 0.0]], 1)
