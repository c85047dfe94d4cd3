"""Server-sent events: negotiation, encoding, the JSON fallback, errors, pings, cancellation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from fastapi import FastAPI

from langchain_references.server import events as sse
from langchain_references.server.events import ApiError, Event, collect, encode_event
from langchain_references.server.settings import LimitExceededError
from tests.unit_tests.server._native_fixtures import (
    LiveServer,
    make_app,
    native_index,
    native_index_dir,
    native_settings,
    parse_sse,
)

__all__ = ["make_app", "native_index", "native_index_dir", "native_settings"]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, False),
        ("", False),
        ("*/*", False),
        ("application/json", False),
        ("text/event-stream", True),
        ("Text/Event-Stream; charset=utf-8", True),
        ("application/json, text/event-stream", True),
        ("text/event-stream;q=0.5, application/json", False),
        ("text/event-stream;q=0", False),
        ("text/event-stream;q=oops", False),
        ("application/json;q=0.2, text/event-stream;q=0.9", True),
    ],
)
def test_accept_negotiation(accept: str | None, expected: bool) -> None:
    assert sse.wants_event_stream(accept) is expected


def test_encoding_is_one_json_line_per_event() -> None:
    event = Event("claim", {"text": "two\nlines\r\nand </script> ü", "n": 1})
    raw = encode_event(event, event_id=7).decode()
    assert raw.endswith("\n\n")
    lines = raw.rstrip("\n").split("\n")
    assert lines[0] == "event: claim"
    assert lines[-1] == "id: 7"
    assert len(lines) == 3
    assert json.loads(lines[1].removeprefix("data: ")) == event.data


async def _events(*items: Event | BaseException) -> AsyncIterator[Event]:
    for item in items:
        if isinstance(item, BaseException):
            raise item
        yield item


async def test_collect_answers_the_result_event() -> None:
    response = await collect(_events(Event("progress", {"a": 1}), Event("result", {"ok": True})))
    assert response.status_code == 200
    assert json.loads(bytes(response.body)) == {"ok": True}


@pytest.mark.parametrize(
    ("error", "status", "body"),
    [
        (
            ApiError(422, "fetch_failed", "could not fetch", {"url": "https://x.example"}),
            422,
            {"detail": "could not fetch", "code": "fetch_failed", "url": "https://x.example"},
        ),
        (
            LimitExceededError("max_claims", 2, 3, status_code=413),
            413,
            {
                "detail": "max_claims is 2, the request has 3",
                "code": "limit_exceeded",
                "limit": "max_claims",
                "maximum": 2,
                "actual": 3,
            },
        ),
    ],
)
async def test_collect_answers_typed_errors(
    error: Exception, status: int, body: dict[str, object]
) -> None:
    response = await collect(_events(Event("progress", {}), error))
    assert response.status_code == status
    assert json.loads(bytes(response.body)) == body


async def test_collect_without_result_is_a_500() -> None:
    response = await collect(_events(Event("progress", {})))
    assert response.status_code == 500
    assert json.loads(bytes(response.body))["code"] == "internal_error"


async def _body(events: AsyncIterator[Event], ping_s: float = 15.0) -> str:
    chunks = [chunk async for chunk in sse._sse_body(events, ping_s)]
    return b"".join(chunks).decode()


async def test_stream_numbers_events_and_ends_on_error() -> None:
    body = await _body(_events(Event("a", {"i": 1}), Event("b", {"i": 2}), RuntimeError("boom")))
    parsed = parse_sse(body)
    assert [(n, i) for n, _, i in parsed] == [("a", "1"), ("b", "2"), ("error", "3")]
    assert parsed[-1][1] == {"detail": "the request failed on the server", "code": "internal_error"}
    assert "boom" not in body  # internal details stay in the log


async def test_stream_sends_typed_error_details() -> None:
    body = await _body(_events(ApiError(422, "extract_failed", "no text")))
    assert parse_sse(body) == [("error", {"detail": "no text", "code": "extract_failed"}, "1")]


async def test_stream_pings_while_idle() -> None:
    async def slow() -> AsyncIterator[Event]:
        await asyncio.sleep(0.25)
        yield Event("result", {"done": True})

    body = await _body(slow(), ping_s=0.05)
    assert body.startswith(": ping\n\n")
    assert parse_sse(body) == [("result", {"done": True}, "1")]


async def test_disconnect_cancels_the_work() -> None:
    finished = asyncio.Event()
    cancelled: list[bool] = []

    async def endless() -> AsyncIterator[Event]:
        try:
            i = 0
            while True:
                i += 1
                yield Event("tick", {"i": i})
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        finally:
            finished.set()

    body = sse._sse_body(endless(), 15.0)
    first = await body.__anext__()
    assert first.startswith(b"event: tick")
    await body.aclose()  # what the server does when the client goes away
    await asyncio.wait_for(finished.wait(), 5)
    assert cancelled == [True]


async def test_a_stream_past_its_budget_ends_with_an_error_and_cancels_the_work() -> None:
    cancelled: list[int] = []
    produced: list[int] = []

    async def endless() -> AsyncIterator[Event]:
        i = 0
        try:
            while True:
                i += 1
                produced.append(i)
                yield Event("tick", {"i": i})
                await asyncio.sleep(0.4)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    body = b"".join([chunk async for chunk in sse._sse_body(endless(), 15.0, 1)]).decode()
    parsed = parse_sse(body)
    assert [(name, event_id) for name, _, event_id in parsed] == [
        ("tick", "1"),
        ("tick", "2"),
        ("tick", "3"),
        ("error", "4"),
    ]
    assert parsed[-1][1] == {
        "detail": "max_request_seconds is 1, the request has 2",
        "code": "limit_exceeded",
        "limit": "max_request_seconds",
        "maximum": 1,
        "actual": 2,
    }
    assert cancelled == [3]
    await asyncio.sleep(0.5)
    assert produced == [1, 2, 3]  # nothing after the budget


# --------------------------------------------------------------------------- real uvicorn


def test_events_arrive_over_a_real_server(make_app: Callable[..., FastAPI]) -> None:
    app = make_app()
    with LiveServer(app) as server, httpx.Client(base_url=server.base_url, timeout=60) as client:
        body = {"text": "The Space Needle is in Seattle. Honey bees make honey.", "top_k": 1}
        with client.stream(
            "POST", "/v1/article", json=body, headers={"Accept": "text/event-stream"}
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            assert response.headers["x-request-id"]
            chunks = list(response.iter_text())
        events = parse_sse("".join(chunks))
        assert events[0][0] == "article"
        assert events[-1][0] == "result"
        assert [c["id"] for c in events[-1][1]["claims"]] == [0, 1]
        plain = client.post("/v1/article", json=body)
        assert plain.headers["content-type"] == "application/json"
        assert [c["text"] for c in plain.json()["claims"]] == [
            "The Space Needle is in Seattle.",
            "Honey bees make honey.",
        ]
