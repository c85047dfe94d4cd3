"""The evidence index: record parsing, building (idempotent), searching, concurrency."""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from langchain_references.errors import RecordError
from langchain_references.server.index import (
    BuildResult,
    EvidenceIndex,
    EvidenceIndexError,
    EvidenceRecord,
    IncompleteIndexError,
    IndexBuildError,
    IndexNotFoundError,
    parse_evidence_record,
    split_sentences,
)
from langchain_references.services._vectors import cosine
from langchain_references.services.embeddings import MiniLMEmbeddings
from langchain_references.services.loading import load_records
from langchain_references.services.retrieval import Retrieval

from ._build_fakes import WordHashEmbeddings
from .conftest import CORPUS, INDEX_NAME


def _corpus() -> list[dict[str, object]]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------ records


def test_parse_record_keeps_known_fields_and_serializes_extras() -> None:
    record = parse_evidence_record(
        {
            "id": 7,
            "title": " T ",
            "text": "Some text.",
            "year": 2020.0,
            "doi": "10.1/x",
            "tags": ["a", "b"],
            "nested": {"k": 1},
            "score": 0.5,
            "flag": False,
            "missing": None,
        },
        location="c.jsonl:3",
    )
    assert record.id == "7"
    assert record.title == "T"
    assert record.year == 2020
    assert record.citation_count is None
    assert record.extra == {
        "tags": '["a", "b"]',
        "nested": '{"k": 1}',
        "score": 0.5,
        "flag": False,
    }
    meta = record.metadata()
    assert meta["record_id"] == "7"
    assert meta["doi"] == "10.1/x"
    assert "citation_count" not in meta  # None values are not stored


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"title": "t", "text": "x"}, "id"),
        ({"id": True, "title": "t", "text": "x"}, "id"),
        ({"id": " ", "title": "t", "text": "x"}, "id"),
        ({"id": "a", "title": 3, "text": "x"}, "title"),
        ({"id": "a", "title": "t", "text": "  "}, "text"),
        ({"id": "a", "title": "t"}, "text"),
        ({"id": "a", "title": "t", "text": "x", "year": "2020"}, "year"),
        ({"id": "a", "title": "t", "text": "x", "citation_count": 1.5}, "citation_count"),
        ({"id": "a", "title": "t", "text": "x", "doi": 10}, "doi"),
        ({"id": "a", "title": "t", "text": "x", "granularity": "phrase"}, "granularity"),
    ],
)
def test_parse_record_rejects_bad_fields(obj: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as info:
        parse_evidence_record(obj, location="c.jsonl:9")
    assert info.value.field == field
    assert info.value.location == "c.jsonl:9"


def test_parse_record_rejects_non_objects() -> None:
    with pytest.raises(RecordError, match="JSON object"):
        parse_evidence_record(["id", "text"], location="c.jsonl:1")


def test_split_sentences() -> None:
    assert split_sentences("Sea level rises. Ice melts fast!  Why? ") == [
        "Sea level rises.",
        "Ice melts fast!",
        "Why?",
    ]
    assert split_sentences("   ") == []


# ------------------------------------------------------------------ building


def test_built_index_has_both_granularities(evidence_index: EvidenceIndex) -> None:
    records = _corpus()
    sentences = sum(len(split_sentences(str(r["text"]))) for r in records)
    assert evidence_index.count("abstract") == len(records)
    assert evidence_index.count("phrase") == sentences
    assert evidence_index.count() == len(records) + sentences


def test_every_entry_carries_the_record_metadata(evidence_index: EvidenceIndex) -> None:
    hits = evidence_index.search("coral bleaching heatwaves", granularity="phrase", k=20)
    coral = [h for h in hits if h.record_id == "42"]
    assert len(coral) == 2  # both sentences of the record
    for hit in coral:
        assert hit.title == "Coral bleaching"
        assert hit.year == 2017
        assert hit.citation_count == 88
        assert hit.influential_citation_count is None
        assert hit.metadata["extra_score"] == 0.5
        assert hit.metadata["open_access"] is True
        assert hit.metadata["granularity"] == "phrase"
    assert sorted(h.id for h in coral) == ["42:phrase:0", "42:phrase:1"]
    (abstract,) = [
        h
        for h in evidence_index.search("coral bleaching", granularity="abstract", k=8)
        if h.record_id == "42"
    ]
    assert abstract.id == "42:abstract"
    assert abstract.text.startswith("Marine heatwaves")
    assert abstract.text.endswith("recovery.")


def test_rebuild_is_idempotent_and_drops_stale_sentences(
    index_copy: Path, embeddings: MiniLMEmbeddings
) -> None:
    index = EvidenceIndex.open(INDEX_NAME, persist_dir=index_copy, embeddings=embeddings)
    records = load_records(CORPUS, parse_evidence_record).records
    before = index.count()
    assert index.add_records(records, batch_size=5) == before
    assert index.count() == before
    shorter = parse_evidence_record({"id": "co2-1", "title": "CO2", "text": "One sentence only."})
    index.add_records([shorter])
    assert index.count() == before - 1  # the record lost one of its two sentences
    hits = index.search("One sentence only.", granularity="phrase", k=1)
    assert hits[0].id == "co2-1:phrase:0"
    assert hits[0].title == "CO2"


def test_repeated_ids_keep_the_last_record(tmp_path: Path, embeddings: MiniLMEmbeddings) -> None:
    index = EvidenceIndex.open("dups", persist_dir=tmp_path, embeddings=embeddings, create=True)
    first = parse_evidence_record({"id": "a", "title": "old", "text": "Old text."})
    second = parse_evidence_record({"id": "a", "title": "new", "text": "New text."})
    assert index.add_records([first, second]) == 2
    assert index.count() == 2
    (hit,) = index.search("text", granularity="abstract", k=5)
    assert (hit.title, hit.text) == ("new", "New text.")


def test_progress_reports_every_record(tmp_path: Path, embeddings: MiniLMEmbeddings) -> None:
    index = EvidenceIndex.open("progress", persist_dir=tmp_path, embeddings=embeddings, create=True)
    records = load_records(CORPUS, parse_evidence_record).records
    done: list[int] = []
    index.add_records(records, batch_size=4, progress=done.append)
    assert sum(done) == len(records)
    assert len(done) > 1  # several batches


# ------------------------------------------------------------------ opening


def test_open_missing_index_or_directory(tmp_path: Path, embeddings: MiniLMEmbeddings) -> None:
    with pytest.raises(IndexNotFoundError):
        EvidenceIndex.open("absent", persist_dir=tmp_path / "nowhere", embeddings=embeddings)
    EvidenceIndex.open("present", persist_dir=tmp_path, embeddings=embeddings, create=True)
    with pytest.raises(IndexNotFoundError, match="absent"):
        EvidenceIndex.open("absent", persist_dir=tmp_path, embeddings=embeddings)


@pytest.mark.parametrize("name", ["ab", "-abc", "a b c", "x" * 53, "abc-", "a__b"])
def test_open_rejects_invalid_names(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid index name"):
        EvidenceIndex.open(name, persist_dir=tmp_path)


def test_open_needs_exactly_one_location(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        EvidenceIndex.open("abc")
    with pytest.raises(ValueError, match="exactly one"):
        EvidenceIndex.open("abc", persist_dir=tmp_path, chroma_url="http://127.0.0.1:1")


# ------------------------------------------------------------------ searching


@pytest.mark.parametrize("retrieval", ["dense", "bm25", "hybrid"])
def test_similarity_is_rescaled_cosine(
    built_index_dir: Path, embeddings: MiniLMEmbeddings, retrieval: Retrieval
) -> None:
    evidence_index = EvidenceIndex.open(
        INDEX_NAME, persist_dir=built_index_dir, embeddings=embeddings, retrieval=retrieval
    )
    query = "sea level is rising faster"
    hits = evidence_index.search(query, granularity="phrase", k=6)
    assert len(hits) == 6
    vector = embeddings.embed_query(query)
    for hit in hits:
        c = cosine(vector, embeddings.embed_query(hit.text))
        assert hit.similarity == pytest.approx((c + 1) / 2, abs=2e-3)
        assert 0.0 <= hit.similarity <= 1.0
        assert hit.granularity == "phrase"
    if retrieval == "dense":  # the other modes rank by BM25 scores or fused ranks
        assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)


def test_search_validates_arguments(evidence_index: EvidenceIndex) -> None:
    with pytest.raises(ValueError, match="granularity"):
        evidence_index.search("x", granularity="word", k=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be"):
        evidence_index.search("x", granularity="phrase", k=0)


def test_async_and_batched_search_match_search(evidence_index: EvidenceIndex) -> None:
    queries = ["arctic sea ice", "honey bees", "the moon atmosphere"]
    expected = [
        [h.id for h in evidence_index.search(q, granularity="abstract", k=3)] for q in queries
    ]
    many = evidence_index.search_many(queries, granularity="abstract", k=3)
    assert [[h.id for h in hits] for hits in many] == expected

    async def both() -> list[list[str]]:
        single = await asyncio.gather(
            *(evidence_index.asearch(q, granularity="abstract", k=3) for q in queries)
        )
        return [[h.id for h in hits] for hits in single]

    assert asyncio.run(both()) == expected
    assert expected[1][0] == "bees-1:abstract"


def test_concurrent_searches_from_threads(evidence_index: EvidenceIndex) -> None:
    queries = ["ice", "bees", "sea level", "coral", "moon", "carbon dioxide"] * 4
    expected = {
        q: [h.id for h in evidence_index.search(q, granularity="phrase", k=4)] for q in queries
    }
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(
                lambda q: [h.id for h in evidence_index.search(q, granularity="phrase", k=4)],
                queries,
            )
        )
    assert results == [expected[q] for q in queries]


# ------------------------------------------------------------------ generations (atomic builds)

QUERIES = ("carbon dioxide warming", "honey bees", "sea level rise", "coral bleaching")


def _records() -> list[EvidenceRecord]:
    return load_records(CORPUS, parse_evidence_record).records


def _collections(directory: Path) -> list[str]:
    from chromadb import PersistentClient
    from chromadb.config import Settings

    client = PersistentClient(path=str(directory), settings=Settings(anonymized_telemetry=False))
    return sorted(c.name for c in client.list_collections())


def _answers(index: EvidenceIndex) -> list[list[tuple[str, float]]]:
    return [
        [(h.id, round(h.similarity, 6)) for h in index.search(q, granularity=g, k=4)]
        for q in QUERIES
        for g in ("abstract", "phrase")
    ]


def _built(directory: Path, records: list[EvidenceRecord] | None = None) -> BuildResult:
    return EvidenceIndex.build(
        "gen-idx",
        _records() if records is None else records,
        persist_dir=directory,
        embeddings=WordHashEmbeddings(),
        batch_size=4,
    )


def _open(directory: Path) -> EvidenceIndex:
    return EvidenceIndex.open("gen-idx", persist_dir=directory, embeddings=WordHashEmbeddings())


def test_build_writes_a_new_generation_and_keeps_only_the_previous_one(tmp_path: Path) -> None:
    first = _built(tmp_path)
    assert (first.generation, first.previous_generation, first.deleted) == ("gen-idx__g1", None, ())
    assert first.entries == first.index.count() == 24
    assert first.records == 8
    assert _open(tmp_path).generation == "gen-idx__g1"

    second = _built(tmp_path, _records()[:3])
    assert (second.generation, second.previous_generation) == ("gen-idx__g2", "gen-idx__g1")
    assert (second.entries, second.previous_entries) == (9, 24)
    assert _open(tmp_path).count() == 9
    assert first.index.count() == 24  # a server still on the previous generation answers

    third = _built(tmp_path)
    assert third.deleted == ("gen-idx__g1",)
    assert _collections(tmp_path) == ["gen-idx", "gen-idx__g2", "gen-idx__g3"]
    assert _open(tmp_path).count("abstract") == 8


@pytest.mark.parametrize("failure", ["error", "interrupt"])
def test_a_failed_build_leaves_the_previous_generation_serving(
    tmp_path: Path, failure: str
) -> None:
    _built(tmp_path)
    before = _answers(_open(tmp_path))
    bigger = [*_records(), parse_evidence_record({"id": "new", "text": "Honey bees dance."})]
    failing = WordHashEmbeddings(fail_after=3, fail_with=failure)
    expected = "index 'gen-idx' left as it was: generation 'gen-idx__g1' (24 entries) still current"
    caught: pytest.ExceptionInfo[BaseException]
    with pytest.raises(IndexBuildError if failure == "error" else KeyboardInterrupt) as caught:
        EvidenceIndex.build(
            "gen-idx", bigger, persist_dir=tmp_path, embeddings=failing, batch_size=4
        )
    assert failing.calls == 3  # it failed midway, after writing some entries
    if failure == "error":
        assert str(caught.value).endswith(expected)
        assert "embeddings failed after 3 batches" in str(caught.value)
    else:
        assert caught.value.__notes__ == [expected]
    after = _open(tmp_path)
    assert after.generation == "gen-idx__g1"
    assert _answers(after) == before
    assert after.search("Honey bees dance.", granularity="abstract", k=1)[0].record_id != "new"
    assert _collections(tmp_path) == ["gen-idx", "gen-idx__g1"]  # the new generation is gone


def test_a_failed_first_build_leaves_no_index(tmp_path: Path) -> None:
    with pytest.raises(IndexBuildError, match=r"no index 'gen-idx' was made$"):
        EvidenceIndex.build(
            "gen-idx",
            _records(),
            persist_dir=tmp_path,
            embeddings=WordHashEmbeddings(fail_after=2),
            batch_size=4,
        )
    with pytest.raises(IndexNotFoundError):
        _open(tmp_path)
    assert _collections(tmp_path) == []


def _killed_first_build(directory: Path) -> None:
    """What `kill -9` during a first build leaves: a partial generation and no pointer."""
    _built(directory, _records()[:3])
    client = _chroma(directory)
    client.delete_collection("gen-idx")
    client.delete_collection("gen-idx__g1")
    partial = client.create_collection("gen-idx__g1", embedding_function=None)
    partial.add(ids=["x:abstract"], embeddings=[[1.0] * 64], documents=["x"])


def _short_generation(directory: Path) -> None:
    _built(directory)
    _chroma(directory).get_collection("gen-idx__g1").delete(ids=["co2-1:abstract"])


def _interrupted_update(directory: Path) -> None:
    _built(directory, _records()[:3])
    index = EvidenceIndex.open(
        "gen-idx",
        persist_dir=directory,
        embeddings=WordHashEmbeddings(fail_after=1),
        create=True,
    )
    with pytest.raises(EvidenceIndexError):
        index.add_records(_records(), batch_size=4)


def _missing_generation(directory: Path) -> None:
    _built(directory)
    _chroma(directory).delete_collection("gen-idx__g1")


def _older_version(directory: Path) -> None:
    """An index as versions without generations built it: one collection, no pointer."""
    legacy = _chroma(directory).create_collection("gen-idx", embedding_function=None)
    legacy.add(ids=["x:abstract"], embeddings=[[1.0] * 64], documents=["x"])


def _chroma(directory: Path) -> Any:
    from chromadb import PersistentClient
    from chromadb.config import Settings

    return PersistentClient(path=str(directory), settings=Settings(anonymized_telemetry=False))


INCOMPLETE = {
    "killed first build": (_killed_first_build, "has no complete build"),
    "short generation": (_short_generation, "holds 23 of its 24 entries"),
    "interrupted update": (_interrupted_update, "update of its generation 'gen-idx__g1'"),
    "missing generation": (_missing_generation, "'gen-idx__g1' is missing"),
    "older version": (_older_version, "built by an older version"),
}


@pytest.mark.parametrize("state", sorted(INCOMPLETE))
def test_open_refuses_an_index_without_a_complete_generation(tmp_path: Path, state: str) -> None:
    make, message = INCOMPLETE[state]
    make(tmp_path)
    with pytest.raises(IncompleteIndexError, match=re.escape(message)) as caught:
        _open(tmp_path)
    assert "\n" not in str(caught.value)
    assert str(caught.value).endswith("run `index build` again")
    rebuilt = _built(tmp_path)  # a build repairs it
    assert _open(tmp_path).generation == rebuilt.generation
    assert _open(tmp_path).count() == 24
    assert _collections(tmp_path)[-1] == rebuilt.generation


def test_rerunning_an_interrupted_update_completes_the_index(tmp_path: Path) -> None:
    _interrupted_update(tmp_path)
    index = EvidenceIndex.open(
        "gen-idx", persist_dir=tmp_path, embeddings=WordHashEmbeddings(), create=True
    )
    index.add_records(_records(), batch_size=4)
    assert _open(tmp_path).count() == 24


def test_a_build_deletes_the_generations_of_killed_builds(tmp_path: Path) -> None:
    _built(tmp_path)
    _built(tmp_path)
    _chroma(tmp_path).create_collection("gen-idx__g3", embedding_function=None)  # killed
    result = _built(tmp_path)
    assert result.generation == "gen-idx__g4"
    assert result.deleted == ("gen-idx__g1", "gen-idx__g3")
    assert _collections(tmp_path) == ["gen-idx", "gen-idx__g2", "gen-idx__g4"]
