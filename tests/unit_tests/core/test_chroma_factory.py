"""The one Chroma client factory: every client of the package is made by it, under one lock."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from langchain_references.factcheck import relevance
from langchain_references.server.index import EvidenceIndexError
from langchain_references.server.index import chroma as index_chroma
from langchain_references.services import _chroma


def test_http_client_refuses_what_is_not_an_http_url() -> None:
    with pytest.raises(ValueError, match=r"not an http\(s\) URL: 'ftp://host:8000'"):
        _chroma.http_client("ftp://host:8000")
    with pytest.raises(EvidenceIndexError, match=r"not an http\(s\) URL: 'http://'"):
        index_chroma.client(None, "http://")


def test_the_shared_in_memory_client_is_one_object_until_reset() -> None:
    first = _chroma.ephemeral_client()
    assert _chroma.ephemeral_client() is first
    assert relevance.chroma_client() is first  # the relevance stage uses the same one
    assert relevance._shared_client is _chroma.SHARED_EPHEMERAL
    _chroma.SHARED_EPHEMERAL.reset()
    assert _chroma.ephemeral_client() is not first


def test_the_evidence_index_makes_its_clients_with_the_factory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(
        index_chroma, "persistent_client", lambda path, **kw: calls.append(("dir", path))
    )
    monkeypatch.setattr(index_chroma, "http_client", lambda url, **kw: calls.append(("url", url)))
    index_chroma.client(tmp_path, None)
    index_chroma.client(None, "http://127.0.0.1:1")
    assert calls == [("dir", tmp_path), ("url", "http://127.0.0.1:1")]


def test_clients_made_at_once_from_threads_all_work(tmp_path: Path) -> None:
    # Chroma's first set-up in a process is not thread-safe: the factory's lock serialises it.
    _chroma.SHARED_EPHEMERAL.reset()
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []
    counts: list[int] = []

    def make(number: int) -> None:
        try:
            barrier.wait()
            if number % 2:
                client = _chroma.ephemeral_client()
            else:
                client = _chroma.persistent_client(tmp_path / f"store{number}")
            collection = client.get_or_create_collection(
                f"collection{number}",
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
            )
            collection.upsert(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]])
            counts.append(collection.count())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert counts == [2] * 6
