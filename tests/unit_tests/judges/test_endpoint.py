"""An unreachable model endpoint costs one retry policy, not one per call, and says so once.

The LLM judge runs on LangChain's real OpenAI integration (``ChatOpenAI`` and the ``openai``
SDK), pointed at servers on 127.0.0.1: one that closes every connection it accepts (the
endpoint cannot be reached), one that answers 429 (rate limited: reachable).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda

from langchain_references.judges import LLMJudge
from langchain_references.services._endpoint import (
    EndpointGuard,
    EndpointUnreachableError,
    endpoint_name,
    guarded,
    is_connection_error,
)

openai_integration = pytest.importorskip("langchain_openai")

STATEMENT = "The Moon orbits the Earth."
PASSAGES = [f"Passage {i} about the Moon." for i in range(6)]


class _Closer:
    """Accepts connections on 127.0.0.1 and closes each at once, counting them."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.socket.accept()
                self.accepted += 1
                connection.close()

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def closer() -> Iterator[_Closer]:
    server = _Closer()
    yield server
    server.close()


class _RateLimited(http.server.BaseHTTPRequestHandler):
    requests = 0

    def do_POST(self) -> None:
        type(self).requests += 1
        body = b'{"error": {"message": "Rate limit reached", "type": "requests"}}'
        self.send_response(429)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _judge(port: int) -> LLMJudge:
    model = openai_integration.ChatOpenAI(
        model="gpt-4o-mini",
        api_key="sk-test",
        base_url=f"http://127.0.0.1:{port}/v1",
        max_retries=0,  # the SDK's own retries off: the judge's policy is 2 attempts
    )
    return LLMJudge(model, max_attempts=2, retry_wait=False)


def _inputs() -> list[dict[str, str]]:
    return [{"statement": STATEMENT, "passage": passage} for passage in PASSAGES]


def test_an_unreachable_endpoint_is_tried_once_per_attempt_then_not_called(
    closer: _Closer, caplog: pytest.LogCaptureFixture
) -> None:
    judge = _judge(closer.port)
    with caplog.at_level(logging.WARNING, logger="langchain_references.services._endpoint"):
        judgements = judge.batch(_inputs(), config={"max_concurrency": 1})
    assert closer.accepted == 2  # the first call's two attempts; no other call was made
    errors = [j.error or "" for j in judgements]
    assert errors[0].startswith("OpenAIConnectionError: ")
    endpoint = f"openai:gpt-4o-mini at http://127.0.0.1:{closer.port}/v1"
    assert (
        errors[1:]
        == [
            f"EndpointUnreachableError: not called: {endpoint} could not be reached "
            "(OpenAIConnectionError: Connection error.)"
        ]
        * 5
    )
    assert [r.getMessage() for r in caplog.records if r.name.endswith("_endpoint")] == [
        f"{endpoint} could not be reached (OpenAIConnectionError: Connection error.): its "
        "other calls are not made for 60 s"
    ]


def test_the_async_path_stops_calling_too(closer: _Closer) -> None:
    judge = _judge(closer.port)

    async def run() -> list[Any]:
        first = await judge.ainvoke(_inputs()[0])
        rest = [await judge.ainvoke(value) for value in _inputs()[1:]]
        return [first, *rest]

    judgements = asyncio.run(run())
    assert closer.accepted == 2
    assert [(j.error or "").split(":")[0] for j in judgements] == [
        "OpenAIConnectionError",
        *["EndpointUnreachableError"] * 5,
    ]


def test_a_rate_limited_endpoint_is_still_called() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RateLimited)
    _RateLimited.requests = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        judge = _judge(server.server_address[1])
        judgements = judge.batch(_inputs()[:3], config={"max_concurrency": 1})
    finally:
        server.shutdown()
        server.server_close()
    assert _RateLimited.requests == 6  # every call, every attempt: the endpoint answers
    assert all((j.error or "").startswith("OpenAIRateLimitError") for j in judgements)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_guard_lets_one_call_try_again_after_its_cooldown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    guard = EndpointGuard("model at http://x", cooldown_s=30, clock=clock)
    guard.before()  # closed: the call is made
    guard.after(ValueError("bad request"))  # not a connection error: still closed
    guard.before()
    with caplog.at_level(logging.WARNING, logger="langchain_references.services._endpoint"):
        guard.after(ConnectionRefusedError("refused"))
        clock.now = 120.0
        with pytest.raises(EndpointUnreachableError, match=r"model at http://x could not be"):
            guard.before()
        guard.after(ConnectionRefusedError("refused"))  # a call in flight failed too
        clock.now = 140.0
        with pytest.raises(EndpointUnreachableError):
            guard.before()  # the second failure, at 120, moved the end from 130 to 150
        clock.now = 150.0
        guard.before()  # past it: one call tries again
    assert len(caplog.records) == 1  # one line while it stays unreachable


def test_the_guard_refuses_a_cooldown_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="cooldown_s must be positive"):
        EndpointGuard("x", cooldown_s=0)


def test_what_counts_as_a_connection_error() -> None:
    from langchain_core.exceptions import ModelConnectionError, ModelRateLimitError

    assert is_connection_error(ConnectionResetError())
    assert is_connection_error(ModelConnectionError("down"))
    assert not is_connection_error(TimeoutError())
    assert not is_connection_error(ModelRateLimitError("429"))
    assert not is_connection_error(RuntimeError("boom"))


def test_the_endpoint_is_named_with_its_url_without_credentials() -> None:
    model = openai_integration.ChatOpenAI(
        model="gpt-4o-mini", api_key="sk-test", base_url="http://user:secret@127.0.0.1:9/v1/"
    )
    assert endpoint_name(model) == "openai:gpt-4o-mini at http://127.0.0.1:9/v1"


def test_the_guard_holds_under_threads() -> None:
    calls: list[int] = []
    lock = threading.Lock()

    def down(value: int) -> int:
        with lock:
            calls.append(value)
        raise ConnectionResetError("reset")

    guard = EndpointGuard("x")
    runnable = guarded(RunnableLambda(down), guard)
    outcomes = runnable.batch(
        list(range(64)), config={"max_concurrency": 8}, return_exceptions=True
    )
    made = [o for o in outcomes if isinstance(o, ConnectionResetError)]
    skipped = [o for o in outcomes if isinstance(o, EndpointUnreachableError)]
    assert len(made) == len(calls) <= 8  # only the calls already in flight were made
    assert len(made) + len(skipped) == 64
