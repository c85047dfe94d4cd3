"""How long normal traffic waits while the service handles one hostile request.

Run: ``python benchmarks/bench_hostile_service.py [--src DIR] [--timeout 60]``. ``--src`` is the
checkout whose code is served (default: this one); run it once on the old code (another
worktree) and once on the new to compare. For each hostile request the script

1. builds a small index (the test corpus plus two hostile records: 80 KB of ``<sup>`` and a
   100 KB title) with ``langchain-references index build``;
2. starts ``langchain-references serve`` on 127.0.0.1 (a real uvicorn, one worker);
3. measures normal traffic alone (one client: ``POST /api/phrase/evidence`` then
   ``GET /healthcheck``, in a loop) for a few seconds: the idle p50 / p95;
4. sends the hostile request from another thread (the client gives up after ``--timeout``
   seconds) while the normal client goes on, and records the normal requests' latencies
   until the hostile one returns;
5. sends SIGTERM and times the exit (killed after 30 s).

Prints one table: per hostile request, its status and time, the normal traffic's p50 / p95 /
max while it ran, the ratio of that p95 to the idle p95 (measured in the same server run), and
the seconds SIGTERM took. Figures are for comparing runs on one machine, not absolute.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "unit_tests" / "server" / "data" / "corpus.jsonl"
INDEX = "hostile-bench"
NORMAL_CLAIM = {"claim": "sea level rise", "top_k": 3}


@dataclass(frozen=True)
class Hostile:
    """One hostile request: ``(method, path, body)`` and what it targets."""

    name: str
    path: str
    body: dict[str, Any]


CASES = [
    Hostile("article: 30 KB of 'a. '", "/v1/article", {"text": "a. " * 10_000}),
    Hostile(
        "answer: 80 KB <sup> record",
        "/v1/answer",
        {"question": "honey bees pollinate crops", "top_k": 10},
    ),
    Hostile(
        "abstract verify: 6 KB, 100 claims",
        "/api/abstract/verify/batch?filter_nei=false",
        {"claims": [f"Claim {i} about sea level and ice {i}" for i in range(100)], "top_k": 10},
    ),
    Hostile("split: lone surrogate", "/api/split", {"text": "\ud800 broken"}),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _corpus(directory: Path) -> Path:
    path = directory / "corpus.jsonl"
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    hostile = [
        {"id": "sup", "title": "Sup", "text": "Honey bees pollinate crops. " + "<sup>" * 16_000},
        {"id": "title", "title": "T" * 100_000, "text": "Honey bees pollinate many crops."},
    ]
    path.write_text("\n".join([*lines, *(json.dumps(r) for r in hostile)]) + "\n", "utf-8")
    return path


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}


def _cli(src: Path, *args: str) -> list[str]:
    # run from ``src``: ``python -m`` puts the working directory first on the path
    return [sys.executable, "-m", "langchain_references.cli", *args]


def _serve(src: Path, persist: Path, port: int) -> subprocess.Popen[bytes]:
    command = _cli(
        src, "serve", "--index", INDEX, "--persist-dir", str(persist), "--port", str(port)
    )
    return subprocess.Popen(
        command, cwd=src, env=_env(src), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _wait_up(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("serve exited")
        try:
            if httpx.get(base + "/healthcheck", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("serve did not start")


def _normal(http: httpx.Client, until: Callable[[], bool], latencies: list[float]) -> None:
    while not until():
        for send in (
            lambda: http.post("/api/phrase/evidence", json=NORMAL_CLAIM),
            lambda: http.get("/healthcheck"),
        ):
            started = time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                send()
            latencies.append(time.perf_counter() - started)


def _p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=20)[-1]


def _stop(process: subprocess.Popen[bytes]) -> float:
    started = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return float("inf")
    return time.perf_counter() - started


def run_case(case: Hostile, src: Path, persist: Path, timeout: float) -> list[str]:
    """Serve, measure idle then hostile traffic, stop; the case's table row."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    process = _serve(src, persist, port)
    try:
        _wait_up(base, process)
        with httpx.Client(base_url=base, timeout=timeout) as http:
            for _ in range(5):  # warm-up
                http.post("/api/phrase/evidence", json=NORMAL_CLAIM)
            idle: list[float] = []
            stop_idle = time.monotonic() + 4
            _normal(http, lambda: time.monotonic() > stop_idle, idle)
            outcome: dict[str, Any] = {}

            def hostile() -> None:
                started = time.perf_counter()
                try:
                    with httpx.Client(base_url=base, timeout=timeout) as other:
                        response = other.post(
                            case.path,
                            content=json.dumps(case.body).encode(),  # \ud800 escaped
                            headers={"Content-Type": "application/json"},
                        )
                    outcome["status"] = str(response.status_code)
                    outcome["json"] = response.headers.get("content-type", "").startswith(
                        "application/json"
                    )
                except httpx.HTTPError as exc:
                    outcome["status"] = type(exc).__name__
                    outcome["json"] = False
                outcome["seconds"] = time.perf_counter() - started

            thread = threading.Thread(target=hostile)
            busy: list[float] = []
            thread.start()
            time.sleep(0.05)
            _normal(http, lambda: not thread.is_alive(), busy)
            thread.join()
        sigterm = _stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    idle_p95 = _p95(idle)
    return [
        case.name,
        f"{outcome['status']}{'' if outcome['json'] else ' (not JSON)'}",
        f"{outcome['seconds']:.2f}",
        f"{statistics.median(idle) * 1000:.0f}/{idle_p95 * 1000:.0f}",
        f"{statistics.median(busy) * 1000:.0f}/{_p95(busy) * 1000:.0f}/{max(busy) * 1000:.0f}",
        f"{_p95(busy) / idle_p95:.1f}",
        f"{sigterm:.1f}",
    ]


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    return "\n".join(lines)


def main() -> None:
    """Build the index, run every case, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT, help="checkout to serve")
    parser.add_argument("--timeout", type=float, default=60.0, help="hostile client timeout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        persist = Path(tmp) / "index"
        corpus = _corpus(Path(tmp))
        subprocess.run(
            [
                *_cli(args.src, "index", "build", "--input", str(corpus), "--name", INDEX),
                *("--persist-dir", str(persist)),
            ],
            cwd=args.src,
            env=_env(args.src),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        rows = []
        for case in CASES:
            rows.append(run_case(case, args.src, persist, args.timeout))
            print(" | ".join(rows[-1]), flush=True)
    print(f"code served: {args.src}")
    print(
        _table(
            [
                "hostile request",
                "status",
                "hostile s",
                "idle p50/p95 ms",
                "busy p50/p95/max ms",
                "p95 ratio",
                "SIGTERM s",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
