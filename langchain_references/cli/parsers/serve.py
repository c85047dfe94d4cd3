"""The options of ``langchain-references serve``: its parser, without the command's code.

The command itself (:mod:`langchain_references.cli.serve`: uvicorn, the judges) loads when it
runs (:class:`~langchain_references.cli._commands.LazyCommand`).
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
from typing import Any, Final

from langchain_references.cli._args import add_retrieval_option, non_blank, positive_int
from langchain_references.cli._commands import LazyCommand
from langchain_references.cli.parsers.index import add_location_options
from langchain_references.server.settings import ServerSettings

__all__ = [
    "DESCRIPTION",
    "GRACEFUL_SECONDS",
    "HELP",
    "LIMITS",
    "REQUIRES",
    "configure_parser",
    "proxy_address",
    "run",
]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ()
#: The command (``args.func``), imported when it runs.
run: Final = LazyCommand("langchain_references.cli.serve")

HELP: Final = "run the evidence service (HTTP API)"
DESCRIPTION: Final = (
    "Serve an evidence index over HTTP: the climate-evidence-compatible API, /healthcheck and "
    "the docs at /docs. --judge sets the judge of the verdicts (default: the offline "
    "heuristic, which is rough)."
)
#: Seconds the requests in flight get to finish on SIGTERM before uvicorn cancels them.
GRACEFUL_SECONDS: Final = 5
#: The request limits: each is an option ``--max-...`` and the :class:`ServerSettings` field
#: of its name, with what it bounds.
LIMITS: Final = (
    ("max_body_bytes", "largest request body in bytes"),
    ("max_claims", "most claims per request"),
    ("max_top_k", "largest top_k"),
    ("max_claim_chars", "longest claim"),
    ("max_article_chars", "longest article or text to split"),
    ("max_sentences", "most sentences of an article"),
    ("max_judged", "most passages judged per verify request"),
    ("max_request_seconds", "time budget of a request, in seconds"),
    ("max_client_requests", "heavy requests (POST) of one client in flight at once; more wait"),
    ("max_client_queue", "heavy requests of one client waiting their turn (429 past them)"),
    ("max_client_threads", "worker threads one client's work may use at once"),
)
#: The defaults of :class:`ServerSettings` (read from its fields: making one checks the judge
#: spec, which imports the judges).
_DEFAULTS: Final[dict[str, Any]] = {
    field.name: field.default
    for field in dataclasses.fields(ServerSettings)
    if field.default is not dataclasses.MISSING
}


def proxy_address(value: str) -> str:
    """A ``--trusted-proxy`` value: an IP address, a network (``10.0.0.0/8``) or ``*``.

    Args:
        value: The option's value.

    Returns:
        The value, as written.

    Raises:
        argparse.ArgumentTypeError: If it is none of those.
    """
    if value != "*":
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not an IP address, a network or '*'"
            ) from None
    return value


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``serve``.

    Args:
        parser: The ``serve`` parser.
    """
    parser.add_argument(
        "--index", dest="name", required=True, type=non_blank, help="the index to serve"
    )
    add_location_options(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument(
        "--workers", type=positive_int, default=1, metavar="N", help="processes (default: 1)"
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="require 'Authorization: Bearer <key>', the key read from this variable",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow this origin (repeatable; CORS is off by default)",
    )
    for name, what in LIMITS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=positive_int,
            default=_DEFAULTS[name],
            metavar="N",
            help=f"{what} (default: {_DEFAULTS[name]})",
        )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST",
        help="answer requests for this Host name (repeatable; '*.domain', '*' for any); "
        "default: the loopback names and --host",
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        type=proxy_address,
        metavar="ADDR",
        help="a reverse proxy (address or network, '*' for any) whose X-Forwarded-For names "
        "the client (repeatable); by default the header is ignored and a client is the "
        "connection's peer",
    )
    parser.add_argument(
        "--graceful-timeout",
        type=positive_int,
        default=GRACEFUL_SECONDS,
        metavar="S",
        help="on SIGTERM, seconds the requests in flight get before they are cancelled "
        f"(default: {GRACEFUL_SECONDS})",
    )
    parser.add_argument(
        "--search",
        metavar="SPEC",
        help="web search back-end of /v1/factcheck: ddgs, tavily, bing, searx[:URL] or "
        "recorded:FILE (default: the index only)",
    )
    parser.add_argument(
        "--judge",
        default=_DEFAULTS["judge"],
        metavar="SPEC",
        help="the judge of the verdicts: heuristic (offline, rough), heuristic-lexical, "
        "llm:PROVIDER:MODEL or nli:MODEL (an ONNX cross-encoder: a local folder or .onnx "
        "file, or a Hugging Face Hub id) (default: heuristic)",
    )
    add_retrieval_option(parser, "the evidence endpoints and the fact-check relevance stage rank")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level (default: info)",
    )
