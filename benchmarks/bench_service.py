"""Throughput and latency of the evidence service, against the same work done in process.

On an index built from the evidence sentences of ``../shared/data/climate-fever-dev.jsonl``
(one record per distinct sentence, title = its Wikipedia article), measured in one run:

* index build: records/s and entries/s (each record is indexed as an abstract and as its
  sentences), offline MiniLM embeddings;
* evidence recall@5 / @10: the share of each claim's gold evidence sentences among the first
  5 / 10 distinct records of ``phrase`` search (all five annotated sentences, and only those
  labelled SUPPORTS or REFUTES);
* requests/s and p50 / p95 latency of ``POST /api/phrase/verify/batch`` (4 claims, top_k 5)
  and ``POST /v1/factcheck`` (top_k 5, JSON) at 1, 8 and 32 concurrent clients, served by
  ``langchain-references serve`` with 1 and 2 workers (a real uvicorn on 127.0.0.1), offline
  judge; the same handler work run in this process (the compat drivers, the fact-check
  stream) at the same concurrency; the ratio service / in-process at equal clients is the
  HTTP layer's cost (target >= 0.8 at 8 clients, 1 worker);
* query latency at 10k and 100k entries: the vector store alone (pre-computed random unit
  vectors, Chroma HNSW, cosine), plus the MiniLM query embedding measured separately.

The load generator shares the machine (and its cores) with the server, as the in-process run
does with its own work. Usage::

    python benchmarks/bench_service.py [--rounds 3] [--clients 1,8,32] [--workers 1,2]
        [--scale 10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from langchain_core.embeddings import Embeddings

sys.path.insert(0, str(Path(__file__).resolve().parent))

from climate_fever import ClaimRecord, load_climate_fever

from langchain_references.judges import offline_judge
from langchain_references.server.compat import averify_claims
from langchain_references.server.index import (
    EvidenceIndex,
    EvidenceRecord,
    parse_evidence_record,
)
from langchain_references.server.services import Services
from langchain_references.server.settings import ServerSettings
from langchain_references.services.embeddings import MiniLMEmbeddings

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "climate-fever-dev.jsonl"
BIN = Path(sys.executable).parent
INDEX = "climate-fever-dev"
BATCH_CLAIMS = 4
TOP_K = 5


# ------------------------------------------------------------------ data and index


def evidence_records(claims: Sequence[ClaimRecord]) -> list[EvidenceRecord]:
    """One corpus record per distinct evidence sentence."""
    seen: dict[str, EvidenceRecord] = {}
    for claim in claims:
        for ev in claim.evidences:
            if ev.evidence_id not in seen:
                url = "https://en.wikipedia.org/wiki/" + ev.article.replace(" ", "_")
                seen[ev.evidence_id] = parse_evidence_record(
                    {"id": ev.evidence_id, "title": ev.article, "text": ev.evidence, "url": url}
                )
    return list(seen.values())


def build_index(records: Sequence[EvidenceRecord], directory: Path) -> tuple[EvidenceIndex, str]:
    """Build the benchmark index; returns it and a table of the build speed."""
    embeddings = MiniLMEmbeddings()
    embeddings.embed_query("warm-up")
    index = EvidenceIndex.open(INDEX, persist_dir=directory, embeddings=embeddings, create=True)
    started = time.perf_counter()
    entries = index.add_records(records)
    seconds = time.perf_counter() - started
    table = _table(
        ["records", "entries", "seconds", "records/s", "entries/s"],
        [
            [
                len(records),
                entries,
                f"{seconds:.1f}",
                f"{len(records) / seconds:.0f}",
                f"{entries / seconds:.0f}",
            ]
        ],
    )
    return index, table


def recall(index: EvidenceIndex, claims: Sequence[ClaimRecord]) -> str:
    """Evidence recall@5 and @10 of phrase search (distinct records, similarity order)."""
    found = index.search_many([c.claim for c in claims], granularity="phrase", k=30)
    rows = []
    for name, labels in (
        ("all 5 annotated", {"SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO"}),
        ("SUPPORTS/REFUTES", {"SUPPORTS", "REFUTES"}),
    ):
        scores: dict[int, list[float]] = {5: [], 10: []}
        for claim, hits in zip(claims, found, strict=True):
            gold = {e.evidence_id for e in claim.evidences if e.evidence_label in labels}
            if not gold:
                continue
            ranked = list(dict.fromkeys(h.record_id for h in hits))
            for k in scores:
                scores[k].append(len(gold & set(ranked[:k])) / len(gold))
        rows.append(
            [
                name,
                len(scores[5]),
                f"{statistics.mean(scores[5]):.3f}",
                f"{statistics.mean(scores[10]):.3f}",
            ]
        )
    return _table(["gold sentences", "claims", "recall@5", "recall@10"], rows)


# ------------------------------------------------------------------ load generation


@dataclass
class Run:
    """Latencies (seconds) of the requests completed in ``seconds``."""

    latencies: list[float]
    seconds: float
    errors: int

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.seconds

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        return float(np.percentile(self.latencies, q)) * 1000


async def load(call: Callable[[int], Awaitable[bool]], clients: int, requests: int) -> Run:
    """Send ``requests`` calls from ``clients`` concurrent loops (after one warm-up call).

    A fixed amount of work (not a fixed time), so that the service and the in-process runs
    do the same requests and a slow request is never cut off by a deadline.
    """
    await call(0)
    latencies: list[float] = []
    errors = 0
    counter = iter(range(1, requests + 1))

    async def client() -> None:
        nonlocal errors
        for i in counter:
            started = time.perf_counter()
            ok = await call(i)
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return Run(latencies, time.perf_counter() - started, errors)


def _requests(clients: int, rounds: int) -> int:
    """Requests per measurement: ``rounds`` per client, at least 24."""
    return max(24, rounds * clients)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(directory: Path, workers: int, log: Path) -> Iterator[str]:
    """Run ``langchain-references serve`` on the index; yields its base URL."""
    port = _free_port()
    argv = [
        str(BIN / "langchain-references"),
        "serve",
        "--index",
        INDEX,
        "--persist-dir",
        str(directory),
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    with log.open("ab") as handle:
        process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited with {process.returncode}; see {log}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/healthcheck", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start; see {log}")
            time.sleep(0.3)
        yield base
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _claim_batches(claims: Sequence[ClaimRecord]) -> list[list[str]]:
    texts = [c.claim for c in claims]
    return [texts[i : i + BATCH_CLAIMS] for i in range(0, len(texts) - BATCH_CLAIMS, BATCH_CLAIMS)]


async def http_runs(
    base: str, claims: Sequence[ClaimRecord], clients: int, rounds: int, factcheck: bool
) -> dict[str, Run]:
    """Load the service's two endpoints."""
    batches = _claim_batches(claims)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    runs: dict[str, Run] = {}
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:

        async def verify(i: int) -> bool:
            body = {"claims": batches[i % len(batches)], "top_k": TOP_K}
            response = await http.post("/api/phrase/verify/batch", json=body)
            return response.status_code == 200

        async def check(i: int) -> bool:
            body = {"statement": claims[i % len(claims)].claim, "top_k": TOP_K}
            response = await http.post(
                "/v1/factcheck", json=body, headers={"Accept": "application/json"}
            )
            return response.status_code == 200

        runs["verify/batch"] = await load(verify, clients, _requests(clients, rounds))
        if factcheck:
            runs["factcheck"] = await load(check, clients, _requests(clients, rounds))
    return runs


async def in_process_runs(
    services: Services,
    claims: Sequence[ClaimRecord],
    clients: int,
    rounds: int,
    factcheck: bool,
) -> dict[str, Run]:
    """The same handler work, without HTTP, in this process."""
    batches = _claim_batches(claims)

    async def verify(i: int) -> bool:
        await averify_claims(services, batches[i % len(batches)], granularity="phrase", top_k=TOP_K)
        return True

    runs = {"verify/batch": await load(verify, clients, _requests(clients, rounds))}
    if factcheck:
        from langchain_references.server.factcheck_api import build_checker, check_stream

        async def check(i: int) -> bool:
            checker = build_checker(services, k=TOP_K)
            stream: AsyncIterator[Any] = check_stream(checker, claims[i % len(claims)].claim)
            async for _ in stream:
                pass
            return True

        runs["factcheck"] = await load(check, clients, _requests(clients, rounds))
    return runs


def has_factcheck(base: str) -> bool:
    """Whether the service has ``/v1/factcheck`` (another module of the package)."""
    paths = httpx.get(f"{base}/openapi.json", timeout=10).json()["paths"]
    return "/v1/factcheck" in paths


# ------------------------------------------------------------------ scale


class RandomEmbeddings(Embeddings):
    """Deterministic random unit vectors (384 dimensions) keyed by the text: store cost only."""

    def _vector(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
        vector = np.random.default_rng(seed).standard_normal(384)
        return (vector / np.linalg.norm(vector)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def scale(sizes: Sequence[int], directory: Path, queries: int = 200) -> str:
    """Search latency of the vector store at each size (random vectors, cosine HNSW)."""
    minilm = MiniLMEmbeddings()
    minilm.embed_query("warm-up")
    embed_times = []
    for i in range(50):
        started = time.perf_counter()
        minilm.embed_query(f"claim number {i} about the climate")
        embed_times.append(time.perf_counter() - started)
    rows = []
    for size in sizes:
        index = EvidenceIndex.open(
            f"scale-{size}",
            persist_dir=directory / str(size),
            embeddings=RandomEmbeddings(),
            create=True,
        )
        records = [
            parse_evidence_record({"id": f"r{i}", "title": "t", "text": f"passage {i}."})
            for i in range(size // 2)  # each record is one abstract + one sentence entry
        ]
        started = time.perf_counter()
        index.add_records(records, batch_size=5000)
        build = time.perf_counter() - started
        times = []
        for i in range(queries):
            started = time.perf_counter()
            index.search(f"query {i}", granularity="phrase", k=TOP_K + 5)
            times.append(time.perf_counter() - started)
        rows.append(
            [
                f"{index.count():,}",
                f"{build:.0f}",
                f"{np.percentile(times, 50) * 1000:.1f}",
                f"{np.percentile(times, 95) * 1000:.1f}",
                f"{(np.percentile(times, 50) + np.median(embed_times)) * 1000:.1f}",
            ]
        )
    return _table(
        ["entries", "build s", "store p50 ms", "store p95 ms", "+ MiniLM query p50 ms"], rows
    )


# ------------------------------------------------------------------ main


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(map(str, header)), *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--rounds", type=int, default=3, help="requests per client per measurement (>= 24 in all)"
    )
    parser.add_argument("--clients", type=_ints, default=[1, 8, 32])
    parser.add_argument("--workers", type=_ints, default=[1, 2])
    parser.add_argument("--scale", type=_ints, default=[10_000, 100_000])
    args = parser.parse_args(argv)
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (the shared data folder)")
        return 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    claims = load_climate_fever(DATA)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "index"
        records = evidence_records(claims)
        index, build_table = build_index(records, directory)
        print(f"## Index build ({DATA.name}: {len(claims)} claims)\n{build_table}\n", flush=True)
        print(f"## Evidence recall (phrase search)\n{recall(index, claims)}\n", flush=True)

        settings = ServerSettings(index_name=INDEX, persist_dir=directory)
        services = Services(settings=settings, index=index, judge=offline_judge())
        with serving(directory, 1, Path(tmp) / "probe.log") as base:
            factcheck = has_factcheck(base)
        in_process: dict[tuple[str, int], Run] = {}
        for clients in args.clients:
            for name, run in asyncio.run(
                in_process_runs(services, claims, clients, args.rounds, factcheck)
            ).items():
                in_process[name, clients] = run
        rows = []
        for workers in args.workers:
            with serving(directory, workers, Path(tmp) / "serve.log") as base:
                for clients in args.clients:
                    runs = asyncio.run(http_runs(base, claims, clients, args.rounds, factcheck))
                    for name, run in runs.items():
                        local = in_process[name, clients]
                        rows.append(
                            [
                                name,
                                workers,
                                clients,
                                f"{run.rps:.1f}",
                                f"{run.percentile(50):.0f}",
                                f"{run.percentile(95):.0f}",
                                f"{local.rps:.1f}",
                                f"{local.percentile(50):.0f}",
                                f"{run.rps / local.rps:.2f}x",
                                run.errors,
                            ]
                        )
                        print(" | ".join(map(str, rows[-1])), flush=True)
        header = [
            "endpoint",
            "workers",
            "clients",
            "HTTP req/s",
            "p50 ms",
            "p95 ms",
            "in-process req/s",
            "in-proc p50 ms",
            "HTTP/in-process",
            "errors",
        ]
        print("\n## Service vs in-process (verify/batch: 4 claims per request, top_k 5)")
        print(_table(header, rows))
        if not factcheck:
            print("\n/v1/factcheck is not in this build of the service: not measured.")
        if args.scale:
            print(f"\n## Query latency by index size\n{scale(args.scale, Path(tmp) / 'scale')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
