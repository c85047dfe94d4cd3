"""``serve`` while ``index build`` rebuilds its index, and what serving writes to the index.

Run with ``PYTHONPATH`` set to the checkout to measure (the ``serve`` and ``index build``
subprocesses inherit it); a checkout without ``server/live.py`` gives the "before" figures.

Part 1, rebuilds: ``index build`` (a subprocess) builds the index from three records titled
``alpha``; ``langchain-references serve`` (one worker on 127.0.0.1) starts on it; requests to
``/api/abstract/evidence`` are answered, then ``index build`` rebuilds it from ``beta``, then
from ``gamma`` (which deletes ``alpha``'s generation), each followed by ``--requests``
requests. The table gives the status codes and which records answered, after each step.

Part 2, writes: the SHA-256 and mtime of every file under the persist directory, compared
before and after each step of serving in this process: a Chroma client created, the index
opened (``EvidenceIndex.open``), ``--requests`` searches, as many pointer reads; then around a
whole ``serve`` process (start, searches, stop).

Part 3, the cost of the pointer read a serving index makes at most every few seconds, against
a search (same process, same run).

Embeddings: hashed words (``tests.unit_tests.server._build_fakes:WordHashEmbeddings``, no
model), so the figures are about the index, not the model. The judge is the offline heuristic
(loaded by ``serve``).

Usage::

    PYTHONPATH=. python benchmarks/serve_rebuild.py [--requests 5]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_service import _table

NAME = "bench-rebuild"
EMBEDDINGS = "tests.unit_tests.server._build_fakes:WordHashEmbeddings"
CLI = [sys.executable, "-c", "from langchain_references.cli import main; raise SystemExit(main())"]


def _write_corpus(path: Path, tag: str) -> Path:
    lines = [
        {"id": f"{tag}-{i}", "title": tag, "text": f"Record {tag} {i}: glaciers melt."}
        for i in range(3)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _location(directory: Path) -> list[str]:
    return ["--persist-dir", str(directory), "--embeddings", EMBEDDINGS]


def _build(directory: Path, tag: str) -> None:
    corpus = _write_corpus(directory.parent / f"{tag}.jsonl", tag)
    subprocess.run(
        [
            *CLI,
            "index",
            "build",
            "--input",
            str(corpus),
            "--name",
            NAME,
            *_location(directory),
            "--quiet",
        ],
        check=True,
        capture_output=True,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _serve(directory: Path, log: Path) -> Iterator[str]:
    """A ``serve`` process on the index; yields its base URL."""
    port = _free_port()
    with log.open("w") as err:
        process = subprocess.Popen(
            [*CLI, "serve", "--index", NAME, *_location(directory), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/healthcheck", timeout=1).status_code == 200:
                        break
                if process.poll() is not None:
                    raise RuntimeError(f"serve exited: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=60)


def _ask(url: str, count: int) -> tuple[str, str]:
    """``count`` evidence requests: their status codes, and the titles that answered."""
    codes, titles = [], set()
    for _ in range(count):
        response = httpx.post(
            url + "/api/abstract/evidence?re_rank=false",
            json={"claim": "glaciers melt", "top_k": 3},
            timeout=60,
        )
        codes.append(response.status_code)
        if response.status_code == 200:
            titles.update(item["title"] for item in response.json())
    return " ".join(map(str, codes)), ",".join(sorted(titles)) or "-"


def part_rebuilds(root: Path, requests: int) -> None:
    directory = root / "rebuilds" / "index"
    directory.mkdir(parents=True)
    log = root / "serve-rebuilds.log"
    _build(directory, "alpha")
    rows = []
    with _serve(directory, log) as url:
        rows.append(["serving alpha (g1)", *_ask(url, requests)])
        _build(directory, "beta")
        rows.append(["after build beta (g2)", *_ask(url, requests)])
        _build(directory, "gamma")
        rows.append(["after build gamma (g3, g1 deleted)", *_ask(url, requests)])
        time.sleep(6)  # past the 5 s pointer check
        rows.append(["6 s later", *_ask(url, requests)])
    print(_table(["step", "status codes", "records from"], rows))
    switched = [line for line in log.read_text().splitlines() if "switched" in line]
    print("serve log, switches:" if switched else "serve log: no switch")
    for line in switched:
        print("  " + line.split(": ", 1)[-1])


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/")
Snapshot = dict[str, tuple[str, int, str]]


def _rows(database: Path) -> str:
    """The row count of each table of a SQLite file (read from a copy of it)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy.sqlite3"
        shutil.copyfile(database, copy)
        connection = sqlite3.connect(copy)
        try:
            tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master")]
            counts = {
                table: connection.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
                for table in tables
                if connection.execute(
                    "SELECT type FROM sqlite_master WHERE name = ?", (table,)
                ).fetchone()[0]
                == "table"
            }
        finally:
            connection.close()
    return json.dumps(counts, sort_keys=True)


def _snapshot(directory: Path) -> Snapshot:
    """Each file's SHA-256, mtime and (for SQLite) row counts, by path (segment dirs named so)."""
    return {
        _UUID.sub("<hnsw segment>/", str(path.relative_to(directory))): (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            path.stat().st_mtime_ns,
            _rows(path) if path.suffix == ".sqlite3" else "",
        )
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _changes(before: Snapshot, after: Snapshot) -> str:
    out = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            out.append(f"+{path}")
        elif path not in after:
            out.append(f"-{path}")
        elif before[path][0] != after[path][0]:
            rows_before, rows_after = (
                json.loads(before[path][2] or "{}"),
                json.loads(after[path][2] or "{}"),
            )
            grown = [
                f"{table} {rows_before.get(table, 0)}->{count} rows"
                for table, count in sorted(rows_after.items())
                if rows_before.get(table) != count
            ]
            out.append(f"{path} (content{': ' + ', '.join(grown) if grown else ''})")
        elif before[path][1] != after[path][1]:
            out.append(f"{path} (mtime only)")
    return "; ".join(out) or "nothing"


def part_writes(root: Path, requests: int) -> None:
    import chromadb
    from chromadb.config import Settings

    from langchain_references.server.index import EvidenceIndex
    from tests.unit_tests.server._build_fakes import WordHashEmbeddings

    directory = root / "writes" / "index"
    directory.mkdir(parents=True)
    _build(directory, "alpha")
    rows = []
    snap = _snapshot(directory)
    print(f"files under the persist dir: {len(snap)}")

    def step(name: str) -> None:
        nonlocal snap
        now = _snapshot(directory)
        rows.append([name, _changes(snap, now)])
        snap = now

    chromadb.PersistentClient(path=str(directory), settings=Settings(anonymized_telemetry=False))
    step("chromadb.PersistentClient(path)")
    index = EvidenceIndex.open(NAME, persist_dir=directory, embeddings=WordHashEmbeddings())
    step("EvidenceIndex.open")
    for _ in range(requests):
        index.search("glaciers melt", granularity="abstract", k=3)
        index.search("glaciers melt", granularity="phrase", k=3)
    step(f"{2 * requests} searches")
    if hasattr(index, "pointed_generation"):
        for _ in range(requests):
            index.pointed_generation()
        step(f"{requests} pointer reads")
    served = root / "writes" / "served"
    _build(served, "alpha")
    snap = _snapshot(served)
    with _serve(served, root / "serve-writes.log") as url:
        _ask(url, requests)
    now = _snapshot(served)
    rows.append([f"a serve process: start, {requests} requests, stop", _changes(snap, now)])
    print(_table(["step", "files changed"], rows))


def part_pointer_cost(root: Path, rounds: int = 200) -> None:
    from langchain_references.server.index import EvidenceIndex
    from tests.unit_tests.server._build_fakes import WordHashEmbeddings

    directory = root / "writes" / "index"
    index = EvidenceIndex.open(NAME, persist_dir=directory, embeddings=WordHashEmbeddings())
    if not hasattr(index, "pointed_generation"):
        print("pointer read: not in this checkout")
        return

    def timed(call: object) -> float:
        assert callable(call)
        start = time.perf_counter()
        for _ in range(rounds):
            call()
        return (time.perf_counter() - start) / rounds * 1000

    read = timed(index.pointed_generation)
    search = timed(lambda: index.search("glaciers melt", granularity="abstract", k=3))
    print(
        _table(
            ["call", "ms per call", "ratio to a search"],
            [
                ["pointer read", f"{read:.3f}", f"{read / search:.2f}"],
                ["search (hybrid, k=3)", f"{search:.3f}", "1.00"],
            ],
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three parts and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=5, help="requests after each step")
    args = parser.parse_args(argv)
    live = importlib.util.find_spec("langchain_references.server.live") is not None
    checkout = Path(__import__("langchain_references").__file__).resolve().parent.parent
    print(f"checkout: {checkout} (server/live.py: {'yes' if live else 'no'})")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("\n## rebuilds while serving")
        part_rebuilds(root, args.requests)
        print("\n## files written by serving (embedded Chroma)")
        part_writes(root, args.requests)
        print("\n## cost of the pointer read")
        part_pointer_cost(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
