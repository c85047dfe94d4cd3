"""``langchain-references serve``: run the evidence service with uvicorn.

``serve --index NAME [--persist-dir DIR | --chroma-url URL] --host 127.0.0.1 --port 8000
--workers N`` serves an index built by ``index build``: the climate-evidence-compatible API
(``/api/...``), ``/healthcheck`` and the OpenAPI docs at ``/docs``. Several workers share one
index (an embedded directory or a Chroma server); no per-user state is kept. The service
calls no Chroma write (no add, upsert, update, delete, modify, create or delete of a
collection); Chroma's embedded client itself writes to the directory when it opens it (see the
evidence service docs), so the directory must stay writable.

The judge of every verdict is ``--judge``: ``heuristic`` (the default: offline, rough, not an
NLI model), ``heuristic-lexical``, ``llm:PROVIDER:MODEL`` (an LLM judge; needs the ``llm``
extra, the provider's package and its API key, checked before the service starts) or
``nli:MODEL`` (an ONNX cross-encoder NLI model: a local folder or ``.onnx`` file, or a Hugging
Face Hub id; the ``nli`` extra; loaded before the service starts, and a local path is made
absolute for the workers). The start-up line names it, and so does every verdict the service
answers (a ``judge`` key in the JSON, a badge on the web page).

Limits (``--max-body-bytes``, ``--max-claims``, ``--max-top-k``, ``--max-article-chars``) are
answered with 4xx JSON errors naming the limit; ``--api-key-env VAR`` requires
``Authorization: Bearer $VAR``; ``--cors-origin`` turns CORS on for the given origins. Log
lines carry the request id (``X-Request-ID``).

Each client gets a fair share (:mod:`~langchain_references.server.fair`): at most
``--max-client-requests`` heavy requests in flight (the next ``--max-client-queue`` wait their
turn, more are answered 429) and ``--max-client-threads`` of the worker threads at once. A
client is the connection's peer address: ``X-Forwarded-For`` is read only from the
``--trusted-proxy`` addresses (uvicorn's proxy headers are off without one).

``serve`` opens the generation the index's pointer names (see ``index build``) and follows it:
a build that switches the index while it serves is picked up within 5 seconds, or at once by a
search whose generation the build after it deleted (retried there,
:mod:`~langchain_references.server.live`). It refuses at start-up,
with one ``error: ...`` line, an index that has no complete generation: a first build that was
interrupted or failed, a generation missing or short of entries, an interrupted in-place
update, or an index built by an older version that did not mark complete builds.

Exit status: 0 after a clean shutdown, 2 when the service cannot start (the port in use, no
such index, an incomplete index, Chroma unreachable, bad option): one ``error: ...`` line,
before the ``serving ...`` line (the port is checked first).
"""

from __future__ import annotations

import argparse
import errno
import inspect
import os
import socket
from typing import Any, Final, TextIO

from langchain_references.cli._commands import streams
from langchain_references.cli._errors import CLIError
from langchain_references.cli._models import build_judge
from langchain_references.cli.index import open_index
from langchain_references.cli.parsers.serve import (
    DESCRIPTION,
    HELP,
    LIMITS,
    configure_parser,
)
from langchain_references.judges.base import judge_info
from langchain_references.judges.spec import JudgeSpecError, portable_judge_spec
from langchain_references.server.settings import LOOPBACK_HOSTS, ServerSettings, SettingsError

__all__ = [
    "DESCRIPTION",
    "HELP",
    "configure_parser",
    "log_config",
    "run",
    "settings_from_args",
]

#: How long a worker may take to start (load the model, open the index) before uvicorn's
#: supervisor, which checks its workers' health, restarts it.
WORKER_STARTUP_SECONDS: Final = 120
#: Bind addresses that are not host names (every interface).
_WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - names, not a bind
#: The uvicorn factory the workers build the application with.
APP_FACTORY: Final = "langchain_references.server.app:app_from_env"
_DEFAULTS: Final = ServerSettings()


def _allowed_hosts(args: argparse.Namespace) -> tuple[str, ...]:
    """``--allowed-host`` values, or the loopback names; plus ``--host`` if it is a name."""
    hosts = list(args.allowed_host) or list(LOOPBACK_HOSTS)
    if args.host not in _WILDCARDS and args.host.lower() not in hosts:
        hosts.append(args.host.lower())
    return tuple(hosts)


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    """The server settings of the parsed options.

    Args:
        args: Arguments parsed by :func:`configure_parser`'s options.

    Returns:
        The settings.

    Raises:
        CLIError: If the API key variable is unset or a setting is invalid (the judge spec
            too: a local NLI model's path is made absolute, as the workers read it).
    """
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise CLIError(f"--api-key-env: the variable {args.api_key_env} is unset or empty")
    try:
        judge = portable_judge_spec(args.judge)  # the workers may not share our directory
    except JudgeSpecError as exc:
        raise CLIError(f"judge {exc}") from None
    try:
        return ServerSettings(
            index_name=args.name,
            persist_dir=args.persist_dir,
            chroma_url=args.chroma_url,
            embeddings=args.embeddings,
            default_top_k=min(_DEFAULTS.default_top_k, args.max_top_k),
            api_key=api_key,
            api_key_env=args.api_key_env,
            cors_origins=tuple(args.cors_origin),
            allowed_hosts=_allowed_hosts(args),
            search_backend=args.search,
            judge=judge,
            retrieval=args.retrieval,
            **{name: getattr(args, name) for name, _ in LIMITS},
        )
    except SettingsError as exc:
        raise CLIError(str(exc)) from exc


def log_config(level: str) -> dict[str, Any]:
    """The logging configuration of the service (uvicorn applies it in every worker).

    Args:
        level: The level of this package's and uvicorn's loggers.

    Returns:
        A :func:`logging.config.dictConfig` dictionary whose lines carry the pid and the
        request id.
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "langchain_references.server.app.RequestIdFilter"}},
        "formatters": {
            "service": {
                "()": "langchain_references.server.app.EscapingFormatter",
                "format": "%(asctime)s %(levelname)s pid=%(process)d request=%(request_id)s "
                "%(name)s: %(message)s",
            }
        },
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "service",
                "filters": ["request_id"],
            }
        },
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
            "langchain_references": {
                "handlers": ["stderr"],
                "level": level.upper(),
                "propagate": False,
            },
        },
    }


def check_port(host: str, port: int) -> None:
    """Fail now, in one line, if ``host:port`` cannot be listened on (busy, or not ours).

    The test binds the address as uvicorn does (``SO_REUSEADDR``: a port whose earlier
    connections are closing is free), then lets it go.

    Raises:
        CLIError: If the address is in use or cannot be bound.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CLIError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CLIError(
                    f"port {port} on {host} is in use (another serve?): choose another --port"
                ) from exc
            raise CLIError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``serve`` until interrupted.

    Args:
        args: Arguments parsed by :func:`configure_parser`'s options.
        out: Where the start-up line goes (stdout by default).
        err: Unused (uvicorn logs to stderr).

    Returns:
        0 after shutdown.

    Raises:
        CLIError: If the settings are invalid, the index cannot be opened (missing, or
            without a complete generation) or the judge cannot be loaded (missing package or
            API key).
    """
    import uvicorn

    out, _ = streams(out, err)
    settings = settings_from_args(args)
    check_port(args.host, args.port)  # before the slow part, and before announcing it
    judge, _model = build_judge(settings.judge)  # fail now (package, API key), not in a worker
    index = open_index(args, create=False)  # fail now, not in every worker
    out.write(
        f"serving index {args.name!r} (generation {index.generation!r}, {index.count()} "
        f"entries) from {index.location} at "
        f"http://{args.host}:{args.port} with {args.workers} worker(s); docs at /docs\n"
        f"judge: {judge_info(judge)}\nretrieval: {index.retrieval}\n"
    )
    out.flush()
    common: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_config": log_config(args.log_level),
        "access_log": False,  # the service logs each request itself, with its id
        # on SIGTERM, requests in flight are cancelled after this (their work stops with them)
        "timeout_graceful_shutdown": args.graceful_timeout,
        # a client is its address (its fair share): X-Forwarded-For only from trusted proxies
        "proxy_headers": bool(args.trusted_proxy),
    }
    if args.trusted_proxy:
        common["forwarded_allow_ips"] = list(args.trusted_proxy)
    if args.workers == 1:
        from langchain_references.server.app import build_services, create_app

        app = create_app(settings, services=build_services(settings, index=index, judge=judge))
        uvicorn.run(app, **common)
    else:
        os.environ.update(settings.to_env())
        if "timeout_worker_healthcheck" in inspect.signature(uvicorn.Config).parameters:
            # a worker loads the embedding model and opens the index before it answers
            # uvicorn's health check: on a slow or busy machine that takes more than its 5 s
            common["timeout_worker_healthcheck"] = WORKER_STARTUP_SECONDS
        uvicorn.run(APP_FACTORY, factory=True, workers=args.workers, **common)
    return 0
