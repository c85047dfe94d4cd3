"""A request's work, stopped when its client leaves or its time budget runs out.

:func:`guarded` runs a handler's work as a task and watches the request beside it: every
:data:`POLL_INTERVAL_S` seconds it asks Starlette whether the client disconnected
(``Request.is_disconnected``) and whether the request's time budget (``max_request_seconds``)
is spent. Either way the work is cancelled: it stops at its next ``await`` (CPU-bound steps
run in worker threads in bounded slices, so that the next ``await`` comes soon), and the
client is answered 503 naming the limit, or nothing (it has gone).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable
from contextlib import suppress
from typing import Final, TypeVar

from fastapi import Request

from langchain_references.errors import LangchainReferencesError
from langchain_references.server.settings import LimitExceededError

__all__ = ["POLL_INTERVAL_S", "ClientDisconnectedError", "guarded"]

logger = logging.getLogger(__name__)

#: Seconds between two looks at the client and the clock.
POLL_INTERVAL_S: Final = 0.2

T = TypeVar("T")


class ClientDisconnectedError(LangchainReferencesError):
    """The client left before its answer was ready; its work was cancelled."""


async def guarded(request: Request, work: Awaitable[T], *, seconds: int) -> T:
    """Await ``work``, cancelling it when the client disconnects or ``seconds`` pass.

    Args:
        request: The request the work answers.
        work: The handler's work (a coroutine or a future).
        seconds: The time budget (``max_request_seconds``).

    Returns:
        The work's result.

    Raises:
        ClientDisconnectedError: If the client disconnected (the work was cancelled).
        LimitExceededError: (503, ``max_request_seconds``) If the budget ran out.
    """
    task = asyncio.ensure_future(work)
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=POLL_INTERVAL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                logger.info("The client left; its request's work is cancelled")
                raise ClientDisconnectedError("the client disconnected")
            elapsed = time.monotonic() - started
            if elapsed > seconds:
                logger.warning("A request ran out of its %d s; its work is cancelled", seconds)
                raise LimitExceededError(
                    "max_request_seconds", seconds, math.ceil(elapsed), status_code=503
                )
    finally:
        if not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await task
