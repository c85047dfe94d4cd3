"""CPU-bound work on untrusted text, in a worker process: the event loop keeps the GIL.

A worker thread keeps CPU-bound work off the event loop but not off the GIL. Pure-Python work
(pysbd's rules over an article, the sentence tracker over ``/api/split``'s text) in a thread
makes the event loop wait for the GIL each time it wakes up (up to the 5 ms switch interval,
several times per request, longer with two such threads): with two clients sending 15 KB of
``"a. "`` to ``/v1/article`` in a loop, the health checks' p95 went from 6 to 36 ms
(``tests/unit_tests/server/test_load.py``). :func:`run_cpu_bound` runs such work in the
package's worker processes instead (``langchain_references.services._isolation``: reused between
calls, at a lower priority, ended with their parent), where it costs the service's process nothing
but the pickling of the text and of the result.

:func:`start` (run in the background as the service starts: it answers meanwhile, and a
request that needs a worker waits for one) starts the workers, which import the modules of
the functions they will run as they start (at the service's priority: see
:func:`~langchain_references.services._isolation.preload`), a few seconds. A function given to
:func:`run_cpu_bound` must be a module-level function, and its arguments, result and
exceptions picklable; what it raises is raised by :func:`run_cpu_bound`. A worker that dies
(killed, out of memory) fails the call it was running with
:class:`~langchain_references.services._isolation.WorkerDiedError`; the next call takes another
worker. A cancelled call (the client went away) has its worker killed.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable
from typing import TypeVar

from langchain_references.services._isolation import (
    MAX_WORKERS,
    WORKER_NICENESS,
    call_isolated,
    preload,
)

__all__ = ["WORKER_NICENESS", "run_cpu_bound", "start"]

T = TypeVar("T")


def _ready(modules: tuple[str, ...]) -> None:
    """Import ``modules`` in a worker (start-up), so that no request waits for them."""
    for name in modules:
        importlib.import_module(name)


async def start(*modules: str) -> None:
    """Start the workers now and wait until each has imported ``modules`` (start-up).

    Args:
        *modules: The modules of the functions the service will run in the workers.
    """
    preload(*modules)  # a worker started later (one was killed) imports them too
    await asyncio.gather(*(run_cpu_bound(_ready, modules) for _ in range(MAX_WORKERS)))


async def run_cpu_bound(function: Callable[..., T], *args: object) -> T:
    """Run ``function(*args)`` in a worker process and wait for it without blocking.

    Args:
        function: A module-level function (pickled by reference).
        *args: Its arguments (pickled).

    Returns:
        What ``function`` returns.

    Raises:
        WorkerDiedError: If the worker process died while it ran.
        Exception: What ``function`` raised.
    """
    stop = threading.Event()
    try:
        return await asyncio.to_thread(call_isolated, function, *args, stop=stop)
    finally:  # cancelled: the worker is killed rather than left computing for nobody
        stop.set()
