"""The ``langchain-references`` command: ``factcheck``, ``factuality``, ``citations``, ``demo``.

One entry point, :func:`main`, run by the ``langchain-references`` console script and by
``python -m langchain_references.cli``. Each command is a module of this package with
``run(args, *, out=None, err=None)``, and its parser (``HELP``, ``DESCRIPTION``,
``configure_parser(parser)``) is the module of the same name in
:mod:`~langchain_references.cli.parsers` (registered by
:func:`~langchain_references.cli._commands.add_command`, ``run`` imported when it runs):

* :mod:`~langchain_references.cli.factcheck`: check statements against web evidence;
* :mod:`~langchain_references.cli.factuality`: FactReasoner-style long-form factuality;
* :mod:`~langchain_references.cli.citations`: citation recall and precision of cited answers;
* :mod:`~langchain_references.cli.demo`: a RAG answer over the offline demo corpus.

Shared pieces, one module per concern: the error (:mod:`~langchain_references.cli._errors`),
registering and running a command (:mod:`~langchain_references.cli._commands`), argument types
(:mod:`~langchain_references.cli._args`), files (:mod:`~langchain_references.cli._files`),
models, API keys and judges (:mod:`~langchain_references.cli._models`), the run cache and
``--rate`` (:mod:`~langchain_references.cli._runs`), the engines
(:mod:`~langchain_references.cli._engines`), progress
(:mod:`~langchain_references.cli._progress`) and tables
(:mod:`~langchain_references.cli._tables`).

Ctrl-C stops any command at once with one ``error: interrupted; ...`` line saying what was kept
(a command adds it as a note to the ``KeyboardInterrupt``) and exit status 130, without a
traceback. ``langchain-references --version`` prints the installed version.

Logging: stderr shows warnings and errors only, of this package and of the libraries it uses
alike (bm25s, Ray, httpx, chromadb... whatever level a library gives its own logger), each
distinct message once; ``-v`` (before or after the command) shows INFO lines too, ``-vv``
DEBUG lines. A host that configured logging before calling :func:`main` keeps its own.

The parser is built from the light modules of :mod:`langchain_references.cli.parsers` (the
options of each command, defined there once): ``--version``, ``--help`` and every command's
``--help`` import no judge, model, embeddings, tracer or engine; a command's module is imported
when it runs. A command whose optional dependencies are not installed (its ``REQUIRES``, looked
up without importing them; e.g. ``factuality`` on the core install) still appears in
``--help``, and running it prints one ``error:`` line naming the extra to install, as does any
:class:`~langchain_references._optional.MissingDependencyError` a command raises.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

from langchain_references._optional import MissingDependencyError, missing_dependency
from langchain_references.cli._commands import (
    Command,
    CommandParser,
    VersionAction,
    add_command,
    streams,
)
from langchain_references.cli._errors import CLIError

__all__ = ["CLIError", "build_parser", "main"]

#: Exit status of a command that cannot run as asked (also argparse's for a usage error).
USAGE_ERROR = 2
#: Exit status of an interrupted command (128 + SIGINT, as shells report it).
INTERRUPTED = 130

#: The commands, in ``--help`` order, and the extra of this project each one needs.
_COMMANDS: Final[dict[str, str | None]] = {
    "factcheck": "factcheck",
    "factuality": "factuality",
    "citations": None,
    "demo": "demo",
    "index": "server",
    "serve": "server",
}


def _unavailable_command(subparsers: Any, name: str, error: MissingDependencyError) -> None:
    """Register ``name`` as a command that only reports its missing extra.

    It takes any arguments (its options are unknown without its module): ``-h``/``--help``
    prints the install line, anything else raises ``error``, which :func:`main` reports.
    """
    parser = subparsers.add_parser(
        name,
        help=f"(not installed: {_install_line(error)})",
        description=str(error),
        add_help=False,
        prefix_chars="\0",  # no options: every argument, "--input" included, is collected
    )
    parser.add_argument("arguments", nargs="*")

    def run(
        args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> int:
        if {"-h", "--help"} & set(args.arguments):
            (out or sys.stdout).write(f"usage: {parser.prog} ...\n\n{error}\n")
            return 0
        raise error

    parser.set_defaults(func=run)


def _install_line(error: MissingDependencyError) -> str:
    """Return the short install command of ``error``'s extra, e.g. ``pip install ".[demo]"``."""
    return f'pip install ".[{error.extra}]"'


def build_parser() -> argparse.ArgumentParser:
    """Build the ``langchain-references`` parser with all subcommands.

    Returns:
        The parser; ``parse_args`` stores the command's ``run`` as ``args.func``.
    """
    parser = argparse.ArgumentParser(
        prog="langchain-references",
        description="Verifiable LLM answers: fact-check statements, score long-form "
        "factuality, check an answer's citations, or run the streaming-citations demo.",
    )
    parser.add_argument("--version", action=VersionAction, help="print the version")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )
    for name, extra in _COMMANDS.items():
        # Only the command's parser module (light): the command's own loads when it runs.
        command = importlib.import_module(f"{__name__}.parsers.{name}")
        error = _missing_requirement(command.REQUIRES, name, extra)
        if error is not None:  # its extra is not installed: --help names it, a run reports it
            _unavailable_command(subparsers, name, error)
        else:
            _add_verbose(add_command(subparsers, name, command), default=argparse.SUPPRESS)
    _add_verbose(parser, default=0)
    return parser


def _missing_requirement(
    modules: Sequence[str], name: str, extra: str | None
) -> MissingDependencyError | None:
    """The error of the first of ``modules`` that is not installed (none imported), else None."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a finder that refuses it
            found = False
        if not found:
            missing = ModuleNotFoundError(f"No module named {module!r}", name=module)
            return missing_dependency(missing, extra, feature=f"the {name} command")
    return None


def _add_verbose(parser: argparse.ArgumentParser, *, default: Any) -> None:
    """Add ``-v/--verbose`` (counted; a subcommand's leaves the top level's value alone)."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default,
        help="log INFO lines on stderr (-vv: DEBUG lines); by default warnings only",
    )


def _exit_status(code: object) -> int:
    """The exit status of a ``SystemExit`` code (``None`` is 0, a message is 1)."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


class _FirstOccurrence(logging.Filter):
    """Lets each distinct log message through once.

    A dead network or a missing key fails every call the same way: one warning says it, the
    command's summary (``k of n judgements failed``) counts them.
    """

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[str, int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is the first with its logger, level and message."""
        key = (record.name, record.levelno, record.getMessage())
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


def log_level(verbose: int) -> int:
    """The level of the lines stderr shows for ``-v`` given ``verbose`` times.

    Args:
        verbose: How many ``-v``.

    Returns:
        ``WARNING`` (none), ``INFO`` (``-v``) or ``DEBUG`` (``-vv`` and more).
    """
    return (logging.WARNING, logging.INFO)[verbose] if verbose < 2 else logging.DEBUG


def _configure_logging(verbose: int = 0) -> None:
    """Log lines of ``log_level(verbose)`` and up to stderr, each distinct message once.

    The level is set on the handler too: a library that sets its own logger to DEBUG (bm25s
    does, at import) still shows nothing below it. Logging configured already (a host
    application calling :func:`main`) is left alone.

    Args:
        verbose: How many ``-v``.
    """
    level = log_level(verbose)
    root = logging.getLogger()
    before = list(root.handlers)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in root.handlers:
        if handler not in before:
            handler.setLevel(level)
            handler.addFilter(_FirstOccurrence())


def _interrupted(exc: KeyboardInterrupt, err: TextIO) -> int:
    """Report Ctrl-C in one line, with the notes of ``exc`` (what the command kept)."""
    isatty = getattr(err, "isatty", None)
    clear = "\r\x1b[K" if isatty is not None and isatty() else ""  # a live progress line
    notes: list[str] = getattr(exc, "__notes__", [])
    err.write(clear + "; ".join(["error: interrupted", *notes]) + "\n")
    err.flush()
    return INTERRUPTED


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line.

    Usage errors (argparse's ``usage: ...`` and ``error: ...`` lines), :class:`CLIError` and a
    missing optional dependency (one ``error: ...`` line, naming the extra to install) go to
    ``err`` and give exit status 2, without a traceback. Ctrl-C gives one
    ``error: interrupted; ...`` line (with what the command kept) and exit status 130.

    Args:
        argv: Arguments, without the program name (``sys.argv[1:]`` by default).
        out: Where the command's results and ``--help`` go (stdout by default).
        err: Where progress, notices and errors go (stderr by default).

    Returns:
        The exit status: 0 on success, 1 when some items failed (the command says which),
        2 when the command cannot run as asked, 130 when interrupted (Ctrl-C).
    """
    out, err = streams(out, err)
    try:
        return _main(argv, out, err)
    except KeyboardInterrupt as exc:
        return _interrupted(exc, err)


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already reported on err
        return _exit_status(exc.code)
    _configure_logging(getattr(args, "verbose", 0))
    run: Command = args.func
    try:
        return run(args, out=out, err=err)
    except CLIError as exc:
        err.write(f"error: {exc}\n")
        return USAGE_ERROR
    except ImportError as exc:
        error = missing_dependency(
            exc, _COMMANDS.get(args.command), feature=f"the {args.command} command"
        )
        if error is None:  # not a missing extra: a bug, let it show
            raise
        err.write(f"error: {error}\n")
        return USAGE_ERROR
