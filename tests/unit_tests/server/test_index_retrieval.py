"""The index's retrieval modes: BM25 saved with each generation, the dense query, fusion."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from langchain_references.server import bm25_store
from langchain_references.server.index import (
    FUSION_DEPTH,
    BuildResult,
    EvidenceIndex,
    EvidenceRecord,
    IndexBuildError,
    parse_evidence_record,
    split_sentences,
)
from langchain_references.services.loading import load_records
from langchain_references.services.retrieval import BM25Index, Retrieval, reciprocal_rank_fusion

from ._build_fakes import WordHashEmbeddings
from .conftest import CORPUS

NAME = "ret-idx"
QUERIES = ("carbon dioxide warming", "sea level rise since 1900", "honey bees", "ice melting")


def _records() -> list[EvidenceRecord]:
    return load_records(CORPUS, parse_evidence_record).records


def _build(
    directory: Path, records: list[EvidenceRecord] | None = None, **options: Any
) -> BuildResult:
    return EvidenceIndex.build(
        NAME,
        _records() if records is None else records,
        persist_dir=directory,
        embeddings=WordHashEmbeddings(),
        batch_size=4,
        **options,
    )


def _open(directory: Path, retrieval: Retrieval) -> EvidenceIndex:
    return EvidenceIndex.open(
        NAME, persist_dir=directory, embeddings=WordHashEmbeddings(), retrieval=retrieval
    )


def _no_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: EvidenceIndex) -> None:
        raise AssertionError("the BM25 index was rebuilt instead of loaded")

    monkeypatch.setattr(EvidenceIndex, "_bm25_from_entries", fail)


def _ids(index: EvidenceIndex, query: str, granularity: str = "phrase", k: int = 5) -> list[str]:
    return [h.id for h in index.search(query, granularity=granularity, k=k)]  # type: ignore[arg-type]


# ------------------------------------------------------------------ BM25 with the generation


def test_bm25_is_saved_with_each_generation_and_switched_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = bm25_store.bm25_root(tmp_path)
    first = _build(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == [f"{NAME}__g1"]
    assert sorted(p.name for p in (root / f"{NAME}__g1").iterdir()) == ["abstract", "phrase"]

    # the second generation drops the bees: the first one's BM25 still finds them
    second = _build(tmp_path, [r for r in _records() if r.id != "bees-1"])
    assert sorted(p.name for p in root.iterdir()) == [f"{NAME}__g1", f"{NAME}__g2"]
    _no_rebuild(monkeypatch)
    reopened = _open(tmp_path, "bm25")
    assert reopened.generation == second.generation == f"{NAME}__g2"
    assert not any(i.startswith("bees-1:") for i in _ids(reopened, "honey bees"))
    assert _ids(first.index, "honey bees", k=1)[0].startswith("bees-1:")

    third = _build(tmp_path)  # deletes generation 1, with its BM25 index
    assert third.deleted == (f"{NAME}__g1",)
    assert sorted(p.name for p in root.iterdir()) == [f"{NAME}__g2", f"{NAME}__g3"]
    assert _ids(_open(tmp_path, "bm25"), "honey bees", k=1)[0].startswith("bees-1:")


def test_a_failed_build_leaves_no_bm25_index_behind(tmp_path: Path) -> None:
    _build(tmp_path)
    with pytest.raises(IndexBuildError):
        EvidenceIndex.build(
            NAME,
            _records(),
            persist_dir=tmp_path,
            embeddings=WordHashEmbeddings(fail_after=1),
            batch_size=4,
        )
    assert [p.name for p in bm25_store.bm25_root(tmp_path).iterdir()] == [f"{NAME}__g1"]


def test_the_loaded_bm25_ranks_as_a_fresh_one_over_the_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _records()
    _build(tmp_path)
    _no_rebuild(monkeypatch)
    index = _open(tmp_path, "bm25")
    phrases = [
        (f"{r.id}:phrase:{i}", s) for r in records for i, s in enumerate(split_sentences(r.text))
    ]
    fresh = BM25Index.build([i for i, _ in phrases], [t for _, t in phrases])
    abstracts = BM25Index.build([f"{r.id}:abstract" for r in records], [r.text for r in records])
    for query in QUERIES:
        assert _ids(index, query, k=4) == [i for i, _ in fresh.top(query, 4)]
        assert _ids(index, query, "abstract", k=3) == [i for i, _ in abstracts.top(query, 3)]
    assert index.search("zebra quantum", granularity="phrase", k=5) == []


def test_a_dense_build_saves_no_bm25_and_opening_for_bm25_builds_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _build(tmp_path, retrieval="dense")
    assert not bm25_store.bm25_root(tmp_path).exists()
    with caplog.at_level(logging.WARNING, logger="langchain_references.server.index"):
        index = _open(tmp_path, "hybrid")
    assert "building the BM25 index in memory" in caplog.text
    assert not bm25_store.bm25_root(tmp_path).exists()  # opening never writes
    assert _ids(index, "honey bees", k=1)[0].startswith("bees-1:")


def test_add_records_refreshes_the_saved_bm25(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _records()
    _build(tmp_path, [r for r in records if r.id != "bees-1"])
    index = _open(tmp_path, "bm25")
    assert _ids(index, "honey bees") == []
    index.add_records([r for r in records if r.id == "bees-1"])
    assert _ids(index, "honey bees", k=1)[0].startswith("bees-1:")
    _no_rebuild(monkeypatch)
    assert _ids(_open(tmp_path, "bm25"), "honey bees", k=1)[0].startswith("bees-1:")


# ------------------------------------------------------------------ the modes


def _as_hits(nearest: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Chroma's ``(id, cosine distance)`` as ``(id, similarity)``."""
    return [(i, min(1.0, max(0.0, 1.0 - d / 2.0))) for i, d in nearest]


def test_dense_search_matches_chromas_filtered_query(tmp_path: Path) -> None:
    index = _build(tmp_path).index
    index.retrieval = "dense"
    embeddings = WordHashEmbeddings()
    for query in QUERIES:
        vector = embeddings.embed_query(query)
        for granularity in ("abstract", "phrase"):
            for k in (1, 3, 30):
                filtered = index._chroma_query([vector], k, {"granularity": granularity})[0]
                hits = index.search(query, granularity=granularity, k=k)
                assert [(h.id, h.similarity) for h in hits] == _as_hits(filtered)
                assert {h.granularity for h in hits} == {granularity}


def test_hybrid_is_the_fusion_of_the_dense_and_bm25_rankings(tmp_path: Path) -> None:
    _build(tmp_path)
    dense, bm25, hybrid = (_open(tmp_path, mode) for mode in ("dense", "bm25", "hybrid"))
    for query in QUERIES:
        for granularity in ("abstract", "phrase"):
            fused = reciprocal_rank_fusion(
                [
                    _ids(dense, query, granularity, FUSION_DEPTH),
                    _ids(bm25, query, granularity, FUSION_DEPTH),
                ]
            )
            assert _ids(hybrid, query, granularity, 4) == [i for i, _ in fused[:4]]
    # a hit found by BM25 alone carries its cosine similarity too
    by_id = {h.id: h for h in dense.search("honey bees", granularity="phrase", k=50)}
    for hit in hybrid.search("honey bees", granularity="phrase", k=10):
        assert hit.similarity == pytest.approx(by_id[hit.id].similarity, abs=1e-6)
        assert hit.text == by_id[hit.id].text
        assert hit.metadata == by_id[hit.id].metadata


async def test_async_search_gives_the_same_hits(tmp_path: Path) -> None:
    _build(tmp_path)
    for mode in ("dense", "bm25", "hybrid"):
        index = _open(tmp_path, mode)  # type: ignore[arg-type]
        sync = index.search_many(list(QUERIES), granularity="phrase", k=4)
        assert await index.asearch_many(list(QUERIES), granularity="phrase", k=4) == sync


def test_open_rejects_an_unknown_mode(tmp_path: Path) -> None:
    _build(tmp_path)
    with pytest.raises(ValueError, match="retrieval must be one of dense, bm25, hybrid"):
        _open(tmp_path, "sparse")  # type: ignore[arg-type]


@pytest.mark.parametrize(("oversample", "cap"), [(0.0, 2048), (0.0, 0)])
def test_dense_search_refills_then_falls_back_to_a_filtered_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, oversample: float, cap: int
) -> None:
    from langchain_references.server.index import search as index_module

    index = _build(tmp_path).index
    index.retrieval = "dense"
    vector = WordHashEmbeddings().embed_query("ice melting")
    expected = index._chroma_query([vector], 5, {"granularity": "abstract"})[0]
    monkeypatch.setattr(index_module, "_OVERSAMPLE", oversample)
    monkeypatch.setattr(index_module, "_OVERSAMPLE_CAP", cap)
    calls: list[tuple[int, object]] = []
    real = EvidenceIndex._chroma_query

    def spy(self: EvidenceIndex, vectors: list[list[float]], n: int, where: object) -> object:
        calls.append((n, where))
        return real(self, vectors, n, where)

    monkeypatch.setattr(EvidenceIndex, "_chroma_query", spy)
    hits = index.search("ice melting", granularity="abstract", k=5)
    assert [(h.id, h.similarity) for h in hits] == _as_hits(expected)
    if cap == 0:  # nothing unfiltered: straight to the filtered query
        assert calls == [(5, {"granularity": "abstract"})]
    else:  # 15 entries first (k + 10), then doubled until 5 abstracts are among them
        assert calls[0] == (15, None)
        assert all(where is None for _, where in calls)
        assert [n for n, _ in calls] == [min(15 * 2**i, index.count()) for i in range(len(calls))]
