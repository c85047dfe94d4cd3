"""CPU-bound work on untrusted text, in a worker process: the event loop keeps the GIL.

A worker thread keeps CPU-bound work off the event loop but not off the GIL. Pure-Python work
(pysbd's rules over an article, the sentence tracker over ``/api/split``'s text) in a thread
makes the event loop wait for the GIL each time it wakes up (up to the 5 ms switch interval,
several times per request, longer with two such threads): with two clients sending 15 KB of
``"a. "`` to ``/v1/article`` in a loop, the health checks' p95 went from 6 to 36 ms
(``tests/unit_tests/server/test_load.py``). :func:`run_cpu_bound` runs such work in
:data:`CPU_WORKERS` separate processes instead, where it costs the service's process nothing
but the pickling of the text and of the result.

The pool is process-wide (one per server process; each uvicorn worker has its own), started
by :func:`start` (the service's start-up waits for it: the worker imports the modules of the
functions it will run, a few seconds) or by the first call, and shut down at exit. Its
processes are spawned, never forked (the service runs threads), and run at a lower priority
(:data:`WORKER_NICENESS`). A function given to it must be a module-level function, and its
arguments, result and exceptions picklable; what it raises is raised by
:func:`run_cpu_bound`. A worker that dies (killed, out of memory) fails the calls it was
running with ``BrokenProcessPool``; the next call starts a new pool.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Final, TypeVar

__all__ = ["CPU_WORKERS", "PARENT_CHECK_SECONDS", "WORKER_NICENESS", "run_cpu_bound", "start"]

logger = logging.getLogger(__name__)

#: Processes of the pool: the machine the service targets has 2 cores, one for the server.
CPU_WORKERS: Final = 1
#: How much lower the workers' scheduling priority is than the service's (``nice``).
WORKER_NICENESS: Final = 10

T = TypeVar("T")

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


#: Seconds between two checks, in a worker, that the process that started it still runs.
PARENT_CHECK_SECONDS: Final = 1.0


def _exit_with(parent: int, interval: float) -> None:
    """Leave (``os._exit``) once ``parent`` is no longer this process's parent."""
    while os.getppid() == parent:
        time.sleep(interval)
    os._exit(0)


def _init_worker(parent: int, interval: float = PARENT_CHECK_SECONDS) -> None:
    """Worker initializer: a lower priority, no Ctrl-C, and no life after its parent's.

    At :data:`WORKER_NICENESS` the worker weighs about a tenth of the service's process for
    the kernel's scheduler: on a core they share, a request that arrives while the worker
    splits a hostile text gets the core almost at once. A parent that dies without shutting
    the pool down (killed, or ended by ``os._exit``) would leave the worker waiting for work
    for ever: a daemon thread ends it within ``interval`` seconds of its parent's death.
    """
    threading.Thread(
        target=_exit_with, args=(parent, interval), name="parent-watch", daemon=True
    ).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(WORKER_NICENESS)
    except OSError:  # pragma: no cover - not permitted: run at the service's priority
        logger.debug("could not lower the CPU worker's priority", exc_info=True)


def _ready(modules: tuple[str, ...]) -> None:
    """Import ``modules`` in the worker (start-up), so that no request waits for them."""
    for name in modules:
        importlib.import_module(name)


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                CPU_WORKERS,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(os.getpid(),),
            )
        return _pool


def _discard(pool: ProcessPoolExecutor) -> None:
    """Forget a broken pool (the next call starts a new one)."""
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


async def start(*modules: str) -> None:
    """Start the pool now and wait until its worker has imported ``modules`` (start-up).

    Args:
        *modules: The modules of the functions the service will run in the pool.
    """
    await run_cpu_bound(_ready, modules)


async def run_cpu_bound(function: Callable[..., T], *args: object) -> T:
    """Run ``function(*args)`` in the pool's worker process and wait for it without blocking.

    Args:
        function: A module-level function (pickled by name).
        *args: Its arguments (pickled).

    Returns:
        What ``function`` returns.

    Raises:
        BrokenProcessPool: If the worker process died while it ran.
        Exception: What ``function`` raised.
    """
    pool = _get_pool()
    try:
        return await asyncio.wrap_future(pool.submit(function, *args))
    except BrokenProcessPool:
        logger.error("The CPU worker process died; starting a new one for the next call")
        _discard(pool)
        raise
