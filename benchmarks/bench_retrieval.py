"""Dense, BM25 and hybrid retrieval: quality on Climate-FEVER, latency at scale, embedding once.

Everything is measured in one run and printed as tables (ratios, never absolute targets):

1. **Retrieval quality** on ``../shared/data/climate-fever-dev.jsonl`` (the dev half of
   Climate-FEVER; the rows "second" are its held-out second half, ``split_claims``, on which
   nothing in this package was tuned): an evidence index of one record per distinct evidence
   sentence (offline MiniLM), searched with each claim at the ``phrase`` granularity in each
   mode. recall@5 / @10, MRR@10 and nDCG@10 (binary gains) of all five annotated sentences, and
   of those labelled SUPPORTS or REFUTES, with the p50 latency of one in-process search (the
   MiniLM query embedding included).
2. **Latency at scale**: an index of ``--scale`` entries (real Climate-FEVER sentences, repeated
   into five-sentence records; deterministic random unit vectors, so that the build is the
   store's cost only), searched in each mode (``phrase``, k=10, the query vector looked up, not
   computed). Against the same collection queried directly (Chroma, unfiltered, the same
   ``k``) and with the granularity filter the index used before. The ratio is index / direct.
3. **Embedding once**: the relevance and judge stages of the fact-check chain (MiniLM, the
   offline heuristic judge) on the passages of ``--chain-claims`` claims (each claim's five
   evidence sentences plus 35 of other claims, k=20), with the judge sharing the chain's
   embeddings object (now: the shared cache) or holding its own (as before). Texts embedded
   and embedding time, each over the one-embedding limit: every distinct text embedded once.
4. **A batch sharing pages**: the whole fact-check chain (the demo site on 127.0.0.1, MiniLM,
   the offline judge) over 18 statements about the same pages, at concurrency 1 and 4
   (``--batch-concurrency``): texts embedded over the distinct texts (each embedded once is
   1.00). Needs no data file.

Usage::

    python benchmarks/bench_retrieval.py [--data FILE] [--split all,second] [--scale 100000]
        [--scale-dir DIR] [--chain-claims 40] [--skip-quality] [--skip-scale] [--skip-chain]
        [--batch-concurrency 1,4] [--skip-batch]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_service import DATA, RandomEmbeddings, _table, evidence_records
from climate_fever import ClaimRecord, load_climate_fever, split_claims

from langchain_references.factcheck.stages import FactCheckState, JudgeStage, RelevanceStage
from langchain_references.factcheck.types import Passage
from langchain_references.judges import HeuristicJudge
from langchain_references.server.index import (
    EvidenceIndex,
    EvidenceIndexError,
    parse_evidence_record,
)
from langchain_references.services.embedding_cache import embeds_queries_as_documents
from langchain_references.services.embeddings import MiniLMEmbeddings
from langchain_references.services.retrieval import RETRIEVAL_MODES

K = 10
GOLD = {
    "all 5 annotated": {"SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO"},
    "SUPPORTS/REFUTES": {"SUPPORTS", "REFUTES"},
}


def _ms(seconds: Sequence[float], q: float = 50) -> float:
    return float(np.percentile(seconds, q)) * 1000


# ------------------------------------------------------------------ 1. quality


def _metrics(ranked: Sequence[str], gold: set[str]) -> tuple[float, float, float, float]:
    """recall@5, recall@10, reciprocal rank (within 10), nDCG@10 of one query."""
    top = list(dict.fromkeys(ranked))[:K]
    hits = [1.0 if r in gold else 0.0 for r in top]
    first = next((i for i, h in enumerate(hits) if h), None)
    dcg = sum(h / math.log2(i + 2) for i, h in enumerate(hits))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), K)))
    return (
        len(gold & set(top[:5])) / len(gold),
        len(gold & set(top)) / len(gold),
        0.0 if first is None else 1 / (first + 1),
        dcg / ideal,
    )


def quality(claims: Sequence[ClaimRecord], splits: Sequence[str], directory: Path) -> str:
    """The retrieval table of each split and mode."""
    embeddings = MiniLMEmbeddings()
    embeddings.embed_query("warm-up")
    records = evidence_records(claims)
    started = time.perf_counter()
    EvidenceIndex.build("cf-dev", records, persist_dir=directory, embeddings=embeddings)
    print(f"(index of {len(records)} sentences built in {time.perf_counter() - started:.0f} s)")
    rows = []
    for split in splits:
        chosen = split_claims(claims, split)  # type: ignore[arg-type]
        for mode in RETRIEVAL_MODES:
            index = EvidenceIndex.open(
                "cf-dev", persist_dir=directory, embeddings=embeddings, retrieval=mode
            )
            latencies, found = [], []
            for claim in chosen:
                t0 = time.perf_counter()
                hits = index.search(claim.claim, granularity="phrase", k=K)
                latencies.append(time.perf_counter() - t0)
                found.append([h.record_id for h in hits])
            for name, labels in GOLD.items():
                per_query = [
                    _metrics(ranked, gold)
                    for claim, ranked in zip(chosen, found, strict=True)
                    if (
                        gold := {
                            e.evidence_id for e in claim.evidences if e.evidence_label in labels
                        }
                    )
                ]
                means = [statistics.mean(m[i] for m in per_query) for i in range(4)]
                rows.append(
                    [
                        split,
                        mode,
                        name,
                        len(per_query),
                        *(f"{m:.3f}" for m in means),
                        f"{_ms(latencies):.1f}",
                    ]
                )
    header = ["split", "mode", "gold sentences", "claims", "recall@5", "recall@10", "MRR@10"]
    return _table([*header, "nDCG@10", "p50 ms/query"], rows)


# ------------------------------------------------------------------ 2. scale


class _LookupEmbeddings(RandomEmbeddings):
    """Random unit vectors, the queries' computed once beforehand (a dictionary look-up)."""

    def __init__(self, queries: Sequence[str]) -> None:
        self._queries = {q: self._vector(q) for q in queries}

    def embed_query(self, text: str) -> list[float]:
        return self._queries.get(text) or self._vector(text)


def _scale_records(sentences: Sequence[str], entries: int) -> list[Any]:
    """Five-sentence records of real sentences (each record: 1 abstract + 5 phrase entries)."""
    records, n = [], 0
    while n * 6 < entries:
        text = " ".join(sentences[(n * 5 + j) % len(sentences)] for j in range(5))
        records.append(parse_evidence_record({"id": f"r{n}", "title": f"t{n}", "text": text}))
        n += 1
    return records


def _scale_index(name: str, records: Sequence[Any], directory: Path, embeddings: Any) -> Any:
    """``(index, build seconds or None)``: the index built, or reused if ``directory`` holds it."""
    if directory.is_dir():
        with contextlib.suppress(EvidenceIndexError):
            return EvidenceIndex.open(name, persist_dir=directory, embeddings=embeddings), None
    started = time.perf_counter()
    built = EvidenceIndex.build(
        name, records, persist_dir=directory, embeddings=embeddings, batch_size=5000
    )
    return built.index, time.perf_counter() - started


def scale(claims: Sequence[ClaimRecord], sizes: Sequence[int], directory: Path) -> str:
    """Search latency of each mode at each size, against direct Chroma queries.

    An index already in ``directory`` (``--scale-dir``) is reused, not built again.
    """
    sentences = [ev.evidence for c in claims for ev in c.evidences]
    sentences = [s.strip().rstrip(".") + "." for s in dict.fromkeys(sentences) if len(s) > 20]
    queries = [c.claim for c in claims[:100]]
    rows = []
    for size in sizes:
        embeddings = _LookupEmbeddings(queries)
        records = _scale_records(sentences, size)
        built, build_s = _scale_index(f"scale-{size}", records, directory / str(size), embeddings)
        entries = built.count()
        collection = built._collection
        vectors = [embeddings.embed_query(q) for q in queries]

        def direct(vector: list[float], where: Any = None, collection: Any = collection) -> None:
            collection.query(
                query_embeddings=[vector],
                n_results=K,
                where=where,
                include=["documents", "metadatas", "distances"],
            )

        timed: dict[str, list[float]] = {}
        for _ in range(2):  # the second round is kept: caches warm for every contender
            for name in ("direct", *RETRIEVAL_MODES):
                timed[name] = []
            index = {
                mode: EvidenceIndex.open(
                    f"scale-{size}",
                    persist_dir=directory / str(size),
                    embeddings=embeddings,
                    retrieval=mode,
                )
                for mode in RETRIEVAL_MODES
            }
            for query, vector in zip(queries, vectors, strict=True):
                t0 = time.perf_counter()
                direct(vector)
                timed["direct"].append(time.perf_counter() - t0)
                for mode in RETRIEVAL_MODES:
                    t0 = time.perf_counter()
                    index[mode].search(query, granularity="phrase", k=K)
                    timed[mode].append(time.perf_counter() - t0)
        filtered = []
        for vector in vectors[:10]:
            t0 = time.perf_counter()
            direct(vector, {"granularity": "phrase"})
            filtered.append(time.perf_counter() - t0)
        base = _ms(timed["direct"])
        rows.append(
            [
                f"{entries:,}",
                "reused" if build_s is None else f"{build_s:.0f}",
                "direct (Chroma, unfiltered)",
                f"{base:.1f}",
                f"{_ms(timed['direct'], 95):.1f}",
                "1.00",
            ]
        )
        rows.append(
            [
                f"{entries:,}",
                "",
                "direct, granularity filter (before)",
                f"{_ms(filtered):.1f}",
                f"{_ms(filtered, 95):.1f}",
                f"{_ms(filtered) / base:.2f}",
            ]
        )
        for mode in RETRIEVAL_MODES:
            rows.append(
                [
                    f"{entries:,}",
                    "",
                    f"index.search, {mode}",
                    f"{_ms(timed[mode]):.1f}",
                    f"{_ms(timed[mode], 95):.1f}",
                    f"{_ms(timed[mode]) / base:.2f}",
                ]
            )
    return _table(["entries", "build s", "query", "p50 ms", "p95 ms", "p50 / direct"], rows)


# ------------------------------------------------------------------ 3. embedding once


class _Timed(Embeddings):
    """Counts and times what the wrapped embeddings embed."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner, self.texts, self.seconds = inner, 0, 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        t0 = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.texts += len(texts)
            self.seconds += time.perf_counter() - t0

    def embed_query(self, text: str) -> list[float]:
        t0 = time.perf_counter()
        try:
            return self.inner.embed_query(text)
        finally:
            self.texts += 1
            self.seconds += time.perf_counter() - t0


def _passages(claims: Sequence[ClaimRecord], i: int) -> list[Passage]:
    own = [ev.evidence for ev in claims[i].evidences]
    others = [ev.evidence for c in claims[i + 1 : i + 8] for ev in c.evidences][:35]
    return [
        Passage(
            text=t,
            url=f"https://example.org/{n}",
            title="",
            rank=n,
            index_in_page=0,
            n_tokens=len(t.split()),
        )
        for n, t in enumerate(dict.fromkeys(own + others))
    ]


def chain(claims: Sequence[ClaimRecord], count: int) -> str:
    """Embedding of the relevance + judge stages, shared embeddings or not, over the limit."""
    model = MiniLMEmbeddings()
    model.embed_query("warm-up")
    config = RunnableConfig()
    totals = {"shared (now)": [0, 0.0], "judge's own (before)": [0, 0.0], "limit": [0, 0.0]}
    for i in range(count):
        passages = _passages(claims, i)
        statement = claims[i].claim
        state0 = FactCheckState.begin(statement, statement).advance(passages=tuple(passages))
        for name in ("shared (now)", "judge's own (before)"):
            timed = _Timed(model)  # a new object: nothing cached from the previous run
            judge_embeddings = timed if name.startswith("shared") else _Timed(model)
            relevance = RelevanceStage(embeddings=timed, vector_store=None, k=20)
            state = relevance.as_runnable().invoke(state0, config)
            judge = JudgeStage(HeuristicJudge(judge_embeddings), max_concurrency=4)
            judge.as_runnable().invoke(state, config)
            extra = judge_embeddings if judge_embeddings is not timed else None
            totals[name][0] += timed.texts + (extra.texts if extra else 0)
            totals[name][1] += timed.seconds + (extra.seconds if extra else 0.0)
        t0 = time.perf_counter()
        model.embed_documents([p.text for p in passages])
        model.embed_query(statement)
        totals["limit"][1] += time.perf_counter() - t0
        totals["limit"][0] += len(passages) + 1
    limit_texts, limit_s = totals["limit"]
    rows = [
        [name, texts, f"{seconds:.1f}", f"{texts / limit_texts:.2f}", f"{seconds / limit_s:.2f}"]
        for name, (texts, seconds) in totals.items()
    ]
    return _table(
        ["judge embeddings", "texts embedded", "embedding s", "texts / limit", "time / limit"], rows
    )


#: Statements about the demo corpus: several per page, so that a batch shares its pages.
BATCH_STATEMENTS = (
    "The Moon orbits Earth.",
    "The Moon is tidally locked.",
    "Apollo 11 landed on the Moon in 1969.",
    "Europa is a moon of Jupiter.",
    "Europa has an ocean under its ice.",
    "Galileo discovered Europa in 1610.",
    "Honeybees perform a waggle dance.",
    "Karl von Frisch decoded the waggle dance.",
    "A hive has a single queen.",
    "Workers make honey from nectar.",
    "The Space Needle is in Seattle.",
    "The Space Needle was built for the 1962 World's Fair.",
    "The Moon has water ice in craters.",
    "Europa is smaller than the Moon.",
    "Drones are male bees.",
    "The queen lays eggs.",
    "Bees build comb from wax.",
    "The Moon has a diameter of about 3,474 km.",
)


class _Distinct(_Timed):
    """:class:`_Timed`, also remembering which texts it embedded (thread-safe)."""

    def __init__(self, inner: Embeddings) -> None:
        super().__init__(inner)
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        # counting changes no vector: it embeds queries as documents when the model does
        self.queries_are_documents = embeds_queries_as_documents(inner)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.seen.update(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            self.seen.add(text)
        return super().embed_query(text)


def batch_chain(concurrencies: Sequence[int]) -> str:
    """Texts a fact-check batch embeds (the demo site), over the embed-once limit.

    The 18 statements of :data:`BATCH_STATEMENTS` share the demo corpus's pages; the chain's
    embeddings and its offline judge's are one object (a fresh one per row). The limit is
    every distinct text embedded once.
    """
    from langchain_references.demo.site import DemoSiteSearch, LocalOriginGuard, serve_demo_site
    from langchain_references.factcheck import PageFetcher, create_fact_check_chain

    model = MiniLMEmbeddings()
    model.embed_query("warm-up")
    rows = []
    for concurrency in concurrencies:
        counted = _Distinct(model)
        with serve_demo_site() as base:
            chain = create_fact_check_chain(
                search=DemoSiteSearch(base),
                judge=HeuristicJudge(counted),
                embeddings=counted,
                fetcher=PageFetcher(guard=LocalOriginGuard([base])),
            )
            t0 = time.perf_counter()
            chain.batch(list(BATCH_STATEMENTS), config={"max_concurrency": concurrency})
            seconds = time.perf_counter() - t0
        rows.append(
            [
                len(BATCH_STATEMENTS),
                concurrency,
                counted.texts,
                len(counted.seen),
                f"{counted.texts / len(counted.seen):.2f}",
                f"{seconds:.1f}",
            ]
        )
    return _table(
        ["statements", "concurrency", "texts embedded", "distinct texts", "x limit", "s"], rows
    )


# ------------------------------------------------------------------ main


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DATA, help="Climate-FEVER dev JSONL")
    parser.add_argument("--split", default="all,second", help="claim splits (all, first, second)")
    parser.add_argument("--scale", type=_ints, default=[100_000], help="index sizes (entries)")
    parser.add_argument(
        "--scale-dir",
        type=Path,
        default=None,
        help="keep the scale indexes here and reuse them (default: built in a temporary folder)",
    )
    parser.add_argument("--chain-claims", type=int, default=40)
    parser.add_argument(
        "--batch-concurrency", type=_ints, default=[1, 4], help="rows of the batch table"
    )
    parser.add_argument("--skip-batch", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-chain", action="store_true")
    args = parser.parse_args(argv)
    if not args.skip_batch:
        table = batch_chain(args.batch_concurrency)
        print(f"\n## Embedding of a fact-check batch sharing pages\n{table}", flush=True)
    if not args.data.is_file():
        print(f"missing {args.data}: give --data", file=sys.stderr)
        return 2
    claims = load_climate_fever(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_quality:
            table = quality(claims, args.split.split(","), Path(tmp) / "quality")
            print(f"\n## Retrieval on Climate-FEVER (phrase, k={K})\n{table}", flush=True)
        if not args.skip_chain:
            table = chain(claims, args.chain_claims)
            print(f"\n## Embedding of the relevance + judge stages\n{table}", flush=True)
        if not args.skip_scale and args.scale:
            table = scale(claims, args.scale, args.scale_dir or Path(tmp) / "scale")
            print(f"\n## Query latency at scale (phrase, k={K})\n{table}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
