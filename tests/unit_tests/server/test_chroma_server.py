"""End to end with a Chroma server: build through it, serve it with two workers.

Starts ``chroma run`` on 127.0.0.1, builds the index through it with ``index build
--chroma-url``, starts ``serve --chroma-url ... --workers 2`` and sends requests until both
worker processes (``X-Worker-PID``) have answered from the shared index.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from langchain_references.cli import main

from ._chroma_run import BIN, chroma_run, start, stop, wait_for
from .conftest import CORPUS, free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def chroma_url(tmp_path: Path) -> Iterator[str]:
    with chroma_run(tmp_path) as url:
        yield url


def test_build_through_a_chroma_server_and_serve_with_two_workers(
    chroma_url: str, tmp_path: Path
) -> None:
    out, err = io.StringIO(), io.StringIO()
    status = main(
        [
            "index",
            "build",
            "--input",
            str(CORPUS),
            "--name",
            "shared-idx",
            "--chroma-url",
            chroma_url,
            "--quiet",
        ],
        out=out,
        err=err,
    )
    assert status == 0, err.getvalue()
    assert "holds 24 entries (+24)" in out.getvalue()

    port = free_port()
    log = tmp_path / "serve.log"
    serve = start(
        [
            str(BIN / "langchain-references"),
            "serve",
            "--index",
            "shared-idx",
            "--chroma-url",
            chroma_url,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        log,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/healthcheck", serve, log)

        def ask(i: int) -> tuple[str, list[str]]:
            # A new connection per request, so that both workers get to accept some.
            with httpx.Client(base_url=base, timeout=60) as http:
                response = http.post(
                    "/api/phrase/evidence?re_rank=false",
                    json={"claim": "sea level rise" if i % 2 else "honey bees", "top_k": 2},
                )
                assert response.status_code == 200
                return response.headers["x-worker-pid"], [i["title"] for i in response.json()]

        pids: set[str] = set()
        answers: list[list[str]] = []
        deadline = time.monotonic() + 120
        with ThreadPoolExecutor(max_workers=8) as pool:
            while len(pids) < 2 and time.monotonic() < deadline:
                for pid, titles in pool.map(ask, range(16)):
                    pids.add(pid)
                    answers.append(titles)
        assert len(pids) == 2, f"only worker(s) {pids} answered"
        assert str(serve.pid) not in pids  # the workers are the parent's children
        assert all(titles for titles in answers)
        assert {"Sea level rise", "Honey bees"} <= {t[0] for t in answers}
    finally:
        stop(serve)
