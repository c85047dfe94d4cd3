"""Servers for the tests, on 127.0.0.1: a Chroma server (``chroma run``), or any command.

Each writes its output to a log file (a pipe nobody reads would fill and block); a server that
exits before answering fails the test with the end of its log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import free_port

BIN = Path(sys.executable).parent


def _chroma() -> str:
    found = shutil.which("chroma", path=str(BIN)) or shutil.which("chroma")
    if found is None:
        pytest.skip("the `chroma` command is not installed (it comes with chromadb)")
    return found


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a server whose output goes to ``log``."""
    with log.open("wb") as handle:
        return subprocess.Popen(
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
        )


def wait_for(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> None:
    """Wait until ``url`` answers 200 (fail the test if the server exits or stays silent)."""
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


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server (SIGINT, then SIGKILL after 20 s)."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def chroma_run(directory: Path) -> Iterator[str]:
    """A ``chroma run`` on 127.0.0.1 storing into ``directory/chroma``; yields its URL."""
    port = free_port()
    log = directory / "chroma.log"
    process = start(
        [
            _chroma(),
            "run",
            "--path",
            str(directory / "chroma"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        log,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/api/v2/heartbeat", process, log)
        yield url
    finally:
        stop(process)
