"""``index build --engine ray``: the same index as the local engine, into both kinds of Chroma.

One local Ray (two CPUs, 127.0.0.1; ``local_ray``, shared with the run's other Ray tests) and one
``chroma run`` (127.0.0.1) serve the whole module.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray", reason="the Ray engine needs the [ray] extra")

from langchain_references.cli import main
from langchain_references.server import bm25_store
from langchain_references.server.index import (
    BuildResult,
    EvidenceIndex,
    EvidenceRecord,
    IndexBuildError,
    parse_evidence_record,
)
from langchain_references.server.index import chroma as index_chroma
from langchain_references.server.index import writing as index_writing
from langchain_references.services.engine import RayOptions
from langchain_references.services.loading import load_records

from ._build_fakes import WordHashEmbeddings
from ._chroma_run import chroma_run
from .conftest import CORPUS
from .test_cli_index import _corpus_with_bad_lines

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_ray")]

FAKE = "tests.unit_tests.server._build_fakes:WordHashEmbeddings"
POISONED = "tests.unit_tests.server._build_fakes:poisoned"
QUERIES = ("carbon dioxide warming", "honey bees", "sea level rise", "coral bleaching")
TWO = RayOptions(workers=2)


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with chroma_run(tmp_path_factory.mktemp("chroma")) as url:
        yield url


def _records(*extra: dict[str, Any]) -> list[EvidenceRecord]:
    return [
        *load_records(CORPUS, parse_evidence_record).records,
        *(parse_evidence_record(obj) for obj in extra),
    ]


def _build(name: str, *, embeddings: Any = FAKE, **options: Any) -> tuple[BuildResult, list[int]]:
    """Build the corpus (batches of 4 entries); the result and the progress calls."""
    progress: list[int] = []
    result = EvidenceIndex.build(
        name, _records(), embeddings=embeddings, batch_size=4, progress=progress.append, **options
    )
    return result, progress


def _entries(index: EvidenceIndex) -> list[tuple[str, str, dict[str, Any], list[float]]]:
    got = index._collection.get(include=["documents", "metadatas", "embeddings"])
    rows = zip(
        got["ids"], got["documents"] or [], got["metadatas"] or [], got["embeddings"], strict=True
    )
    return sorted((i, d, dict(m or {}), [float(x) for x in v]) for i, d, m, v in rows)


def _same_entries(ray: EvidenceIndex, local: EvidenceIndex) -> None:
    ray_entries, local_entries = _entries(ray), _entries(local)
    assert [e[:3] for e in ray_entries] == [e[:3] for e in local_entries]
    for (entry_id, *_, vector), (_, *_, expected) in zip(ray_entries, local_entries, strict=True):
        assert len(vector) == len(expected)
        assert max(abs(a - b) for a, b in zip(vector, expected, strict=True)) <= 1e-6, entry_id


def _answers(index: EvidenceIndex) -> list[list[tuple[str, float]]]:
    return [
        [(h.id, round(h.similarity, 6)) for h in index.search(q, granularity=g, k=4)]
        for q in QUERIES
        for g in ("abstract", "phrase")
    ]


def test_ray_and_local_engines_build_the_same_index(tmp_path: Path) -> None:
    # The default MiniLM, loaded once per actor from its spec, against this process's.
    local, local_progress = _build("same", persist_dir=tmp_path / "l", embeddings=None)
    ray, ray_progress = _build(
        "same", persist_dir=tmp_path / "r", embeddings=None, engine="ray", ray=TWO
    )
    assert (ray.records, ray.entries, ray.generation) == (8, 24, "same__g1")
    assert (local.records, local.entries) == (8, 24)
    assert ray_progress == local_progress == [2, 2, 2, 2]  # batches of >= 4 entries, in order
    _same_entries(ray.index, local.index)
    reopened = EvidenceIndex.open("same", persist_dir=tmp_path / "r")  # saved BM25 included
    assert _answers(reopened) == _answers(ray.index) == _answers(local.index)
    for granularity in ("abstract", "phrase"):  # the snapshot beside BM25: one code path
        saved = [bm25_store.bm25_root(tmp_path / e) / "same__g1" / granularity for e in "rl"]
        vectors = [np.load(folder / bm25_store.VECTORS_FILE) for folder in saved]
        rows = 8 if granularity == "abstract" else 16  # 24 entries, 8 records
        assert vectors[0].shape == vectors[1].shape == (rows, 384)
        assert np.abs(vectors[0] - vectors[1]).max() <= 1e-6
        entries = [
            [
                json.loads(line)
                for line in (folder / bm25_store.ENTRIES_FILE)
                .read_text(encoding="utf-8")
                .splitlines()
            ]
            for folder in saved
        ]
        assert entries[0] == entries[1]
        assert len(entries[0]) == rows


def test_ray_workers_build_into_a_chroma_server(
    chroma_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local, _ = _build("served", persist_dir=tmp_path)

    def driver_writes(*_: object) -> None:
        raise AssertionError("the driver wrote entries: the workers should have")

    monkeypatch.setattr(index_writing, "upsert", driver_writes)
    monkeypatch.setattr(EvidenceIndex, "_upsert", driver_writes)
    first, progress = _build("served", chroma_url=chroma_url, engine="ray", ray=TWO)
    assert (first.generation, first.entries, progress) == ("served__g1", 24, [2, 2, 2, 2])
    _same_entries(first.index, local.index)
    second, _ = _build("served", chroma_url=chroma_url, engine="ray", ray=TWO)
    assert (second.generation, second.previous_generation) == ("served__g2", "served__g1")
    served = EvidenceIndex.open("served", chroma_url=chroma_url, embeddings=WordHashEmbeddings())
    assert served.generation == "served__g2"
    assert _answers(served) == _answers(local.index)


def _collections(where: dict[str, Any], name: str) -> list[str]:
    client = index_chroma.client(where.get("persist_dir"), where.get("chroma_url"))
    return sorted(c.name for c in client.list_collections() if c.name.startswith(name))


@pytest.mark.parametrize(
    ("location", "failure"), [("embedded", "error"), ("server", "error"), ("embedded", "interrupt")]
)
def test_a_failed_ray_build_leaves_the_previous_generation_serving(
    chroma_url: str, tmp_path: Path, location: str, failure: str
) -> None:
    name = f"fail-{location}-{failure}"
    where: dict[str, Any] = (
        {"persist_dir": tmp_path} if location == "embedded" else {"chroma_url": chroma_url}
    )
    _build(name, **where)
    before = _answers(EvidenceIndex.open(name, embeddings=WordHashEmbeddings(), **where))
    poison = {"id": "bad", "text": "A poison batch."}
    records = [*_records()[:3], *_records(poison)[8:], *_records()[3:]]  # fails midway

    def interrupt(_: int) -> None:
        raise KeyboardInterrupt

    kept = f"index {name!r} left as it was: generation '{name}__g1' (24 entries) still current"
    with pytest.raises(IndexBuildError if failure == "error" else KeyboardInterrupt) as caught:
        EvidenceIndex.build(
            name,
            records,
            embeddings=POISONED if failure == "error" else FAKE,
            batch_size=4,
            engine="ray",
            ray=TWO,
            progress=interrupt if failure == "interrupt" else None,
            **where,
        )
    if failure == "error":
        message = str(caught.value)
        assert message.startswith(f"build of index {name!r} failed: cannot write to index")
        assert "embeddings refused a text holding 'poison'" in message
        assert message.endswith(kept)
    else:
        assert caught.value.__notes__ == [kept]
    after = EvidenceIndex.open(name, embeddings=WordHashEmbeddings(), **where)
    assert after.generation == f"{name}__g1"
    assert _answers(after) == before
    assert _collections(where, name) == [name, f"{name}__g1"]  # the new generation is gone


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_the_cli_summary_is_the_same_with_either_engine(tmp_path: Path) -> None:
    corpus = _corpus_with_bad_lines(tmp_path)
    outputs = {}
    for engine in ("local", "ray"):
        db = tmp_path / engine
        ray_only = ["--workers", "2"] if engine == "ray" else []
        status, out, err = _cli(
            *("index", "build", "--input", str(corpus), "--name", "cli-idx"),
            *("--persist-dir", str(db), "--embeddings", FAKE, "--batch-size", "4"),
            *("--engine", engine, *ray_only),
        )
        assert status == 1, err
        assert err.count("(record skipped)") == 2
        assert "8/8 [" in err  # the progress bar reached the end
        outputs[engine] = out.replace(str(db), "DB")
    assert outputs["ray"] == outputs["local"]
    assert outputs["ray"].startswith("indexed 8 record(s) as 24 entries into 'cli-idx' at DB")
    assert outputs["ray"].endswith("; 2 line(s) skipped\n")


def test_a_failed_cli_build_on_ray_says_what_still_serves(tmp_path: Path) -> None:
    corpus = tmp_path / "poisoned.jsonl"
    corpus.write_text(CORPUS.read_text() + json.dumps({"id": "p", "text": "Poison."}) + "\n")
    common = ("index", "build", "--name", "cli-fail", "--persist-dir", str(tmp_path / "db"))
    assert _cli(*common, "--input", str(CORPUS), "--embeddings", FAKE, "--quiet")[0] == 0
    status, out, err = _cli(
        *common, "--input", str(corpus), "--embeddings", POISONED, "--engine", "ray", "--quiet"
    )
    assert (status, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("error: build of index 'cli-fail' failed: cannot write to index")
    assert "embeddings refused a text holding 'poison'" in line
    assert line.endswith("generation 'cli-fail__g1' (24 entries) still current")
