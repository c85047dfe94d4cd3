"""The options of ``langchain-references factuality``: its parser, without the command's code.

The command itself (:mod:`langchain_references.cli.factuality`) loads when it runs
(:class:`~langchain_references.cli._common.LazyCommand`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from langchain_references.cli._common import (
    LazyCommand,
    add_engine_options,
    add_judge_options,
    add_run_options,
    positive_int,
)

__all__ = ["DESCRIPTION", "HELP", "REQUIRES", "configure_parser", "run"]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ("numpy", "httpx")
#: The command (``args.func``), imported when it runs.
run: Final = LazyCommand("langchain_references.cli.factuality")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add ``--input``, ``--version``, the judge options and the pipeline's to ``parser``.

    Args:
        parser: The ``factuality`` subcommand's parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="FactReasoner .json/.jsonl")
    parser.add_argument(
        "--version", type=int, choices=(1, 2, 3), default=2, help="FR graph version (default: 2)"
    )
    add_judge_options(parser)
    parser.add_argument(
        "--llm",
        metavar="PROVIDER:MODEL",
        help="chat model that atomizes records without atoms (default: the judge's model)",
    )
    parser.add_argument("--output", type=Path, help="write FactReasoner results (JSONL) here")
    parser.add_argument("--top-k", type=positive_int, help="contexts per atom (default: all given)")
    parser.add_argument(
        "--method",
        choices=("auto", "exact", "bp", "gibbs"),
        default="auto",
        help="inference method (default: auto)",
    )
    add_run_options(parser)
    add_engine_options(parser)


HELP: Final = "FactReasoner-style long-form factuality of responses"
DESCRIPTION: Final = "Score the atoms of responses against their contexts (FR1/FR2/FR3)."
