"""The options of ``langchain-references factuality``: its parser, without the command's code.

The command itself (:mod:`langchain_references.cli.factuality`) loads when it runs
(:class:`~langchain_references.cli._commands.LazyCommand`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from langchain_references.cli._args import positive_int
from langchain_references.cli._commands import LazyCommand, write_version
from langchain_references.cli._engines import add_engine_options
from langchain_references.cli._models import add_judge_options
from langchain_references.cli._runs import add_run_options

__all__ = ["DESCRIPTION", "HELP", "REQUIRES", "configure_parser", "run"]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ("numpy", "httpx")
#: The command (``args.func``), imported when it runs.
run: Final = LazyCommand("langchain_references.cli.factuality")


class _VersionOrGraphVersion(argparse.Action):
    """``factuality --version``: alone, the program's version; with ``N``, ``--graph-version``.

    ``--version N`` is the old spelling of ``--graph-version N``: accepted, with a deprecation
    warning on stderr.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest="graph_version",
            nargs="?",
            type=int,
            choices=(1, 2, 3),
            default=argparse.SUPPRESS,
            help="print the program's version (--version N: deprecated, see --graph-version)",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Print the version and exit, or store ``N`` as ``--graph-version`` with a warning."""
        if values is None:
            write_version()
            parser.exit()
        sys.stderr.write("warning: factuality --version N is deprecated; use --graph-version N\n")
        setattr(namespace, self.dest, values)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add ``--input``, ``--graph-version``, the judge options and the pipeline's to ``parser``.

    Args:
        parser: The ``factuality`` subcommand's parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="FactReasoner .json/.jsonl")
    parser.add_argument(
        "--graph-version",
        type=int,
        choices=(1, 2, 3),
        default=2,
        help="FactReasoner graph version, FR1 to FR3 (default: 2)",
    )
    parser.add_argument("--version", action=_VersionOrGraphVersion)
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
