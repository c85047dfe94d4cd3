from __future__ import annotations

import hashlib
import math
import re

import pytest
from langchain_chroma import Chroma
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_references.factcheck.relevance import (
    RelevanceOptions,
    aselect_relevant,
    chroma_client,
    select_relevant,
)
from langchain_references.factcheck.types import Passage

DIM = 256


class BagOfWords(Embeddings):
    """Deterministic hashed bag-of-words embeddings: shared words -> higher cosine."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * DIM
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIM] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


TEXTS = [
    "Arctic terns migrate from the Arctic to the Antarctic every year.",
    "Python 3.6 added formatted string literals to the language.",
    "Access to Wikipedia was restored in Turkey in January 2020.",
    "The Constitutional Court of Turkey ruled the Wikipedia block unconstitutional.",
    "Honey bees communicate the location of flowers with a waggle dance.",
]


def _passages() -> list[Passage]:
    return [
        Passage(
            text=t,
            url=f"https://example.org/{i}",
            title=f"t{i}",
            rank=i,
            index_in_page=0,
            n_tokens=len(t.split()),
        )
        for i, t in enumerate(TEXTS)
    ]


def _lcr_collections() -> list[str]:
    return [c.name for c in chroma_client().list_collections() if c.name.startswith("lcr-")]


def test_returns_closest_passages_with_cosine_similarity() -> None:
    embeddings = BagOfWords()
    statement = "Wikipedia access in Turkey was restored"
    results = select_relevant(statement, _passages(), embeddings=embeddings, k=3)

    assert len(results) == 3
    assert results[0][0].text == TEXTS[2]
    assert {p.text for p, _ in results[:2]} == {TEXTS[2], TEXTS[3]}
    scores = [s for _, s in results]
    assert scores == sorted(scores, reverse=True)
    query = embeddings.embed_query(statement)
    for passage, score in results:
        assert score == pytest.approx(_cos(query, embeddings.embed_query(passage.text)), abs=1e-5)
    assert results[0][0] == _passages()[2]


def test_identical_text_scores_one_and_collection_is_deleted() -> None:
    before = _lcr_collections()
    results = select_relevant(TEXTS[0], _passages(), embeddings=BagOfWords(), k=1)
    assert results[0][0].text == TEXTS[0]
    assert results[0][1] == pytest.approx(1.0, abs=1e-5)
    assert _lcr_collections() == before


def test_k_larger_than_the_passages_and_empty_input() -> None:
    results = select_relevant("bees", _passages(), embeddings=BagOfWords(), k=50)
    assert sorted(p.rank for p, _ in results) == [0, 1, 2, 3, 4]
    assert select_relevant("bees", [], embeddings=BagOfWords()) == []


def test_works_with_langchain_fake_embeddings() -> None:
    results = select_relevant(
        TEXTS[1], _passages(), embeddings=DeterministicFakeEmbedding(size=32), k=5
    )
    assert results[0][0].text == TEXTS[1]
    assert results[0][1] == pytest.approx(1.0, abs=1e-5)
    assert all(-1.0 - 1e-6 <= s <= 1.0 + 1e-6 for _, s in results)


async def test_async_variant_matches_sync() -> None:
    statement = "How do honey bees tell where flowers are?"
    sync = select_relevant(statement, _passages(), embeddings=BagOfWords(), k=2)
    async_ = await aselect_relevant(statement, _passages(), embeddings=BagOfWords(), k=2)
    assert sync[0][0].text == async_[0][0].text == TEXTS[4]
    assert [s for _, s in async_] == pytest.approx([s for _, s in sync])


def test_existing_store_is_used_and_left_as_it_was() -> None:
    store = Chroma(
        collection_name="lcr-test-existing",
        embedding_function=BagOfWords(),
        client=chroma_client(),
        collection_configuration={"hnsw": {"space": "l2"}},
    )
    try:
        store.add_texts(["Wikipedia access in Turkey was restored"], ids=["own-doc"])
        results = select_relevant("Wikipedia Turkey restored", _passages(), store=store, k=2)
        assert [p.text for p, _ in results] == [TEXTS[2], TEXTS[3]]
        query = BagOfWords().embed_query("Wikipedia Turkey restored")
        assert results[0][1] == pytest.approx(
            _cos(query, BagOfWords().embed_query(TEXTS[2])), abs=1e-5
        )
        assert store.get()["ids"] == ["own-doc"]
    finally:
        store.delete_collection()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="k must be"):
        select_relevant("x", _passages(), embeddings=BagOfWords(), k=0)
    with pytest.raises(ValueError, match="pass embeddings"):
        select_relevant("x", _passages())
    store = Chroma(
        collection_name="lcr-test-args", embedding_function=BagOfWords(), client=chroma_client()
    )
    try:
        with pytest.raises(ValueError, match="not both"):
            select_relevant("x", _passages(), embeddings=BagOfWords(), store=store)
    finally:
        store.delete_collection()


def test_chroma_client_reuses_an_in_memory_chroma_with_other_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import chromadb

    calls: list[object] = []
    real = chromadb.EphemeralClient

    def fake(settings: object = None, **kwargs: object) -> object:
        calls.append(settings)
        if settings is not None:
            raise ValueError(
                "An instance of Chroma already exists for ephemeral with different settings"
            )
        return real(settings=chromadb.config.Settings(anonymized_telemetry=False))

    monkeypatch.setattr(chromadb, "EphemeralClient", fake)
    assert chroma_client() is not None
    assert len(calls) == 2
    assert calls[1] is None

    def always_fails(settings: object = None, **kwargs: object) -> object:
        raise ValueError(
            "An instance of Chroma already exists for ephemeral with different settings"
        )

    monkeypatch.setattr(chromadb, "EphemeralClient", always_fails)
    with pytest.raises(ValueError, match="pass client="):
        chroma_client()


async def test_async_variant_passes_every_option_on() -> None:
    statement = "How do honey bees tell where flowers are?"
    store = Chroma(
        collection_name="lcr-test-async-options",
        embedding_function=BagOfWords(),
        client=chroma_client(),
    )
    try:
        options: RelevanceOptions = {"store": store, "k": 1}
        sync = select_relevant(statement, _passages(), **options)
        async_ = await aselect_relevant(statement, _passages(), **options)
        assert [p.text for p, _ in async_] == [p.text for p, _ in sync] == [TEXTS[4]]
        assert store.get()["ids"] == []  # the passages were removed again
        with pytest.raises(ValueError, match="not both"):
            await aselect_relevant(statement, _passages(), embeddings=BagOfWords(), store=store)
    finally:
        store.delete_collection()
    with pytest.raises(ValueError, match="k must be"):
        await aselect_relevant(statement, _passages(), embeddings=BagOfWords(), k=0)
