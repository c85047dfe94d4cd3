from __future__ import annotations

import math
import re
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import Field

from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.search import BaseSearchProvider
from langchain_references.factcheck.types import SearchHit
from langchain_references.factuality import load_inputs
from langchain_references.factuality.model import Atom, Context
from langchain_references.factuality.retrieval import (
    InputContexts,
    RetrievedContexts,
    VectorStoreContexts,
    WebContexts,
)


class BagOfWords(Embeddings):
    """Deterministic hashed bag-of-words vectors: texts sharing words are close."""

    dim = 256

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dim
        for word in re.findall(r"[a-z]+", text.lower()):
            v[zlib.crc32(word.encode()) % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


ATOMS = (
    Atom("a0", "Paris is the capital of France."),
    Atom("a1", "Rome is the capital of Italy."),
)
CORPUS = [
    Document(
        "Paris is the capital and largest city of France.",
        metadata={"title": "Paris", "source": "https://p"},
    ),
    Document("Rome is the capital city of Italy.", metadata={"title": "Rome", "url": "https://r"}),
    Document("Berlin is the capital of Germany.", metadata={"title": 7}),
]


# ------------------------------------------------------------------------- input contexts


def test_input_contexts_pass_through_and_top_k(shared_data: Path) -> None:
    (record,) = load_inputs(shared_data / "factreasoner_flaherty_wikipedia.json").records
    result = InputContexts().retrieve(record.atoms, record.contexts)
    assert result.atoms == record.atoms
    assert result.contexts == record.contexts
    no_context = {a.id for a in record.atoms if not a.contexts}
    assert {f.item for f in result.failures} == no_context
    assert len(no_context) == 4

    trimmed = InputContexts(top_k=1).retrieve(record.atoms, record.contexts)
    assert all(len(a.contexts) <= 1 for a in trimmed.atoms)
    kept = {c.id for c in trimmed.contexts}
    assert kept == {a.contexts[0] for a in record.atoms if a.contexts}
    assert [a.text for a in trimmed.atoms] == [a.text for a in record.atoms]
    with pytest.raises(ValueError, match="top_k"):
        InputContexts(top_k=0)


async def test_input_contexts_async() -> None:
    atoms = (Atom("a0", "x", contexts=("c0",)),)
    contexts = (Context("c0", "y"),)
    result = await InputContexts().aretrieve(atoms, contexts)
    assert result == RetrievedContexts(atoms, contexts)


# --------------------------------------------------------------------- vector store


def check_vector_result(result: RetrievedContexts, k: int) -> None:
    assert [a.contexts for a in result.atoms] == [
        tuple(f"c_a0_{j}" for j in range(k)),
        tuple(f"c_a1_{j}" for j in range(k)),
    ]
    by_id = {c.id: c for c in result.contexts}
    assert by_id["c_a0_0"].text.startswith("Paris")
    assert (by_id["c_a0_0"].title, by_id["c_a0_0"].link) == ("Paris", "https://p")
    assert by_id["c_a1_0"].text.startswith("Rome")
    assert (by_id["c_a1_0"].title, by_id["c_a1_0"].link) == ("Rome", "https://r")
    assert [a.text for a in result.atoms] == [a.text for a in ATOMS]


def test_vector_store_contexts_in_memory() -> None:
    store = InMemoryVectorStore.from_documents(CORPUS, BagOfWords())
    result = VectorStoreContexts(store, k=2).retrieve(ATOMS, (Context("old", "ignored"),))
    check_vector_result(result, 2)
    assert result.failures == ()
    assert all(c.id != "old" for c in result.contexts)


def test_vector_store_contexts_chroma() -> None:
    from langchain_chroma import Chroma

    from langchain_references.factcheck.relevance import chroma_client

    store = Chroma(
        collection_name=f"test-{uuid.uuid4().hex}",
        embedding_function=BagOfWords(),
        client=chroma_client(),
    )
    try:
        store.add_documents(CORPUS)
        check_vector_result(VectorStoreContexts(store, k=1).retrieve(ATOMS), 1)
    finally:
        store.delete_collection()


class FlakyRetriever(BaseRetriever):
    """Returns the corpus documents containing the query's first word; fails on 'Rome'."""

    docs: list[Document]
    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        if "Rome" in query:
            raise ConnectionError("index offline")
        first = query.split(":")[-1].split()[0]
        return [d for d in self.docs if first in d.page_content] * 3


async def test_retriever_failures_are_recorded_and_k_applies() -> None:
    retriever = FlakyRetriever(docs=CORPUS)
    source = VectorStoreContexts(retriever, k=2, include_topic=True)
    for result in (
        source.retrieve(ATOMS, topic="Capitals"),
        await source.aretrieve(ATOMS, topic="Capitals"),
    ):
        assert result.atoms[0].contexts == ("c_a0_0", "c_a0_1")
        assert result.atoms[1].contexts == ()
        (failure,) = result.failures
        assert (failure.item, failure.stage) == ("a1", "retrieve")
        assert "index offline" in failure.reason
    assert retriever.queries[0] == "Capitals: Paris is the capital of France."
    assert VectorStoreContexts(retriever).retrieve(()) == RetrievedContexts((), ())


async def test_vector_store_contexts_no_atoms_no_query() -> None:
    retriever = FlakyRetriever(docs=CORPUS)
    source = VectorStoreContexts(retriever)
    assert source.retrieve(()) == RetrievedContexts((), ())
    assert await source.aretrieve(()) == RetrievedContexts((), ())
    assert retriever.queries == []


class CountingRetriever(BaseRetriever):
    """Records how many queries run at once."""

    docs: list[Document]
    now: int = 0
    peak: int = 0
    lock: Any = Field(default_factory=threading.Lock)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.02)
        with self.lock:
            self.now -= 1
        return self.docs


def test_vector_store_contexts_config_max_concurrency_wins() -> None:
    atoms = tuple(Atom(f"a{i}", f"fact {i}") for i in range(4))
    retriever = CountingRetriever(docs=CORPUS[:1])
    VectorStoreContexts(retriever, max_concurrency=1).retrieve(atoms)
    assert retriever.peak == 1
    retriever = CountingRetriever(docs=CORPUS[:1])
    result = VectorStoreContexts(retriever, max_concurrency=1).retrieve(
        atoms, config={"max_concurrency": 4}
    )
    assert 1 < retriever.peak <= 4
    assert [a.contexts for a in result.atoms] == [(f"c_a{i}_0",) for i in range(4)]


def test_vector_store_contexts_checks() -> None:
    with pytest.raises(TypeError):
        VectorStoreContexts("not a store")  # type: ignore[arg-type]
    store = InMemoryVectorStore(BagOfWords())
    with pytest.raises(ValueError, match="k"):
        VectorStoreContexts(store, k=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        VectorStoreContexts(store, max_concurrency=0)
    result = VectorStoreContexts(store).retrieve(ATOMS)
    assert [f.reason for f in result.failures] == ["no document found"] * 2


# ------------------------------------------------------------------------------ web


PARIS = (
    "Paris is the capital and most populous city of France, with an estimated population "
    "of two million residents."
)
ROME = "Rome is the capital city of Italy and the seat of the Italian government since 1871."
FILLER = "The city has many museums, parks and restaurants that attract visitors every year."


class Site:
    """Pages on 127.0.0.1, counting requests per path."""

    pages: ClassVar[dict[str, str]] = {
        "/paris": f"<html><head><title>Paris</title></head><body><article><p>{PARIS}</p>"
        f"<p>{FILLER}</p></article></body></html>",
        "/rome": f"<html><head><title>Rome</title></head><body><article><p>{ROME}</p>"
        f"<p>{FILLER}</p></article></body></html>",
    }

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests[self.path] += 1
                body = site.pages.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site()
    yield server
    server.close()


class KeywordSearch(BaseSearchProvider):
    name = "keyword"

    def __init__(self, base: str) -> None:
        self.base = base

    def _search(self, query: str, k: int) -> list[SearchHit]:
        if "fail" in query:
            raise TimeoutError("search timed out")
        hits = [
            SearchHit(
                title="Paris",
                snippet="Paris snippet about France.",
                link=f"{self.base}/paris",
                rank=0,
            ),
            SearchHit(
                title="Rome", snippet="Rome snippet about Italy.", link=f"{self.base}/rome", rank=1
            ),
            SearchHit(title="Gone", snippet="", link=f"{self.base}/missing", rank=2),
        ]
        return hits[:k]


def test_web_contexts_fetch_each_url_once_and_select_relevant(site: Site) -> None:
    atoms = (*ATOMS, Atom("a2", "This query will fail."))
    web = WebContexts(
        KeywordSearch(site.base),
        embeddings=BagOfWords(),
        fetcher=PageFetcher(allow_private=True, timeout_s=5),
        k_contexts=1,
    )
    result = web.retrieve(atoms)
    by_id = {c.id: c for c in result.contexts}
    (paris,) = [by_id[c] for c in result.atoms[0].contexts]
    (rome,) = [by_id[c] for c in result.atoms[1].contexts]
    assert paris.text.startswith("Paris is the capital")
    assert paris.link == f"{site.base}/paris"
    assert paris.title == "Paris"
    assert paris.snippet == "Paris snippet about France."
    assert rome.text.startswith("Rome is the capital")
    assert result.atoms[2].contexts == ()
    assert site.requests == Counter({"/paris": 1, "/rome": 1, "/missing": 1})
    stages = Counter(f.stage for f in result.failures)
    assert stages["search"] == 1
    assert stages["fetch"] == 1
    assert any(f.item == "a2" and "timed out" in f.reason for f in result.failures)
    assert any(f.url.endswith("/missing") and "404" in f.reason for f in result.failures)


async def test_web_contexts_snippets_without_fetcher(site: Site) -> None:
    web = WebContexts(KeywordSearch(site.base), embeddings=BagOfWords(), k_contexts=5)
    result = await web.aretrieve(ATOMS[:1], topic="Europe")
    assert [c.text for c in result.contexts] == [
        "Paris snippet about France.",
        "Rome snippet about Italy.",
    ]
    assert site.requests == Counter()
    no_fallback = WebContexts(
        KeywordSearch(site.base), embeddings=BagOfWords(), snippet_fallback=False
    )
    result = await no_fallback.aretrieve(ATOMS[:1])
    assert result.contexts == ()
    assert result.failures[0].reason == "no context found"
    with pytest.raises(ValueError, match="k_hits"):
        WebContexts(KeywordSearch(site.base), embeddings=BagOfWords(), k_hits=0)
