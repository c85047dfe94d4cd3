"""Replay recorded search results (offline tests, evaluations, reproducible runs).

The recording maps a query to its result list, each result a ``{title, snippet, link}`` dict
(the Serper-style shape of VeriScore's ``claim_search_results``). Lookup is by exact query,
then by a normalized form (Unicode NFKC, case-folded, whitespace collapsed, surrounding
punctuation and quotes stripped). An unknown query returns no hits and logs a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_references.errors import RecordError
from langchain_references.factcheck.search.base import BaseSearchProvider, hits_from_records
from langchain_references.factcheck.types import SearchHit
from langchain_references.services.loading import iter_json_objects, read_text

__all__ = ["RecordedSearch", "normalize_query"]

logger = logging.getLogger(__name__)

#: Field of a VeriScore record that holds ``{claim: [{title, snippet, link}]}``.
VERISCORE_FIELD = "claim_search_results"

_STRIP = "\"'“”‘’«».,;:!?()[]{} \t\n"


def normalize_query(query: str) -> str:
    """Normalise a query for the fallback lookup.

    Args:
        query: A query.

    Returns:
        NFKC-normalized, case-folded, whitespace-collapsed text without surrounding punctuation.
    """
    text = " ".join(unicodedata.normalize("NFKC", query).casefold().split())
    return text.strip(_STRIP)


def _check_results(query: Any, results: Any, source: str) -> list[Mapping[str, Any]]:
    if not isinstance(query, str):
        raise ValueError(f"{source}: query keys must be strings, got {type(query).__name__}")
    if (
        isinstance(results, str | bytes)
        or not isinstance(results, Sequence)
        or not all(isinstance(r, Mapping) for r in results)
    ):
        raise ValueError(f"{source}: results for {query!r} must be a list of objects")
    return list(results)


class RecordedSearch(BaseSearchProvider):
    """Search provider that replays a recording.

    Args:
        recording: ``{query: [{"title": ..., "snippet": ..., "link": ...}, ...]}``.

    Raises:
        ValueError: If the recording is not a mapping of strings to lists of objects.
    """

    name: ClassVar[str] = "recorded"

    def __init__(self, recording: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        if not isinstance(recording, Mapping):
            raise ValueError(f"recording must be a mapping, got {type(recording).__name__}")
        self._exact: dict[str, list[Mapping[str, Any]]] = {}
        self._normalized: dict[str, list[Mapping[str, Any]]] = {}
        self._add(recording, "recording")

    def _add(self, recording: Mapping[str, Any], source: str) -> None:
        for query, results in recording.items():
            checked = _check_results(query, results, source)
            self._exact.setdefault(query, checked)
            self._normalized.setdefault(normalize_query(query), checked)

    @property
    def queries(self) -> list[str]:
        """The recorded queries, in recording order."""
        return list(self._exact)

    @property
    def digest(self) -> str:
        """The SHA-256 of what the recording replays: its queries and results, in order.

        The identity of the recording in cache keys: editing a result of the file changes
        it, moving the file or re-indenting it does not.
        """
        replayed = [[query, [dict(r) for r in results]] for query, results in self._exact.items()]
        text = json.dumps(replayed, sort_keys=True, separators=(",", ":"), default=repr)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()  # ASCII JSON

    @classmethod
    def from_records(
        cls, records: Iterable[Mapping[str, Any]], *, field: str = VERISCORE_FIELD
    ) -> RecordedSearch:
        """Build from records that each hold a recording under ``field``.

        When a query appears in several records, the first recording wins.

        Args:
            records: E.g. VeriScore records.
            field: The field holding ``{query: [results]}``.

        Returns:
            The provider.

        Raises:
            ValueError: If a record lacks the field or the field is malformed.
        """
        provider = cls({})
        for number, record in enumerate(records, start=1):
            source = f"record {number}"
            if not isinstance(record, Mapping) or not isinstance(record.get(field), Mapping):
                raise ValueError(f"{source}: expected an object with a {field!r} mapping")
            provider._add(record[field], source)
        return provider

    @classmethod
    def from_jsonl(cls, path: str | Path, *, field: str = VERISCORE_FIELD) -> RecordedSearch:
        """Load a JSONL file of records (e.g. VeriScore's ``data_sample.jsonl``).

        Args:
            path: The file.
            field: The field of each record holding ``{query: [results]}``.

        Returns:
            The provider.

        Raises:
            ValueError: If a line is not valid JSON (or not UTF-8, or holds a lone surrogate:
                a :class:`~langchain_references.errors.RecordError` naming ``file:line``) or
                lacks the field.
        """
        records: list[Any] = []
        for _, value in iter_json_objects(path):
            if isinstance(value, RecordError):
                raise value
            records.append(value)
        return cls.from_records(records, field=field)

    @classmethod
    def from_json(cls, path: str | Path, *, field: str = VERISCORE_FIELD) -> RecordedSearch:
        """Load a JSON file: a recording, a record with ``field``, or a list of such records.

        Args:
            path: The file.
            field: The field holding ``{query: [results]}`` in record form.

        Returns:
            The provider.

        Raises:
            ValueError: If the file is not valid JSON (or not UTF-8: a
                :class:`~langchain_references.errors.RecordError` naming ``file:line``) or has
                none of the accepted shapes.
        """
        try:
            data = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON: {exc}") from exc
        if isinstance(data, list):
            return cls.from_records(data, field=field)
        if isinstance(data, Mapping) and isinstance(data.get(field), Mapping):
            return cls.from_records([data], field=field)
        if isinstance(data, Mapping):
            return cls(data)
        raise ValueError(f"{path}: expected a JSON object or list, got {type(data).__name__}")

    def _search(self, query: str, k: int) -> list[SearchHit]:
        results = self._exact.get(query)
        if results is None:
            results = self._normalized.get(normalize_query(query))
        if results is None:
            logger.warning("No recorded search results for query %r", query)
            return []
        return hits_from_records(results, k=k)

    async def _asearch(self, query: str, k: int) -> list[SearchHit]:
        return self._search(query, k)
