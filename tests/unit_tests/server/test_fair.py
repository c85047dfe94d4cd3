"""A fair share between clients: request slots per client, and worker threads by client."""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from langchain_references.server.app import create_app
from langchain_references.server.fair import (
    BACKGROUND,
    RETRY_AFTER_S,
    ClientBusyError,
    ClientLimiter,
    FairExecutor,
    client_key,
    current_client,
)
from langchain_references.server.services import Services
from langchain_references.server.settings import ENV_PREFIX, ServerSettings, SettingsError
from tests.unit_tests.server._native_fixtures import native_index_dir

__all__ = ["native_index_dir"]

WAIT_S = 5


async def _settle() -> None:
    """Let the tasks that can run, run."""
    for _ in range(10):
        await asyncio.sleep(0)


# --------------------------------------------------------------------------- who is a client


@pytest.mark.parametrize(
    ("client", "key"),
    [
        (("203.0.113.7", 5000), "203.0.113.7"),
        (("2001:db8:1:2:aaaa::1", 5000), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:bbbb:cccc:dddd:eeee", 1), "2001:db8:1:2::/64"),
        (("2001:db8:1:3::1", 1), "2001:db8:1:3::/64"),
        (("::ffff:198.51.100.4", 1), "198.51.100.4"),
        (("testclient", 50000), "testclient"),
        (None, "unknown"),
    ],
)
def test_a_client_is_its_address_and_an_ipv6_one_its_network(
    client: tuple[str, int] | None, key: str
) -> None:
    assert client_key(client) == key


# --------------------------------------------------------------------------- the request slots


async def test_a_client_past_its_slots_waits_while_another_client_goes_on() -> None:
    limiter = ClientLimiter(per_client=2, queue=4, wait_seconds=WAIT_S)
    await limiter.acquire("a")
    await limiter.acquire("a")
    third = asyncio.create_task(limiter.acquire("a"))
    await _settle()
    assert not third.done()
    await asyncio.wait_for(limiter.acquire("b"), WAIT_S)  # another client: at once
    assert limiter.tracked() == {"a": (2, 1), "b": (1, 0)}
    limiter.release("a")
    await asyncio.wait_for(third, WAIT_S)
    assert limiter.tracked() == {"a": (2, 0), "b": (1, 0)}


async def test_waiting_requests_get_their_slots_in_arrival_order() -> None:
    limiter = ClientLimiter(per_client=1, queue=3, wait_seconds=WAIT_S)
    await limiter.acquire("a")
    order: list[int] = []

    async def request(n: int) -> None:
        await limiter.acquire("a")
        order.append(n)

    tasks = []
    for n in range(3):
        tasks.append(asyncio.create_task(request(n)))
        await _settle()  # queued in this order
    for expected in ([0], [0, 1], [0, 1, 2]):
        limiter.release("a")  # the holder is done
        await _settle()
        assert order == expected
    await asyncio.gather(*tasks)
    assert limiter.tracked() == {"a": (1, 0)}


async def test_a_full_queue_is_refused_naming_the_limit_and_changes_nothing() -> None:
    limiter = ClientLimiter(per_client=1, queue=1, wait_seconds=WAIT_S)
    await limiter.acquire("a")
    waiting = asyncio.create_task(limiter.acquire("a"))
    await _settle()
    with pytest.raises(ClientBusyError) as info:
        await limiter.acquire("a")
    assert (info.value.limit, info.value.maximum, info.value.retry_after) == (
        "max_client_queue",
        1,
        RETRY_AFTER_S,
    )
    assert "1 requests in flight and 1 waiting" in str(info.value)
    assert limiter.tracked() == {"a": (1, 1)}
    limiter.release("a")
    await asyncio.wait_for(waiting, WAIT_S)
    assert limiter.tracked() == {"a": (1, 0)}


async def test_a_wait_past_its_time_is_refused_and_gives_its_place_up() -> None:
    limiter = ClientLimiter(per_client=1, queue=2, wait_seconds=0.05)
    await limiter.acquire("a")
    started = time.monotonic()
    with pytest.raises(ClientBusyError) as info:
        await limiter.acquire("a")
    assert time.monotonic() - started >= 0.05
    assert (info.value.limit, info.value.maximum) == ("max_client_requests", 1)
    assert limiter.tracked() == {"a": (1, 0)}
    limiter.release("a")
    assert limiter.tracked() == {}


async def test_idle_clients_are_forgotten() -> None:
    limiter = ClientLimiter(per_client=1, queue=1, wait_seconds=WAIT_S)
    for n in range(1_000):
        async with limiter.slot(f"10.0.{n // 256}.{n % 256}"):
            assert len(limiter.tracked()) == 1
    with contextlib.suppress(RuntimeError):
        async with limiter.slot("10.1.0.1"):
            raise RuntimeError("the request failed")
    assert limiter.tracked() == {}


async def test_a_cancelled_wait_takes_nothing_and_the_next_one_gets_the_slot() -> None:
    limiter = ClientLimiter(per_client=1, queue=2, wait_seconds=WAIT_S)
    await limiter.acquire("a")
    first = asyncio.create_task(limiter.acquire("a"))
    second = asyncio.create_task(limiter.acquire("a"))
    await _settle()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert limiter.tracked() == {"a": (1, 1)}
    limiter.release("a")
    await asyncio.wait_for(second, WAIT_S)
    assert limiter.tracked() == {"a": (1, 0)}
    limiter.release("a")
    assert limiter.tracked() == {}


async def test_a_slot_handed_to_a_wait_being_cancelled_passes_on() -> None:
    limiter = ClientLimiter(per_client=1, queue=2, wait_seconds=WAIT_S)
    await limiter.acquire("a")
    first = asyncio.create_task(limiter.acquire("a"))
    second = asyncio.create_task(limiter.acquire("a"))
    await _settle()
    first.cancel()  # its cancellation is under way as the slot is handed to it
    limiter.release("a")
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, WAIT_S)
    assert limiter.tracked() == {"a": (1, 0)}
    limiter.release("a")
    assert limiter.tracked() == {}


async def test_a_slot_given_back_from_another_thread_wakes_the_waiter() -> None:
    limiter = ClientLimiter(per_client=1, queue=1, wait_seconds=WAIT_S)
    await limiter.acquire("a")
    waiting = asyncio.create_task(limiter.acquire("a"))
    await _settle()
    await asyncio.to_thread(limiter.release, "a")
    await asyncio.wait_for(waiting, WAIT_S)
    assert limiter.tracked() == {"a": (1, 0)}


@pytest.mark.parametrize(
    "arguments",
    [
        {"per_client": 0, "queue": 1, "wait_seconds": 1},
        {"per_client": 1, "queue": -1, "wait_seconds": 1},
        {"per_client": 1, "queue": 1, "wait_seconds": 0},
    ],
)
def test_the_limiter_refuses_meaningless_limits(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="per_client"):
        ClientLimiter(**arguments)


# --------------------------------------------------------------------------- the worker threads


@contextlib.contextmanager
def _as_client(key: str) -> Iterator[None]:
    token = current_client.set(key)
    try:
        yield
    finally:
        current_client.reset(token)


@pytest.fixture
def executor() -> Iterator[Callable[..., FairExecutor]]:
    made: list[FairExecutor] = []

    def make(max_workers: int, per_client: int) -> FairExecutor:
        made.append(FairExecutor(max_workers, per_client=per_client))
        return made[-1]

    yield make
    for pool in made:
        pool.shutdown(cancel_futures=True)


def test_a_clients_backlog_does_not_delay_another_clients_job(
    executor: Callable[..., FairExecutor],
) -> None:
    pool = executor(2, 1)
    gate = threading.Event()
    started: list[str] = []

    def blocked(name: str) -> str:
        started.append(name)
        gate.wait(WAIT_S)
        return name

    with _as_client("a"):
        backlog = [pool.submit(blocked, f"a{i}") for i in range(10)]
    with _as_client("b"):
        other = pool.submit(str.upper, "b")
    assert other.result(timeout=WAIT_S) == "B"  # on the second thread, before a's backlog
    assert started == ["a0"]  # a runs one job at a time
    gate.set()
    assert [job.result(timeout=WAIT_S) for job in backlog] == [f"a{i}" for i in range(10)]


def test_clients_take_turns_for_a_free_thread(executor: Callable[..., FairExecutor]) -> None:
    pool = executor(1, 1)
    gate = threading.Event()
    running = threading.Event()
    order: list[str] = []

    def job(name: str) -> None:
        running.set()
        gate.wait(WAIT_S)
        order.append(name)

    with _as_client("a"):
        first = pool.submit(job, "a0")
        assert running.wait(WAIT_S)
        jobs = [first, pool.submit(job, "a1"), pool.submit(job, "a2")]
    with _as_client("b"):
        jobs += [pool.submit(job, "b0"), pool.submit(job, "b1")]
    with _as_client("c"):
        jobs.append(pool.submit(job, "c0"))
    gate.set()
    for item in jobs:
        item.result(timeout=WAIT_S)
    assert order == ["a0", "a1", "b0", "c0", "a2", "b1"]


def test_a_free_thread_goes_to_the_client_with_the_fewest_running(
    executor: Callable[..., FairExecutor],
) -> None:
    pool = executor(3, 2)
    gates = {name: threading.Event() for name in ("a0", "a1", "c0")}
    started: list[str] = []
    lock = threading.Lock()

    def job(name: str) -> None:
        with lock:
            started.append(name)
        if name in gates:
            gates[name].wait(WAIT_S)

    with _as_client("a"):
        jobs = [pool.submit(job, "a0"), pool.submit(job, "a1")]
    with _as_client("c"):
        jobs.append(pool.submit(job, "c0"))
    deadline = time.monotonic() + WAIT_S
    while len(started) < 3:  # every thread busy
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with _as_client("a"):
        jobs.append(pool.submit(job, "a2"))  # a runs two already: its turn comes after b's
    with _as_client("b"):
        jobs.append(pool.submit(job, "b0"))
    gates["a0"].set()  # a runs one now, b none: b goes first
    jobs[0].result(timeout=WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while len(started) < 4:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert started[3] == "b0"
    gates["a1"].set()
    gates["c0"].set()
    for item in jobs:
        item.result(timeout=WAIT_S)
    assert sorted(started[4:]) == ["a2"]


def test_the_start_up_jobs_are_not_limited_per_client(
    executor: Callable[..., FairExecutor],
) -> None:
    pool = executor(3, 1)
    together = threading.Barrier(3, timeout=WAIT_S)
    assert current_client.get() == BACKGROUND
    jobs = [pool.submit(together.wait) for _ in range(3)]  # all three at once, or it breaks
    assert sorted(job.result(timeout=WAIT_S) for job in jobs) == [0, 1, 2]


def test_a_jobs_exception_is_its_futures(executor: Callable[..., FairExecutor]) -> None:
    pool = executor(1, 1)
    with _as_client("a"):
        failed = pool.submit(int, "not a number")
        fine = pool.submit(int, "7")
    with pytest.raises(ValueError, match="not a number"):
        failed.result(timeout=WAIT_S)
    assert fine.result(timeout=WAIT_S) == 7


def test_shutdown_cancels_the_queued_jobs_and_refuses_new_ones() -> None:
    pool = FairExecutor(1, per_client=1)
    gate = threading.Event()
    with _as_client("a"):
        running = pool.submit(gate.wait, WAIT_S)
        queued = pool.submit(str, "never")
    while not running.running():
        time.sleep(0.01)
    gate.set()
    pool.shutdown(wait=True, cancel_futures=True)
    assert queued.cancelled()
    assert running.result(timeout=0) is True
    assert not any(thread.is_alive() for thread in pool._workers)
    with pytest.raises(RuntimeError, match="shutdown"):
        pool.submit(str, "late")


def test_shutdown_finishes_the_queued_jobs_by_default() -> None:
    pool = FairExecutor(2, per_client=1)
    with _as_client("a"):
        jobs = [pool.submit(time.sleep, 0.01) for _ in range(5)]
    pool.shutdown(wait=True)
    assert all(job.done() and not job.cancelled() for job in jobs)


async def test_the_event_loop_queues_each_tasks_jobs_under_its_client() -> None:
    loop = asyncio.get_running_loop()
    pool = FairExecutor(2, per_client=1)
    loop.set_default_executor(pool)
    gate = threading.Event()

    async def heavy() -> list[bool]:
        current_client.set("heavy")
        return await asyncio.gather(*(asyncio.to_thread(gate.wait, WAIT_S) for _ in range(8)))

    async def light() -> str:
        current_client.set("light")
        return await asyncio.to_thread(str.upper, "light")

    backlog = asyncio.create_task(heavy())
    await _settle()
    assert await asyncio.wait_for(light(), WAIT_S) == "LIGHT"  # beside the heavy backlog
    gate.set()
    assert await asyncio.wait_for(backlog, WAIT_S) == [True] * 8


def test_the_executor_refuses_meaningless_thread_counts() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairExecutor(0, per_client=1)
    with pytest.raises(ValueError, match="at least 1"):
        FairExecutor(2, per_client=0)


# --------------------------------------------------------------------------- in the service


def _blocking_app(services: Services, **limits: int) -> tuple[Any, threading.Event, list[str]]:
    """The service with ``POST /test/block``, which holds its slot until the gate opens."""
    settings = replace(services.settings, **limits)
    app = create_app(settings, services=replace(services, settings=settings))
    gate = threading.Event()
    entered: list[str] = []

    @app.post("/test/block")
    async def block() -> dict[str, str]:
        entered.append(current_client.get())
        await asyncio.to_thread(gate.wait, WAIT_S)
        return {"client": current_client.get()}

    return app, gate, entered


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_client_past_its_slots_and_queue_gets_a_429_naming_the_limit(
    services: Services,
) -> None:
    app, gate, entered = _blocking_app(services, max_client_requests=1, max_client_queue=1)
    answers: list[Any] = []
    with TestClient(app, base_url="http://localhost", client=("203.0.113.7", 1)) as client:
        threads = [
            threading.Thread(target=lambda: answers.append(client.post("/test/block")))
            for _ in range(2)
        ]
        threads[0].start()
        _wait_for(lambda: len(entered) == 1)
        threads[1].start()  # waits its turn
        _wait_for(lambda: _tracked(app) == {"203.0.113.7": (1, 1)})
        refused = client.post("/test/block", headers={"X-Request-ID": "over"})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == str(RETRY_AFTER_S)
        assert refused.headers["x-request-id"] == "over"
        assert refused.json() == {
            "detail": "this client has 1 requests in flight and 1 waiting, the most it may "
            "have (1 and 1)",
            "limit": "max_client_queue",
            "maximum": 1,
        }
        assert client.get("/healthcheck").status_code == 200  # light: never limited
        other = TestClient(app, base_url="http://localhost", client=("203.0.113.8", 1))
        elsewhere = threading.Thread(target=lambda: answers.append(other.post("/test/block")))
        elsewhere.start()
        _wait_for(lambda: len(entered) == 2)  # another client: at once
        assert entered == ["203.0.113.7", "203.0.113.8"]
        gate.set()
        for thread in [*threads, elsewhere]:
            thread.join(WAIT_S)
    assert sorted(a.json()["client"] for a in answers) == [
        "203.0.113.7",
        "203.0.113.7",
        "203.0.113.8",
    ]
    assert entered == ["203.0.113.7", "203.0.113.8", "203.0.113.7"]
    assert _tracked(app) == {}


def _tracked(app: Any) -> dict[str, tuple[int, int]]:
    """The clients the service's limiter holds now."""
    layer = app.middleware_stack
    while not hasattr(layer, "limiter"):
        layer = layer.app
    tracked: dict[str, tuple[int, int]] = layer.limiter.tracked()
    return tracked


def test_the_native_endpoints_document_the_429(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/factcheck", "/v1/article", "/v1/answer"):
        described = paths[path]["post"]["responses"]["429"]["description"]
        assert "`max_client_requests`" in described
        assert "`Retry-After`" in described


def test_the_service_shares_its_worker_threads_by_client(services: Services) -> None:
    app = create_app(services.settings, services=services)
    with TestClient(app, base_url="http://localhost") as client:
        pool = client.portal.call(asyncio.to_thread, lambda: threading.current_thread().name)
        assert pool.startswith("fair-")
        loop_pool = client.portal.call(asyncio.get_running_loop)._default_executor
        assert isinstance(loop_pool, FairExecutor)
        assert loop_pool.per_client == services.settings.max_client_threads == 1


# --------------------------------------------------------------------------- settings, serve


def test_the_client_limits_are_settings_that_travel_to_the_workers() -> None:
    settings = ServerSettings(max_client_requests=2, max_client_queue=5, max_client_threads=3)
    env = settings.to_env()
    assert env[ENV_PREFIX + "MAX_CLIENT_REQUESTS"] == "2"
    assert env[ENV_PREFIX + "MAX_CLIENT_QUEUE"] == "5"
    assert env[ENV_PREFIX + "MAX_CLIENT_THREADS"] == "3"
    assert ServerSettings.from_env(env) == settings
    defaults = ServerSettings()
    assert (
        defaults.max_client_requests,
        defaults.max_client_queue,
        defaults.max_client_threads,
    ) == (4, 16, 1)
    for name in ("max_client_requests", "max_client_queue", "max_client_threads"):
        with pytest.raises(SettingsError, match=name):
            ServerSettings(**{name: 0})


def test_serve_takes_the_client_limits_and_trusts_no_proxy_by_default(
    native_index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from langchain_references.cli import build_parser, serve

    started: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(kwargs))
    argv = ["serve", "--index", "native-landmarks", "--persist-dir", str(native_index_dir)]
    limits = ["--max-client-requests", "2", "--max-client-queue", "3", "--max-client-threads", "2"]
    settings = serve.settings_from_args(build_parser().parse_args([*argv, *limits]))
    assert (settings.max_client_requests, settings.max_client_queue) == (2, 3)
    assert settings.max_client_threads == 2
    assert serve.run(build_parser().parse_args(argv), out=io.StringIO()) == 0
    proxies = ["--trusted-proxy", "10.0.0.1", "--trusted-proxy", "192.168.0.0/16"]
    assert serve.run(build_parser().parse_args([*argv, *proxies]), out=io.StringIO()) == 0
    assert started[0]["proxy_headers"] is False
    assert "forwarded_allow_ips" not in started[0]
    assert started[1]["proxy_headers"] is True
    assert started[1]["forwarded_allow_ips"] == ["10.0.0.1", "192.168.0.0/16"]


def test_serve_refuses_a_trusted_proxy_that_is_no_address(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from langchain_references.cli import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["serve", "--index", "x", "--trusted-proxy", "proxy.local"])
    assert info.value.code == 2
    assert "'proxy.local' is not an IP address, a network or '*'" in capsys.readouterr().err
    args = build_parser().parse_args(["serve", "--index", "x", "--trusted-proxy", "*"])
    assert args.trusted_proxy == ["*"]
