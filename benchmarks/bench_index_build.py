"""``index build``: the local engine against the Ray engine (1 and 2 actors), in one run.

The corpus: ``--records`` records of five consecutive distinct Climate-FEVER evidence sentences
(``../shared/data/climate-fever-dev.jsonl``), so six entries each (the passage and its
sentences). Two embeddings: the offline MiniLM (CPU-bound: on a small machine the actors share
its cores), and an API-like one (``ApiLikeEmbeddings``: each call waits ``--latency`` seconds,
as a remote embeddings API would, and hashes words, using no CPU to speak of). Each engine
builds the same records into a fresh embedded Chroma directory, then (if the ``chroma`` command
is installed) into a ``chroma run`` on 127.0.0.1, where the Ray actors write the entries
themselves. One local Ray serves every Ray row; its start is timed apart. A Ray build's time
includes its actors' start and their loading of the embeddings (once per actor, per build).
Speed-ups are to the local engine's embedded build with the same embeddings, in the same run.

Usage::

    python benchmarks/bench_index_build.py [--data FILE] [--records 60] [--batch-size 32]
        [--latency 0.25] [--embeddings minilm,api]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_service import DATA, _table
from climate_fever import load_climate_fever
from langchain_core.embeddings import Embeddings

from langchain_references.server.index import EvidenceIndex, EvidenceRecord, parse_evidence_record
from langchain_references.services.embeddings import MiniLMEmbeddings
from langchain_references.services.engine import RayOptions, ray_session

SENTENCES_PER_RECORD = 5
API_LIKE = "bench_index_build:ApiLikeEmbeddings"


class ApiLikeEmbeddings(Embeddings):
    """Waits ``LR_BENCH_LATENCY`` seconds per call (a remote API), then hashes words."""

    def __init__(self) -> None:
        self.latency = float(os.environ.get("LR_BENCH_LATENCY", "0.25"))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        time.sleep(self.latency)
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        vector = [0.0] * 64
        for word in text.lower().split():
            vector[zlib.crc32(word.encode()) % 64] += 1.0
        vector[0] += 1e-3
        norm = sum(v * v for v in vector) ** 0.5
        return [v / norm for v in vector]


def corpus(path: Path, count: int) -> list[EvidenceRecord]:
    """``count`` records of five consecutive distinct evidence sentences."""
    sentences = list(
        dict.fromkeys(
            ev.evidence.strip() for claim in load_climate_fever(path) for ev in claim.evidences
        )
    )
    records = []
    for i in range(count):
        chunk = sentences[i * SENTENCES_PER_RECORD : (i + 1) * SENTENCES_PER_RECORD]
        if len(chunk) < SENTENCES_PER_RECORD:
            break
        text = " ".join(s if s.endswith((".", "!", "?")) else s + "." for s in chunk)
        records.append(parse_evidence_record({"id": f"r{i}", "title": f"Record {i}", "text": text}))
    return records


@contextlib.contextmanager
def chroma_server(directory: Path) -> Iterator[str | None]:
    """A ``chroma run`` on 127.0.0.1 (``None`` when the command is not installed)."""
    command = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which(
        "chroma"
    )
    if command is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (directory / "chroma.log").open("wb") as log:
        process = subprocess.Popen(
            [
                command,
                "run",
                "--path",
                str(directory / "chroma"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def build(records: Sequence[EvidenceRecord], name: str, batch_size: int, **options: Any) -> float:
    """Seconds one build takes."""
    started = time.perf_counter()
    result = EvidenceIndex.build(name, records, batch_size=batch_size, **options)
    seconds = time.perf_counter() - started
    assert result.records == len(records)
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument(
        "--embeddings", default="minilm,api", help="which embeddings: minilm, api (comma-separated)"
    )
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"skipped: {args.data} is absent (the shared data folder)")
        return 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Before Ray starts, so that its actors see them: the latency, and this folder (API_LIKE).
    os.environ["LR_BENCH_LATENCY"] = str(args.latency)
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    records = corpus(args.data, args.records)
    entries = len(records) * (SENTENCES_PER_RECORD + 1)
    MiniLMEmbeddings().embed_query("warm-up")  # the model files read once, for every row
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        with ray_session(RayOptions(workers=2)), chroma_server(root) as url:
            ray_start = time.perf_counter() - started
            engines: list[tuple[str, str, dict[str, Any]]] = [
                ("local", "embedded", {}),
                ("ray, 1 actor", "embedded", {"engine": "ray", "ray": RayOptions(workers=1)}),
                ("ray, 2 actors", "embedded", {"engine": "ray", "ray": RayOptions(workers=2)}),
            ]
            if url is not None:
                engines += [
                    ("local", "chroma run", {}),
                    (
                        "ray, 2 actors",
                        "chroma run",
                        {"engine": "ray", "ray": RayOptions(workers=2)},
                    ),
                ]
            kinds = {"minilm": "minilm", "api": API_LIKE}
            for embeddings in (kinds[kind] for kind in args.embeddings.split(",")):
                baseline = None
                for engine, store, options in engines:
                    number = len(rows)
                    where: dict[str, Any] = (
                        {"persist_dir": root / f"db{number}"}
                        if store == "embedded"
                        else {"chroma_url": url}
                    )
                    seconds = build(
                        records,
                        f"bench-{number}",
                        args.batch_size,
                        embeddings=embeddings,
                        **where,
                        **options,
                    )
                    baseline = baseline or seconds
                    rows.append(
                        [
                            "MiniLM" if embeddings == "minilm" else f"API-like ({args.latency} s)",
                            engine,
                            store,
                            f"{seconds:.1f}",
                            f"{len(records) / seconds:.1f}",
                            f"{entries / seconds:.0f}",
                            f"{baseline / seconds:.2f}",
                        ]
                    )
    print(
        f"index build: {len(records)} records, {entries} entries, batches of {args.batch_size} "
        f"entries, {os.cpu_count()} CPUs; Ray started in {ray_start:.1f} s (not counted)"
    )
    header = ["embeddings", "engine", "store", "seconds", "records/s", "entries/s", "speed-up"]
    print(_table(header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
