"""A fair share between clients: request slots per client, worker threads shared by client.

Two heavy clients sending legal but expensive requests (a hundred claims at ``top_k`` 100, an
article of 24 claims, abstract verify batches) in loops pushed a third client's evidence
searches from a p95 of 28 ms to 4.5 s (``tests/unit_tests/server/test_load.py``): every
request's work runs in the event loop's worker threads (the embeddings, the index queries, the
judge, the wait for a CPU worker process), whose queue is first come, first served, so one
search waited behind the hundreds of jobs the heavy requests had queued; and the jobs running
at once, six on two cores, shared the CPU six ways. Two mechanisms share the service between
clients instead:

* :class:`ClientLimiter` caps each client's heavy requests in flight
  (``max_client_requests``); the next ones wait their turn in FIFO order, at most
  ``max_client_queue`` of them, for at most ``max_request_seconds``; past either the client
  is answered 429 with ``Retry-After`` (:class:`ClientBusyError`). It holds a client only
  while that client has a request in flight or waiting: an idle client is forgotten at once.
* :class:`FairExecutor` is the event loop's default executor (``loop.run_in_executor(None,
  ...)``, ``asyncio.to_thread``, LangChain's ``run_in_executor``): each job is queued under
  the client of the request that submitted it (:data:`current_client`, set by the
  application's middleware and inherited by the request's tasks); a free thread takes the
  next job of the client with the fewest jobs running (in turn among equals), and a client
  runs at most ``max_client_threads`` jobs at once (one by default). A client's hundred
  queued jobs no longer delay another client's job (when every thread is busy, that job
  waits for one job of each client ahead of it in turn, not for the hundred), and no
  client takes more than its share of the cores.

With both, the third client's p95 stays within 4x its idle p95 plus 150 ms (the load test;
figures in the service docs, *A fair share between clients*).

A client is its address as the ASGI server reports it (:func:`client_key`): the peer of the
connection, or the address a trusted proxy forwarded (the ``serve`` command trusts
``X-Forwarded-For`` only from its ``--trusted-proxy`` addresses). An IPv6 client is its /64
network, which one host usually holds whole.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, ParamSpec, TypeVar

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "BACKGROUND",
    "RETRY_AFTER_S",
    "ClientBusyError",
    "ClientLimiter",
    "FairExecutor",
    "client_key",
    "current_client",
]

logger = logging.getLogger(__name__)

#: The client of the jobs no request submitted (the start-up's): not limited to
#: ``max_client_threads`` (no address is written so).
BACKGROUND: Final = "(background)"
#: Seconds a client refused with 429 is told to wait (``Retry-After``).
RETRY_AFTER_S: Final = 1
#: Bits of an IPv6 address that name a client: a host usually holds a whole /64 network.
_IPV6_CLIENT_PREFIX: Final = 64

#: The client whose request is being served (:func:`client_key`): the application's
#: middleware sets it for each request, and the request's tasks inherit it.
current_client: contextvars.ContextVar[str] = contextvars.ContextVar(
    "current_client", default=BACKGROUND
)

P = ParamSpec("P")
T = TypeVar("T")


def client_key(client: tuple[str, int] | list[Any] | None) -> str:
    """The identity of a request's client, from the ASGI scope's ``client``.

    Args:
        client: ``(host, port)`` as the ASGI server reports it, or ``None`` (a Unix socket).

    Returns:
        The IPv4 address; an IPv6 address's /64 network (an IPv4-mapped one: the IPv4
        address); a host that is no address (a test client's name) as it is; ``"unknown"``
        without a client.
    """
    if not client:
        return "unknown"
    host = str(client[0])
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, _IPV6_CLIENT_PREFIX), strict=False))
    return str(address)


class ClientBusyError(LangchainReferencesError):
    """A client has too many heavy requests in flight and waiting (answered 429).

    Attributes:
        limit: The setting that refused it (``max_client_queue``: the queue was full;
            ``max_client_requests``: the request waited ``max_request_seconds`` for a slot).
        maximum: Its value.
        retry_after: Seconds the client is told to wait (``Retry-After``).
    """

    def __init__(self, message: str, *, limit: str, maximum: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum
        self.retry_after = RETRY_AFTER_S


@dataclass(eq=False)
class _Waiter:
    """A request waiting for one of its client's slots; ``granted`` once one is handed over."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = False


@dataclass
class _Client:
    running: int = 0
    waiting: deque[_Waiter] = field(default_factory=deque)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ClientLimiter:
    """At most ``per_client`` heavy requests in flight per client; the next ones wait in turn.

    A request past its client's slots waits in FIFO order, at most ``queue`` of them per
    client and for at most ``wait_seconds``; past either it gets :class:`ClientBusyError`. A
    waiting request that is cancelled (its client left, the server stops) takes nothing: if
    a slot was handed to it as it gave up, the slot goes to the next one. The state is kept
    per client only while the client has a request in flight or waiting, under a lock: the
    limiter may be used from several threads and event loops.

    Args:
        per_client: Requests of one client in flight at once (``max_client_requests``).
        queue: Requests of one client waiting at once (``max_client_queue``).
        wait_seconds: Longest wait for a slot (``max_request_seconds``).

    Raises:
        ValueError: If ``per_client`` is below 1, ``queue`` below 0 or ``wait_seconds`` not
            positive.
    """

    def __init__(self, *, per_client: int, queue: int, wait_seconds: float) -> None:
        if per_client < 1 or queue < 0 or wait_seconds <= 0:
            raise ValueError(
                f"per_client ({per_client}) must be at least 1, queue ({queue}) at least 0 "
                f"and wait_seconds ({wait_seconds}) positive"
            )
        self.per_client = per_client
        self.queue = queue
        self.wait_seconds = wait_seconds
        self._clients: dict[str, _Client] = {}
        self._lock = threading.Lock()

    def tracked(self) -> dict[str, tuple[int, int]]:
        """The clients held now, each with its ``(requests in flight, requests waiting)``.

        Returns:
            A copy (only clients with a request in flight or waiting are held).
        """
        with self._lock:
            return {key: (c.running, len(c.waiting)) for key, c in self._clients.items()}

    async def acquire(self, key: str) -> None:
        """Take one of ``key``'s slots: at once, or after waiting in turn.

        Give it back with :meth:`release`. A cancelled wait takes nothing.

        Args:
            key: The client (:func:`client_key`).

        Raises:
            ClientBusyError: If the client's queue is full, or the wait took ``wait_seconds``.
        """
        waiter = self._enter(key)
        if waiter is not None:
            await self._wait(key, waiter)

    def release(self, key: str) -> None:
        """Give back a slot :meth:`acquire` took: to the client's first waiter, if any.

        Args:
            key: The client.
        """
        with self._lock:
            client = self._clients[key]
            if client.waiting:
                waiter = client.waiting.popleft()
                waiter.granted = True  # the slot passes to it: ``running`` stays
                waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                return
            client.running -= 1
            self._forget_if_idle(key, client)

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        """Hold one of ``key``'s slots for the body of the ``async with``.

        Args:
            key: The client (:func:`client_key`).

        Yields:
            Once the slot is held.

        Raises:
            ClientBusyError: If the client's queue is full, or the wait took ``wait_seconds``.
        """
        await self.acquire(key)
        try:
            yield
        finally:
            self.release(key)

    def _enter(self, key: str) -> _Waiter | None:
        """Take a slot now (``None``), or queue a waiter; refuse when the queue is full."""
        with self._lock:
            client = self._clients.setdefault(key, _Client())
            if client.running < self.per_client:  # then none waits: a slot freed is handed over
                client.running += 1
                return None
            if len(client.waiting) >= self.queue:
                self._forget_if_idle(key, client)
                raise ClientBusyError(
                    f"this client has {client.running} requests in flight and "
                    f"{len(client.waiting)} waiting, the most it may have "
                    f"({self.per_client} and {self.queue})",
                    limit="max_client_queue",
                    maximum=self.queue,
                )
            loop = asyncio.get_running_loop()
            waiter = _Waiter(loop, loop.create_future())
            client.waiting.append(waiter)
            return waiter

    async def _wait(self, key: str, waiter: _Waiter) -> None:
        try:
            await asyncio.wait_for(waiter.future, self.wait_seconds)
        except BaseException as exc:  # timed out or cancelled: give the place up
            with self._lock:
                granted = waiter.granted
                if not granted:
                    client = self._clients[key]
                    client.waiting.remove(waiter)
                    self._forget_if_idle(key, client)
            if granted:  # a slot was handed over as it gave up: pass it on
                self.release(key)
            if isinstance(exc, TimeoutError):
                logger.warning("A request waited %s s for its client's slot", self.wait_seconds)
                raise ClientBusyError(
                    f"the request waited {self.wait_seconds:g} s for one of its client's "
                    f"{self.per_client} request slots",
                    limit="max_client_requests",
                    maximum=self.per_client,
                ) from None
            raise

    def _forget_if_idle(self, key: str, client: _Client) -> None:
        """Drop a client with nothing in flight or waiting (under the lock)."""
        if client.running == 0 and not client.waiting:
            del self._clients[key]


@dataclass(eq=False)
class _Job:
    future: Future[Any]
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.function(*self.args, **self.kwargs)
        except BaseException as exc:
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)


class FairExecutor(ThreadPoolExecutor):
    """A pool of threads shared fairly between the clients that submit jobs to it.

    A job is queued under the client of the context that submits it (:data:`current_client`:
    ``loop.run_in_executor`` submits from the calling task). A free thread takes the first
    queued job of the client with the fewest jobs running; among equals the clients take
    turns (a client served, or new, goes after the others). A client never has more than
    ``per_client`` jobs running, except :data:`BACKGROUND`. Threads start as jobs need them,
    up to ``max_workers``, and stay. A subclass of
    :class:`~concurrent.futures.ThreadPoolExecutor` (what ``loop.set_default_executor``
    accepts) that uses none of its machinery. The state is held per client only while the
    client has a job queued or running; it is guarded by a lock (jobs may be submitted from
    any thread).

    Args:
        max_workers: Threads at most.
        per_client: Jobs of one client running at once (``max_client_threads``).

    Raises:
        ValueError: If ``max_workers`` or ``per_client`` is below 1.
    """

    def __init__(self, max_workers: int, *, per_client: int) -> None:
        if max_workers < 1 or per_client < 1:
            raise ValueError(
                f"max_workers ({max_workers}) and per_client ({per_client}) must be at least 1"
            )
        super().__init__(max_workers=max_workers, thread_name_prefix="fair")
        self.per_client = per_client
        self._condition = threading.Condition()
        #: The clients with queued jobs, in turn: a client served, or new, goes last.
        self._queues: OrderedDict[str, deque[_Job]] = OrderedDict()
        self._running: dict[str, int] = {}
        self._queued = 0
        self._idle = 0
        self._workers: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Queue ``fn(*args, **kwargs)`` under the current client.

        Args:
            fn: The function.
            *args: Its positional arguments.
            **kwargs: Its keyword arguments.

        Returns:
            The job's future.

        Raises:
            RuntimeError: If the executor was shut down.
        """
        key = current_client.get()
        future: Future[T] = Future()
        with self._condition:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queues.setdefault(key, deque()).append(_Job(future, fn, args, kwargs))
            self._queued += 1
            if self._idle < self._queued and len(self._workers) < self._max_workers:
                thread = threading.Thread(
                    target=self._work, name=f"fair-{len(self._workers)}", daemon=True
                )
                self._workers.append(thread)
                thread.start()
            self._condition.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more jobs; the threads end once the queued jobs are done.

        Args:
            wait: Wait for the threads to end.
            cancel_futures: Cancel the queued jobs that have not started.
        """
        with self._condition:
            self._closed = True
            if cancel_futures:
                for queue in self._queues.values():
                    for job in queue:
                        job.future.cancel()
                self._queues.clear()
                self._queued = 0
            self._condition.notify_all()
            workers = list(self._workers)
        if wait:
            for thread in workers:
                thread.join()

    def _take(self) -> tuple[str, _Job] | None:
        """The next job to run: of the client with the fewest running (under the lock)."""
        best: str | None = None
        fewest = 0
        for key in self._queues:
            running = self._running.get(key, 0)
            if (running < self.per_client or key == BACKGROUND) and (
                best is None or running < fewest
            ):
                best, fewest = key, running
                if running == 0:
                    break
        if best is None:
            return None
        queue = self._queues[best]
        job = queue.popleft()
        if queue:
            self._queues.move_to_end(best)  # served: after the others
        else:
            del self._queues[best]
        self._running[best] = fewest + 1
        self._queued -= 1
        return best, job

    def _work(self) -> None:
        while True:
            with self._condition:
                taken = self._take()
                while taken is None:
                    if self._closed and self._queued == 0:
                        return
                    self._idle += 1
                    self._condition.wait()
                    self._idle -= 1
                    taken = self._take()
            key, job = taken
            job.run()
            del job
            with self._condition:
                self._running[key] -= 1
                if self._running[key] == 0:
                    del self._running[key]
                if self._closed and self._queued == 0:
                    self._condition.notify_all()  # the threads waiting for capped clients
