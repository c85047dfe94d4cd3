"""The options of ``langchain-references factcheck``: its parser, without the command's code.

The command itself (:mod:`langchain_references.cli.factcheck`) loads when it runs
(:class:`~langchain_references.cli._commands.LazyCommand`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from langchain_references.cli._args import add_retrieval_option, positive_float, positive_int
from langchain_references.cli._commands import LazyCommand
from langchain_references.cli._engines import add_engine_options
from langchain_references.cli._models import add_judge_options
from langchain_references.cli._runs import add_run_options

__all__ = ["DEFAULT_CONCURRENCY", "DESCRIPTION", "HELP", "REQUIRES", "configure_parser", "run"]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ()
#: The command (``args.func``), imported when it runs.
run: Final = LazyCommand("langchain_references.cli.factcheck")


#: Statements checked at once by default.
DEFAULT_CONCURRENCY: Final = 2


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``factcheck`` arguments to a parser.

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument("statements", nargs="*", metavar="STATEMENT", help="statements to check")
    parser.add_argument(
        "--file",
        type=Path,
        help="file with one statement per line (blank lines and lines starting with # skipped;"
        " '-' reads stdin)",
    )
    parser.add_argument(
        "--search",
        default="ddgs",
        metavar="SPEC",
        help="demo | local:FOLDER | recorded:FILE | ddgs | tavily | bing | searx[:URL]"
        " (default: ddgs)",
    )
    add_judge_options(parser)
    parser.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help="deprecated: same as --judge llm:PROVIDER:MODEL",
    )
    parser.add_argument(
        "--style",
        choices=("markdown", "text", "html"),
        default="markdown",
        help="report format (default: markdown)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON result per line instead")
    parser.add_argument(
        "-k", "--k", type=positive_int, default=20, help="passages judged (default: 20)"
    )
    add_retrieval_option(parser, "the passages judged are chosen")
    parser.add_argument(
        "--max-results", type=positive_int, default=10, help="search results (default: 10)"
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        help=f"statements checked at once (default: {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--timeout", type=positive_float, default=10.0, help="seconds per page (default: 10)"
    )
    parser.add_argument(
        "--allow-private",
        action="store_true",
        help="allow fetching private and loopback addresses (needed for local servers)",
    )
    add_run_options(parser)
    add_engine_options(parser)


HELP: Final = "check statements against web evidence"
DESCRIPTION: Final = "Check statements against evidence found on the web."
