"""Resuming and rate limits: the run cache, ``--resume`` and ``--rate``.

Every run records the items it finishes in a run cache (``--cache FILE``, default
:func:`~langchain_references.services.runcache.default_run_cache_path`; ``--no-cache`` turns it
off); ``--resume`` reads them back, so only what did not finish is run again
(:func:`open_run_cache`). ``--rate KIND=RPS[/N]`` sets the limits of ``search``, ``fetch``
(per host) and ``judge`` (an LLM judge's requests), shared by every worker of the run
(:func:`build_limiter`, defaults :data:`~langchain_references.services.ratelimit.DEFAULT_LIMITS`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from langchain_references.cli._errors import CLIError
from langchain_references.cli._progress import add_quiet_option
from langchain_references.services.ratelimit import DEFAULT_LIMITS, RateLimit, RateLimiter
from langchain_references.services.runcache import RunCache, RunCacheError, default_run_cache_path

__all__ = ["add_run_options", "build_limiter", "open_run_cache", "rate_option", "reuse_note"]


def rate_option(value: str) -> tuple[str, RateLimit]:
    """``argparse`` type of ``--rate``: ``KIND=RPS[/CONCURRENT]``.

    Args:
        value: E.g. ``search=0.5/1`` or ``fetch=4/4``.

    Returns:
        ``(kind, limit)``.

    Raises:
        argparse.ArgumentTypeError: If the kind is not one of ``search``, ``fetch``, ``judge``
            or the limit is malformed.
    """
    kind, equals, limit = value.partition("=")
    if not equals or kind.strip() not in DEFAULT_LIMITS:
        raise argparse.ArgumentTypeError(
            f"expected KIND=RPS[/CONCURRENT] with KIND one of {', '.join(DEFAULT_LIMITS)},"
            f" got {value!r}"
        )
    try:
        return kind.strip(), RateLimit.parse(limit)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Add a batch command's options: ``--quiet``, ``--resume``, ``--cache``, ``--rate``...

    ``--quiet``, ``--resume``, ``--cache FILE``, ``--no-cache`` and ``--rate KIND=RPS[/N]``.

    Args:
        parser: The parser of a command that runs a batch.
    """
    add_quiet_option(parser)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="reuse what an earlier run with the same inputs, settings and judge finished",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        metavar="FILE",
        help=f"run cache (SQLite; default: {default_run_cache_path()})",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="record nothing (a later --resume redoes all)"
    )
    defaults = ", ".join(
        f"{kind}={limit.requests_per_second:g}/{limit.max_concurrent}"
        for kind, limit in DEFAULT_LIMITS.items()
    )
    parser.add_argument(
        "--rate",
        type=rate_option,
        action="append",
        default=[],
        metavar="KIND=RPS[/N]",
        help=f"requests per second and in flight of search, fetch (per host) or judge "
        f"(default: {defaults})",
    )


def open_run_cache(args: argparse.Namespace) -> RunCache | None:
    """The run cache of ``--cache``/``--resume``/``--no-cache``.

    Args:
        args: Parsed arguments (:func:`add_run_options`).

    Returns:
        The cache (reusing with ``--resume``), or ``None`` with ``--no-cache``.

    Raises:
        CLIError: If ``--resume`` and ``--no-cache`` are both given, or the file cannot be
            opened.
    """
    resume = bool(getattr(args, "resume", False))
    if getattr(args, "no_cache", False):
        if resume:
            raise CLIError("--resume needs the run cache: drop --no-cache")
        return None
    path = getattr(args, "cache", None) or default_run_cache_path()
    try:
        return RunCache(path, reuse=resume, keep_going=True)
    except RunCacheError as exc:
        raise CLIError(str(exc)) from exc


def build_limiter(args: argparse.Namespace) -> RateLimiter:
    """The rate limiter of ``--rate`` (over the default limits).

    The defaults are :data:`~langchain_references.services.ratelimit.DEFAULT_LIMITS`.

    Args:
        args: Parsed arguments (:func:`add_run_options`); ``args.limiter_backend``, when the
            driver of a Ray run set it, holds the limits' state shared by all the actors.

    Returns:
        The limiter, shared by every worker of the run.
    """
    limits = dict(DEFAULT_LIMITS)
    for kind, limit in getattr(args, "rate", None) or []:
        limits[kind] = limit
    return RateLimiter(limits, backend=getattr(args, "limiter_backend", None))


def reuse_note(reused: int, total: int, what: str, cache: RunCache | None) -> str:
    """The line that says how many items a run reused, e.g. ``reused 3 of 5 statement(s)...``.

    Args:
        reused: Items taken from the cache.
        total: Items of the run.
        what: The items' name, e.g. ``"statement(s)"``.
        cache: The run cache (``None``: nothing said).

    Returns:
        The line (no newline), or ``""`` when not resuming.
    """
    if cache is None or not cache.reuse:
        return ""
    return f"resumed: reused {reused} of {total} {what} from {cache.path}"
