from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_chroma import Chroma
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_references.factcheck import relevance
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


def passages_of(texts: list[str]) -> list[Passage]:
    """One passage per text, ranked in order, each from a page of its own."""
    return [
        Passage(
            text=t,
            url=f"https://example.org/{i}",
            title=f"t{i}",
            rank=i,
            index_in_page=0,
            n_tokens=len(t.split()),
        )
        for i, t in enumerate(texts)
    ]


def _passages() -> list[Passage]:
    return passages_of(TEXTS)


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


@pytest.fixture
def fresh_client_cache() -> Iterator[None]:
    """Make :func:`chroma_client` create its client again, before and after the test."""
    relevance._shared_client.reset()
    yield
    relevance._shared_client.reset()


@pytest.mark.usefixtures("fresh_client_cache")
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
    relevance._shared_client.reset()
    with pytest.raises(ValueError, match="use a client of your own"):
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


# ----------------------------------------------------------------- threads and batch sizes


@pytest.mark.usefixtures("fresh_client_cache")
def test_chroma_client_is_created_once_per_process_even_from_racing_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import chromadb

    real = chromadb.EphemeralClient
    created: list[object] = []
    inside = threading.Event()
    overlapped = threading.Event()

    def slow_first_setup(*args: Any, **kwargs: Any) -> Any:
        # Chroma's first-time set-up is not thread-safe: record any overlap of two set-ups.
        if inside.is_set():
            overlapped.set()
        inside.set()
        try:
            overlapped.wait(0.2)
            client = real(*args, **kwargs)
            created.append(client)
            return client
        finally:
            inside.clear()

    monkeypatch.setattr(chromadb, "EphemeralClient", slow_first_setup)
    barrier = threading.Barrier(8)
    clients: list[object] = []

    def first_use() -> None:
        barrier.wait()
        clients.append(chroma_client())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not overlapped.is_set()
    assert len(created) == 1
    assert len(clients) == 8
    assert all(c is created[0] for c in clients)
    assert chroma_client() is created[0]


@pytest.mark.usefixtures("fresh_client_cache")
def test_a_closed_shared_client_is_replaced() -> None:
    first = chroma_client()
    assert chroma_client() is first
    first.close()  # type: ignore[attr-defined]
    second = chroma_client()
    assert second is not first
    assert (
        select_relevant(TEXTS[0], _passages(), embeddings=BagOfWords(), k=1)[0][0].text
        == (TEXTS[0])
    )


async def test_concurrent_first_calls_from_threads_and_asyncio_all_succeed(
    fresh_client_cache: None,
) -> None:
    import asyncio

    results = await asyncio.gather(
        *(
            aselect_relevant(TEXTS[i % 5], _passages(), embeddings=BagOfWords(), k=1)
            for i in range(16)
        )
    )
    assert [r[0][0].text for r in results] == [TEXTS[i % 5] for i in range(16)]
    assert _lcr_collections() == []


class Indexed(Embeddings):
    """Cheap embeddings for many passages: passage ``n`` points at angle ``n`` (in 0.001 rad)."""

    def _vector(self, text: str) -> list[float]:
        n = int(text.rsplit(" ", 1)[-1])
        return [math.cos(n / 1000), math.sin(n / 1000), 0.5]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _many_passages(count: int) -> list[Passage]:
    return [
        Passage(
            text=f"passage {i}",
            url="https://example.org/",
            title="t",
            rank=0,
            index_in_page=i,
            n_tokens=2,
        )
        for i in range(count)
    ]


def test_more_passages_than_chromas_max_batch_size_need_no_collection() -> None:
    count = chroma_client().get_max_batch_size() + 539  # 6,000 with Chroma's 5,461
    passages = _many_passages(count)
    results = select_relevant(
        "passage 4321", passages, embeddings=Indexed(), k=3, retrieval="dense"
    )
    assert results[0][0].index_in_page == 4321
    assert {p.index_in_page for p, _ in results} == {4320, 4321, 4322}
    assert results[0][1] == pytest.approx(1.0, abs=1e-5)
    assert _lcr_collections() == []


class _Recorder:
    """Wraps a client and records the size of every write; a tiny max batch size."""

    def __init__(self, client: Any, max_batch: int) -> None:
        self._client = client
        self._max_batch = max_batch

    def get_max_batch_size(self) -> int:
        return self._max_batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_existing_store_writes_and_deletes_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Chroma(
        collection_name="lcr-test-batches",
        embedding_function=BagOfWords(),
        client=chroma_client(),
        collection_configuration={"hnsw": {"space": "l2"}},
    )
    monkeypatch.setattr(store, "_client", _Recorder(chroma_client(), max_batch=2))
    added: list[int] = []
    deleted: list[int] = []
    real_add, real_delete = store.add_texts, store.delete

    def add_texts(texts: Any, *args: Any, **kwargs: Any) -> list[str]:
        texts = list(texts)
        added.append(len(texts))
        return real_add(texts, *args, **kwargs)

    def delete(ids: list[str] | None = None, **kwargs: Any) -> None:
        deleted.append(len(ids or []))
        real_delete(ids=ids, **kwargs)

    monkeypatch.setattr(store, "add_texts", add_texts)
    monkeypatch.setattr(store, "delete", delete)
    try:
        results = select_relevant("Wikipedia Turkey restored", _passages(), store=store, k=5)
        assert added == deleted == [2, 2, 1]
        assert [p.text for p, _ in results][:2] == [TEXTS[2], TEXTS[3]]
        assert sorted(p.rank for p, _ in results) == [0, 1, 2, 3, 4]
        assert store.get()["ids"] == []
    finally:
        store.delete_collection()
