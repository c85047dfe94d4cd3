"""The limits of a provider and where their state lives: decisions only (pure, no I/O).

:class:`RateLimit` is one provider's limits; :class:`LimiterBackend` the three calls that
decide whether a request may start now (never a sleep: the drivers of
:mod:`~langchain_references.services.ratelimit` sleep as these say), and
:class:`LocalLimiterBackend` their state in this process, a token bucket per key under a lock.
A Ray actor holding a :class:`LocalLimiterBackend` shares the same state across processes
(:class:`~langchain_references.services.engine.RayLimiterBackend`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

__all__ = ["DEFAULT_LIMITS", "LimiterBackend", "LocalLimiterBackend", "RateLimit"]

#: Longest wait for a free concurrency slot before asking again (seconds).
_POLL_S: Final = 0.02
#: A bucket this close to a whole token has one (float sums of refills fall just short).
_TOKEN_EPSILON: Final = 1e-9
#: The slowest and fastest rates a limit may set (requests per second): below, a request would
#: wait longer than a quarter of an hour (``1e-9`` is 31 years; ``1e-300`` never ends).
MIN_RPS: Final = 0.001
MAX_RPS: Final = 10_000.0
#: The most requests in flight a limit may allow.
MAX_CONCURRENT: Final = 10_000


@dataclass(frozen=True)
class RateLimit:
    """The limits of one provider.

    Attributes:
        requests_per_second: Sustained request rate; ``None`` for no rate limit.
        max_concurrent: Requests in flight at once; ``None`` for no limit.
        burst: Requests that may start at once after a quiet spell (the bucket's size).
        max_retries: Retries of a call answered 429 or 503 (0: no retry).
        backoff_s: First wait after a 429/503 without ``Retry-After`` (doubled each time).
        max_backoff_s: Longest wait, ``Retry-After`` included.

    Raises:
        ValueError: If a number is out of range.
    """

    requests_per_second: float | None = None
    max_concurrent: int | None = None
    burst: int = 1
    max_retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def __post_init__(self) -> None:
        rps = self.requests_per_second
        if rps is not None and not (math.isfinite(rps) and MIN_RPS <= rps <= MAX_RPS):
            raise ValueError(
                f"requests per second must be between {MIN_RPS:g} and {MAX_RPS:g} (or no "
                f"rate limit), got {rps!r}"
            )
        most = self.max_concurrent
        if most is not None and not 1 <= most <= MAX_CONCURRENT:
            raise ValueError(
                f"requests in flight must be between 1 and {MAX_CONCURRENT} (or no limit), "
                f"got {most}"
            )
        if self.burst < 1:
            raise ValueError(f"burst must be >= 1, got {self.burst}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if not (self.backoff_s > 0 and self.max_backoff_s >= self.backoff_s):
            raise ValueError("backoff_s must be > 0 and max_backoff_s >= backoff_s")

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """Read ``RPS[/CONCURRENT]``, e.g. ``"1"``, ``"0.5/2"``, ``"/4"`` (no rate limit).

        ``"none"`` is no limit at all; an empty text is an error (it would silently lift the
        limits it replaces).

        Args:
            text: The limit.

        Returns:
            The limit (other fields at their defaults).

        Raises:
            ValueError: If it is empty, malformed or out of range.
        """
        if text.strip().lower() == "none":
            return cls()
        if not text.strip().strip("/").strip():
            raise ValueError(
                f"expected RPS[/CONCURRENT] (e.g. 1 or 0.5/2), or none for no limit, got {text!r}"
            )
        rate, _, concurrent = text.strip().partition("/")
        try:
            rps = float(rate) if rate.strip() else None
            most = int(concurrent) if concurrent.strip() else None
        except ValueError:
            raise ValueError(
                f"expected RPS[/CONCURRENT] (e.g. 1 or 0.5/2), or none for no limit, got {text!r}"
            ) from None
        return cls(requests_per_second=rps, max_concurrent=most)


#: Defaults that keep free tiers alive: DuckDuckGo, Tavily's and Bing's free plans throttle
#: around one request per second; sites are fetched politely; LLM APIs' low tiers allow a
#: few requests per second.
DEFAULT_LIMITS: Final[Mapping[str, RateLimit]] = {
    "search": RateLimit(requests_per_second=1.0, max_concurrent=2),
    "fetch": RateLimit(requests_per_second=4.0, max_concurrent=4, burst=4),
    "judge": RateLimit(requests_per_second=4.0, max_concurrent=8, burst=4),
}


@runtime_checkable
class LimiterBackend(Protocol):
    """Where the limits' state lives: decisions only, never a sleep (a Ray actor can be one)."""

    def try_acquire(self, key: str, limit: RateLimit) -> float:
        """Take a request slot for ``key`` if one is free now.

        Returns:
            0 if taken (call :meth:`release` when the request ends), else the seconds to wait
            before asking again.
        """
        ...

    def release(self, key: str) -> None:
        """End a request that :meth:`try_acquire` let through."""
        ...

    def defer(self, key: str, seconds: float) -> None:
        """Let no request of ``key`` start for ``seconds`` (a 429's ``Retry-After``)."""
        ...


@dataclass
class _Bucket:
    tokens: float
    updated: float
    in_flight: int = 0
    paused_until: float = 0.0


class LocalLimiterBackend:
    """The limits' state in this process, under a lock (threads and asyncio tasks alike).

    Args:
        clock: Monotonic clock in seconds (a fake one in tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def try_acquire(self, key: str, limit: RateLimit) -> float:
        """See :meth:`LimiterBackend.try_acquire`."""
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(tokens=float(limit.burst), updated=now)
            if now < bucket.paused_until:  # no refill while paused: no burst after the pause
                return bucket.paused_until - now
            rps = limit.requests_per_second
            if rps is not None:  # the bucket holds at most ``burst`` tokens, however long idle
                elapsed = max(0.0, now - bucket.updated)
                bucket.tokens = min(float(limit.burst), bucket.tokens + elapsed * rps)
            bucket.updated = now
            if limit.max_concurrent is not None and bucket.in_flight >= limit.max_concurrent:
                return _POLL_S
            if rps is not None:
                if bucket.tokens < 1.0 - _TOKEN_EPSILON:  # not a rounding error's wait forever
                    return (1.0 - bucket.tokens) / rps
                bucket.tokens = max(0.0, bucket.tokens - 1.0)
            bucket.in_flight += 1
            return 0.0

    def release(self, key: str) -> None:
        """See :meth:`LimiterBackend.release`."""
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is not None and bucket.in_flight > 0:
                bucket.in_flight -= 1

    def defer(self, key: str, seconds: float) -> None:
        """See :meth:`LimiterBackend.defer`.

        The pause leaves one token in the bucket (the retry goes when it ends) and none
        accrues during it: no burst after the pause, however many requests waited it out.
        """
        with self._lock:
            now = self._clock()
            bucket = self._buckets.setdefault(key, _Bucket(tokens=0.0, updated=now))
            bucket.paused_until = max(bucket.paused_until, now + max(0.0, seconds))
            bucket.tokens = 1.0
            bucket.updated = bucket.paused_until

    def in_flight(self, key: str) -> int:
        """Requests of ``key`` in flight now."""
        with self._lock:
            bucket = self._buckets.get(key)
            return bucket.in_flight if bucket is not None else 0
