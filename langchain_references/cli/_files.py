"""A command's files: reading ``--input``, checking and writing ``--output``.

:func:`read_records` reads an ``--input`` (each bad record reported once, no record at all is
an error); :func:`check_output` refuses an ``--output`` that is an input or cannot be
written, before any work; ``with writing(path), atomic_write(path) as handle:`` writes it all
or nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from langchain_references.cli._errors import CLIError
from langchain_references.errors import RecordError

if TYPE_CHECKING:
    from langchain_references.services.loading import LoadResult

__all__ = ["atomic_write", "check_output", "read_records", "reading", "writing"]

T = TypeVar("T")


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
