"""End to end with a Chroma server: build through it, serve it with two workers.

Starts ``chroma run`` on 127.0.0.1, builds the index through it with ``index build
--chroma-url``, starts ``serve --chroma-url ... --workers 2`` and sends requests until both
worker processes (``X-Worker-PID``) have answered from the shared index.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from langchain_references.cli import main

from .conftest import CORPUS, free_port

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def _chroma() -> str:
    found = shutil.which("chroma", path=str(BIN)) or shutil.which("chroma")
    if found is None:
        pytest.skip("the `chroma` command is not installed (it comes with chromadb)")
    return found


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a server whose output goes to ``log`` (a pipe nobody reads would fill and block)."""
    with log.open("wb") as handle:
        return subprocess.Popen(
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
        )


def _wait_for(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log.read_text(errors="replace")
            pytest.fail(f"{process.args!r} exited with {process.returncode}:\n{output[-3000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    pytest.fail(f"{url} did not answer within {timeout}s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def chroma_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "chroma.log"
    process = _start(
        [
            _chroma(),
            "run",
            "--path",
            str(tmp_path / "chroma"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        log,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(f"{url}/api/v2/heartbeat", process, log)
        yield url
    finally:
        _stop(process)


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
    serve = _start(
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
        _wait_for(f"{base}/healthcheck", serve, log)

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
        _stop(serve)
