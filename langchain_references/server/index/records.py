"""Corpus records: their validation, and the entries (abstract and sentences) each one becomes.

A record ``{"id", "title", "text", "url"?, "doi"?, "year"?, "citation_count"?,
"influential_citation_count"?, ...}`` becomes one ``abstract`` entry (the whole text, id
``"{id}:abstract"``) and one ``phrase`` entry per sentence (id ``"{id}:phrase:{i}"``), each with
the record's metadata.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, get_args

from langchain_references.citations.sentences import split_cited_sentences
from langchain_references.errors import RecordError
from langchain_references.server.index.fields import (
    KNOWN_INT,
    KNOWN_STR,
    Bibliography,
    record_bibliography,
)
from langchain_references.server.settings import MAX_RECORD_CHARS

__all__ = [
    "GRANULARITIES",
    "RESERVED_KEYS",
    "Entry",
    "EvidenceRecord",
    "Granularity",
    "Scalar",
    "entries_of",
    "granularity_of",
    "last_of_each_id",
    "parse_evidence_record",
    "split_sentences",
]

# one logger name for the whole index (the CLI's log lines name it)
logger = logging.getLogger(__package__)

Granularity: TypeAlias = Literal["abstract", "phrase"]
GRANULARITIES: Final[tuple[Granularity, ...]] = get_args(Granularity)

#: Metadata keys the index writes itself; a record may not use them.
RESERVED_KEYS: Final = frozenset({"record_id", "granularity", "position", "embeddings"})

Scalar: TypeAlias = str | int | float | bool


@dataclass(frozen=True, slots=True)
class EvidenceRecord(Bibliography):
    """One validated corpus record, with its :class:`Bibliography` fields.

    Attributes:
        id: The record's id (a JSON string or integer, as a string).
        title: Its title (may be empty).
        text: Its text (the abstract; not blank).
        extra: The record's other keys, as Chroma metadata scalars (nested values as JSON).
    """

    id: str
    title: str
    text: str
    extra: Mapping[str, Scalar] = field(default_factory=dict)

    def metadata(self) -> dict[str, Scalar]:
        """The metadata stored on each of the record's entries (``None`` values left out)."""
        meta: dict[str, Scalar] = {**self.extra, "record_id": self.id, "title": self.title}
        for key in (*KNOWN_STR, *KNOWN_INT):
            value = getattr(self, key)
            if value is not None:
                meta[key] = value
        return meta


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the index: an abstract or a sentence, with its metadata.

    Attributes:
        id: ``"{record_id}:abstract"`` or ``"{record_id}:phrase:{i}"``.
        text: The text embedded and stored.
        metadata: The record's metadata, its ``granularity`` and (a sentence) ``position``.
    """

    id: str
    text: str
    metadata: dict[str, Scalar]


def split_sentences(text: str) -> list[str]:
    """Split a text into sentences (the ``phrase`` granularity, and ``/api/split``).

    Args:
        text: Any text.

    Returns:
        Its non-blank sentences, whitespace collapsed, in order.
    """
    return [s.text for s in split_cited_sentences(text) if s.text.strip()]


def _scalar(value: Any) -> Scalar | None:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _text_field(obj: Mapping[str, Any], key: str, location: str | None, limit: int) -> None:
    """Refuse a string field with a lone surrogate, or longer than ``limit`` characters."""
    value = obj.get(key)
    if not isinstance(value, str):
        return
    if len(value) > limit:
        raise RecordError(
            f"{key}: {len(value)} characters, above max_record_chars ({limit})",
            location,
            field=key,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordError(
            f"{key}: holds a lone surrogate (U+{ord(value[exc.start]):04X}) at character "
            f"{exc.start}",
            location,
            field=key,
        ) from None


def _extra(obj: Mapping[str, Any], location: str | None) -> dict[str, Scalar]:
    """A record's other keys as metadata scalars (``null`` dropped); a reserved key refused."""
    known = {"id", "title", "text", *KNOWN_STR, *KNOWN_INT}
    extra: dict[str, Scalar] = {}
    for key, value in obj.items():
        if key in known:
            continue
        if key in RESERVED_KEYS:
            raise RecordError(f"{key}: reserved by the index, rename it", location, field=key)
        scalar = _scalar(value)
        if scalar is not None:
            extra[key] = scalar
    return extra


def parse_evidence_record(
    obj: Any, *, location: str | None = None, max_chars: int = MAX_RECORD_CHARS
) -> EvidenceRecord:
    """Validate one corpus record (a parser of records for ``load_records``).

    See :func:`~langchain_references.services.loading.load_records`.

    Args:
        obj: The decoded JSON value.
        location: Where it came from (``file:line``), for errors.
        max_chars: Longest ``text`` and ``title`` accepted (``max_record_chars``).

    Returns:
        The record; extra keys become metadata scalars (``null`` dropped, lists and objects
        as JSON strings).

    Raises:
        RecordError: If it is not an object, ``id`` is not a non-empty string or integer,
            ``title`` is not a string, ``text`` is blank, a known field has the wrong type,
            an extra key is reserved, ``text`` or ``title`` is longer than ``max_chars``, or
            a string holds a lone surrogate.
    """
    if not isinstance(obj, dict):
        raise RecordError("must be a JSON object", location)
    for key in ("id", "title", "text", *KNOWN_STR):
        _text_field(obj, key, location, max_chars)
    raw_id = obj.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
        raise RecordError("id: must be a non-empty string or integer", location, field="id")
    title = obj.get("title", "")
    if not isinstance(title, str):
        raise RecordError("title: must be a string", location, field="title")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise RecordError("text: must be a non-blank string", location, field="text")
    extra = _extra(obj, location)
    return EvidenceRecord(
        id=str(raw_id).strip(),
        title=title.strip(),
        text=text.strip(),
        **record_bibliography(obj, location),
        extra=extra,
    )


def entries_of(record: EvidenceRecord) -> list[Entry]:
    """The abstract entry and the phrase entries of a record.

    Args:
        record: The record.

    Returns:
        Its abstract entry, then one entry per sentence, in order.
    """
    meta = record.metadata()
    entries = [Entry(f"{record.id}:abstract", record.text, {**meta, "granularity": "abstract"})]
    for i, sentence in enumerate(split_sentences(record.text)):
        entries.append(
            Entry(
                f"{record.id}:phrase:{i}",
                sentence,
                {**meta, "granularity": "phrase", "position": i},
            )
        )
    return entries


def granularity_of(entry_id: str) -> Granularity:
    """An entry's granularity, from its id (``"{record}:abstract"``, ``"{record}:phrase:{i}"``).

    Args:
        entry_id: The entry's id.

    Returns:
        ``"abstract"`` or ``"phrase"``.
    """
    return "abstract" if entry_id.endswith(":abstract") else "phrase"


def last_of_each_id(records: Iterable[EvidenceRecord]) -> list[EvidenceRecord]:
    """The records in order, a repeated id keeping its last record (at its first place).

    Args:
        records: The records.

    Returns:
        One record per id (a warning is logged when an id repeats).
    """
    by_id: dict[str, EvidenceRecord] = {}
    repeated = 0
    for record in records:
        repeated += record.id in by_id
        by_id[record.id] = record
    if repeated:
        logger.warning(
            "%d record(s) repeat an earlier id; the last one of each id is kept", repeated
        )
    return list(by_id.values())
