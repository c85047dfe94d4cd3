"""The shared embedding cache embeds a text once, also when calls overlap (threads, asyncio).

The wrapped embeddings are gated: a call blocks until the test opens its gate, so that a
second call starts while the first is embedding, deterministically (no sleeps).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from langchain_references.services import embedding_cache
from langchain_references.services.embedding_cache import (
    CachedEmbeddings,
    embeds_queries_as_documents,
)


def vector(text: str) -> list[float]:
    return [float(len(text)), float(sum(map(ord, text)) % 97), 1.0]


class Gated(Embeddings):
    """Embeds by :func:`vector`; each call announces itself, then waits for its gate."""

    def __init__(self, *, failures: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.started = threading.Semaphore(0)
        self.gates: dict[str, threading.Event] = {}
        self.failures = failures  # the first calls fail
        self._lock = threading.Lock()

    def gate(self, text: str) -> threading.Event:
        with self._lock:
            return self.gates.setdefault(text, threading.Event())

    def _fails(self) -> bool:
        with self._lock:
            self.failures -= 1
            return self.failures >= 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.calls.append(list(texts))
        self.started.release()
        self.gate(texts[0]).wait(timeout=30)
        if self._fails():
            raise RuntimeError(f"model down for {texts}")
        return [vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.calls.append(list(texts))
        self.started.release()
        await asyncio.to_thread(self.gate(texts[0]).wait, 30)
        if self._fails():
            raise RuntimeError(f"model down for {texts}")
        return [vector(t) for t in texts]


def test_a_text_being_embedded_in_another_thread_is_waited_for_not_embedded_again() -> None:
    inner = Gated()
    cache = CachedEmbeddings(inner)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.embed_documents, ["x", "y"])
        inner.started.acquire()  # the first call is embedding x and y
        inner.gate("z").set()
        second = pool.submit(cache.embed_documents, ["x", "z"])
        inner.started.acquire()  # the second embeds z only, then waits for x
        assert inner.calls == [["x", "y"], ["z"]]
        assert not second.done()
        inner.gate("x").set()
        assert second.result(timeout=30) == [vector("x"), vector("z")]
        assert first.result(timeout=30) == [vector("x"), vector("y")]
    assert inner.calls == [["x", "y"], ["z"]]


async def test_a_text_being_embedded_by_another_task_is_awaited_not_embedded_again() -> None:
    inner = Gated()
    cache = CachedEmbeddings(inner)
    first = asyncio.create_task(cache.aembed_documents(["x", "y"]))
    await asyncio.to_thread(inner.started.acquire)
    inner.gate("z").set()
    second = asyncio.create_task(cache.aembed_documents(["z", "x"]))
    await asyncio.to_thread(inner.started.acquire)
    await asyncio.sleep(0.01)
    assert inner.calls == [["x", "y"], ["z"]]
    assert not second.done()
    inner.gate("x").set()
    assert await second == [vector("z"), vector("x")]
    assert await first == [vector("x"), vector("y")]
    assert inner.calls == [["x", "y"], ["z"]]


async def test_a_task_awaits_a_text_a_thread_is_embedding() -> None:
    inner = Gated()
    cache = CachedEmbeddings(inner)
    with ThreadPoolExecutor(1) as pool:
        thread_call = pool.submit(cache.embed_documents, ["x"])
        await asyncio.to_thread(inner.started.acquire)
        task = asyncio.create_task(cache.aembed_documents(["x"]))
        await asyncio.sleep(0.01)
        assert not task.done()  # waiting on the thread's flight, not blocking the loop
        inner.gate("x").set()
        assert await task == [vector("x")]
        assert thread_call.result(timeout=30) == [vector("x")]
    assert inner.calls == [["x"]]


async def test_a_sync_call_does_not_wait_for_a_task_it_embeds_the_text_itself() -> None:
    """A blocked thread could be the one running that task's loop: no wait, no deadlock."""
    inner = Gated()
    cache = CachedEmbeddings(inner)
    task = asyncio.create_task(cache.aembed_documents(["x"]))
    await asyncio.to_thread(inner.started.acquire)
    # a sync call on the loop's own thread, while the task's flight is up
    inner_gate = inner.gate("x")
    threading.Timer(0.05, inner_gate.set).start()
    assert cache.embed_documents(["x"]) == [vector("x")]
    assert await task == [vector("x")]
    assert inner.calls == [["x"], ["x"]]


def test_when_the_embedding_call_fails_its_waiters_embed_the_text_themselves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waiting = threading.Event()
    wait = embedding_cache._Flight.wait

    def announced(flight: Any) -> Any:
        waiting.set()
        return wait(flight)

    monkeypatch.setattr(embedding_cache._Flight, "wait", announced)
    inner = Gated(failures=1)  # the first call fails; the model is up again for the second
    cache = CachedEmbeddings(inner)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.embed_documents, ["x", "y"])
        inner.started.acquire()
        second = pool.submit(cache.embed_documents, ["x"])
        assert waiting.wait(timeout=30)  # the second call waits for the first's x
        inner.gate("x").set()
        with pytest.raises(RuntimeError, match=r"model down for \['x', 'y'\]"):
            first.result(timeout=30)
        assert second.result(timeout=30) == [vector("x")]
    assert inner.calls == [["x", "y"], ["x"]]
    assert cache.embed_documents(["x"]) == [vector("x")]  # remembered now
    assert inner.calls == [["x", "y"], ["x"]]


class Short(Embeddings):
    """Returns one vector too few."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [vector(t) for t in texts][:-1]

    def embed_query(self, text: str) -> list[float]:
        return vector(text)


def test_a_wrong_count_is_an_error_and_leaves_nothing_in_flight() -> None:
    cache = CachedEmbeddings(Short())
    with pytest.raises(ValueError, match=r"^embeddings returned 1 vectors for 2 texts$"):
        cache.embed_documents(["a", "b"])
    cache.inner = Gated()
    cache.inner.gate("a").set()
    assert cache.embed_documents(["a", "b"]) == [vector("a"), vector("b")]  # not waiting


def test_many_threads_embed_each_shared_text_once() -> None:
    class Counting(Embeddings):
        def __init__(self) -> None:
            self.texts: list[str] = []
            self.lock = threading.Lock()

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            with self.lock:
                self.texts.extend(texts)
            return [vector(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return vector(text)

    inner = Counting()
    cache = CachedEmbeddings(inner)
    batches: list[Any] = [[f"page {(i + j) % 12}" for j in range(6)] for i in range(48)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(cache.embed_documents, batches))
    assert results == [[vector(t) for t in batch] for batch in batches]
    assert sorted(inner.texts) == sorted(f"page {i}" for i in range(12))  # each once


def test_queries_are_embedded_once_and_apart_from_documents() -> None:
    inner = Gated()
    for text in ("q", "r"):
        inner.gate(text).set()
    cache = CachedEmbeddings(inner)
    assert [cache.embed_query("q"), cache.embed_query("q")] == [vector("q")] * 2
    assert cache.embed_documents(["q", "r"]) == [vector("q"), vector("r")]
    assert inner.calls == [["q"], ["q", "r"]]  # a model may embed queries differently


def test_a_model_that_embeds_queries_as_documents_shares_one_memo() -> None:
    class Symmetric(Gated):
        queries_are_documents = True

    inner = Symmetric()
    for text in ("q", "r"):
        inner.gate(text).set()
    cache = CachedEmbeddings(inner)
    assert embeds_queries_as_documents(inner)
    assert cache.embed_query("q") == vector("q")
    assert cache.embed_documents(["q", "r"]) == [vector("q"), vector("r")]
    assert cache.embed_query("r") == vector("r")
    assert inner.calls == [["q"], ["r"]]
    assert not embeds_queries_as_documents(Gated())
    truthy = Gated()
    truthy.queries_are_documents = "yes"  # type: ignore[attr-defined]
    assert not embeds_queries_as_documents(truthy)  # only True itself


def test_minilm_declares_that_it_embeds_queries_as_documents() -> None:
    from langchain_references.services.embeddings import MiniLMEmbeddings

    model = MiniLMEmbeddings()
    assert embeds_queries_as_documents(model)
    assert (
        model.embed_query("The Moon orbits Earth.")
        == model.embed_documents(["The Moon orbits Earth."])[0]
    )
