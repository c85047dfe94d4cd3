"""The options of ``langchain-references index``: its parsers, without the command's code.

The command itself (:mod:`langchain_references.cli.index`: Chroma, embeddings) loads when it
runs (:class:`~langchain_references.cli._common.LazyCommand`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from langchain_references.cli._common import (
    LazyCommand,
    add_engine_options,
    add_retrieval_option,
    add_subcommand,
    non_blank,
    positive_int,
)
from langchain_references.server.settings import MAX_RECORD_CHARS

__all__ = [
    "BUILD_DESCRIPTION",
    "BUILD_HELP",
    "DESCRIPTION",
    "HELP",
    "REQUIRES",
    "add_location_options",
    "add_parser",
    "configure_build_parser",
    "run_build",
]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ()
#: ``index build`` (``args.func``), imported when it runs.
run_build: Final = LazyCommand("langchain_references.cli.index", "run_build")

HELP: Final = "build an evidence index for the service"
DESCRIPTION: Final = "Manage evidence indexes (Chroma collections) served by `serve`."
BUILD_HELP: Final = "index a corpus JSONL file (atomic: a new generation, switched to when done)"
BUILD_DESCRIPTION: Final = (
    "Index each record of a corpus JSONL file as a whole passage and as sentences, with its "
    "metadata, into a new generation of the index; the index switches to it only when it is "
    "complete, so a failed or interrupted build leaves the index as it was."
)


def add_location_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--persist-dir DIR`` / ``--chroma-url URL`` and ``--embeddings SPEC``.

    Args:
        parser: The parser of a command that opens an index (``index build``, ``serve``).
    """
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--persist-dir",
        type=Path,
        metavar="DIR",
        help="embedded Chroma directory (default: langchain-references/indexes in the user "
        "data directory, e.g. ~/.local/share/langchain-references/indexes on Linux)",
    )
    where.add_argument(
        "--chroma-url", metavar="URL", help="a Chroma server (`chroma run`), e.g. http://host:8000"
    )
    parser.add_argument(
        "--embeddings",
        metavar="SPEC",
        help="'minilm' (default, offline) or module:factory returning a LangChain Embeddings; "
        "use the same to build and to serve",
    )


def configure_build_parser(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``index build``.

    Args:
        parser: The ``index build`` parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="corpus JSONL")
    parser.add_argument("--name", required=True, type=non_blank, help="the index name")
    add_location_options(parser)
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=256,
        metavar="N",
        help="entries embedded and written per batch (default: 256)",
    )
    parser.add_argument(
        "--max-record-chars",
        type=positive_int,
        default=MAX_RECORD_CHARS,
        metavar="N",
        help=f"longest record text; a longer record is skipped (default: {MAX_RECORD_CHARS})",
    )
    add_retrieval_option(
        parser,
        "the index will be searched; unless dense, its BM25 index is saved with the new "
        "generation (embedded Chroma only)",
    )
    add_engine_options(parser, batch_option=False)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``index`` and its subcommand ``build`` in ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "index", help=HELP, description=DESCRIPTION
    )
    actions = parser.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    add_subcommand(
        actions, "build", BUILD_HELP, BUILD_DESCRIPTION, configure_build_parser, run_build
    )
    return parser
