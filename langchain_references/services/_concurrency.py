"""The two rules of a stage's own concurrency: who sets ``max_concurrency``, sync over async.

* **max_concurrency**: the caller's ``config["max_concurrency"]`` wins; a component's own
  ``max_concurrency`` (its constructor argument) is only the default used when the config
  sets none (:func:`with_default_concurrency`).
* **sync over async**: where a sync entry point must drive async I/O, it does so through
  :func:`run_sync` (a fresh event loop; in a worker thread, with the caller's context
  variables, when the calling thread already runs a loop).

These are the rules this module enforces. The package's other concurrency lives with what it
protects, one implementation each:

* shared state under a lock, safe for threads and asyncio tasks alike: the embedding memo's
  in-flight texts (:mod:`~langchain_references.services.embedding_cache`), the rate limiter's
  buckets and FIFO turns (:mod:`~langchain_references.services.ratelimit`), the run cache
  (:mod:`~langchain_references.services.runcache`), the dead-endpoint guard
  (:mod:`~langchain_references.services._endpoint`), the one Chroma client
  (:mod:`~langchain_references.services._chroma`);
* blocking work off the event loop: ``run_in_executor`` in the judges and fact-check stages;
* CPU-bound or crash-prone work in killable worker processes
  (:mod:`~langchain_references.services._isolation`; the service's pool in ``server.cpu``);
* bounded fan-out of async I/O with semaphores (page fetches, a service request's claims);
* batches of items on local threads or Ray actors (:mod:`~langchain_references.services.engine`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config

__all__ = ["check_concurrency", "run_sync", "with_default_concurrency"]

T = TypeVar("T")


def check_concurrency(value: int | None, name: str = "max_concurrency") -> int | None:
    """Validate a component's ``max_concurrency`` argument.

    Args:
        value: ``None`` (no default of its own) or an integer >= 1.
        name: The argument name, for the error message.

    Returns:
        ``value``.

    Raises:
        ValueError: If ``value`` is not ``None`` nor an integer >= 1.
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def with_default_concurrency(config: RunnableConfig | None, default: int | None) -> RunnableConfig:
    """The config to run a batch with: the caller's ``max_concurrency``, else ``default``.

    Args:
        config: The caller's config (may be ``None``).
        default: The component's own limit, or ``None`` for none.

    Returns:
        A new config (the caller's is not modified).
    """
    merged = ensure_config(config)
    if default is not None and merged.get("max_concurrency") is None:
        merged["max_concurrency"] = default
    return merged


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code.

    Uses ``asyncio.run``; when the calling thread already runs an event loop (a notebook
    cell, an async framework calling a sync API), runs it on a fresh loop in a worker thread
    with a copy of the caller's context variables (callbacks, tracing).

    Args:
        coro: The coroutine.

    Returns:
        Its result.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lcr-sync") as pool:
        return pool.submit(context.run, asyncio.run, coro).result()
