"""Pieces shared by the commands: the error, files, argument types, models, judges and tables.

Every command module exposes ``add_parser(subparsers)``, which registers the command with
:func:`add_subcommand`, and ``run(args, *, out=None, err=None)``, the :class:`Command` stored
as ``args.func`` that :func:`langchain_references.cli.main` calls.

Files: :func:`read_records` reads an ``--input`` (each bad record reported once, no record at
all is an error); :func:`check_output` refuses an ``--output`` that is an input or cannot be
written, before any work; ``with writing(path), atomic_write(path) as handle:`` writes it all
or nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TextIO, TypeVar

from langchain_references._optional import MissingDependencyError, require
from langchain_references.errors import LangchainReferencesError, RecordError
from langchain_references.judges import offline_judge
from langchain_references.judges.llm import LLMJudge

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import Runnable

    from langchain_references.judges.base import JudgeInputLike, Judgement
    from langchain_references.loading import LoadResult

__all__ = [
    "HEURISTIC_NOTICE",
    "CLIError",
    "Command",
    "add_judge_options",
    "add_subcommand",
    "atomic_write",
    "build_judge",
    "check_output",
    "format_number",
    "format_table",
    "load_chat_model",
    "non_blank",
    "positive_float",
    "positive_int",
    "read_records",
    "reading",
    "streams",
    "writing",
]

T = TypeVar("T")

#: What ``--judge heuristic`` / ``heuristic-lexical`` says on stderr (``{emb}``: embeddings).
HEURISTIC_NOTICE: Final = (
    "judge: HeuristicJudge (offline word-overlap{emb} heuristic; weak, not an NLI model). "
    "Pass --judge llm:PROVIDER:MODEL for an LLM judge."
)


class CLIError(LangchainReferencesError, RuntimeError):
    """The command cannot run as asked (bad option value, unreadable input, missing package).

    :func:`langchain_references.cli.main` prints it as one ``error: ...`` line on stderr and
    exits with status 2.
    """


class Command(Protocol):
    """A command's handler: ``run(args, *, out=None, err=None) -> exit status``."""

    def __call__(
        self, args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> int:
        """Run the command.

        Args:
            args: The parsed arguments.
            out: Where results go (stdout by default).
            err: Where notices and errors go (stderr by default).

        Returns:
            The exit status.
        """
        ...


def add_subcommand(
    subparsers: Any,
    name: str,
    help: str,
    description: str,
    configure: Callable[[argparse.ArgumentParser], None],
    run: Command,
) -> argparse.ArgumentParser:
    """Add a subcommand whose handler is ``args.func``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.
        name: The subcommand.
        help: One line for the command list.
        description: The subcommand's ``--help`` description.
        configure: Adds the subcommand's arguments.
        run: The handler, stored as ``args.func``.

    Returns:
        The subcommand's parser.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=description
    )
    configure(parser)
    parser.set_defaults(func=run)
    return parser


def streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    """A command's output and error streams: the given ones, else stdout and stderr.

    Args:
        out: ``run``'s ``out`` argument.
        err: ``run``'s ``err`` argument.

    Returns:
        ``(out, err)``, resolved when the command runs (so that redirections apply).
    """
    return (sys.stdout if out is None else out), (sys.stderr if err is None else err)


@contextlib.contextmanager
def reading(path: object, *errors: type[Exception]) -> Iterator[None]:
    """Report a failure to read an input file as ``CLIError("cannot read PATH: ...")``.

    Args:
        path: The file, for the message.
        *errors: The format errors of the loader, besides ``OSError`` and
            ``UnicodeDecodeError``.

    Yields:
        Nothing: the ``with`` block reads the file.

    Raises:
        CLIError: If the block raises one of those errors.
    """
    caught: tuple[type[Exception], ...] = (OSError, UnicodeDecodeError, *errors)
    try:
        yield
    except caught as exc:
        raise CLIError(f"cannot read {path}: {exc}") from exc


def read_records(
    path: Path, load: Callable[[Path], LoadResult[T]], err: TextIO
) -> tuple[list[T], list[RecordError]]:
    """Read a command's input records, reporting each bad one once on ``err``.

    Args:
        path: The ``--input`` file.
        load: The lenient loader (e.g. ``load_answer_records``): returns the records and one
            :class:`~langchain_references.errors.RecordError` per bad record.
        err: Where each bad record gets one ``error: FILE:LINE: FIELD: ... (record skipped)``
            line.

    Returns:
        The records (at least one) and the errors.

    Raises:
        CLIError: If the file cannot be read, is not JSON, or holds no valid record.
    """
    with reading(path, RecordError):
        loaded = load(path)
    for error in loaded.errors:
        err.write(f"error: {error} (record skipped)\n")
    if not loaded.records:
        if loaded.errors:
            raise CLIError(f"no valid record in {path} ({len(loaded.errors)} skipped)")
        raise CLIError(f"no records in {path}: the file is empty")
    return loaded.records, loaded.errors


# ------------------------------------------------------------------------ output files


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return a.resolve() == b.resolve()


def check_output(output: Path, *inputs: Path | None, option: str = "--output") -> None:
    """Refuse an output file before anything is computed or written.

    Args:
        output: The output file.
        *inputs: The command's input files (``None`` for an absent one).
        option: The option that named ``output``, for messages.

    Raises:
        CLIError: If ``output`` is one of the inputs (also through a link), is a directory, or
            its directory does not exist or is not writable.
    """
    for path in inputs:
        if path is not None and _same_file(output, path):
            raise CLIError(
                f"{option} {output} is the input file {path}; refusing to overwrite the input"
            )
    if output.is_dir():
        raise CLIError(f"cannot write {output}: it is a directory")
    folder = output.parent
    if not folder.is_dir():
        raise CLIError(f"cannot write {output}: no such directory {folder}")
    if not os.access(folder, os.W_OK):
        raise CLIError(f"cannot write {output}: directory {folder} is not writable")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], *, encoding: str = "utf-8") -> Iterator[TextIO]:
    """Write a file all at once: to a temporary file beside it, renamed over it at the end.

    If the ``with`` block raises (or the process dies), the temporary file is removed and
    ``path`` is left as it was: never a partial file. An existing file keeps its permissions.

    Args:
        path: The file to (re)place.
        encoding: The text encoding.

    Yields:
        The open temporary file.

    Raises:
        OSError: If the temporary file cannot be created, written or renamed (see
            :func:`writing`).
    """
    target = Path(path)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    # Created with mode 0o666 minus the umask, like ``open(path, "w")``.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            shutil.copymode(target, temp)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


@contextlib.contextmanager
def writing(path: object) -> Iterator[None]:
    """Report a failure to write an output file as ``CLIError("cannot write PATH: ...")``.

    Args:
        path: The file, for the message.

    Yields:
        Nothing: the ``with`` block writes the file (with :func:`atomic_write`).

    Raises:
        CLIError: If the block raises ``OSError`` or ``UnicodeError`` (e.g. a lone surrogate).
    """
    try:
        yield
    except (OSError, UnicodeError) as exc:
        raise CLIError(f"cannot write {path}: {exc}") from exc


# ------------------------------------------------------------------------ argument types


def positive_int(value: str) -> int:
    """``argparse`` type: an integer >= 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def positive_float(value: str) -> float:
    """``argparse`` type: a number > 0."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return number


def non_blank(value: str) -> str:
    """``argparse`` type: a string that is not empty or only whitespace."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


# ------------------------------------------------------------------------ models and judges


def load_chat_model(name: str, *, option: str = "--model", **kwargs: Any) -> BaseChatModel:
    """Load ``provider:model`` with ``langchain.chat_models.init_chat_model``.

    Args:
        name: E.g. ``"openai:gpt-4o-mini"``.
        option: The option that named the model, for error messages.
        **kwargs: Passed to ``init_chat_model`` (e.g. ``temperature=0``).

    Returns:
        The chat model.

    Raises:
        CLIError: If ``langchain`` or the provider package is missing or the name is unknown.
    """
    try:
        # Optional dependency, imported by name: it may be absent (and untyped).
        chat_models = require("langchain.chat_models", "llm", feature=f"{option} {name}")
    except MissingDependencyError as exc:
        raise CLIError(f"{exc} (plus the provider's package, e.g. langchain-openai)") from exc
    try:
        model: BaseChatModel = chat_models.init_chat_model(name, **kwargs)
    except (ImportError, ValueError) as exc:
        raise CLIError(f"cannot load {option} {name}: {exc}") from exc
    return model


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--judge SPEC`` (read by :func:`build_judge`) and ``--max-concurrency N``.

    Args:
        parser: The parser of a command that judges claims against passages.
    """
    parser.add_argument(
        "--judge",
        default="heuristic",
        metavar="SPEC",
        help="heuristic | heuristic-lexical | llm:PROVIDER:MODEL (default: heuristic)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=4,
        metavar="N",
        help="judge calls in flight (default: 4)",
    )


def build_judge(
    spec: str, *, err: TextIO | None = None
) -> tuple[Runnable[JudgeInputLike, Judgement], BaseChatModel | None]:
    """Build the judge of ``--judge`` (the ``factuality`` and ``citations`` commands).

    Args:
        spec: ``heuristic`` (offline, MiniLM embeddings), ``heuristic-lexical`` (offline, no
            embeddings) or ``llm:PROVIDER:MODEL``.
        err: Where to write :data:`HEURISTIC_NOTICE` for a heuristic judge (nowhere if None).

    Returns:
        The judge and, for an LLM judge, its chat model.

    Raises:
        CLIError: On an unknown spec or an unavailable model.
    """
    if spec in ("heuristic", "heuristic-lexical"):
        judge = offline_judge(use_embeddings=spec == "heuristic")
        if err is not None:
            emb = " + MiniLM similarity" if judge.embeddings is not None else ""
            err.write(HEURISTIC_NOTICE.format(emb=emb) + "\n")
        return judge, None
    if spec.startswith("llm:") and len(spec) > len("llm:"):
        model = load_chat_model(spec[len("llm:") :], option="--judge llm:", temperature=0)
        return LLMJudge(model), model
    raise CLIError(
        f"--judge must be 'heuristic', 'heuristic-lexical' or 'llm:PROVIDER:MODEL', got {spec!r}"
    )


# ------------------------------------------------------------------------ tables


def format_number(value: float | None, digits: int = 3) -> str:
    """A table cell for a number: ``-`` for None, else ``digits`` decimals.

    Args:
        value: The number, or None when undefined.
        digits: Decimals.

    Returns:
        The cell.
    """
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, with a dashed line under the header.

    Args:
        rows: The header row, then the data rows; all of the same length.

    Returns:
        The table, without a final newline.
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
