"""The options of ``langchain-references index``: its parsers, without the command's code.

The command itself (:mod:`langchain_references.cli.index`: Chroma, embeddings) loads when it
runs (:class:`~langchain_references.cli._commands.LazyCommand`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from langchain_references.cli._args import add_retrieval_option, non_blank, positive_int
from langchain_references.cli._commands import LazyCommand, add_subcommand
from langchain_references.cli._engines import add_engine_options
from langchain_references.server.settings import MAX_RECORD_CHARS

__all__ = [
    "ADD_DESCRIPTION",
    "ADD_HELP",
    "BUILD_DESCRIPTION",
    "BUILD_HELP",
    "DESCRIPTION",
    "HELP",
    "REQUIRES",
    "add_location_options",
    "add_parser",
    "configure_add_parser",
    "configure_build_parser",
    "run_add",
    "run_build",
]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ()
#: ``index build`` (``args.func``), imported when it runs.
run_build: Final = LazyCommand("langchain_references.cli.index", "run_build")
#: ``index add`` (``args.func``), imported when it runs.
run_add: Final = LazyCommand("langchain_references.cli.index", "run_add")

HELP: Final = "build an evidence index for the service"
DESCRIPTION: Final = "Manage evidence indexes (Chroma collections) served by `serve`."
BUILD_HELP: Final = "index a corpus JSONL file (atomic: a new generation, switched to when done)"
BUILD_DESCRIPTION: Final = (
    "Index each record of a corpus JSONL file as a whole passage and as sentences, with its "
    "metadata, into a new generation of the index; the index switches to it only when it is "
    "complete, so a failed or interrupted build leaves the index as it was."
)


ADD_HELP: Final = "add or update records of a corpus JSONL file in an index, in place"
ADD_DESCRIPTION: Final = (
    "Upsert each record of a corpus JSONL file into the index's current generation (a record "
    "whose id is already there is replaced), without rebuilding the rest. Not atomic: while it "
    "runs, and if it fails, the index is marked incomplete (a running `serve` keeps answering "
    "from what it has; a new one refuses it) until an `index add` completes."
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


def _add_corpus_options(parser: argparse.ArgumentParser, name_help: str) -> None:
    """The options ``index build`` and ``index add`` share: the corpus, the index, batches."""
    parser.add_argument("--input", required=True, type=Path, help="corpus JSONL")
    parser.add_argument("--name", required=True, type=non_blank, help=name_help)
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


def configure_add_parser(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``index add``.

    Args:
        parser: The ``index add`` parser.
    """
    _add_corpus_options(parser, "the index to update (it must exist: see index build)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def configure_build_parser(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``index build``.

    Args:
        parser: The ``index build`` parser.
    """
    _add_corpus_options(parser, "the index name")
    add_retrieval_option(
        parser,
        "the index will be searched; unless dense, its BM25 index is saved with the new "
        "generation (embedded Chroma only)",
    )
    add_engine_options(parser, batch_option=False)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``index`` and its subcommands ``build`` and ``add`` in ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "index", help=HELP, description=DESCRIPTION
    )
    actions = parser.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    add_subcommand(
        actions, "build", BUILD_HELP, BUILD_DESCRIPTION, configure_build_parser, run_build
    )
    add_subcommand(actions, "add", ADD_HELP, ADD_DESCRIPTION, configure_add_parser, run_add)
    return parser
