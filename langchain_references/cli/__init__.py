"""The ``langchain-references`` command: ``factcheck``, ``factuality``, ``citations``, ``demo``.

One entry point, :func:`main`, run by the ``langchain-references`` console script and by
``python -m langchain_references.cli``. Each command is a module of this package with
``add_parser(subparsers)`` and ``run(args, *, out=None, err=None)``:

* :mod:`~langchain_references.cli.factcheck`: check statements against web evidence;
* :mod:`~langchain_references.cli.factuality`: FactReasoner-style long-form factuality;
* :mod:`~langchain_references.cli.citations`: citation recall and precision of cited answers;
* :mod:`~langchain_references.cli.demo`: a RAG answer over the offline demo corpus.

Shared pieces (``CLIError``, argument types, model and judge loading, tables) are in
:mod:`~langchain_references.cli._common`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Sequence
from typing import TextIO

from langchain_references.cli._common import CLIError, Command, streams

__all__ = ["CLIError", "build_parser", "main"]

#: Exit status of a command that cannot run as asked (also argparse's for a usage error).
USAGE_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    """Build the ``langchain-references`` parser with all subcommands.

    Returns:
        The parser; ``parse_args`` stores the command's ``run`` as ``args.func``.
    """
    # Imported here, so that importing one command module does not load the others.
    from langchain_references.cli import citations, demo, factcheck, factuality

    parser = argparse.ArgumentParser(
        prog="langchain-references",
        description="Verifiable LLM answers: fact-check statements, score long-form "
        "factuality, check an answer's citations, or run the streaming-citations demo.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (factcheck, factuality, citations, demo):
        command.add_parser(subparsers)
    return parser


def _exit_status(code: object) -> int:
    """The exit status of a ``SystemExit`` code (``None`` is 0, a message is 1)."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line.

    Usage errors (argparse's ``usage: ...`` and ``error: ...`` lines) and :class:`CLIError`
    (one ``error: ...`` line) go to ``err`` and give exit status 2, without a traceback.

    Args:
        argv: Arguments, without the program name (``sys.argv[1:]`` by default).
        out: Where the command's results and ``--help`` go (stdout by default).
        err: Where progress, notices and errors go (stderr by default).

    Returns:
        The exit status: 0 on success, 1 when some items failed (the command says which),
        2 when the command cannot run as asked.
    """
    out, err = streams(out, err)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already reported on err
        return _exit_status(exc.code)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run: Command = args.func
    try:
        return run(args, out=out, err=err)
    except CLIError as exc:
        err.write(f"error: {exc}\n")
        return USAGE_ERROR
