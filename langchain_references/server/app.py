"""The FastAPI application: the routers, and the operational layer around them.

:func:`create_app` assembles the service: the climate-evidence-compatible routes
(:mod:`~langchain_references.server.compat`), the native ``/v1`` routes and the web page when
their modules (``server.native``, ``server.page``) are installed, the API docs (``/docs``,
``/redoc``: :mod:`~langchain_references.server.docs`, offline, under a CSP), and one ASGI
middleware that

* gives every request an id (the client's ``X-Request-ID`` if it is a sane token, else a new
  one), returned in ``X-Request-ID`` and available to log records through
  :class:`RequestIdFilter`; the worker's pid goes out in ``X-Worker-PID``;
* refuses a body larger than ``max_body_bytes`` (413, JSON naming the limit), by its
  ``Content-Length`` or while it streams in;
* checks the bearer token when an API key is configured (401 JSON); ``/healthcheck``, the
  docs and the web page stay public;
* gives each client a fair share (:mod:`~langchain_references.server.fair`): the request's
  client (its address) is the :data:`~langchain_references.server.fair.current_client` of
  its work, and a heavy request (any method but ``GET``, ``HEAD`` and ``OPTIONS``) waits for
  one of its client's ``max_client_requests`` slots, or is answered 429 (``Retry-After``,
  JSON naming the limit) when ``max_client_queue`` of them wait already or the wait takes
  ``max_request_seconds``.

As the service starts, the event loop's default executor becomes a
:class:`~langchain_references.server.fair.FairExecutor`, which shares its threads (the
embeddings, the index queries, the judge) between the clients whose requests submit jobs.

CORS is added only when origins are configured. Limits a handler detects
(:class:`~langchain_references.server.settings.LimitExceededError`) and index failures are
answered with JSON errors; bad bodies get FastAPI's usual 422.

``uvicorn --factory langchain_references.server.app:app_from_env`` builds the application from
the environment the ``serve`` command sets (:meth:`ServerSettings.from_env`): that is how
``--workers N`` starts identical workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import importlib
import importlib.util
import ipaddress
import json
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Final

from langchain_references._optional import require
from langchain_references.judges.nli import NLIModelError
from langchain_references.judges.spec import JUDGE_SPECS, judge_from_spec
from langchain_references.server.index import EvidenceIndex, EvidenceIndexError, load_embeddings
from langchain_references.server.live import LiveIndex
from langchain_references.server.services import Services
from langchain_references.server.settings import (
    LimitExceededError,
    ServerSettings,
    SettingsError,
)

require("fastapi", "server", feature="The evidence service")

from fastapi import FastAPI, HTTPException, Request  # noqa: E402 - after the extra check
from fastapi.encoders import jsonable_encoder  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse, Response  # noqa: E402

from langchain_references.server import cpu  # noqa: E402
from langchain_references.server.fair import (  # noqa: E402
    ClientBusyError,
    ClientLimiter,
    FairExecutor,
    client_key,
    current_client,
)
from langchain_references.server.guard import ClientDisconnectedError  # noqa: E402

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from langchain_references.factcheck.search import SearchProvider
    from langchain_references.judges import Judge
    from langchain_references.judges.base import JudgeInfo

__all__ = [
    "LIGHT_METHODS",
    "OPTIONAL_ROUTERS",
    "PUBLIC_PATHS",
    "EscapingFormatter",
    "RequestIdFilter",
    "api_description",
    "app_from_env",
    "build_search_backend",
    "build_services",
    "create_app",
    "escape_log",
    "executor_threads",
    "load_judge_model",
]

logger = logging.getLogger(__name__)

#: Modules of this package whose ``router`` is included when they are installed.
OPTIONAL_ROUTERS: Final = ("native", "page")
#: Paths served without the bearer token.
PUBLIC_PATHS: Final = frozenset({"/", "/healthcheck", "/docs", "/docs/oauth2-redirect", "/redoc"})
_PUBLIC_PREFIXES: Final = ("/static/", "/openapi.json")
#: Methods of the light requests (the health check, the page, the docs): never limited per
#: client. Every other request is heavy (every ``POST`` route does the service's work).
LIGHT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_REQUEST_ID: Final = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class RequestIdFilter(logging.Filter):
    """Adds ``record.request_id`` (the current request's id) to every log record it sees.

    Attach it to a handler and use ``%(request_id)s`` in the handler's format.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Set ``record.request_id``; keep the record.

        Args:
            record: The log record.

        Returns:
            Always ``True``.
        """
        record.request_id = _request_id.get()
        return True


def escape_log(text: str) -> str:
    """``text`` with its control characters escaped, as Python writes them: one log line.

    Args:
        text: Untrusted text bound for a log line (a path, a message).

    Returns:
        The text, a line feed as a backslash and ``n``, other control characters as
        ``x``/``u`` escapes.
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class EscapingFormatter(logging.Formatter):
    """A formatter whose messages cannot forge log lines: control characters are escaped.

    The message (with its arguments) is escaped; a traceback keeps its lines.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        """Format the record with its message escaped (:func:`escape_log`).

        Args:
            record: The record (``record.message`` is set by :meth:`format`).

        Returns:
            The formatted line.
        """
        record.message = escape_log(record.message)
        return super().formatMessage(record)


def _host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """Whether a host name matches one of ``patterns`` (``name``, ``*.domain``, ``*``)."""
    for pattern in patterns:
        if pattern == "*" or host == pattern:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False


#: ``Host = uri-host [ ":" port ]`` (RFC 7230 5.4, RFC 3986 3.2.2): a bracketed IPv6
#: address or a name of letters, digits, dots, hyphens and underscores (an IPv4 address is
#: one), digits for the port. No userinfo (``user@host``), path, query, blank or
#: percent-encoding.
_HOST_RE: Final = re.compile(
    r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]"
    r"|(?P<name>[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?))"
    r"(?::(?P<port>[0-9]{1,5}))?"
)


def _host_of(values: list[bytes]) -> str | None:
    """The host name of the request's ``Host`` headers, parsed strictly, or ``None``.

    Exactly one ``Host`` header (RFC 7230 5.4) whose value is ``host[:port]``: a name (lower
    case in the result) or a bracketed IPv6 address (without its brackets in the result), a
    port of at most 65535. Anything else (a doubled header, ``user@host``, a port that is no
    number...) is ``None``, so refused.
    """
    if len(values) != 1:
        return None
    try:
        value = values[0].decode("ascii")
    except UnicodeDecodeError:
        return None
    match = _HOST_RE.fullmatch(value)
    if match is None or (match["port"] is not None and int(match["port"]) > _MAX_PORT):
        return None
    if match["ipv6"] is not None:
        try:
            return ipaddress.IPv6Address(match["ipv6"]).compressed
        except ValueError:
            return None
    return match["name"].lower()


_MAX_PORT: Final = 65_535


def _is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES)


def _json_body(status: int, payload: dict[str, object]) -> tuple[int, bytes]:
    return status, json.dumps(payload).encode()


class _RequestContext:
    """Pure ASGI middleware: request ids, body size, bearer auth, per-client request slots."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        api_key: str | None,
        limiter: ClientLimiter,
        allowed_hosts: Iterable[str] = ("*",),
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = tuple(h.lower() for h in allowed_hosts)
        self.limiter = limiter
        self._api_key = api_key.encode() if api_key is not None else None
        self._pid = str(os.getpid()).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        token = _request_id.set(request_id)
        started = time.perf_counter()
        status_holder = [0]
        extra = [(b"x-request-id", request_id.encode()), (b"x-worker-pid", self._pid)]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder[0] = message["status"]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        client = client_key(scope.get("client"))
        client_token = current_client.set(client)
        try:
            refusal = self._refusal(scope, headers)
            if refusal is not None:
                await self._send_json(send_with_headers, *refusal)
            elif scope["method"] in LIGHT_METHODS:
                await self.app(scope, self._limited(receive), send_with_headers)
            else:
                await self._in_turn(client, scope, receive, send_with_headers)
        finally:
            current_client.reset(client_token)
            logger.info(
                "%s %s %s %d %.1fms",
                request_id,
                escape_log(scope["method"]),
                escape_log(scope["path"]),
                status_holder[0],
                (time.perf_counter() - started) * 1000,
            )
            _request_id.reset(token)

    async def _in_turn(self, client: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a heavy request in one of its client's slots, or answer 429."""
        try:
            await self.limiter.acquire(client)
        except ClientBusyError as exc:
            logger.info("Client %s refused: %s", escape_log(client), exc)
            status, body = _json_body(
                429, {"detail": str(exc), "limit": exc.limit, "maximum": exc.maximum}
            )
            retry = [(b"retry-after", str(exc.retry_after).encode())]
            await self._send_json(send, status, body, retry)
            return
        try:
            await self.app(scope, self._limited(receive), send)
        finally:
            self.limiter.release(client)

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, bytes] | None:
        """A 400, 401 or 413 answer decided from the headers alone, or ``None``."""
        hosts = [value for name, value in scope["headers"] if name == b"host"]
        host = _host_of(hosts)
        if host is None or not _host_allowed(host, self.allowed_hosts):
            shown = escape_log(b", ".join(hosts).decode("latin-1"))[:200]
            return _json_body(
                400, {"detail": f"host {shown!r} is not allowed", "limit": "allowed_hosts"}
            )
        if (
            self._api_key is not None
            and scope["method"] != "OPTIONS"
            and not _is_public(scope["path"])
        ):
            scheme, _, credentials = headers.get(b"authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(
                credentials.strip(), self._api_key
            ):
                return _json_body(401, {"detail": "missing or invalid bearer token"})
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return self._too_large()
        return None

    def _too_large(self) -> tuple[int, bytes]:
        return _json_body(
            413,
            {
                "detail": f"request body exceeds max_body_bytes ({self.max_body_bytes} bytes)",
                "limit": "max_body_bytes",
                "maximum": self.max_body_bytes,
            },
        )

    def _limited(self, receive: Receive) -> Receive:
        """``receive`` that fails with a 413 once the body exceeds the limit."""
        received = 0
        maximum = self.max_body_bytes

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > maximum:
                    # FastAPI re-raises HTTPException from body reading as is.
                    raise HTTPException(
                        413, f"request body exceeds max_body_bytes ({maximum} bytes)"
                    )
            return message

        return limited

    @staticmethod
    async def _send_json(
        send: Send, status: int, body: bytes, extra: Iterable[tuple[bytes, bytes]] = ()
    ) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        headers.extend(extra)
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _limit_exceeded(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, LimitExceededError):  # pragma: no cover - registered for it only
        raise exc
    return JSONResponse(
        {"detail": str(exc), "limit": exc.limit, "maximum": exc.maximum, "actual": exc.actual},
        status_code=exc.status_code,
    )


async def _invalid_body(request: Request, exc: Exception) -> Response:
    """FastAPI's 422, written in ASCII: the errors echo the input, which may not be text."""
    if not isinstance(exc, RequestValidationError):  # pragma: no cover - registered for it only
        raise exc
    body = json.dumps({"detail": jsonable_encoder(exc.errors())}, ensure_ascii=True)
    return Response(body, status_code=422, media_type="application/json")


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.error("request failed: %s: %s", type(exc).__name__, exc)
    body = {"detail": "the request failed on the server", "code": "internal_error"}
    return JSONResponse(body, status_code=500)


async def _client_left(request: Request, exc: Exception) -> Response:
    return Response(status_code=499)  # nobody reads it: the client has gone


async def _index_failed(request: Request, exc: Exception) -> JSONResponse:
    logger.error("evidence index failure: %s", exc)
    return JSONResponse({"detail": f"evidence index unavailable: {exc}"}, status_code=503)


def build_search_backend(spec: str | None) -> SearchProvider | None:
    """The web search back-end of ``/v1/factcheck`` named by ``spec``.

    Args:
        spec: ``None`` (the evidence index only), ``ddgs``, ``tavily``, ``bing``,
            ``searx[:URL]`` or ``recorded:FILE`` (a recording, for tests and benchmarks).

    Returns:
        The provider, or ``None``.

    Raises:
        SettingsError: If the spec is unknown.
        MissingDependencyError: If the provider's package is not installed.
    """
    if spec is None:
        return None
    from langchain_references.factcheck.search.spec import SEARCH_SPECS, search_from_spec

    provider = search_from_spec(spec)
    if provider is None:
        raise SettingsError(f"unknown search back-end {spec!r}: use {SEARCH_SPECS}")
    return provider


def load_judge_model(name: str) -> BaseChatModel:
    """The chat model of an LLM judge (``judge="llm:PROVIDER:MODEL"``), at temperature 0.

    Args:
        name: ``PROVIDER:MODEL`` for ``langchain.chat_models.init_chat_model``.

    Returns:
        The chat model.

    Raises:
        MissingDependencyError: If ``langchain`` is not installed (the ``llm`` extra).
        SettingsError: If the provider's package is missing or the name is unknown.
    """
    chat_models = require("langchain.chat_models", "llm", feature=f"the judge llm:{name}")
    try:
        model: BaseChatModel = chat_models.init_chat_model(name, temperature=0)
    except (ImportError, ValueError) as exc:
        raise SettingsError(f"cannot load the judge llm:{name}: {exc}") from exc
    return model


def build_services(
    settings: ServerSettings, *, index: EvidenceIndex | None = None, judge: Judge | None = None
) -> Services:
    """Open what the handlers share: the index (never written to), the judge, the search.

    Args:
        settings: The server's settings.
        index: The index, if already open (else opened from ``settings``).
        judge: The judge, if already built (else built from ``settings.judge``).

    Returns:
        The services.

    Raises:
        IndexNotFoundError: If the index does not exist.
        IncompleteIndexError: If it has no complete generation (an interrupted build...).
        EvidenceIndexError: If Chroma cannot be reached.
        SettingsError: If the search back-end is unknown or the judge cannot be loaded (an
            LLM judge's provider, an NLI judge's model files or the Hub).
        MissingDependencyError: If the judge needs a package that is not installed.
    """
    if judge is None:
        try:
            judge, _ = judge_from_spec(settings.judge, load_model=load_judge_model)
        except NLIModelError as exc:
            raise SettingsError(f"cannot load the judge nli:{exc}") from exc
    if index is None:
        index = EvidenceIndex.open(
            settings.index_name,
            persist_dir=settings.resolved_persist_dir,
            chroma_url=settings.chroma_url,
            embeddings=load_embeddings(settings.embeddings),
            retrieval=settings.retrieval,
        )
    index.embeddings.embed_query("warm-up")  # load the model now, not on the first request
    return Services(
        settings=settings,
        index=index,
        judge=judge,
        search=build_search_backend(settings.search_backend),
    )


def _optional_routers(names: Iterable[str]) -> list[str]:
    """The optional router modules that are installed (their import errors are not hidden)."""
    return [name for name in names if importlib.util.find_spec(f"{__package__}.{name}") is not None]


#: Modules of the functions the handlers run in the CPU worker process (imported at start-up).
CPU_BOUND_MODULES: Final = (
    "langchain_references.server.article",
    "langchain_references.server.index",
)


def _workers_started(task: asyncio.Task[None]) -> None:
    """Log a failed start of the CPU workers (each request then starts one as it needs it)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.warning("the CPU worker processes did not start ahead of requests: %r", error)


def executor_threads() -> int:
    """Threads of the service's :class:`FairExecutor`: as many as asyncio's default pool.

    Returns:
        ``min(32, CPUs + 4)``.
    """
    return min(32, (os.cpu_count() or 1) + 4)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Share the worker threads between clients; start the CPU worker processes.

    The event loop's default executor becomes a :class:`FairExecutor` (its previous one, if
    the loop had made one already, is left to finish its jobs). The service answers at once
    (its health check first); a request that needs a CPU worker before they are up waits for
    one. Starting them takes a few seconds (their imports), more on a busy machine.
    """
    settings: ServerSettings = app.state.services.settings
    executor = FairExecutor(executor_threads(), per_client=settings.max_client_threads)
    asyncio.get_running_loop().set_default_executor(executor)
    starting = asyncio.create_task(cpu.start(*CPU_BOUND_MODULES))
    starting.add_done_callback(_workers_started)
    try:
        yield
    finally:
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await starting


def api_description(judge: JudgeInfo) -> str:
    """The description of the API in ``/docs``: what it serves, and the judge of its verdicts.

    Args:
        judge: The service's judge.

    Returns:
        Markdown: the service, the judge every verdict names (its ``judge`` key) and the specs
        an operator chooses it with (``serve --judge SPEC``, :data:`JUDGE_SPECS`).
    """
    *first, last = (f"`{spec}`" for spec in JUDGE_SPECS)
    return (
        "Evidence retrieval and claim verification over an evidence index; compatible with "
        "the climate evidence API (`/api/...`).\n\n"
        f"**Judge of the verdicts**: {judge}. Every verdict names it (a `judge` key: `kind`, "
        "`model`, `description`; an NLI judge is named after its model). The operator sets "
        f"it with `langchain-references serve --judge SPEC`: {', '.join(first)} or {last} "
        "(an ONNX cross-encoder: a local folder or `.onnx` file, or a Hugging Face Hub id)."
    )


def create_app(settings: ServerSettings, *, services: Services | None = None) -> FastAPI:
    """Build the service's application.

    Args:
        settings: Limits, auth, CORS and the index location.
        services: What the handlers share; built from ``settings`` by
            :func:`build_services` when omitted (opening the index, loading the judge). Its
            :class:`EvidenceIndex` is wrapped in a
            :class:`~langchain_references.server.live.LiveIndex`, which follows the builds
            that switch the index while it serves.

    Returns:
        The FastAPI application (OpenAPI docs at ``/docs`` and ``/redoc``, served offline by
        :mod:`~langchain_references.server.docs`).
    """
    from langchain_references.server import compat, docs

    if services is None:
        services = build_services(settings)
    index = services.index
    if isinstance(index, EvidenceIndex):  # follow the builds that switch it while it serves
        index = LiveIndex(index)
    if services.settings is not settings or index is not services.index:
        services = Services(
            settings=settings, index=index, judge=services.judge, search=services.search
        )
    app = FastAPI(
        title="langchain-references evidence service",
        description=api_description(services.judge_info),
        docs_url=None,  # served offline by server.docs, under a CSP
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        lifespan=_lifespan,
    )
    app.state.services = services
    app.include_router(compat.router)
    if docs.available():
        app.include_router(docs.router)
    else:
        logger.warning("no API docs at /docs: install fastapi-offline (in the server extra)")
    for name in _optional_routers(OPTIONAL_ROUTERS):
        module = importlib.import_module(f"{__package__}.{name}")
        app.include_router(module.router)
    app.add_exception_handler(LimitExceededError, _limit_exceeded)
    app.add_exception_handler(EvidenceIndexError, _index_failed)
    app.add_exception_handler(ClientDisconnectedError, _client_left)
    app.add_exception_handler(RequestValidationError, _invalid_body)
    app.add_exception_handler(Exception, _unexpected)  # JSON, never a plain-text 500
    app.add_middleware(
        _RequestContext,
        max_body_bytes=settings.max_body_bytes,
        api_key=settings.api_key,
        allowed_hosts=settings.allowed_hosts,
        limiter=ClientLimiter(
            per_client=settings.max_client_requests,
            queue=settings.max_client_queue,
            wait_seconds=settings.max_request_seconds,
        ),
    )
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
            expose_headers=["X-Request-ID", "X-Worker-PID"],
        )
    return app


def app_from_env() -> FastAPI:
    """Build the application from the environment (the uvicorn factory of the workers).

    Returns:
        ``create_app(ServerSettings.from_env())``.
    """
    return create_app(ServerSettings.from_env())
