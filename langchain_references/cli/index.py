"""``langchain-references index build`` and ``index add``: build an evidence index, update it.

``index build --input corpus.jsonl --name NAME`` indexes each record ``{"id", "title", "text",
"url"?, "doi"?, "year"?, "citation_count"?, "influential_citation_count"?, ...}`` twice: the
whole text (``abstract``) and each sentence (``phrase``), with the record's metadata on every
entry (see :mod:`~langchain_references.server.index`). The index goes into an embedded Chroma
(``--persist-dir``, default ``<user data dir>/langchain-references/indexes``) or a Chroma
server (``--chroma-url http://host:port``, started with ``chroma run``).

Each build is atomic: it writes a new generation of the index and switches to it only when
every entry is written, so re-running it rebuilds the index from the corpus. A build that fails
or is interrupted (Ctrl-C) is undone and says so: the previous generation still serves, or
there is still no index; a build killed outright leaves an unfinished generation that nothing
serves and the next build deletes. The generation replaced is kept until the next build, for the
searches a running ``serve`` has in flight on it; ``serve`` moves to the new generation within
a few seconds, or at once when its generation is deleted (no restart). Unless ``--retrieval
dense``, the generation's BM25 indexes are saved with it (embedded Chroma), so that ``serve
--retrieval hybrid`` (the default) or ``bm25`` loads them. A bad line is reported
as ``error: FILE:LINE: FIELD: problem (record skipped)`` and the other records are indexed.

``--engine ray`` embeds the batches on Ray actors (``--workers N`` of them, each loading the
embeddings once) of a local Ray started on 127.0.0.1, or of the cluster at ``--ray-address``
(extra ``[ray]``): the same entries are written, the progress bar counts the records of the
batches done, in order, and the summary line is the local engine's. Into a Chroma server
(``--chroma-url``) the actors write the entries themselves.

``index add --input more.jsonl --name NAME`` updates the index in place instead: each record is
upserted into the current generation (a record whose id is there already is replaced, the
sentences it no longer has deleted) and the saved BM25 indexes are rebuilt. It is not atomic:
while it runs, and if it fails or is interrupted, the index is marked incomplete (a running
``serve`` keeps answering from what it has and reopens the generation once an ``index add``
completes; a new ``serve`` refuses it) until an ``index add`` completes; running it again
completes it. An index that does not exist is an error (``index build`` creates indexes).

Exit status: 0 when every record was indexed, 1 when some lines were skipped, 2 when the
command cannot run or the build failed (unreadable input, no valid record, index unavailable,
a write refused), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO, cast

from langchain_references.cli._commands import streams
from langchain_references.cli._engines import ray_options
from langchain_references.cli._errors import CLIError
from langchain_references.cli._files import read_records
from langchain_references.cli.parsers.index import (
    BUILD_DESCRIPTION,
    BUILD_HELP,
    DESCRIPTION,
    HELP,
    add_location_options,
    add_parser,
    configure_add_parser,
    configure_build_parser,
)
from langchain_references.server.index import (
    EvidenceIndex,
    EvidenceIndexError,
    EvidenceRecord,
    IncompleteIndexError,
    load_embeddings,
    parse_evidence_record,
)
from langchain_references.server.settings import default_persist_dir
from langchain_references.services.loading import LoadResult, load_records
from langchain_references.services.retrieval import DEFAULT_RETRIEVAL

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_references.services.engine import Engine

__all__ = [
    "BUILD_DESCRIPTION",
    "BUILD_HELP",
    "DESCRIPTION",
    "HELP",
    "add_location_options",
    "add_parser",
    "configure_add_parser",
    "configure_build_parser",
    "open_index",
    "run_add",
    "run_build",
]

#: Exit status of an interrupted build (128 + SIGINT, as shells report it).
INTERRUPTED: Final = 130


def _loader(max_chars: int) -> Callable[[Path], LoadResult[EvidenceRecord]]:
    parse = functools.partial(parse_evidence_record, max_chars=max_chars)

    def load(path: Path) -> LoadResult[EvidenceRecord]:
        return load_records(path, parse, strict=False, what="corpus record")

    return load


def _persist_dir(args: argparse.Namespace) -> Path | None:
    return None if args.chroma_url else (args.persist_dir or default_persist_dir())


def _embeddings(args: argparse.Namespace) -> Embeddings:
    try:
        return load_embeddings(args.embeddings)
    except (ValueError, ImportError) as exc:
        raise CLIError(f"--embeddings {args.embeddings}: {exc}") from exc


def open_index(args: argparse.Namespace, *, create: bool) -> EvidenceIndex:
    """Open the index named by ``--name``/``--index`` at the location given by the options.

    Args:
        args: Parsed :func:`add_location_options` options and ``name``.
        create: Create the index if it is missing.

    Returns:
        The index.

    Raises:
        CLIError: If the name is invalid, the embeddings cannot be loaded, or the index cannot
            be opened (it is missing, or has no complete generation).
    """
    embeddings = _embeddings(args)
    try:
        return EvidenceIndex.open(
            args.name,
            persist_dir=_persist_dir(args),
            chroma_url=args.chroma_url,
            embeddings=embeddings,
            create=create,
            retrieval=getattr(args, "retrieval", DEFAULT_RETRIEVAL),
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
        0 when every record was indexed, 1 when some lines were skipped, 130 when interrupted
        (one ``error: interrupted; ...`` line says what still serves).

    Raises:
        CLIError: If the input cannot be read or has no valid record, or the index cannot be
            reached or written (the message says what still serves).
    """
    from tqdm import tqdm  # type: ignore[import-untyped]

    out, err = streams(out, err)
    ray = ray_options(args)
    records, errors = read_records(args.input, _loader(args.max_record_chars), err)
    embeddings: Embeddings | str | None = _embeddings(args)
    if ray is not None:  # each Ray actor loads them from their spec
        embeddings = args.embeddings
    try:
        with tqdm(
            total=len(records), unit="record", file=err, disable=args.quiet, desc="indexing"
        ) as bar:
            result = EvidenceIndex.build(
                args.name,
                records,
                persist_dir=_persist_dir(args),
                chroma_url=args.chroma_url,
                embeddings=embeddings,
                batch_size=args.batch_size,
                progress=bar.update,
                retrieval=args.retrieval,
                engine=cast("Engine", args.engine),
                ray=ray,
            )
    except (ValueError, EvidenceIndexError) as exc:
        raise CLIError(str(exc)) from exc
    except KeyboardInterrupt as exc:
        err.write("; ".join(["error: interrupted", *getattr(exc, "__notes__", ())]) + "\n")
        return INTERRUPTED
    index = result.index
    kept = (
        f"; generation {result.previous_generation!r} kept until the next build (a running "
        "`serve` moves to the new one by itself)"
        if result.previous_generation
        else ""
    )
    out.write(
        f"indexed {result.records} record(s) as {result.entries} entries into {args.name!r} at "
        f"{index.location}, generation {index.generation!r}; the index holds {result.entries} "
        f"entries ({result.entries - result.previous_entries:+d})"
        + kept
        + (f"; {len(errors)} line(s) skipped" if errors else "")
        + "\n"
    )
    return 1 if errors else 0


def _index_to_update(args: argparse.Namespace) -> EvidenceIndex:
    """The index ``index add`` writes to: it must exist; an incomplete one is completed."""
    try:
        return open_index(args, create=False)
    except CLIError as exc:
        if not isinstance(exc.__cause__, IncompleteIndexError):
            raise  # missing (a typo in --name should not make a new index), or unreachable
    return open_index(args, create=True)  # an earlier add or build did not finish


def run_add(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``index add``: upsert the records of ``--input`` into the index, in place.

    Args:
        args: Arguments parsed by :func:`configure_add_parser`'s options.
        out: Where the summary goes (stdout by default).
        err: Where skipped lines and the progress bar go (stderr by default).

    Returns:
        0 when every record was added, 1 when some lines were skipped, 130 when interrupted
        (one ``error: interrupted; ...`` line says the index stays incomplete until an
        ``index add`` completes).

    Raises:
        CLIError: If the input cannot be read or has no valid record, or the index does not
            exist, cannot be reached or refuses a write.
    """
    from tqdm import tqdm

    out, err = streams(out, err)
    records, errors = read_records(args.input, _loader(args.max_record_chars), err)
    index = _index_to_update(args)
    try:
        before = index.count()
    except EvidenceIndexError as exc:
        raise CLIError(str(exc)) from exc
    try:
        with tqdm(
            total=len(records), unit="record", file=err, disable=args.quiet, desc="adding"
        ) as bar:
            written = index.add_records(records, batch_size=args.batch_size, progress=bar.update)
        after = index.count()
    except (ValueError, EvidenceIndexError) as exc:
        raise CLIError(
            f"{exc}; index {args.name!r} is marked incomplete until an index add completes "
            "(run it again: re-added records replace their entries)"
        ) from exc
    except KeyboardInterrupt as exc:
        exc.add_note(
            f"index {args.name!r} is marked incomplete until an index add completes (run it "
            "again: re-added records replace their entries)"
        )
        err.write("; ".join(["error: interrupted", *exc.__notes__]) + "\n")
        return INTERRUPTED
    out.write(
        f"added {len(records)} record(s) as {written} entries to {args.name!r} at "
        f"{index.location}, generation {index.generation!r}; the index holds {after} entries "
        f"({after - before:+d})" + (f"; {len(errors)} line(s) skipped" if errors else "") + "\n"
    )
    return 1 if errors else 0
