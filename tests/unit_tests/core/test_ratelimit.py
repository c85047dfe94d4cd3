"""The rate limiter: token bucket, concurrency, pauses on 429, retries, with a fake clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from langchain_references.services.ratelimit import (
    LimiterBackend,
    LocalLimiterBackend,
    RateLimit,
    RateLimiter,
    ThrottledError,
    parse_retry_after,
    retry_delay,
    throttle_info,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


def limiter(clock: FakeClock, **limits: RateLimit) -> RateLimiter:
    return RateLimiter(
        limits,
        backend=LocalLimiterBackend(clock),
        sleep=clock.sleep,
        asleep=clock.asleep,
    )


def test_the_bucket_spaces_requests_at_the_rate() -> None:
    clock = FakeClock()
    rl = limiter(clock, search=RateLimit(requests_per_second=2.0))
    starts = []
    for _ in range(5):
        with rl.slot("search"):
            starts.append(clock.now)
    assert starts == [100.0, 100.5, 101.0, 101.5, 102.0]


def test_burst_lets_that_many_go_at_once() -> None:
    clock = FakeClock()
    rl = limiter(clock, fetch=RateLimit(requests_per_second=1.0, burst=3))
    starts = []
    for _ in range(5):
        with rl.slot("fetch:a.example"):
            starts.append(clock.now)
    assert starts == [100.0, 100.0, 100.0, 101.0, 102.0]


def test_the_bucket_holds_at_most_its_burst_however_long_idle() -> None:
    clock = FakeClock()
    rl = limiter(clock, fetch=RateLimit(requests_per_second=2.0, burst=3))
    with rl.slot("fetch:a.example"):
        pass
    clock.now += 3600.0  # an hour idle: 7,200 tokens' worth of time
    starts = []
    for _ in range(6):
        with rl.slot("fetch:a.example"):
            starts.append(clock.now - 3700.0)
    assert starts == [0.0, 0.0, 0.0, 0.5, 1.0, 1.5]


def test_waiting_out_a_pause_gives_no_burst_after_it() -> None:
    clock = FakeClock()
    backend = LocalLimiterBackend(clock)
    limit = RateLimit(requests_per_second=1.0, burst=3)
    assert [backend.try_acquire("k", limit) for _ in range(4)] == [0.0, 0.0, 0.0, 1.0]
    backend.defer("k", 10.0)  # a 429 with Retry-After: 10
    assert backend.try_acquire("k", limit) == 10.0  # a waiter asks during the pause
    clock.now += 10.0
    # one request when the pause ends (the retry), then one a second: not the three that ten
    # seconds would refill
    assert [backend.try_acquire("k", limit) for _ in range(2)] == [0.0, 1.0]


def test_prefix_and_default_limits() -> None:
    rl = RateLimiter({"fetch": RateLimit(1.0), "fetch:slow.example": RateLimit(0.1)})
    assert rl.limit_for("fetch:a.example") == RateLimit(1.0)
    assert rl.limit_for("fetch:slow.example") == RateLimit(0.1)
    assert rl.limit_for("judge") is None
    assert RateLimiter(default=RateLimit(3.0)).limit_for("judge") == RateLimit(3.0)


def test_hosts_have_separate_buckets() -> None:
    backend = LocalLimiterBackend(FakeClock())
    limit = RateLimit(requests_per_second=1.0)
    assert backend.try_acquire("fetch:a", limit) == 0.0
    assert backend.try_acquire("fetch:b", limit) == 0.0
    assert backend.try_acquire("fetch:a", limit) == pytest.approx(1.0)


def test_concurrency_is_capped_across_threads() -> None:
    rl = RateLimiter({"judge": RateLimit(max_concurrent=3)})
    lock = threading.Lock()
    in_flight, peak = 0, 0

    def work() -> None:
        nonlocal in_flight, peak
        with rl.slot("judge"):
            with lock:
                in_flight += 1
                peak = max(peak, in_flight)
            time.sleep(0.01)
            with lock:
                in_flight -= 1

    threads = [threading.Thread(target=work) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak == 3
    assert isinstance(rl.backend, LocalLimiterBackend)
    assert rl.backend.in_flight("judge") == 0


def test_concurrency_is_capped_across_asyncio_tasks() -> None:
    rl = RateLimiter({"search": RateLimit(max_concurrent=2)})
    in_flight, peak = 0, 0

    async def work() -> None:
        nonlocal in_flight, peak
        async with rl.aslot("search"):
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1

    async def main() -> None:
        await asyncio.gather(*(work() for _ in range(10)))

    asyncio.run(main())
    assert peak == 2


def test_a_429_pauses_the_key_for_retry_after_then_retries() -> None:
    clock = FakeClock()
    rl = limiter(clock, search=RateLimit(requests_per_second=10.0))
    calls: list[float] = []

    def request() -> str:
        calls.append(clock.now)
        if len(calls) < 3:
            raise ThrottledError(429, retry_after=2.0)
        return "ok"

    assert rl.call("search", request) == "ok"
    assert calls == [100.0, 102.0, 104.0]
    assert rl.retries == {"search": 2}


def test_backoff_doubles_without_retry_after_and_gives_up() -> None:
    clock = FakeClock()
    limit = RateLimit(requests_per_second=None, max_retries=3, backoff_s=0.5)
    rl = limiter(clock, judge=limit)
    calls: list[float] = []

    async def request() -> str:
        calls.append(clock.now)
        raise ThrottledError(503)

    with pytest.raises(ThrottledError, match="HTTP 503"):
        asyncio.run(rl.acall("judge", request))
    assert calls == [100.0, 100.5, 101.5, 103.5]


def test_other_errors_are_not_retried() -> None:
    rl = RateLimiter({"search": RateLimit(1.0)})
    calls = 0

    def request() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("bad query")

    with pytest.raises(ValueError, match="bad query"):
        rl.call("search", request)
    assert calls == 1


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = headers


class _HTTPError(Exception):
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.response = _Response(status, headers)


class RatelimitException(Exception):  # noqa: N818 - the name ddgs uses
    pass


def test_throttle_info_reads_responses_causes_and_class_names() -> None:
    assert throttle_info(_HTTPError(429, {"retry-after": "3"})) == (429, 3.0)
    assert throttle_info(_HTTPError(503, {})) == (503, None)
    assert throttle_info(_HTTPError(500, {"retry-after": "3"})) is None
    wrapped = RuntimeError("search failed")
    wrapped.__cause__ = RatelimitException("202 Ratelimit")
    assert throttle_info(wrapped) == (429, None)
    assert throttle_info(ValueError("x")) is None


def test_parse_retry_after() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0


def test_retry_delay_caps_the_wait() -> None:
    limit = RateLimit(max_retries=2, backoff_s=1.0, max_backoff_s=5.0)
    assert retry_delay(limit, 0, ThrottledError(429, 120.0)) == 5.0
    assert retry_delay(limit, 1, ThrottledError(429)) == 2.0
    assert retry_delay(limit, 2, ThrottledError(429)) is None


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match=r"requests per second must be between 0\.001 and 10000"):
        RateLimit(requests_per_second=0)
    with pytest.raises(ValueError, match="requests in flight must be between 1 and 10000"):
        RateLimit(max_concurrent=0)
    assert RateLimit.parse("0.5/2") == RateLimit(requests_per_second=0.5, max_concurrent=2)
    assert RateLimit.parse("/4") == RateLimit(max_concurrent=4)
    with pytest.raises(ValueError, match="RPS"):
        RateLimit.parse("fast")


BOUNDS = "requests per second must be between 0.001 and 10000"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e-9", f"{BOUNDS} (or no rate limit), got 1e-09"),
        ("1e-300", f"{BOUNDS} (or no rate limit), got 1e-300"),
        ("0.0009", "got 0.0009"),
        ("10001", "got 10001.0"),
        ("inf", "got inf"),
        ("nan", "got nan"),
        ("1/10001", "requests in flight must be between 1 and 10000 (or no limit), got 10001"),
        ("", "expected RPS[/CONCURRENT] (e.g. 1 or 0.5/2), or none for no limit, got ''"),
        ("/", "or none for no limit, got '/'"),
    ],
)  # fmt: skip
def test_a_limit_out_of_bounds_or_empty_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r".") as raised:
        RateLimit.parse(text)
    assert message in str(raised.value)


def test_the_bounds_themselves_are_limits() -> None:
    assert RateLimit.parse("0.001/10000") == RateLimit(
        requests_per_second=0.001, max_concurrent=10_000
    )
    assert RateLimit.parse("10000").requests_per_second == 10_000


def test_none_lifts_a_limit_explicitly() -> None:
    assert RateLimit.parse("none") == RateLimit.parse(" None ") == RateLimit()
    assert RateLimit().requests_per_second is None
    assert RateLimit().max_concurrent is None


def test_langchain_adapter_draws_on_the_same_bucket() -> None:
    clock = FakeClock()
    rl = limiter(clock, judge=RateLimit(requests_per_second=1.0))
    adapter = rl.for_langchain("judge")
    assert adapter.acquire() is True
    assert adapter.acquire(blocking=False) is False
    with rl.slot("judge"):
        assert clock.now == 101.0
    assert asyncio.run(adapter.aacquire()) is True
    assert clock.now == 102.0


def test_the_backend_is_a_small_protocol() -> None:
    assert isinstance(LocalLimiterBackend(), LimiterBackend)


# ------------------------------------------------------------------ waiters take turns


class CountingBackend(LocalLimiterBackend):
    """The local backend, counting how often it is asked for a slot."""

    def __init__(self) -> None:
        super().__init__()
        self.asks = 0

    def try_acquire(self, key: str, limit: RateLimit) -> float:
        self.asks += 1
        return super().try_acquire(key, limit)


def _wait_until(condition: Callable[[], bool]) -> None:
    while not condition():
        time.sleep(0.001)


def test_only_the_first_waiter_asks_the_backend() -> None:
    backend = CountingBackend()
    rl = RateLimiter({"fetch": RateLimit(max_concurrent=1)}, backend=backend)
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with rl.slot("fetch"):
            held.set()
            release.wait()

    def waiter() -> None:
        with rl.slot("fetch"):
            pass

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    held.wait()
    threads += [threading.Thread(target=waiter) for _ in range(200)]
    for thread in threads[1:]:
        thread.start()
    time.sleep(0.2)  # all have started waiting
    asks = backend.asks
    time.sleep(0.2)  # ten polls' worth while the slot is held
    polls = backend.asks - asks
    release.set()
    for thread in threads:
        thread.join()
    assert polls <= 15  # the first waiter polls; 199 sleep (each polling: about 2,000)
    assert backend.in_flight("fetch") == 0


def test_waiters_get_their_slots_in_arrival_order() -> None:
    rl = RateLimiter({"search": RateLimit(max_concurrent=1)})
    order: list[int] = []
    release = threading.Event()
    held = threading.Event()

    def holder() -> None:
        with rl.slot("search"):
            held.set()
            release.wait()

    def waiter(i: int) -> None:
        with rl.slot("search"):
            order.append(i)

    first = threading.Thread(target=holder)
    first.start()
    held.wait()
    threads = []
    for i in range(20):
        threads.append(threading.Thread(target=waiter, args=(i,)))
        threads[-1].start()
        _wait_until(lambda n=i: rl._turns.waiting("search") == n + 1)
    release.set()
    for thread in [first, *threads]:
        thread.join()
    assert order == list(range(20))


def test_a_cancelled_async_waiter_does_not_stop_the_queue() -> None:
    rl = RateLimiter({"judge": RateLimit(max_concurrent=1)})
    order: list[str] = []

    async def main() -> None:
        release = asyncio.Event()

        async def holder() -> None:
            async with rl.aslot("judge"):
                order.append("holder")
                await release.wait()

        async def waiter(name: str) -> None:
            async with rl.aslot("judge"):
                order.append(name)

        tasks = [asyncio.create_task(holder())]
        for name in ("a", "b", "c"):
            await asyncio.sleep(0)
            tasks.append(asyncio.create_task(waiter(name)))
        for _ in range(3):  # each waiter runs until it awaits its turn
            await asyncio.sleep(0)
        assert rl._turns.waiting("judge") == 3
        tasks[2].cancel()  # "b", in the middle of the queue
        release.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    assert order == ["holder", "a", "c"]
    assert rl._turns.waiting("judge") == 0


def test_threads_and_tasks_share_one_queue() -> None:
    rl = RateLimiter({"fetch": RateLimit(max_concurrent=2)})
    done: list[str] = []
    lock = threading.Lock()

    def in_thread(i: int) -> None:
        with rl.slot("fetch"):
            time.sleep(0.001)
            with lock:
                done.append(f"t{i}")

    async def in_tasks() -> None:
        async def one(i: int) -> None:
            async with rl.aslot("fetch"):
                await asyncio.sleep(0.001)
                with lock:
                    done.append(f"a{i}")

        await asyncio.gather(*(one(i) for i in range(30)))

    threads = [threading.Thread(target=in_thread, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    asyncio.run(in_tasks())
    for thread in threads:
        thread.join()
    assert sorted(done) == sorted([f"t{i}" for i in range(30)] + [f"a{i}" for i in range(30)])
    assert rl.backend.in_flight("fetch") == 0  # type: ignore[attr-defined]
    assert rl._turns.waiting("fetch") == 0
