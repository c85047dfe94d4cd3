r"""One convention for every JSON / JSON list / JSONL reader of the package.

Each reader (:func:`~langchain_references.factuality.io.load_inputs`,
:func:`~langchain_references.citations.evaluation.load_answer_records`) is
:func:`load_records` with its own record parser, and returns a :class:`LoadResult`: the
records that parsed, in file order, and one :class:`~langchain_references.errors.RecordError`
(with its ``file:line`` location and, when known, the offending ``field``) per record that did
not. A record parser that validates with a pydantic model turns its ``ValidationError`` into a
:class:`~langchain_references.errors.RecordError` with :func:`validation_error`.

JSON nested deeper than :data:`MAX_DEPTH` levels is a bad record, never a ``RecursionError``.
So is a line that is not UTF-8 (the error names the line and the first bad byte; the other
records are read) and a string holding a lone surrogate (a ``\ud800`` escape: valid JSON,
but not text that can be written out again; the error names the field).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from langchain_references.errors import RecordError

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

__all__ = [
    "MAX_DEPTH",
    "LoadResult",
    "RecordParser",
    "iter_json_objects",
    "load_records",
    "read_text",
    "validate_record",
    "validation_error",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
E = TypeVar("E", bound=RecordError)
ModelT = TypeVar("ModelT", bound="BaseModel")

#: ``parse(obj, location=...) -> record``; raises a :class:`RecordError` on a bad record.
RecordParser = Callable[..., T]

#: Deepest nesting of arrays and objects accepted in a record (the record itself is level 1).
MAX_DEPTH: Final = 100

_DECODER: Final = json.JSONDecoder()
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
#: A JSON string, or one bracket (to find the end of a value too deep to decode).
_TOKEN: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_TOO_DEEP: Final = f"JSON nested deeper than {MAX_DEPTH} levels"
#: Messages for pydantic error types whose own message names Python types or models.
_MESSAGES: Final = {
    "missing": "required field is missing",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
}


@dataclass(frozen=True)
class LoadResult(Generic[T]):
    """Records read from a file, plus the ones that failed (lenient mode).

    Attributes:
        records: Parsed records, in file order.
        errors: One error per record (or line) that could not be parsed.
    """

    records: list[T]
    errors: list[RecordError] = field(default_factory=list)


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests arrays and objects deeper than :data:`MAX_DEPTH` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth > MAX_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in item)
    return False


def _is_text(value: str) -> bool:
    """Whether ``value`` has no lone surrogate (it can be encoded as UTF-8)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate_error(value: Any, location: str, error: type[RecordError]) -> RecordError | None:
    """The error for the first string (key or value) of ``value`` holding a lone surrogate.

    Called on values no deeper than :data:`MAX_DEPTH` (iteratively, in document order).
    """
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        children: list[tuple[Any, tuple[int | str, ...]]] = []
        if isinstance(item, dict):
            for key, child in item.items():
                if not _is_text(key):
                    return _lone_surrogate(key, (*path, ascii(key)), location, error)
                children.append((child, (*path, key)))
        elif isinstance(item, list):
            children = [(child, (*path, index)) for index, child in enumerate(item)]
        elif isinstance(item, str) and not _is_text(item):
            return _lone_surrogate(item, path, location, error)
        stack.extend(reversed(children))
    return None


def _lone_surrogate(
    text: str, path: tuple[int | str, ...], location: str, error: type[RecordError]
) -> RecordError:
    at = next(i for i, char in enumerate(text) if "\ud800" <= char <= "\udfff")
    where = _field_path(path)
    message = f"holds a lone surrogate (U+{ord(text[at]):04X}) at character {at}"
    return error(f"{where}: {message}" if where else message, location, field=where or None)


def _checked(value: Any, location: str, error: type[RecordError]) -> Any:
    """``value``, or the error for a string of it holding a lone surrogate."""
    if isinstance(value, RecordError):
        return value
    return _surrogate_error(value, location, error) or value


@dataclass(frozen=True)
class _Source:
    """A file's text, and the lines that are not UTF-8 (line number -> why)."""

    text: str
    bad: dict[int, str]
    bad_lines: list[int] = field(default_factory=list)  # the keys of ``bad``, in order

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> _Source:
        raw = Path(path).read_bytes()
        try:
            return cls(raw.decode("utf-8"), {})
        except UnicodeDecodeError:
            pass
        bad: dict[int, str] = {}
        for number, line in enumerate(raw.split(b"\n"), start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                byte = line[exc.start]
                bad[number] = f"not UTF-8: byte 0x{byte:02X} at column {exc.start + 1}"
        logger.debug("%s: %d lines are not UTF-8", os.fspath(path), len(bad))
        return cls(raw.decode("utf-8", errors="surrogateescape"), bad, sorted(bad))

    def bad_line(self, first: int, last: int) -> int | None:
        """The first line in ``first..last`` that is not UTF-8, if any."""
        lines = self.bad_lines
        found = bisect_left(lines, first)
        return lines[found] if found < len(lines) and lines[found] <= last else None


def _decode(text: str, name: str, line: int, error: type[RecordError]) -> Any:
    """Decode one JSON value (``text`` starts at ``line``); a bad one is returned as ``error``.

    A syntax error is located at its own line; too deep a value at the line where it starts.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{name}:{line + exc.lineno - 1}"
        return error(f"invalid JSON: {exc.msg} (column {exc.colno})", where)
    except RecursionError:
        value = None
    else:
        if not _too_deep(value):
            return value
    start = line + text.count("\n", 0, len(text) - len(text.lstrip()))
    return error(_TOO_DEEP, f"{name}:{start}")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _skip_whitespace(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    return match.end() if match else index


def _skip_value(text: str, start: int) -> int:
    """The end of the array or object at ``start`` (balanced brackets, strings skipped)."""
    depth = 0
    for match in _TOKEN.finditer(text, start):
        piece = match.group()
        if piece in ("[", "{"):
            depth += 1
        elif piece in ("]", "}"):
            depth -= 1
            if depth == 0:
                return match.end()
    return len(text)


def _iter_list(source: _Source, name: str, error: type[RecordError]) -> Iterator[tuple[str, Any]]:
    """Yield the elements of a JSON list file one by one, each with its ``file:line``."""
    text = source.text
    index = _skip_whitespace(text, text.index("[") + 1)
    line, counted = 1, 0  # the line of ``counted``: lines are counted once, as ``index`` moves
    if text.startswith("]", index):
        index += 1
    else:
        while True:
            line, counted = line + text.count("\n", counted, index), index
            location = f"{name}:{line}"
            try:
                value, end = _DECODER.raw_decode(text, index)
            except json.JSONDecodeError as exc:
                reason = source.bad.get(exc.lineno, f"invalid JSON: {exc.msg}")
                raise error(reason, f"{name}:{exc.lineno}") from exc
            except RecursionError:
                value, end = error(_TOO_DEEP, location), _skip_value(text, index)
            else:
                bad = source.bad_line(line, line + text.count("\n", index, end))
                if bad is not None:
                    value = error(source.bad[bad], f"{name}:{bad}")
                elif _too_deep(value):
                    value = error(_TOO_DEEP, location)
            yield location, _checked(value, location, error)
            index = _skip_whitespace(text, end)
            if text.startswith(",", index):
                index = _skip_whitespace(text, index + 1)
            elif text.startswith("]", index):
                index += 1
                break
            else:
                where = f"{name}:{_line_of(text, index)}"
                raise error("invalid JSON: expecting ',' or ']' after a list element", where)
    if text[index:].strip():
        raise error("invalid JSON: extra data after the list", f"{name}:{_line_of(text, index)}")


def read_text(path: str | os.PathLike[str], *, error: type[RecordError] = RecordError) -> str:
    """Read a UTF-8 text file (for line-oriented inputs that are not JSON).

    Args:
        path: The file.
        error: The :class:`RecordError` subclass to report bytes that are not UTF-8 with.

    Returns:
        The text.

    Raises:
        RecordError: (as ``error``) If a line is not UTF-8, located at the first such line
            (``file:line``) and naming its first bad byte and column.
        OSError: If the file cannot be read.
    """
    source = _Source.read(path)
    if source.bad_lines:
        first = source.bad_lines[0]
        raise error(source.bad[first], f"{os.fspath(path)}:{first}")
    return source.text


def iter_json_objects(
    path: str | os.PathLike[str], *, error: type[RecordError] = RecordError
) -> Iterator[tuple[str, Any]]:
    r"""Yield ``(location, decoded value)`` for a JSON object, JSON list or JSONL file.

    A record that is not valid JSON (a line of a JSONL file), that nests deeper than
    :data:`MAX_DEPTH` levels, that is not UTF-8 (located at its first bad line) or that holds
    a lone surrogate in a string (naming the field) is yielded as an ``error`` instance
    instead of stopping the iteration. JSON Lines are separated by ``\n`` (a ``\r`` before
    it is blank space).

    Args:
        path: The file.
        error: The :class:`RecordError` subclass to report bad JSON with.

    Yields:
        ``("file:line", value)``: the line where each record starts (for JSONL, the list's
        elements or a single object).

    Raises:
        RecordError: (as ``error``) If a whole-file JSON document is malformed, not UTF-8 or
            holds a lone surrogate, or a single JSON object is nested too deeply.
    """
    name = os.fspath(path)
    source = _Source.read(path)
    text = source.text
    stripped = text.lstrip()
    if not stripped:
        return
    if stripped.startswith("["):
        yield from _iter_list(source, name, error)
        return
    document = _decode(text, name, 1, error)
    if not isinstance(document, RecordError):
        location = f"{name}:{_line_of(text, len(text) - len(stripped))}"
        bad = source.bad_line(1, text.count("\n") + 1)
        if bad is not None:
            raise error(source.bad[bad], f"{name}:{bad}")
        checked = _checked(document, location, error)
        if isinstance(checked, RecordError):
            raise checked
        yield location, checked
        return
    values = [
        (
            f"{name}:{number}",
            error(source.bad[number], f"{name}:{number}")
            if number in source.bad
            else _checked(_decode(line, name, number, error), f"{name}:{number}", error),
        )
        for number, line in enumerate(text.split("\n"), start=1)
        if line.strip()
    ]
    if len(values) < 2 or not any(isinstance(value, dict) for _, value in values):
        if source.bad:  # not JSON Lines either: the whole file is malformed
            first = min(source.bad)
            raise error(source.bad[first], f"{name}:{first}")
        raise document
    yield from values


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
            :attr:`LoadResult.errors` and keep reading. The errors are the caller's to report
            (they are only logged at DEBUG level, so that each is reported once).
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
            logger.debug("skipping %s: %s", what, exc)
            errors.append(exc)
    return LoadResult(records=records, errors=errors)


def _field_path(loc: Iterable[int | str]) -> str:
    """``("documents", 2, "page_content")`` -> ``"documents[2].page_content"``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path


def validation_error(
    exc: ValidationError,
    location: str | None,
    *,
    error: type[E],
    models: Iterable[type[BaseModel]] = (),
) -> E:
    """One :class:`RecordError` for a pydantic ``ValidationError`` of a record.

    The message lists the offending fields as JSON paths (``documents[2].page_content``),
    unknown fields first, each with the closest known field name when one looks alike; the
    error's ``field`` is the first of them.

    Args:
        exc: The validation error.
        location: Where the record came from (``file:line``).
        error: The :class:`RecordError` subclass to return.
        models: The models of the record, whose field names are suggested for unknown ones.

    Returns:
        The error (not raised).
    """
    known = sorted({name for model in models for name in model.model_fields})
    problems: list[tuple[str, str]] = []
    for item in sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden"):
        path = _field_path(item["loc"])
        if item["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(item["loc"][-1]), known, n=1)
            message = "unknown field" + (f" (did you mean {close[0]!r}?)" if close else "")
        elif item["type"] in _MESSAGES:
            message = _MESSAGES[item["type"]]
        else:
            message = item["msg"][:1].lower() + item["msg"][1:]
        problems.append((path, f"{path}: {message}" if path else message))
    shown = "; ".join(text for _, text in problems[:3])
    if len(problems) > 3:
        shown += f"; and {len(problems) - 3} more"
    return error(shown, location, field=(problems[0][0] or None) if problems else None)


def validate_record(
    obj: Any,
    model: type[ModelT],
    location: str | None,
    *,
    error: type[E],
    models: Iterable[type[BaseModel]] = (),
) -> ModelT:
    """Validate one decoded JSON record with its pydantic model, or raise one ``error``.

    Args:
        obj: The decoded JSON object.
        model: The record's model.
        location: Where the record came from (``file:line``).
        error: The :class:`RecordError` subclass to raise.
        models: The models nested in ``model``, whose field names are suggested too.

    Returns:
        The validated model.

    Raises:
        RecordError: ``error``, if ``obj`` is not a JSON object or does not validate (see
            :func:`validation_error`).
    """
    from pydantic import ValidationError

    if not isinstance(obj, Mapping):
        raise error("record is not a JSON object", location)
    try:
        return model.model_validate(dict(obj))
    except ValidationError as exc:
        raise validation_error(exc, location, error=error, models=(model, *models)) from exc
