"""Run a function in a worker process that can be killed: for C code that may crash or hang.

Some libraries are not safe to call from several threads of one process: trafilatura's
``extract`` crashes now and then (SIGSEGV or SIGABRT inside libxml2) when threads call it at
the same time (trafilatura issues #840 and #925). A crash there ends the whole process (a
server, a batch run, a test session), and a parse that hangs cannot be interrupted in a thread.
:func:`call_isolated` runs one call in a worker process instead:

* a crash of the worker is :class:`WorkerDiedError` for that call, and the caller goes on;
* past ``timeout_s`` (or when ``stop`` is set) the worker is killed: the CPU it used is freed;
* workers are reused between calls (one call at a time each, at most :data:`MAX_WORKERS` at
  once, and as many kept idle): a call costs the pickling of its arguments and result, not
  a process start;
* workers run at a lower priority (:data:`WORKER_NICENESS`) and ignore Ctrl-C (the caller
  handles it and kills the workers it was waiting for);
* :func:`preload` names modules each new worker imports as it starts, at its parent's
  priority: on a busy host a worker at the lower priority would take as long to import them
  as the host's other work lets it, and whoever waits for the worker (a service's start-up)
  with it.

Workers are ``python -m langchain_references.services._isolation`` processes reading calls on their
standard input (length-prefixed pickles) and writing results on their standard output; they
see the caller's ``sys.path`` and never import the caller's ``__main__`` (a script without an
``if __name__ == "__main__"`` guard is safe). A worker ends when its parent does (its standard
input closes). ``function`` must be a module-level function (pickled by reference), and its
arguments and result picklable. Where processes cannot be used this way (not POSIX), the call
runs in the calling process, one at a time, without a time budget.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, Final, TypeVar, cast

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "MAX_WORKERS",
    "WORKER_NICENESS",
    "IsolationError",
    "WorkerDiedError",
    "WorkerStoppedError",
    "WorkerTimeoutError",
    "call_isolated",
    "preload",
]

T = TypeVar("T")

#: Calls running at the same time in this process (one worker each); more calls wait.
MAX_WORKERS: Final = max(2, os.cpu_count() or 2)
#: How much lower the workers' scheduling priority is than their parent's (``nice``): at 10 a
#: worker weighs about a tenth of a normal process for the kernel, so a service's event loop
#: gets a core it shares with a worker almost at once.
WORKER_NICENESS: Final = 10
#: Seconds a worker may take to start a call (a new worker imports the function's module).
START_TIMEOUT_S: Final = 120.0
#: Seconds between two looks, while a call runs, at its ``stop`` signal.
_POLL_S: Final = 0.1
_HEADER: Final = 8

_lock = threading.Lock()
_slots = threading.BoundedSemaphore(MAX_WORKERS)
_idle: list[subprocess.Popen[bytes]] = []
_preloaded: list[str] = []  # modules each new worker imports as it starts (see preload)
#: Held by a call that runs in this process (no worker processes on this platform).
_in_process = threading.Lock()


class IsolationError(LangchainReferencesError, RuntimeError):
    """A call in a worker process did not return."""


class WorkerDiedError(IsolationError):
    """The worker process died during the call (a crash, or killed from outside)."""


class WorkerTimeoutError(IsolationError):
    """The call ran past its time budget; its worker was killed."""


class WorkerStoppedError(IsolationError):
    """The caller stopped the call (``stop`` set); its worker was killed."""


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(_HEADER, "big") + data


def preload(*modules: str) -> None:
    """Have each worker started from now on import ``modules`` first, at its parent's priority.

    Idle workers started without them are ended (the next calls start new ones); a worker
    running a call keeps running, and a later call that needs the modules imports them there,
    at the workers' lower priority.

    Args:
        *modules: Importable module names (a worker that cannot import one ends, and the call
            that started it fails with :class:`WorkerDiedError`).
    """
    with _lock:
        new = [name for name in dict.fromkeys(modules) if name not in _preloaded]
        _preloaded.extend(new)
        stale = list(_idle) if new else []
        if stale:
            _idle.clear()
    for worker in stale:
        _end(worker)


def _start() -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    with _lock:
        modules = list(_preloaded)
    return subprocess.Popen(  # noqa: S603 - this interpreter, this module
        [sys.executable, "-m", __name__, *modules],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        close_fds=True,
    )


def _take() -> subprocess.Popen[bytes]:
    """An idle worker, else a new one (never more than :data:`MAX_WORKERS`: see ``_slots``)."""
    while True:
        with _lock:
            worker = _idle.pop() if _idle else None
        if worker is None:
            return _start()
        if worker.poll() is None:
            return worker
        _end(worker)  # died while idle (killed from outside): close its pipes


def _give_back(worker: subprocess.Popen[bytes]) -> None:
    with _lock:
        _idle.append(worker)


def _end(worker: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        worker.kill()
    worker.wait()
    for stream in (worker.stdin, worker.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _read(
    stream: IO[bytes], size: int, deadline: float | None, stop: threading.Event | None
) -> bytes:
    """Read ``size`` bytes, waiting until ``deadline`` at most and while ``stop`` is clear."""
    fd = stream.fileno()
    # poll, not select: select() refuses descriptors from 1024 on, which a long-lived process
    # (a service, a test session) reaches
    readable = select.poll()
    readable.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    left = size
    while left:
        if stop is not None and stop.is_set():
            raise WorkerStoppedError("stopped by the caller")
        wait = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
        if wait <= 0:
            raise WorkerTimeoutError("past its time budget")
        if not readable.poll(math.ceil(wait * 1000)):
            continue
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise WorkerDiedError("the worker process ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def call_isolated(
    function: Callable[..., T],
    *args: object,
    timeout_s: float | None = None,
    stop: threading.Event | None = None,
) -> T:
    """``function(*args)`` in a worker process, killed past ``timeout_s`` or when ``stop`` is set.

    Args:
        function: A module-level function (pickled by reference).
        *args: Its arguments (pickled).
        timeout_s: Seconds the call may take once it started in the worker (a new worker's
            start-up is not counted); ``None`` for no limit.
        stop: Set by another thread to end the call at once (within 0.1 s).

    Returns:
        What ``function`` returned.

    Raises:
        WorkerTimeoutError: Past ``timeout_s``, or a worker that did not start the call within
            :data:`START_TIMEOUT_S`.
        WorkerStoppedError: When ``stop`` was set.
        WorkerDiedError: If the worker process died (its exit code is in the message).
        Exception: What ``function`` raised.
    """
    if os.name != "posix":  # pragma: no cover - poll() does not take pipes there
        with _in_process:
            return function(*args)
    request = _frame(pickle.dumps((function, args)))
    while not _slots.acquire(timeout=_POLL_S):
        if stop is not None and stop.is_set():
            raise WorkerStoppedError("stopped by the caller")
    try:
        return cast("T", _call(request, timeout_s, stop))
    finally:
        _slots.release()


def _call(request: bytes, timeout_s: float | None, stop: threading.Event | None) -> Any:
    worker = _take()
    stdin, stdout = cast("IO[bytes]", worker.stdin), cast("IO[bytes]", worker.stdout)
    try:
        stdin.write(request)
        stdin.flush()
        # the worker says when the call starts (its module imported: a new worker's start-up
        # is not the call's time)
        _read(stdout, 1, time.monotonic() + START_TIMEOUT_S, stop)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        size = int.from_bytes(_read(stdout, _HEADER, deadline, stop), "big")
        ok, value = pickle.loads(_read(stdout, size, deadline, stop))  # noqa: S301 - our worker
    except (BrokenPipeError, WorkerDiedError):
        _end(worker)
        raise WorkerDiedError(f"the worker process ended (exit code {worker.returncode})") from None
    except BaseException:  # timeout, stop, an interrupt: the call may still run, end it
        _end(worker)
        raise
    _give_back(worker)
    if not ok:
        raise cast("BaseException", value)
    return value


def _serve() -> None:  # pragma: no cover - runs in the worker process
    """The worker: import the modules named as arguments, then answer calls until stdin closes."""
    for name in sys.argv[1:]:  # before lowering the priority: see preload
        importlib.import_module(name)
    with contextlib.suppress(OSError):  # not permitted: run at the parent's priority
        os.nice(WORKER_NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    requests = sys.stdin.buffer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the called code prints goes to standard error, not into the answers
    while header := requests.read(_HEADER):
        function, args = pickle.loads(requests.read(int.from_bytes(header, "big")))  # noqa: S301
        answers.write(b"\x01")  # the call starts
        answers.flush()
        try:
            answer = pickle.dumps((True, function(*args)))
        except Exception as exc:
            try:
                answer = pickle.dumps((False, exc))
            except Exception:  # an exception that does not pickle
                answer = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        answers.write(_frame(answer))
        answers.flush()


if __name__ == "__main__":  # pragma: no cover
    _serve()
