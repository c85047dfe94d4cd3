"""The options of ``langchain-references citations``: its parser, without the command's code.

The command itself (:mod:`langchain_references.cli.citations`) loads when it runs
(:class:`~langchain_references.cli._commands.LazyCommand`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from langchain_references.cli._args import positive_int
from langchain_references.cli._commands import LazyCommand
from langchain_references.cli._engines import add_engine_options
from langchain_references.cli._models import add_judge_options
from langchain_references.cli._runs import add_run_options

__all__ = ["DESCRIPTION", "HELP", "REQUIRES", "configure_parser", "run"]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ()
#: The command (``args.func``), imported when it runs.
run: Final = LazyCommand("langchain_references.cli.citations")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add ``--input``, ``--json``, ``--min-words`` and the judge options to ``parser``.

    Args:
        parser: The ``citations`` subcommand's parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="answers JSONL")
    add_judge_options(parser)
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    parser.add_argument(
        "--min-words",
        type=positive_int,
        default=4,
        help="verification-worthy sentences have at least this many words (default: 4)",
    )
    add_run_options(parser)
    add_engine_options(parser)


HELP: Final = "citation recall and precision of cited answers"
DESCRIPTION: Final = "Check that the [n](id=k) citations of answers support their sentences."
