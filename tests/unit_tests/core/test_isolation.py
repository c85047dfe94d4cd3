"""``_isolation.call_isolated``: calls in reusable worker processes, killed when they overrun."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from langchain_references.services._isolation import (
    WORKER_NICENESS,
    WorkerStoppedError,
    WorkerTimeoutError,
    call_isolated,
    preload,
)
from tests.unit_tests.core import _isolated_functions as functions

ROOT = Path(__file__).resolve().parents[3]


def test_a_call_returns_its_result_from_another_process_that_is_reused() -> None:
    first_pid, total = call_isolated(functions.pid_and_sum, 2, 3)
    second_pid, again = call_isolated(functions.pid_and_sum, 40, 2)
    assert (total, again) == (5, 42)
    assert first_pid != os.getpid()
    assert second_pid == first_pid  # the idle worker took the second call


def test_what_the_function_raises_is_raised_and_the_worker_stays() -> None:
    with pytest.raises(KeyError, match="no such key"):
        call_isolated(functions.fail, "no such key")
    assert call_isolated(functions.pid_and_sum, 1, 1)[1] == 2


def test_printing_in_the_worker_does_not_corrupt_the_answer() -> None:
    assert call_isolated(functions.shout, "terns") == "TERNS"
    assert call_isolated(functions.shout, "geese") == "GEESE"


def test_a_call_past_its_budget_is_a_timeout_and_the_next_call_gets_a_fresh_worker() -> None:
    before, _ = call_isolated(functions.pid_and_sum, 0, 0)
    with pytest.raises(WorkerTimeoutError):  # the same (last idle) worker takes the call
        call_isolated(functions.sleep, 30.0, timeout_s=0.3)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left sleeping
        os.kill(before, 0)
    pid, _ = call_isolated(functions.pid_and_sum, 0, 0)
    assert pid != before
    assert call_isolated(functions.sleep, 0.0, timeout_s=5.0) == pid


def test_stop_ends_a_running_call_promptly() -> None:
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    with pytest.raises(WorkerStoppedError):
        call_isolated(functions.sleep, 30.0, stop=stop)
    assert time.monotonic() - started < 20  # not the 30 s of the call


def _run_python(*args: str) -> str:
    """Standard output of a new Python process run with ``args`` (which must succeed)."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path: Path) -> None:
    # multiprocessing's spawn and forkserver import the caller's __main__ in each child: a
    # script calling the package at top level would run again there (or fail)
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            from langchain_references.services._isolation import call_isolated
            from tests.unit_tests.core import _isolated_functions as functions

            print("top level ran")
            print(call_isolated(functions.shout, "once")[:4])
            """
        ),
        encoding="utf-8",
    )
    assert _run_python(str(script)).splitlines() == ["top level ran", "ONCE"]


def test_a_process_with_over_a_thousand_open_files_still_reads_its_workers() -> None:
    # select() refused descriptors from 1024 on ("filedescriptor out of range"): in a long
    # test session or a busy service, the pipes of a new worker get such descriptors
    script = textwrap.dedent(
        """
        import os
        from langchain_references.services._isolation import call_isolated
        from tests.unit_tests.core import _isolated_functions as functions

        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        print(min(held), max(held))
        print(call_isolated(functions.pid_and_sum, 20, 22)[1])
        """
    )
    out = _run_python("-c", script).split()
    low, high = map(int, out[:2])
    assert (low < 1024 < high, out[2:]) == (True, ["42"])


def test_an_idle_worker_killed_from_outside_is_replaced() -> None:
    import signal

    before, _ = call_isolated(functions.pid_and_sum, 0, 0)
    os.kill(before, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # wait until it is dead (a zombie until reaped)
        with open(f"/proc/{before}/stat", encoding="ascii") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    after, total = call_isolated(functions.pid_and_sum, 20, 22)
    assert (total, after != before) == (42, True)
    with pytest.raises(ProcessLookupError):  # reaped, not left a zombie
        os.kill(before, 0)


def test_a_preloaded_module_is_imported_as_a_new_worker_starts_before_its_priority_drops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_references.services import _isolation

    monkeypatch.setattr(_isolation, "_preloaded", [])  # the probe is not left to later workers
    probe = "tests.unit_tests.core._preload_probe"
    before, _ = call_isolated(functions.pid_and_sum, 0, 0)  # an idle worker, without the probe
    preload(probe, probe)
    with pytest.raises(ProcessLookupError):  # the idle worker was ended, and reaped
        os.kill(before, 0)
    again, _ = call_isolated(functions.pid_and_sum, 0, 0)
    preload(probe)  # named already: the idle worker stays
    assert (call_isolated(functions.pid_and_sum, 0, 0)[0], again != before) == (again, True)
    assert _isolation._preloaded.count(probe) == 1
    ours = os.nice(0)
    assert call_isolated(functions.niceness_of, probe) == ours  # imported at our priority
    assert call_isolated(functions.niceness) == min(19, ours + WORKER_NICENESS)
