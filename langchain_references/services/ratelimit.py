"""Rate limits per provider, shared by every worker of a run, with retries on 429 and 503.

A provider is a key: ``"search"`` (the search back-end), ``"judge"`` (the LLM judge),
``"fetch:HOST"`` (page fetches, one limit per host). :class:`RateLimiter` gives each key a
:class:`RateLimit` (the key's own, else its prefix's — ``"fetch"`` for ``"fetch:example.org"``
— else the default) and enforces it for every thread and asyncio task that uses the same
limiter object:

* **requests per second**: a token bucket (``burst`` requests may go at once, then one every
  ``1 / requests_per_second`` seconds);
* **concurrent requests**: at most ``max_concurrent`` in flight;
* **retries**: a call that fails with HTTP 429 or 503 (:func:`throttle_info` reads the status
  and ``Retry-After`` of the error, its response or its cause) pauses the whole key for the
  ``Retry-After`` delay, or an exponential backoff without one, then is tried again, at most
  ``max_retries`` times; any other error is raised at once.

The state of the limits lives behind :class:`LimiterBackend`: three calls (:meth:`try_acquire`,
:meth:`release`, :meth:`defer`) that decide, never sleep. :class:`LocalLimiterBackend` keeps it
in the process (a lock: threads and asyncio tasks alike); a backend that forwards the calls to
a Ray actor holding a :class:`LocalLimiterBackend` would share the limits across processes
with no other change. The sync and async drivers (:meth:`RateLimiter.slot` /
:meth:`RateLimiter.aslot`, :meth:`RateLimiter.call` / :meth:`RateLimiter.acall`) only sleep as
the backend and :func:`retry_delay` say, and take turns: the threads and tasks waiting for a key
queue in arrival order, only the first asks the backend, and each wakes the next as it gets
its slot (a thousand waiters cost one poll, not a thousand).

LangChain chat models take a ``rate_limiter``
(:class:`~langchain_core.rate_limiters.BaseRateLimiter`); :meth:`RateLimiter.for_langchain` is
one that draws on a key's requests per second (the chat model's client retries 429s itself).

Examples:
    >>> limiter = RateLimiter({"search": RateLimit(requests_per_second=1.0, max_concurrent=2)})
    >>> limiter.call("search", lambda: "hits")
    'hits'
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Final, TypeVar

from langchain_core.rate_limiters import BaseRateLimiter

from langchain_references.errors import LangchainReferencesError
from langchain_references.services._limits import (
    DEFAULT_LIMITS,
    LimiterBackend,
    LocalLimiterBackend,
    RateLimit,
)

__all__ = [
    "DEFAULT_LIMITS",
    "RETRY_STATUSES",
    "LimiterBackend",
    "LocalLimiterBackend",
    "RateLimit",
    "RateLimiter",
    "ThrottledError",
    "parse_retry_after",
    "retry_delay",
    "throttle_info",
]

T = TypeVar("T")

#: HTTP statuses that mean "slow down and try again".
RETRY_STATUSES: Final = frozenset({429, 503})


class ThrottledError(LangchainReferencesError, RuntimeError):
    """A provider answered 429 or 503 (:func:`throttle_info` reads it).

    Attributes:
        status_code: The HTTP status.
        retry_after: Seconds the provider asked to wait, if it said.
    """

    def __init__(self, status_code: int, retry_after: float | None = None, what: str = "") -> None:
        wait = f" (Retry-After {retry_after:g}s)" if retry_after is not None else ""
        super().__init__(f"HTTP {status_code}{wait}{': ' + what if what else ''}")
        self.status_code = status_code
        self.retry_after = retry_after


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date).

    Args:
        value: The header value.
        now: Unix time for a date (default: the current time).

    Returns:
        The seconds (>= 0), or ``None`` if absent or unreadable.
    """
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _status(obj: object) -> int | None:
    for name in ("status_code", "status"):
        value = getattr(obj, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def throttle_info(exc: BaseException) -> tuple[int, float | None] | None:
    """Whether ``exc`` says "too many requests", and the ``Retry-After`` it carries.

    Looks at the error, its ``response`` (``status_code`` and ``headers``, as httpx, requests
    and the OpenAI/Anthropic clients have), then its cause and context; an error class named
    like ``RateLimitError`` / ``RatelimitException`` (OpenAI, ddgs) counts as a 429.

    Args:
        exc: The error.

    Returns:
        ``(status, retry_after)`` for a 429/503, else ``None``.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ThrottledError):
            return current.status_code, current.retry_after
        response = getattr(current, "response", None)
        status = _status(current) or _status(response)
        if status in RETRY_STATUSES:
            headers = getattr(response, "headers", None) or getattr(current, "headers", None)
            getter = getattr(headers, "get", None)
            raw = getter("retry-after") if callable(getter) else None
            return status, parse_retry_after(raw if isinstance(raw, str) else None)
        if "ratelimit" in type(current).__name__.lower():
            return 429, None
        current = current.__cause__ or current.__context__
    return None


def retry_delay(limit: RateLimit, attempt: int, exc: BaseException) -> float | None:
    """How long to pause before retry ``attempt`` (0-based) of a call that raised ``exc``.

    Args:
        limit: The key's limits.
        attempt: How many retries were made already.
        exc: The error.

    Returns:
        The ``Retry-After`` delay, else ``backoff_s * 2**attempt``, at most ``max_backoff_s``;
        ``None`` when the error is not a 429/503 or the retries are used up.
    """
    info = throttle_info(exc)
    if info is None or attempt >= limit.max_retries:
        return None
    _, retry_after = info
    delay = retry_after if retry_after is not None else limit.backoff_s * 2**attempt
    return min(delay, limit.max_backoff_s)


class _Turns:
    """The waiters of each key in arrival order: only the first asks the backend for a slot.

    The others sleep until they are first (woken by the one before them as it gets its slot or
    gives up), so a thousand waiters cost one poll, not a thousand, and slots go in arrival
    order. A waiter is a ``wake`` callable (a thread's event, a task's future on its loop).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Callable[[], None]]] = {}

    def join(self, key: str, wake: Callable[[], None]) -> bool:
        """Queue ``wake`` for ``key``; True when it is first (its turn has come)."""
        with self._lock:
            queue = self._queues.setdefault(key, deque())
            queue.append(wake)
            return len(queue) == 1

    def leave(self, key: str, wake: Callable[[], None]) -> None:
        """Take ``wake`` out of ``key``'s queue; if it was first, wake the next one."""
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                return
            if wake not in queue:  # interrupted before it joined
                return
            first = queue[0] is wake
            queue.remove(wake)
            after = queue[0] if first and queue else None
            if not queue:
                del self._queues[key]
        if after is not None:
            after()

    def waiting(self, key: str) -> int:
        """How many wait for ``key`` (the first included)."""
        with self._lock:
            return len(self._queues.get(key, ()))


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class RateLimiter:
    """Per-provider limits shared by every thread and task using this object (module docs).

    Args:
        limits: Limits by key or key prefix (``"fetch"`` covers ``"fetch:HOST"``).
        default: Limit of a key with none of its own; ``None``: such keys are not limited.
        backend: Where the state lives (default: a :class:`LocalLimiterBackend`).
        sleep: Sync sleep (a fake one in tests).
        asleep: Async sleep.
    """

    def __init__(
        self,
        limits: Mapping[str, RateLimit] | None = None,
        *,
        default: RateLimit | None = None,
        backend: LimiterBackend | None = None,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.limits = dict(limits or {})
        self.default = default
        self.backend: LimiterBackend = backend if backend is not None else LocalLimiterBackend()
        self._sleep = sleep
        self._asleep = asleep
        self._lock = threading.Lock()
        self._turns = _Turns()
        self.retries: dict[str, int] = {}

    def limit_for(self, key: str) -> RateLimit | None:
        """The limit of ``key``: its own, else its prefix's (before ``:``), else the default.

        Args:
            key: E.g. ``"search"`` or ``"fetch:example.org"``.

        Returns:
            The limit, or ``None`` when the key is not limited.
        """
        if key in self.limits:
            return self.limits[key]
        prefix = key.partition(":")[0]
        return self.limits.get(prefix, self.default)

    @contextmanager
    def slot(self, key: str) -> Iterator[None]:
        """Hold a request slot of ``key`` for the block (sleeping until one is free).

        Args:
            key: The provider.

        Yields:
            Nothing.
        """
        limit = self.limit_for(key)
        if limit is None:
            yield
            return
        self._acquire(key, limit)
        try:
            yield
        finally:
            self.backend.release(key)

    @asynccontextmanager
    async def aslot(self, key: str) -> AsyncIterator[None]:
        """Async :meth:`slot` (never blocks the event loop)."""
        limit = self.limit_for(key)
        if limit is None:
            yield
            return
        await self._aacquire(key, limit)
        try:
            yield
        finally:
            self.backend.release(key)

    # The two drivers of a wait: join the key's turns, sleep until first, then ask the backend
    # (sleeping as it says) until it gives a slot; leaving wakes the next waiter.

    def _acquire(self, key: str, limit: RateLimit) -> None:
        """Take a slot of ``key`` (the caller releases it), waiting for its turn first."""
        turn = threading.Event()
        wake = turn.set
        try:
            if not self._turns.join(key, wake):
                turn.wait()
            while (wait := self.backend.try_acquire(key, limit)) > 0:
                self._sleep(wait)
        finally:
            self._turns.leave(key, wake)

    async def _aacquire(self, key: str, limit: RateLimit) -> None:
        """Async :meth:`_acquire`."""
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            with suppress(RuntimeError):  # the loop is closed: its waiter is gone
                loop.call_soon_threadsafe(_resolve, turn)

        try:
            if not self._turns.join(key, wake):
                await turn
            while (wait := self.backend.try_acquire(key, limit)) > 0:
                await self._asleep(wait)
        finally:
            self._turns.leave(key, wake)

    def _retry(self, key: str, attempt: int, exc: Exception) -> bool:
        """After a failed call: pause the key and say whether to try again."""
        limit = self.limit_for(key)
        delay = None if limit is None else retry_delay(limit, attempt, exc)
        if delay is None:
            return False
        self.backend.defer(key, delay)
        with self._lock:
            self.retries[key] = self.retries.get(key, 0) + 1
        return True

    def call(self, key: str, func: Callable[[], T]) -> T:
        """Call ``func`` in a slot of ``key``, retrying on 429/503 (:func:`retry_delay`).

        Args:
            key: The provider.
            func: The request.

        Returns:
            Its result.

        Raises:
            Exception: The call's error when it is not a 429/503, or the retries ran out.
        """
        attempt = 0
        while True:
            try:
                with self.slot(key):
                    return func()
            except Exception as exc:
                if not self._retry(key, attempt, exc):
                    raise
                attempt += 1

    async def acall(self, key: str, func: Callable[[], Awaitable[T]]) -> T:
        """Async :meth:`call`: ``func`` makes the coroutine of one attempt."""
        attempt = 0
        while True:
            try:
                async with self.aslot(key):
                    return await func()
            except Exception as exc:
                if not self._retry(key, attempt, exc):
                    raise
                attempt += 1

    def for_langchain(self, key: str) -> BaseRateLimiter:
        """A LangChain rate limiter drawing on ``key``'s requests per second.

        Pass it as a chat model's ``rate_limiter``: each model request takes a token of the
        key's bucket (shared with everything else using the key).

        Args:
            key: The provider, e.g. ``"judge"``.

        Returns:
            The adapter.
        """
        return _LangChainLimiter(self, key)


class _LangChainLimiter(BaseRateLimiter):
    """A :class:`BaseRateLimiter` that takes a slot of a key and gives it back at once."""

    def __init__(self, limiter: RateLimiter, key: str) -> None:
        self.limiter = limiter
        self.key = key

    def _once(self) -> float:
        limit = self.limiter.limit_for(self.key)
        if limit is None:
            return 0.0
        wait = self.limiter.backend.try_acquire(self.key, limit)
        if wait == 0:
            self.limiter.backend.release(self.key)
        return wait

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take a request token (waiting for one unless ``blocking`` is false)."""
        while (wait := self._once()) > 0:
            if not blocking:
                return False
            self.limiter._sleep(wait)
        return True

    async def aacquire(self, *, blocking: bool = True) -> bool:
        """Async :meth:`acquire`."""
        while (wait := self._once()) > 0:
            if not blocking:
                return False
            await self.limiter._asleep(wait)
        return True
