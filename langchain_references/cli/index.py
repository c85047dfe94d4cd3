"""``langchain-references index build``: build an evidence index from a corpus JSONL file.

``index build --input corpus.jsonl --name NAME`` indexes each record ``{"id", "title", "text",
"url"?, "doi"?, "year"?, "citation_count"?, "influential_citation_count"?, ...}`` twice: the
whole text (``abstract``) and each sentence (``phrase``), with the record's metadata on every
entry (see :mod:`~langchain_references.server.index`). The index goes into an embedded Chroma
(``--persist-dir``, default ``<user data dir>/langchain-references/indexes``) or a Chroma
server (``--chroma-url http://host:port``, started with ``chroma run``).

Re-running upserts by id: nothing is duplicated. A bad line is reported as
``error: FILE:LINE: FIELD: problem (record skipped)`` and the other records are indexed.

Exit status: 0 when every record was indexed, 1 when some lines were skipped, 2 when the
command cannot run (unreadable input, no valid record, index unavailable).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final, TextIO

from langchain_references.cli._common import (
    CLIError,
    add_subcommand,
    non_blank,
    positive_int,
    read_records,
    streams,
)
from langchain_references.loading import LoadResult, load_records
from langchain_references.server.index import (
    EvidenceIndex,
    EvidenceIndexError,
    EvidenceRecord,
    load_embeddings,
    parse_evidence_record,
)
from langchain_references.server.settings import default_persist_dir

__all__ = [
    "add_location_options",
    "add_parser",
    "configure_build_parser",
    "open_index",
    "run_build",
]

HELP: Final = "build an evidence index for the service"
DESCRIPTION: Final = "Manage evidence indexes (Chroma collections) served by `serve`."
BUILD_HELP: Final = "index a corpus JSONL file (idempotent)"
BUILD_DESCRIPTION: Final = (
    "Index each record of a corpus JSONL file as a whole passage and as sentences, with its "
    "metadata. Re-running upserts by id."
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


def _load(path: Path) -> LoadResult[EvidenceRecord]:
    return load_records(path, parse_evidence_record, strict=False, what="corpus record")


def open_index(args: argparse.Namespace, *, create: bool) -> EvidenceIndex:
    """Open the index named by ``--name``/``--index`` at the location given by the options.

    Args:
        args: Parsed :func:`add_location_options` options and ``name``.
        create: Create the index if it is missing.

    Returns:
        The index.

    Raises:
        CLIError: If the name is invalid, the embeddings cannot be loaded, or the index cannot
            be opened.
    """
    persist_dir = None if args.chroma_url else (args.persist_dir or default_persist_dir())
    try:
        embeddings = load_embeddings(args.embeddings)
    except (ValueError, ImportError) as exc:
        raise CLIError(f"--embeddings {args.embeddings}: {exc}") from exc
    try:
        return EvidenceIndex.open(
            args.name,
            persist_dir=persist_dir,
            chroma_url=args.chroma_url,
            embeddings=embeddings,
            create=create,
        )
    except (ValueError, EvidenceIndexError) as exc:
        raise CLIError(str(exc)) from exc


def run_build(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``index build``.

    Args:
        args: Arguments parsed by :func:`configure_build_parser`'s options.
        out: Where the summary goes (stdout by default).
        err: Where skipped lines and the progress bar go (stderr by default).

    Returns:
        0 when every record was indexed, 1 when some lines were skipped.

    Raises:
        CLIError: If the input cannot be read or has no valid record, or the index cannot be
            opened or written.
    """
    from tqdm import tqdm  # type: ignore[import-untyped]

    out, err = streams(out, err)
    records, errors = read_records(args.input, _load, err)
    index = open_index(args, create=True)
    before = index.count()
    with tqdm(
        total=len(records), unit="record", file=err, disable=args.quiet, desc="indexing"
    ) as bar:
        try:
            written = index.add_records(records, batch_size=args.batch_size, progress=bar.update)
        except EvidenceIndexError as exc:
            raise CLIError(str(exc)) from exc
    after = index.count()
    out.write(
        f"indexed {len(records)} record(s) as {written} entries into {args.name!r} at "
        f"{index.location}; the index holds {after} entries ({after - before:+d})"
        + (f"; {len(errors)} line(s) skipped" if errors else "")
        + "\n"
    )
    return 1 if errors else 0
