"""A bounded load test on a real uvicorn (127.0.0.1): hostile requests beside normal traffic.

Normal traffic (health checks, timed, with an evidence search between two; one client) is
timed alone, then while
two clients send the hostile requests of the service's issue list in a loop (a sentence
bomb for ``/v1/article``, an ``abstract`` verify of many claims, a lone surrogate, an
article at the size limit). Both are measured in this run; the normal requests' p95 with
the hostile ones must stay within twice the idle p95 (plus a few milliseconds of scheduling
slack), and every hostile request must get its JSON error. (The health checks measure the
event loop; searches share the embedding threads with the hostile requests' own searches, a
contention this test does not bound.) The server starts its CPU worker processes
(:mod:`langchain_references.server.cpu`) in the background as it starts; the article's
splitting runs there from the first hostile request, which waits for a worker if none is up.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
import uvicorn

from langchain_references.server.app import create_app
from langchain_references.server.services import Services

from .conftest import free_port

NORMAL = 60
HOSTILE: list[tuple[str, bytes, int, str]] = [
    ("/v1/article", json.dumps({"text": "a. " * 5_000}).encode(), 413, "max_sentences"),
    (
        "/api/abstract/verify/batch",
        json.dumps({"claims": [f"claim {i} on sea ice" for i in range(100)], "top_k": 10}).encode(),
        413,
        "max_judged",
    ),
    ("/api/split", b'{"text": "bad \\ud800"}', 422, ""),
    ("/api/split", json.dumps({"text": "x" * 300_000}).encode(), 413, "max_article_chars"),
]


@pytest.fixture
def live(services: Services) -> Iterator[str]:
    settings = replace(services.settings, max_judged=100, max_sentences=200)
    app = create_app(settings, services=replace(services, settings=settings))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def _normal(base: str) -> list[float]:
    """Latencies of the health checks of normal traffic (a search between two of them)."""
    latencies = []
    with httpx.Client(base_url=base, timeout=30) as http:
        for _ in range(NORMAL):
            started = time.perf_counter()
            response = http.get("/healthcheck")
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200
            search = http.post("/api/phrase/evidence", json={"claim": "sea ice", "top_k": 3})
            assert search.status_code == 200
    return latencies


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


@pytest.mark.slow  # a real server under load for ~40 s: not a unit test (and not for mutation)
def test_hostile_requests_do_not_slow_normal_traffic(live: str) -> None:
    _normal(live)  # warm-up
    idle = _normal(live)
    stop = threading.Event()
    answers: list[tuple[int, str]] = []
    wrong: list[str] = []

    def hostile(offset: int) -> None:
        with httpx.Client(base_url=live, timeout=60) as http:
            i = offset
            while not stop.is_set():
                path, body, status, limit = HOSTILE[i % len(HOSTILE)]
                i += 1
                response = http.post(
                    path, content=body, headers={"Content-Type": "application/json"}
                )
                answers.append((response.status_code, response.headers["content-type"]))
                got = response.json()
                if response.status_code != status or (limit and got.get("limit") != limit):
                    wrong.append(f"{path}: {response.status_code} {got}")

    threads = [threading.Thread(target=hostile, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    try:
        busy = _normal(live)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    print(  # shown with -rP: the figures of each run
        f"normal p95 {_p95(busy) * 1000:.1f} ms beside {len(answers)} hostile requests, "
        f"{_p95(idle) * 1000:.1f} ms idle"
    )
    assert wrong == []
    assert len(answers) >= len(HOSTILE)
    assert {kind for _, kind in answers} == {"application/json"}
    assert _p95(busy) <= 2 * _p95(idle) + 0.010, (
        f"normal p95 {_p95(busy) * 1000:.1f} ms beside hostile requests, "
        f"{_p95(idle) * 1000:.1f} ms idle"
    )
