"""One convention for every JSON / JSON list / JSONL reader of the package.

Each reader (:func:`~langchain_references.factuality.io.load_inputs`,
:func:`~langchain_references.citations.evaluation.load_answer_records`) is
:func:`load_records` with its own record parser, and returns a :class:`LoadResult`: the
records that parsed, in file order, and one :class:`~langchain_references.errors.RecordError`
(with its ``file:line`` location) per record that did not.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from langchain_references.errors import RecordError

__all__ = ["LoadResult", "RecordParser", "iter_json_objects", "load_records"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
E = TypeVar("E", bound=RecordError)

#: ``parse(obj, location=...) -> record``; raises a :class:`RecordError` on a bad record.
RecordParser = Callable[..., T]


@dataclass(frozen=True)
class LoadResult(Generic[T]):
    """Records read from a file, plus the ones that failed (lenient mode).

    Attributes:
        records: Parsed records, in file order.
        errors: One error per record (or line) that could not be parsed.
    """

    records: list[T]
    errors: list[RecordError] = field(default_factory=list)


def _is_object_line(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def iter_json_objects(
    path: str | os.PathLike[str], *, error: type[RecordError] = RecordError
) -> Iterator[tuple[str, Any]]:
    """Yield ``(location, decoded value)`` for a JSON object, JSON list or JSONL file.

    A line of a JSONL file that is not valid JSON is yielded as an ``error`` instance
    instead of stopping the iteration.

    Args:
        path: The file.
        error: The :class:`RecordError` subclass to report bad JSON with.

    Yields:
        ``("file:line", object)`` for JSONL, ``("file[#i]", object)`` for a list,
        ``("file", object)`` for a single object.

    Raises:
        RecordError: (as ``error``) If a whole-file JSON document is malformed.
    """
    name = os.fspath(path)
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    if not stripped:
        return
    if stripped.startswith("["):
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"invalid JSON: {exc}", name) from exc
        for i, value in enumerate(values):
            yield f"{name}[{i}]", value
        return
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = [line for line in stripped.splitlines() if line.strip()]
        if len(lines) < 2 or not any(_is_object_line(line) for line in lines):
            raise error(f"invalid JSON: {exc}", name) from exc
    else:
        yield name, document
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        location = f"{name}:{number}"
        try:
            yield location, json.loads(line)
        except json.JSONDecodeError as exc:
            yield location, error(f"invalid JSON line: {exc.msg}", location)


def load_records(
    path: str | os.PathLike[str],
    parse: Callable[..., T],
    *,
    strict: bool = True,
    error: type[RecordError] = RecordError,
    what: str = "record",
) -> LoadResult[T]:
    """Read records from a JSON / JSON list / JSONL file with one record parser.

    Args:
        path: The file.
        parse: ``parse(obj, location=...)`` returns one record or raises a
            :class:`RecordError`.
        strict: Raise on the first bad record; otherwise collect it in
            :attr:`LoadResult.errors` (and log it) and keep reading.
        error: The :class:`RecordError` subclass used for malformed JSON.
        what: What a record is called in log messages.

    Returns:
        The records and the errors.

    Raises:
        RecordError: In strict mode, on the first bad record; always when the whole file is
            not JSON.
    """
    records: list[T] = []
    errors: list[RecordError] = []
    for location, value in iter_json_objects(path, error=error):
        try:
            if isinstance(value, RecordError):
                raise value
            records.append(parse(value, location=location))
        except RecordError as exc:
            if strict:
                raise
            logger.warning("skipping %s: %s", what, exc)
            errors.append(exc)
    return LoadResult(records=records, errors=errors)
