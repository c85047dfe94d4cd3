"""One response path for the native endpoints: server-sent events or one JSON document.

Every native endpoint (``/v1/factcheck``, ``/v1/article``, ``/v1/answer``) is written once, as
an async iterator of :class:`Event` objects whose last item is the :data:`RESULT_EVENT` (the
same JSON document a client without streaming receives). :func:`respond` negotiates on the
``Accept`` header (:func:`wants_event_stream`) and drives that iterator one of two ways:

* ``Accept: text/event-stream`` (preferred over ``application/json``): every event is sent as
  it happens, in the SSE wire format (``event:``, ``data:`` with compact JSON, ``id:``, a
  counter from 1), with a ``: ping`` comment when nothing happened for
  :data:`PING_INTERVAL_S` seconds so that proxies keep the connection open. An error in the
  middle of the stream becomes a final :data:`ERROR_EVENT` (the status line was sent already);
  a client that disconnects cancels the work, and so does the end of the request's time
  budget (``max_request_seconds``; the stream then ends with an error event naming it).
* otherwise: the iterator is drained and the data of its result event is the JSON body.

Errors the client should see are :class:`ApiError` objects (an exceeded limit,
:class:`~langchain_references.server.settings.LimitExceededError`, is one too): in the JSON
mode they are a 4xx JSON response ``{"detail", "code", ...}``; inside a stream they are the
data of the error event. Anything else is logged and reported as ``internal_error`` without
details.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from fastapi.sse import KEEPALIVE_COMMENT, EventSourceResponse, format_sse_event

from langchain_references.errors import LangchainReferencesError
from langchain_references.server.guard import guarded
from langchain_references.server.services import get_services
from langchain_references.server.settings import LimitExceededError

__all__ = [
    "ERROR_EVENT",
    "EVENT_STREAM",
    "PING_INTERVAL_S",
    "PROGRESS_EVENT",
    "RESULT_EVENT",
    "ApiError",
    "Event",
    "collect",
    "encode_event",
    "error_response",
    "openapi_responses",
    "respond",
    "stream_response",
    "wants_event_stream",
]

logger = logging.getLogger(__name__)

#: Media type of server-sent events.
EVENT_STREAM: Final = "text/event-stream"
#: Name of the last event of a successful stream; its data is the endpoint's JSON document.
RESULT_EVENT: Final = "result"
#: Name of the last event of a failed stream; its data is the error's JSON body.
ERROR_EVENT: Final = "error"
#: Name of the progress events (stage started / ended).
PROGRESS_EVENT: Final = "progress"
#: Seconds without an event after which a keep-alive comment is sent.
PING_INTERVAL_S: Final = 15.0


def openapi_responses(
    result: str, too_large: str, more: Mapping[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a native endpoint (JSON, or events with ``Accept``).

    Args:
        result: What the 200 response holds, in JSON and as events.
        too_large: When the request is refused with 413.
        more: Descriptions of more statuses.

    Returns:
        The responses: 200 (JSON or ``text/event-stream``), 400 (``top_k``), 413, 429 (the
        client's fair share: :mod:`~langchain_references.server.fair`), ``more``.
    """
    return {
        200: {
            "description": result,
            "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
        },
        400: {"description": "`top_k` above `max_top_k` (JSON naming the limit)."},
        413: {"description": too_large},
        429: {
            "description": "The client has `max_client_requests` requests in flight and "
            "`max_client_queue` waiting, or this one waited `max_request_seconds` for its turn "
            "(JSON naming the limit; `Retry-After`)."
        },
        **{status: {"description": text} for status, text in (more or {}).items()},
    }


@dataclass(frozen=True, slots=True)
class Event:
    """One event of a native endpoint.

    Attributes:
        name: The SSE event name (``progress``, ``claim``, ``token``, ``result``...).
        data: JSON-serialisable data.
    """

    name: str
    data: Mapping[str, Any]


class ApiError(LangchainReferencesError):
    """An error answered to the client, with its HTTP status and a machine-readable code.

    Args:
        status_code: The HTTP status (4xx for the client's errors).
        code: Short machine-readable code, e.g. ``"limit_exceeded"`` or ``"fetch_failed"``.
        message: Human-readable message (no internal details).
        details: More JSON fields of the error body, e.g. ``{"limit": "max_claims"}``.

    Attributes:
        status_code: The HTTP status.
        code: The code.
        message: The message.
        details: The extra fields.
    """

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.details: Mapping[str, Any] = dict(details or {})

    def payload(self) -> dict[str, Any]:
        """The JSON body: ``{"detail": message, "code": code, **details}``.

        The shape of the application's other errors (FastAPI's ``detail``, the limits'
        ``limit`` / ``maximum`` / ``actual``), with a machine-readable ``code``.

        Returns:
            The body.
        """
        return {"detail": self.message, "code": self.code, **self.details}

    @classmethod
    def from_limit(cls, exc: LimitExceededError) -> ApiError:
        """The error answered for an exceeded limit (as the application's handler does).

        Args:
            exc: The limit error.

        Returns:
            ``limit_exceeded`` with the limit's status, name, maximum and actual value.
        """
        return cls(
            exc.status_code,
            "limit_exceeded",
            str(exc),
            {"limit": exc.limit, "maximum": exc.maximum, "actual": exc.actual},
        )


def _internal_error() -> ApiError:
    return ApiError(500, "internal_error", "the request failed on the server")


def _quality(parameters: list[str]) -> float:
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value.strip())))
            except ValueError:
                return 0.0
    return 1.0


def wants_event_stream(accept: str | None) -> bool:
    """Whether an ``Accept`` header asks for server-sent events rather than JSON.

    ``text/event-stream`` must be listed with a non-zero quality at least as high as that of
    ``application/json`` (a bare ``*/*`` or no header means JSON).

    Args:
        accept: The header value, or ``None``.

    Returns:
        True for an event stream.
    """
    if not accept:
        return False
    stream_q = json_q = 0.0
    for item in accept.split(","):
        media, *parameters = item.split(";")
        media = media.strip().lower()
        quality = _quality(parameters)
        if media == EVENT_STREAM:
            stream_q = max(stream_q, quality)
        elif media == "application/json":
            json_q = max(json_q, quality)
    return stream_q > 0.0 and stream_q >= json_q


def encode_event(event: Event, *, event_id: int) -> bytes:
    """One event in the SSE wire format (compact JSON data on one line).

    Args:
        event: The event.
        event_id: Its id (a counter within the stream).

    Returns:
        The bytes, ending with the blank line that ends an event.
    """
    data = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return format_sse_event(data_str=data, event=event.name, id=str(event_id))


def error_response(error: ApiError) -> JSONResponse:
    """The JSON response of an error.

    Args:
        error: The error.

    Returns:
        Its JSON body with its status.
    """
    return JSONResponse(error.payload(), status_code=error.status_code)


async def collect(events: AsyncIterator[Event]) -> Response:
    """Drain the events and answer with the data of the result event (the JSON mode).

    Args:
        events: The endpoint's events.

    Returns:
        The result as JSON (200), or the error response of an :class:`ApiError` raised by
        the iterator.
    """
    result: Mapping[str, Any] | None = None
    try:
        async for event in events:
            if event.name == RESULT_EVENT:
                result = event.data
    except ApiError as error:
        return error_response(error)
    except LimitExceededError as exc:
        return error_response(ApiError.from_limit(exc))
    if result is None:
        logger.error("A native endpoint ended without a result event")
        return error_response(_internal_error())
    return JSONResponse(dict(result))


_END: Final = object()


async def _pump(events: AsyncIterator[Event], queue: asyncio.Queue[object]) -> None:
    """Move the events to ``queue``; an error becomes an error event; then the end marker."""
    try:
        async for event in events:
            queue.put_nowait(event)
    except ApiError as error:
        queue.put_nowait(Event(ERROR_EVENT, error.payload()))
    except LimitExceededError as exc:
        queue.put_nowait(Event(ERROR_EVENT, ApiError.from_limit(exc).payload()))
    except Exception:
        logger.exception("A native endpoint failed while streaming")
        queue.put_nowait(Event(ERROR_EVENT, _internal_error().payload()))
    finally:
        queue.put_nowait(_END)


async def _sse_body(
    events: AsyncIterator[Event], ping_interval_s: float, seconds: int | None = None
) -> AsyncGenerator[bytes, None]:
    """The SSE body: events as they come, pings when idle, work cancelled on disconnect.

    Past ``seconds`` (the request's time budget, ``None`` for none) the work is cancelled and
    the stream ends with an error event naming ``max_request_seconds``.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    task = asyncio.create_task(_pump(events, queue))
    started = last_sent = loop.time()
    event_id = 0
    try:
        while True:
            now = loop.time()
            timeout = ping_interval_s - (now - last_sent)
            if seconds is not None:
                if now - started > seconds:
                    yield _over_budget(seconds, now - started, task, event_id + 1)
                    break
                timeout = min(timeout, started + seconds - now + _BUDGET_SLACK_S)
            try:
                item = await asyncio.wait_for(queue.get(), max(timeout, 0.0))
            except TimeoutError:
                if loop.time() - last_sent >= ping_interval_s:
                    last_sent = loop.time()
                    yield KEEPALIVE_COMMENT
                continue
            if item is _END or not isinstance(item, Event):
                break
            event_id += 1
            last_sent = loop.time()
            yield encode_event(item, event_id=event_id)
    finally:
        if not task.done():
            task.cancel()
        with suppress(asyncio.CancelledError):
            await task


#: How long past the budget the stream waits before ending it (so ``elapsed > seconds``).
_BUDGET_SLACK_S: Final = 0.01


def _over_budget(seconds: int, elapsed: float, task: asyncio.Task[None], event_id: int) -> bytes:
    """Cancel the work of a stream past its budget; the error event that ends the stream."""
    task.cancel()
    logger.warning("A streamed request ran out of its %d s; its work is cancelled", seconds)
    error = LimitExceededError("max_request_seconds", seconds, math.ceil(elapsed), status_code=503)
    return encode_event(Event(ERROR_EVENT, ApiError.from_limit(error).payload()), event_id=event_id)


def stream_response(
    events: AsyncIterator[Event],
    *,
    ping_interval_s: float = PING_INTERVAL_S,
    seconds: int | None = None,
) -> EventSourceResponse:
    """Stream the events as server-sent events (the streaming mode).

    Args:
        events: The endpoint's events.
        ping_interval_s: Seconds without an event before a keep-alive comment.
        seconds: The time budget (``max_request_seconds``): past it the work is cancelled and
            the stream ends with an error event (503's body, naming the limit); ``None``: none.

    Returns:
        A ``text/event-stream`` response, not cached, not buffered by proxies.
    """
    return EventSourceResponse(
        _sse_body(events, ping_interval_s, seconds),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def respond(request: Request, events: AsyncIterator[Event]) -> Response:
    """Answer with the events as SSE or with their result as JSON, by the ``Accept`` header.

    In the JSON mode the work is :func:`~langchain_references.server.guard.guarded`: cancelled
    when the client leaves, answered 503 past ``max_request_seconds``. A stream has the same
    budget: past it the work is cancelled and the stream ends with an error event.

    Args:
        request: The request (its ``Accept`` header decides).
        events: The endpoint's events, the result event last.

    Returns:
        The response.
    """
    seconds = get_services(request).settings.max_request_seconds
    if wants_event_stream(request.headers.get("accept")):
        return stream_response(events, seconds=seconds)
    try:
        return await guarded(request, collect(events), seconds=seconds)
    except LimitExceededError as exc:
        return error_response(ApiError.from_limit(exc))
