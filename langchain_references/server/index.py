"""The evidence index: corpus records as Chroma entries, at two granularities.

Each corpus record ``{"id", "title", "text", "url"?, "doi"?, "year"?, "citation_count"?,
"influential_citation_count"?, ...}`` becomes one ``abstract`` entry (the whole text, id
``"{id}:abstract"``) and one ``phrase`` entry per sentence (id ``"{id}:phrase:{i}"``), each with
the record's metadata. Writes are upserts by id, and a record's stale sentences (its text got
shorter) are deleted, so re-building from the same file changes nothing.

The collection uses cosine distance ``d = 1 - c``; a hit's ``similarity`` is ``(c + 1) / 2``,
in ``[0, 1]``. Vectors come from any LangChain :class:`~langchain_core.embeddings.Embeddings`
(the offline MiniLM by default); the index never asks Chroma to embed.

**Threads and processes.** One Chroma client per index, created under a process-wide lock;
Chroma's clients are thread-safe, so searches run concurrently. Several worker processes may
open the same embedded directory to read it, or share a Chroma server (``chroma run``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast, get_args
from urllib.parse import urlsplit

from langchain_references._optional import require
from langchain_references.citations.sentences import split_cited_sentences
from langchain_references.errors import LangchainReferencesError, RecordError

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import QueryResult
    from langchain_core.embeddings import Embeddings

__all__ = [
    "EvidenceHit",
    "EvidenceIndex",
    "EvidenceIndexError",
    "EvidenceRecord",
    "Granularity",
    "IndexNotFoundError",
    "load_embeddings",
    "parse_evidence_record",
    "split_sentences",
]

logger = logging.getLogger(__name__)

Granularity: TypeAlias = Literal["abstract", "phrase"]
GRANULARITIES: Final[tuple[Granularity, ...]] = get_args(Granularity)

#: Metadata keys the index writes itself; a record may not use them.
RESERVED_KEYS: Final = frozenset({"record_id", "granularity", "position", "embeddings"})
_KNOWN_STR: Final = ("url", "doi", "openalex_id")
_KNOWN_INT: Final = ("year", "citation_count", "influential_citation_count")
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,61}[A-Za-z0-9]$")
_CLIENT_LOCK: Final = threading.Lock()

Scalar: TypeAlias = str | int | float | bool


class EvidenceIndexError(LangchainReferencesError, RuntimeError):
    """The evidence index cannot be opened, written or searched."""


class IndexNotFoundError(EvidenceIndexError, LookupError):
    """No index of that name exists at that location."""


@dataclass(frozen=True, slots=True)
class EvidenceRecord:
    """One validated corpus record.

    Attributes:
        id: The record's id (a JSON string or integer, as a string).
        title: Its title (may be empty).
        text: Its text (the abstract; not blank).
        url: Its URL, if any.
        doi: Its DOI, if any.
        openalex_id: Its OpenAlex id, if any.
        year: Publication year, if known.
        citation_count: Citation count, if known.
        influential_citation_count: Influential citation count, if known.
        extra: The record's other keys, as Chroma metadata scalars (nested values as JSON).
    """

    id: str
    title: str
    text: str
    url: str | None = None
    doi: str | None = None
    openalex_id: str | None = None
    year: int | None = None
    citation_count: int | None = None
    influential_citation_count: int | None = None
    extra: Mapping[str, Scalar] = field(default_factory=dict)

    def metadata(self) -> dict[str, Scalar]:
        """The metadata stored on each of the record's entries (``None`` values left out)."""
        meta: dict[str, Scalar] = {**self.extra, "record_id": self.id, "title": self.title}
        for key in (*_KNOWN_STR, *_KNOWN_INT):
            value = getattr(self, key)
            if value is not None:
                meta[key] = value
        return meta


@dataclass(frozen=True, slots=True)
class EvidenceHit:
    """One search result.

    Attributes:
        id: The entry's id (``"{record_id}:abstract"`` or ``"{record_id}:phrase:{i}"``).
        record_id: The corpus record it comes from.
        title: The record's title.
        text: The entry's text (the abstract, or one sentence of it).
        similarity: ``(cosine + 1) / 2``, in ``[0, 1]``.
        granularity: ``"abstract"`` or ``"phrase"``.
        url: The record's URL, if any.
        doi: The record's DOI, if any.
        openalex_id: The record's OpenAlex id, if any.
        year: Publication year, if known.
        citation_count: Citation count, if known.
        influential_citation_count: Influential citation count, if known.
        metadata: Every metadata key stored with the entry (the record's extra keys included).
    """

    id: str
    record_id: str
    title: str
    text: str
    similarity: float
    granularity: Granularity
    url: str | None = None
    doi: str | None = None
    openalex_id: str | None = None
    year: int | None = None
    citation_count: int | None = None
    influential_citation_count: int | None = None
    metadata: Mapping[str, Scalar] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Entry:
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


def _optional_str(obj: Mapping[str, Any], key: str, location: str | None) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value or None
    raise RecordError(f"{key}: must be a string", location, field=key)


def _optional_int(obj: Mapping[str, Any], key: str, location: str | None) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{key}: must be an integer", location, field=key)
    return value


def _scalar(value: Any) -> Scalar | None:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def parse_evidence_record(obj: Any, *, location: str | None = None) -> EvidenceRecord:
    """Validate one corpus record (a :func:`~langchain_references.loading.load_records` parser).

    Args:
        obj: The decoded JSON value.
        location: Where it came from (``file:line``), for errors.

    Returns:
        The record; extra keys become metadata scalars (``null`` dropped, lists and objects
        as JSON strings).

    Raises:
        RecordError: If it is not an object, ``id`` is not a non-empty string or integer,
            ``title`` is not a string, ``text`` is blank, a known field has the wrong type, or
            an extra key is reserved.
    """
    if not isinstance(obj, dict):
        raise RecordError("must be a JSON object", location)
    raw_id = obj.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
        raise RecordError("id: must be a non-empty string or integer", location, field="id")
    title = obj.get("title", "")
    if not isinstance(title, str):
        raise RecordError("title: must be a string", location, field="title")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise RecordError("text: must be a non-blank string", location, field="text")
    known = {"id", "title", "text", *_KNOWN_STR, *_KNOWN_INT}
    extra: dict[str, Scalar] = {}
    for key, value in obj.items():
        if key in known:
            continue
        if key in RESERVED_KEYS:
            raise RecordError(f"{key}: reserved by the index, rename it", location, field=key)
        scalar = _scalar(value)
        if scalar is not None:
            extra[key] = scalar
    return EvidenceRecord(
        id=str(raw_id).strip(),
        title=title.strip(),
        text=text.strip(),
        url=_optional_str(obj, "url", location),
        doi=_optional_str(obj, "doi", location),
        openalex_id=_optional_str(obj, "openalex_id", location),
        year=_optional_int(obj, "year", location),
        citation_count=_optional_int(obj, "citation_count", location),
        influential_citation_count=_optional_int(obj, "influential_citation_count", location),
        extra=extra,
    )


def _entries(record: EvidenceRecord) -> list[_Entry]:
    """The abstract entry and the phrase entries of a record."""
    meta = record.metadata()
    entries = [_Entry(f"{record.id}:abstract", record.text, {**meta, "granularity": "abstract"})]
    for i, sentence in enumerate(split_sentences(record.text)):
        entries.append(
            _Entry(
                f"{record.id}:phrase:{i}",
                sentence,
                {**meta, "granularity": "phrase", "position": i},
            )
        )
    return entries


def load_embeddings(spec: str | None = None) -> Embeddings:
    """The embeddings named by ``spec``.

    Args:
        spec: ``None`` or ``"minilm"`` for the offline all-MiniLM-L6-v2, or
            ``"package.module:factory"``: a LangChain ``Embeddings`` class or function called
            without arguments (configure it with its environment variables).

    Returns:
        The embeddings.

    Raises:
        ValueError: If the spec is malformed or does not give an ``Embeddings``.
        ImportError: If its module cannot be imported.
    """
    from langchain_core.embeddings import Embeddings

    if spec is None or spec == "minilm":
        from langchain_references.embeddings import MiniLMEmbeddings

        return MiniLMEmbeddings()
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"embeddings must be 'minilm' or 'module:factory', got {spec!r}")
    factory = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(factory):
        raise ValueError(f"{spec!r} is not a callable in {module_name}")
    try:
        embeddings = factory()
    except Exception as exc:  # a factory's own error (missing key, bad signature...)
        raise ValueError(f"{spec}() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(embeddings, Embeddings):
        raise ValueError(f"{spec!r} gave a {type(embeddings).__name__}, not an Embeddings")
    return embeddings


def _last_of_each_id(records: Iterable[EvidenceRecord]) -> list[EvidenceRecord]:
    """The records in order, a repeated id keeping its last record (at its first place)."""
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


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _hits(result: QueryResult, granularity: Granularity) -> list[list[EvidenceHit]]:
    """Turn a Chroma query result (cosine distances) into hits, one list per query."""
    ids_per_query = result["ids"]
    documents = result.get("documents") or [[] for _ in ids_per_query]
    metadatas = result.get("metadatas") or [[] for _ in ids_per_query]
    distances = result.get("distances") or [[] for _ in ids_per_query]
    out: list[list[EvidenceHit]] = []
    for ids, docs, metas, dists in zip(ids_per_query, documents, metadatas, distances, strict=True):
        hits: list[EvidenceHit] = []
        for entry_id, doc, meta, distance in zip(ids, docs, metas, dists, strict=True):
            meta = dict(meta or {})
            similarity = min(1.0, max(0.0, 1.0 - float(distance) / 2.0))
            hits.append(
                EvidenceHit(
                    id=entry_id,
                    record_id=str(meta.get("record_id", entry_id.rsplit(":", 2)[0])),
                    title=str(meta.get("title", "")),
                    text=doc or "",
                    similarity=similarity,
                    granularity=granularity,
                    url=_str_or_none(meta.get("url")),
                    doi=_str_or_none(meta.get("doi")),
                    openalex_id=_str_or_none(meta.get("openalex_id")),
                    year=_int_or_none(meta.get("year")),
                    citation_count=_int_or_none(meta.get("citation_count")),
                    influential_citation_count=_int_or_none(meta.get("influential_citation_count")),
                    metadata=cast("dict[str, Scalar]", meta),
                )
            )
        out.append(hits)
    return out


def _check_query(granularity: str, k: int) -> None:
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _client(persist_dir: Path | None, chroma_url: str | None) -> ClientAPI:
    chromadb = require("chromadb", "server", feature="The evidence index")
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    with _CLIENT_LOCK:  # Chroma's first set-up in a process is not thread-safe
        if chroma_url is not None:
            parts = urlsplit(chroma_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise EvidenceIndexError(f"not an http(s) URL: {chroma_url!r}")
            ssl = parts.scheme == "https"
            port = parts.port or (443 if ssl else 80)
            try:
                return cast(
                    "ClientAPI",
                    chromadb.HttpClient(host=parts.hostname, port=port, ssl=ssl, settings=settings),
                )
            except Exception as exc:  # chromadb raises plain exceptions when unreachable
                raise EvidenceIndexError(f"cannot reach Chroma at {chroma_url}: {exc}") from exc
        if persist_dir is None:
            raise EvidenceIndexError("give persist_dir or chroma_url")
        return cast(
            "ClientAPI", chromadb.PersistentClient(path=str(persist_dir), settings=settings)
        )


class EvidenceIndex:
    """A named evidence index in an embedded Chroma directory or on a Chroma server.

    Open one with :meth:`open`; build it with :meth:`add_records`; search it with
    :meth:`search` / :meth:`asearch` (or several queries at once with :meth:`search_many` /
    :meth:`asearch_many`).

    Args:
        collection: The Chroma collection (cosine space).
        embeddings: The embeddings of the entries and the queries.
        name: The index name.
        location: Where it lives (a directory or a URL), for messages.
        max_batch_size: The most entries Chroma accepts in one write.
    """

    def __init__(
        self,
        collection: Collection,
        embeddings: Embeddings,
        *,
        name: str,
        location: str,
        max_batch_size: int = 1000,
    ) -> None:
        self._collection = collection
        self.max_batch_size = max(1, max_batch_size)
        self.embeddings = embeddings
        self.name = name
        self.location = location
        self._write_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        name: str,
        *,
        persist_dir: str | Path | None = None,
        chroma_url: str | None = None,
        embeddings: Embeddings | None = None,
        create: bool = False,
    ) -> EvidenceIndex:
        """Open (or create) an index.

        Args:
            name: The index name: 3-63 characters, letters, digits, ``.``, ``_`` and ``-``,
                starting and ending with a letter or digit.
            persist_dir: Directory of an embedded Chroma.
            chroma_url: URL of a Chroma server (``http://host:port``), instead.
            embeddings: Embeddings for entries and queries (default: the offline MiniLM).
                Use the same ones to build and to search.
            create: Create the index if missing (building); otherwise it must exist.

        Returns:
            The index.

        Raises:
            ValueError: If the name is invalid, or both or neither locations are given.
            IndexNotFoundError: If the index does not exist and ``create`` is false.
            EvidenceIndexError: If Chroma cannot be reached or opened.
        """
        if not _NAME.match(name):
            raise ValueError(
                f"invalid index name {name!r}: use 3-63 letters, digits, '.', '_' or '-', "
                "starting and ending with a letter or digit"
            )
        if (persist_dir is None) == (chroma_url is None):
            raise ValueError("give exactly one of persist_dir and chroma_url")
        location = chroma_url or str(persist_dir)
        if persist_dir is not None:
            path = Path(persist_dir)
            if not create and not path.is_dir():
                raise IndexNotFoundError(f"no index directory {path}")
            client = _client(path, None)
        else:
            client = _client(None, chroma_url)
        if embeddings is None:
            embeddings = load_embeddings()
        kind = type(embeddings).__name__
        try:
            if create:
                collection = client.get_or_create_collection(
                    name,
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"embeddings": kind},
                    embedding_function=None,
                )
            else:
                collection = client.get_collection(name, embedding_function=None)
        except Exception as exc:  # chromadb's NotFoundError, connection errors...
            if not create and "does not exist" in str(exc).lower():
                raise IndexNotFoundError(f"no index {name!r} in {location}") from exc
            raise EvidenceIndexError(f"cannot open index {name!r} in {location}: {exc}") from exc
        built_with = (collection.metadata or {}).get("embeddings")
        if built_with is not None and built_with != kind:
            logger.warning(
                "index %r was built with %s embeddings, searching with %s", name, built_with, kind
            )
        try:
            max_batch = int(client.get_max_batch_size())
        except Exception:  # a client that cannot tell: Chroma's smallest limit
            max_batch = 1000
        return cls(collection, embeddings, name=name, location=location, max_batch_size=max_batch)

    def count(self, granularity: Granularity | None = None) -> int:
        """Number of entries, of one granularity or of both.

        Args:
            granularity: ``"abstract"``, ``"phrase"`` or ``None`` for all entries.

        Returns:
            The count.
        """
        if granularity is None:
            return int(self._collection.count())
        _check_query(granularity, 1)
        found = self._collection.get(where={"granularity": granularity}, include=[])
        return len(found["ids"])

    def add_records(
        self,
        records: Iterable[EvidenceRecord],
        *,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Upsert records (both granularities), in batches of entries.

        Re-adding a record replaces its entries; sentences it no longer has are deleted. When
        an id repeats, the last record with it wins (a warning is logged).

        Args:
            records: The records.
            batch_size: Entries embedded and written per batch (capped by Chroma's limit).
            progress: Called with the number of records done after each batch.

        Returns:
            The number of entries written.

        Raises:
            ValueError: If ``batch_size`` is not positive.
            EvidenceIndexError: If Chroma rejects a write.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        limit = min(batch_size, self.max_batch_size)
        unique = _last_of_each_id(records)
        written = 0
        pending: list[_Entry] = []
        pending_records: list[str] = []
        with self._write_lock:
            for record in unique:
                pending.extend(_entries(record))
                pending_records.append(record.id)
                if len(pending) >= limit:
                    written += self._flush(pending, pending_records, limit)
                    if progress is not None:
                        progress(len(pending_records))
                    pending, pending_records = [], []
            if pending:
                written += self._flush(pending, pending_records, limit)
                if progress is not None:
                    progress(len(pending_records))
        return written

    def _flush(self, entries: Sequence[_Entry], record_ids: Sequence[str], limit: int) -> int:
        try:
            for start in range(0, len(entries), limit):
                chunk = entries[start : start + limit]
                # A one-sentence record's phrase is its abstract: embed each text once.
                texts = list(dict.fromkeys(e.text for e in chunk))
                by_text = dict(zip(texts, self.embeddings.embed_documents(texts), strict=True))
                vectors = [by_text[e.text] for e in chunk]
                self._collection.upsert(
                    ids=[e.id for e in chunk],
                    embeddings=cast("Any", vectors),
                    documents=[e.text for e in chunk],
                    metadatas=cast("Any", [e.metadata for e in chunk]),
                )
            fresh = {e.id for e in entries}
            owners = {"record_id": {"$in": list(dict.fromkeys(record_ids))}}
            existing = self._collection.get(where=cast("Any", owners), include=[])
            stale = [i for i in existing["ids"] if i not in fresh]
            if stale:
                self._collection.delete(ids=stale)
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot write to index {self.name!r}: {exc}") from exc
        return len(entries)

    def _query(
        self, vectors: list[list[float]], granularity: Granularity, k: int
    ) -> list[list[EvidenceHit]]:
        try:
            result = self._collection.query(
                query_embeddings=cast("Any", vectors),
                n_results=k,
                where={"granularity": granularity},
                include=["documents", "metadatas", "distances"],
            )
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"search failed in index {self.name!r}: {exc}") from exc
        return _hits(result, granularity)

    def search(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
        """The ``k`` entries of one granularity closest to ``query``, best first.

        Args:
            query: The text to look for.
            granularity: ``"abstract"`` or ``"phrase"``.
            k: How many hits at most.

        Returns:
            The hits.

        Raises:
            ValueError: If ``granularity`` or ``k`` is invalid.
            EvidenceIndexError: If Chroma fails.
        """
        return self.search_many([query], granularity=granularity, k=k)[0]

    async def asearch(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
        """Async :meth:`search` (the blocking parts run in executor threads)."""
        return (await self.asearch_many([query], granularity=granularity, k=k))[0]

    def search_many(
        self, queries: Sequence[str], *, granularity: Granularity, k: int
    ) -> list[list[EvidenceHit]]:
        """:meth:`search` for several queries, in one Chroma query.

        Args:
            queries: The texts to look for.
            granularity: ``"abstract"`` or ``"phrase"``.
            k: How many hits at most per query.

        Returns:
            One hit list per query, in order.
        """
        _check_query(granularity, k)
        if not queries:
            return []
        vectors = [self.embeddings.embed_query(q) for q in queries]
        return self._query(vectors, granularity, k)

    async def asearch_many(
        self, queries: Sequence[str], *, granularity: Granularity, k: int
    ) -> list[list[EvidenceHit]]:
        """Async :meth:`search_many`."""
        _check_query(granularity, k)
        if not queries:
            return []
        vectors = list(await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries)))
        return await asyncio.to_thread(self._query, vectors, granularity, k)
