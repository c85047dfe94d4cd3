"""The ``langchain-references`` command: ``factcheck``, ``factuality``, ``citations``, ``demo``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Build the command-line parser with all subcommands."""
    from langchain_references.cli import factcheck as factcheck_cli
    from langchain_references.cli import factuality as factuality_cli

    parser = argparse.ArgumentParser(
        prog="langchain-references",
        description="Verifiable LLM answers: fact-check statements, score long-form "
        "factuality and check an answer's citations.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    factcheck_cli.add_parser(subparsers)
    factuality_cli.add_parser(subparsers)
    factuality_cli.add_citations_parser(subparsers)
    subparsers.add_parser(
        "demo",
        help="stream a cited answer over the offline demo corpus "
        "(options: see python -m langchain_references.demo --help)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit code.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["demo"]:
        from langchain_references.cli.demo import main as demo_main

        return demo_main(args_list[1:])
    args = build_parser().parse_args(args_list)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
