"""A record's bibliography fields, and the one rule that reads them (strictly or leniently).

The fields are read by one rule per type: a text field is a string (empty means missing) or
``null``, an integer field an integer (not a boolean) or ``null``. Two readers apply it, on
purpose differently:

* :func:`record_bibliography`, strict, validates a corpus record: a value of the wrong type is
  the record's error (:class:`~langchain_references.errors.RecordError`), and an integral
  JSON number such as ``2020.0`` is the integer ``2020`` (JSON has one number type);
* :func:`stored_bibliography`, lenient, reads an entry's stored metadata (what a search
  returns): a value of the wrong type reads as missing, floats included (the index writes
  integers, so a float there is not its own), and a search never fails on metadata.

:func:`stored_int` reads the pointer's counters by the lenient rule too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from langchain_references.errors import RecordError

__all__ = [
    "KNOWN_INT",
    "KNOWN_STR",
    "Bibliography",
    "record_bibliography",
    "stored_bibliography",
    "stored_int",
]

#: The bibliography's text fields, in the order they are read (and refused).
KNOWN_STR: Final = ("url", "doi", "openalex_id")
#: The bibliography's integer fields, read after the text fields.
KNOWN_INT: Final = ("year", "citation_count", "influential_citation_count")


@dataclass(frozen=True, slots=True, kw_only=True)
class Bibliography:
    """What the index knows of a record's publication (every field optional, keyword-only).

    Attributes:
        url: Its URL, if any.
        doi: Its DOI, if any.
        openalex_id: Its OpenAlex id, if any.
        year: Publication year, if known.
        citation_count: Citation count, if known.
        influential_citation_count: Influential citation count, if known.
    """

    url: str | None = None
    doi: str | None = None
    openalex_id: str | None = None
    year: int | None = None
    citation_count: int | None = None
    influential_citation_count: int | None = None


def _text(value: object) -> str | None:
    """A text field's value: a non-empty string, or ``None`` for ``null`` and ``""``.

    Raises:
        TypeError: If it is neither a string nor ``None``.
    """
    if value is None or isinstance(value, str):
        return value or None
    raise TypeError("must be a string")


def _integer(value: object, *, integral_floats: bool) -> int | None:
    """An integer field's value (``None`` for ``null``); ``2020.0`` too if ``integral_floats``.

    Raises:
        TypeError: If it is not an integer (a boolean is not) nor ``None``.
    """
    if value is None:
        return None
    if integral_floats and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("must be an integer")
    return value


def record_bibliography(obj: Mapping[str, Any], location: str | None) -> dict[str, Any]:
    """The :class:`Bibliography` fields of a corpus record, by the strict reader.

    Args:
        obj: The record's JSON object.
        location: Where it came from (``file:line``), for errors.

    Returns:
        The fields, by name (``None`` when missing).

    Raises:
        RecordError: At the first field (text fields first) whose value has the wrong type.
    """
    fields: dict[str, Any] = {}
    for key in (*KNOWN_STR, *KNOWN_INT):
        try:
            if key in KNOWN_STR:
                fields[key] = _text(obj.get(key))
            else:
                fields[key] = _integer(obj.get(key), integral_floats=True)
        except TypeError as exc:
            raise RecordError(f"{key}: {exc}", location, field=key) from None
    return fields


def stored_int(meta: Mapping[str, Any], key: str) -> int | None:
    """An integer read from stored metadata by the lenient reader (``None`` unless an integer).

    Args:
        meta: The metadata (an entry's, or an index pointer's).
        key: The key.

    Returns:
        The integer, or ``None`` when it is missing or not an integer.
    """
    try:
        return _integer(meta.get(key), integral_floats=False)
    except TypeError:
        return None


def _stored_str(meta: Mapping[str, Any], key: str) -> str | None:
    try:
        return _text(meta.get(key))
    except TypeError:
        return None


def stored_bibliography(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`Bibliography` fields of an entry's stored metadata, by the lenient reader.

    Args:
        meta: The entry's metadata.

    Returns:
        The fields, by name; a value of the wrong type reads as ``None``.
    """
    return {
        **{key: _stored_str(meta, key) for key in KNOWN_STR},
        **{key: stored_int(meta, key) for key in KNOWN_INT},
    }
