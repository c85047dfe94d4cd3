"""The CPU worker process: CPU-bound work on untrusted text leaves the service's GIL alone."""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import threading
import time

import pytest

from langchain_references.server import cpu
from langchain_references.server.article import _sentences_and_claims
from langchain_references.server.services import Services
from langchain_references.server.settings import LimitExceededError, ServerSettings
from langchain_references.services._isolation import WorkerDiedError


def test_work_runs_in_another_process_at_a_lower_priority() -> None:
    async def main() -> tuple[int, int]:
        pid = await cpu.run_cpu_bound(os.getpid)
        niceness = await cpu.run_cpu_bound(os.nice, 0)
        return pid, niceness

    pid, niceness = asyncio.run(main())
    assert pid != os.getpid()
    assert niceness == min(19, os.nice(0) + cpu.WORKER_NICENESS)


def test_results_and_limit_errors_come_back_as_they_were() -> None:
    text = "The sea rises four millimetres a year. Why? Ice melts."
    sentences, claims = asyncio.run(cpu.run_cpu_bound(_sentences_and_claims, text, 10))
    assert [(s.index, s.start, s.end, s.text) for s in sentences] == [
        (0, 0, 38, "The sea rises four millimetres a year."),
        (1, 39, 43, "Why?"),
        (2, 44, 54, "Ice melts."),
    ]
    assert [s.index for s in claims] == [0]
    with pytest.raises(LimitExceededError) as caught:
        asyncio.run(cpu.run_cpu_bound(_sentences_and_claims, "a. " * 1_000, 5))
    error = caught.value
    assert (error.limit, error.maximum, error.actual, error.status_code) == (
        "max_sentences",
        5,
        6,
        413,
    )
    assert str(error) == "max_sentences is 5, the request has 6"


def test_a_limit_error_pickles_with_its_fields() -> None:
    error = pickle.loads(pickle.dumps(LimitExceededError("max_top_k", 3, 9, status_code=400)))
    assert (error.limit, error.maximum, error.actual, error.status_code) == ("max_top_k", 3, 9, 400)


def test_a_dead_worker_fails_its_call_and_the_next_call_gets_a_new_one() -> None:
    async def main() -> tuple[int, int]:
        before = await cpu.run_cpu_bound(os.getpid)
        with pytest.raises(WorkerDiedError, match="exit code 1"):  # the same (idle) worker
            await cpu.run_cpu_bound(os._exit, 1)
        return before, await cpu.run_cpu_bound(os.getpid)

    before, after = asyncio.run(main())
    assert after not in (before, os.getpid())


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_the_worker_does_not_outlive_a_parent_that_dies_without_shutting_it_down() -> None:
    # its standard input closes with the parent
    script = (
        "import asyncio, os\n"
        "from langchain_references.server import cpu\n"
        "print(asyncio.run(cpu.run_cpu_bound(os.getpid)), flush=True)\n"
        "os._exit(0)\n"  # no shutdown: as a killed server, or a test run ended by os._exit
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    worker = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(worker), f"worker {worker} still runs after its parent died"


def test_a_cancelled_call_has_its_worker_killed() -> None:
    async def main() -> int:
        worker = await cpu.run_cpu_bound(os.getpid)  # the idle worker the next call takes
        call = asyncio.ensure_future(cpu.run_cpu_bound(time.sleep, 60))
        await asyncio.sleep(0.5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        return worker

    worker = asyncio.run(main())
    deadline = time.monotonic() + 10
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(worker), "a cancelled call's worker still computes"


async def test_start_up_readies_every_worker_at_once() -> None:
    from langchain_references.services import _isolation

    for worker in list(_isolation._idle):  # start from no idle worker
        _isolation._end(worker)
    _isolation._idle.clear()
    await cpu.start("langchain_references.server.article")
    assert len(_isolation._idle) == _isolation.MAX_WORKERS
    pids = {await cpu.run_cpu_bound(os.getpid) for _ in range(_isolation.MAX_WORKERS)}
    assert pids <= {worker.pid for worker in _isolation._idle}


def test_the_service_answers_while_its_cpu_workers_start(
    settings: ServerSettings, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from langchain_references.server.app import create_app

    released = threading.Event()
    states: list[str] = []

    async def slow_start(*modules: str) -> None:  # the workers' imports, on a busy machine
        states.append("starting")
        try:
            await asyncio.to_thread(released.wait, 30)
            states.append("started")
        except asyncio.CancelledError:
            states.append("cancelled")
            raise

    monkeypatch.setattr(cpu, "start", slow_start)
    with TestClient(create_app(settings, services=services), base_url="http://localhost") as c:
        health = c.get("/healthcheck")
        states.append(f"health {health.status_code}")
        released.set()
    assert states[:2] == ["starting", "health 200"]  # answered before the workers were up
