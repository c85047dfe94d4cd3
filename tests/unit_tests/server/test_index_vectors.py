"""Hybrid search with the entries' snapshot saved beside the BM25 index: same hits, no reads.

The pinned hits (``data/pinned_hits.json``, k=20, hybrid and BM25) are those of the
implementation before the snapshot was saved (it read the hits, and the vectors of those
found by BM25 alone, from Chroma), on the corpus below with the offline MiniLM: the same ids
in the same order, the same similarities. 14 of the 18 hybrid searches have hits found by
BM25 alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from langchain_references.server import bm25_store
from langchain_references.server.index import (
    EvidenceIndex,
    EvidenceRecord,
    parse_evidence_record,
)
from langchain_references.services._vectors import cosine
from langchain_references.services.embeddings import MiniLMEmbeddings
from langchain_references.services.retrieval import Retrieval

NAME = "pin-idx"
GENERATION = f"{NAME}__g1"
PINNED = Path(__file__).parent / "data" / "pinned_hits.json"

# 198 sentences in 66 records: enough that BM25's first 20 are not all among the dense 20
SUBJECTS = (
    "Carbon dioxide",
    "Sea level",
    "Honey bees",
    "Arctic sea ice",
    "Coral reefs",
    "The Moon's surface",
    "Ocean heat",
    "Mountain glaciers",
)
PREDICATES = ("rose sharply", "declined slowly", "was measured again", "changed little", "doubled")
PLACES = ("in 1900", "near the poles", "along the coast", "since the last survey", "in the tropics")


def _records() -> list[EvidenceRecord]:
    sentences = [f"{s} {p} {w}." for s in SUBJECTS for p in PREDICATES for w in PLACES]
    return [
        parse_evidence_record(
            {"id": f"r{n}", "title": f"Record {n}", "text": " ".join(sentences[3 * n : 3 * n + 3])}
        )
        for n in range(len(sentences) // 3)
    ]


def _pinned(mode: str) -> list[tuple[str, str, list[tuple[str, float]]]]:
    """(granularity, query, hits) of the k=20 searches pinned for a mode."""
    rows = json.loads(PINNED.read_text(encoding="utf-8"))
    return [
        (row["granularity"], row["query"], [(e, s) for e, s in row["hits"]])
        for row in rows
        if row["mode"] == mode
    ]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


@pytest.fixture(scope="module")
def pinned_dir(tmp_path_factory: pytest.TempPathFactory, minilm: MiniLMEmbeddings) -> Path:
    directory = tmp_path_factory.mktemp("pinned")
    EvidenceIndex.build(NAME, _records(), persist_dir=directory, embeddings=minilm, batch_size=16)
    return directory


def _open(directory: Path, minilm: MiniLMEmbeddings, retrieval: Retrieval) -> EvidenceIndex:
    return EvidenceIndex.open(NAME, persist_dir=directory, embeddings=minilm, retrieval=retrieval)


class _Reads:
    """Records what each ``get`` of a collection asks Chroma to include."""

    def __init__(self, index: EvidenceIndex, monkeypatch: pytest.MonkeyPatch) -> None:
        self.includes: list[list[str]] = []
        real = index._collection.get

        def get(*args: Any, **kwargs: Any) -> Any:
            self.includes.append(list(kwargs.get("include") or []))
            return real(*args, **kwargs)

        monkeypatch.setattr(index._collection, "get", get)


def _check(index: EvidenceIndex, mode: str) -> None:
    pinned = _pinned(mode)
    assert len(pinned) == 18
    for granularity, query, expected in pinned:
        hits = index.search(query, granularity=granularity, k=20)  # type: ignore[arg-type]
        assert [h.id for h in hits] == [e for e, _ in expected], (granularity, query)
        for hit, (_, similarity) in zip(hits, expected, strict=True):
            assert hit.similarity == pytest.approx(similarity, abs=2e-6), (query, hit.id)


@pytest.mark.parametrize("mode", ["hybrid", "bm25"])
def test_hits_are_those_of_before_and_chroma_is_not_read_again(
    pinned_dir: Path, minilm: MiniLMEmbeddings, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _open(pinned_dir, minilm, mode)  # type: ignore[arg-type]
    reads = _Reads(index, monkeypatch)
    _check(index, mode)
    if mode == "hybrid":
        assert reads.includes == []  # the dense query only: hits from the saved snapshot
    else:  # one read of the hits (so that a deleted generation fails), no vectors
        assert reads.includes == [["documents", "metadatas"]] * 16  # "zzzz" finds nothing


@pytest.mark.parametrize("mode", ["hybrid", "bm25"])
def test_without_saved_entries_the_hits_are_the_same_read_from_chroma(
    pinned_dir: Path,
    minilm: MiniLMEmbeddings,
    mode: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = tmp_path / "copy"
    shutil.copytree(pinned_dir, directory)
    saved = bm25_store.bm25_root(directory) / GENERATION / "abstract" / bm25_store.ENTRIES_FILE
    saved.unlink()  # vectors only, as saved by an earlier version
    index = _open(directory, minilm, mode)  # type: ignore[arg-type]
    reads = _Reads(index, monkeypatch)
    _check(index, mode)
    assert reads.includes
    assert all(include == ["documents", "metadatas"] for include in reads.includes)


@pytest.mark.parametrize("mode", ["hybrid", "bm25"])
def test_without_saved_vectors_the_hits_are_the_same_read_from_chroma(
    pinned_dir: Path,
    minilm: MiniLMEmbeddings,
    mode: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = tmp_path / "copy"
    shutil.copytree(pinned_dir, directory)
    for granularity in ("abstract", "phrase"):
        saved = bm25_store.bm25_root(directory) / GENERATION / granularity / bm25_store.VECTORS_FILE
        saved.unlink()  # as an index saved by an older version
    index = _open(directory, minilm, mode)  # type: ignore[arg-type]
    reads = _Reads(index, monkeypatch)
    _check(index, mode)
    assert any("embeddings" in include for include in reads.includes)


def test_the_snapshot_is_what_chroma_stores_in_bm25_order(
    pinned_dir: Path, minilm: MiniLMEmbeddings
) -> None:
    index = _open(pinned_dir, minilm, "hybrid")
    root = bm25_store.bm25_root(pinned_dir)
    for granularity, lexical in index._lexical().items():
        saved = np.load(root / GENERATION / granularity / bm25_store.VECTORS_FILE)
        assert saved.dtype == np.float32
        assert saved.shape == (len(lexical), 384)
        got = index._collection.get(
            ids=list(lexical.ids), include=["embeddings", "documents", "metadatas"]
        )
        stored = {
            entry_id: (vector, doc, meta)
            for entry_id, vector, doc, meta in zip(
                got["ids"], got["embeddings"], got["documents"], got["metadatas"], strict=True
            )
        }
        entries = bm25_store.load_entries(root, GENERATION, {granularity: lexical})
        assert entries is not None
        for row, entry_id in enumerate(lexical.ids):
            vector, doc, meta = stored[entry_id]
            assert np.array_equal(saved[row], vector), entry_id
            assert entries[granularity].row(row) == (doc, dict(meta)), entry_id


def test_vectors_of_another_size_are_not_used(
    pinned_dir: Path,
    minilm: MiniLMEmbeddings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    directory = tmp_path / "copy"
    shutil.copytree(pinned_dir, directory)
    saved = bm25_store.bm25_root(directory) / GENERATION / "phrase" / bm25_store.VECTORS_FILE
    np.save(saved, np.load(saved)[:-1])  # one row short: misaligned with the BM25 ids
    index = _open(directory, minilm, "hybrid")
    assert "do not match its BM25 index" in caplog.text
    reads = _Reads(index, monkeypatch)
    _check(index, "hybrid")
    assert any("embeddings" in include for include in reads.includes)


@pytest.mark.parametrize("mode", ["hybrid", "bm25"])
def test_an_update_saves_the_snapshot_of_the_new_entries(
    pinned_dir: Path,
    minilm: MiniLMEmbeddings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    directory = tmp_path / "copy"
    shutil.copytree(pinned_dir, directory)
    writer = EvidenceIndex.open(NAME, persist_dir=directory, embeddings=minilm, create=True)
    text = "Penguins huddle together to survive the Antarctic winter."
    writer.add_records([parse_evidence_record({"id": "peng-1", "title": "P", "text": text})])
    index = _open(directory, minilm, mode)  # type: ignore[arg-type]
    reads = _Reads(index, monkeypatch)
    hits = index.search("penguins huddle", granularity="phrase", k=1)
    assert [h.id for h in hits] == ["peng-1:phrase:0"]
    # in bm25 mode the similarity comes from the snapshot's vectors
    expected = (cosine(minilm.embed_query("penguins huddle"), minilm.embed_query(text)) + 1) / 2
    assert hits[0].similarity == pytest.approx(expected, abs=1e-6)
    assert reads.includes == ([] if mode == "hybrid" else [["documents", "metadatas"]])
    assert (hits[0].text, hits[0].title) == (text, "P")
    assert hits[0].metadata == {
        "record_id": "peng-1",
        "title": "P",
        "granularity": "phrase",
        "position": 0,
    }
