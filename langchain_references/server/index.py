"""The evidence index: corpus records as Chroma entries, at two granularities.

Each corpus record ``{"id", "title", "text", "url"?, "doi"?, "year"?, "citation_count"?,
"influential_citation_count"?, ...}`` becomes one ``abstract`` entry (the whole text, id
``"{id}:abstract"``) and one ``phrase`` entry per sentence (id ``"{id}:phrase:{i}"``), each with
the record's metadata.

**Generations.** An index is built atomically (:meth:`EvidenceIndex.build`): the entries go
into a new collection, a *generation* named ``"{name}__g{N}"``; only when every entry is written
(and counted) does the index switch to it, in one step: the metadata of the empty collection
``name`` (the *pointer*) then names the generation, with its entry count and
``lr_complete: true``. A build that fails or is interrupted drops its generation and leaves the
pointer as it was, so the previous generation still serves (or there is still no index); a
build killed outright leaves an unfinished generation that nothing points at, which the next
build deletes. :meth:`EvidenceIndex.open` opens the generation the pointer names and refuses
(:class:`IncompleteIndexError`) an index without a complete generation: one whose first build
never finished, whose generation is missing or short of entries, whose in-place update
(:meth:`EvidenceIndex.add_records`) was interrupted, or one built by an older version without
a pointer. After a switch the previous generation is kept, so that the searches a ``serve`` runs on
it finish there (a running service moves to the new generation by itself:
:mod:`~langchain_references.server.live`); the next build deletes it. One build at a time per
index.

Within a generation writes are upserts by id, and a record's stale sentences (its text got
shorter) are deleted by :meth:`EvidenceIndex.add_records`.

The collection uses cosine distance ``d = 1 - c``; a hit's ``similarity`` is ``(c + 1) / 2``,
in ``[0, 1]``. Vectors come from any LangChain :class:`~langchain_core.embeddings.Embeddings`
(the offline MiniLM by default); the index never asks Chroma to embed.

**Retrieval.** A search ranks the entries of one granularity in the index's
:data:`~langchain_references.retrieval.Retrieval` mode: ``dense`` (the cosine), ``bm25``
(:class:`~langchain_references.retrieval.BM25Index`, one per granularity) or ``hybrid`` (the
default: the first :data:`FUSION_DEPTH` of each, fused by
:func:`~langchain_references.retrieval.reciprocal_rank_fusion`). Every hit carries its cosine
``similarity`` whichever mode found it. The dense ranking asks Chroma for the nearest entries of
*both* granularities, as many as needed to hold the ``k`` nearest of the wanted one (from the
share of each granularity), rather than a query filtered on the granularity: Chroma's filtered
query scans the filter's matches (about 80 times slower at 100k entries); a filtered query is
the fallback when the unfiltered ones come back short. An embedded index keeps its BM25 indexes
per generation, written before the switch (:mod:`~langchain_references.server.bm25_store`),
with the stored vectors of their entries (a memory-mapped ``vectors.npy`` per granularity,
in BM25 order): the cosine of a hit that BM25 alone found is taken from them, so that a
search reads only the documents and metadata of its hits from Chroma. An index on a Chroma
server, or one built without them (``index build --retrieval dense``, older versions), gets its
BM25 indexes built in memory from its entries when opened, and reads those vectors with its
hits.

**Threads and processes.** One Chroma client per index, created under a process-wide lock;
Chroma's clients are thread-safe, so searches run concurrently. Several worker processes may
open the same embedded directory to read it, or share a Chroma server (``chroma run``). A
build may embed its batches on Ray actors (``engine="ray"``,
:mod:`~langchain_references.server.index_ray`), which write them into a Chroma server
themselves, or hand the vectors back for this process to write into the embedded store.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, cast, get_args

from langchain_references._chroma import http_client, persistent_client
from langchain_references._optional import MissingDependencyError, require
from langchain_references.citations.sentences import split_cited_sentences
from langchain_references.engine import DEFAULT_ENGINE, ENGINES, Engine, RayOptions
from langchain_references.errors import LangchainReferencesError, RecordError
from langchain_references.retrieval import (
    DEFAULT_RETRIEVAL,
    BM25Index,
    LexicalIndexError,
    Retrieval,
    check_retrieval,
    reciprocal_rank_fusion,
)
from langchain_references.server import bm25_store
from langchain_references.server.settings import MAX_RECORD_CHARS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from langchain_core.embeddings import Embeddings

    from langchain_references.server.index_ray import RayWriter

__all__ = [
    "FUSION_DEPTH",
    "GENERATION_SEPARATOR",
    "MAX_RECORD_CHARS",
    "Bibliography",
    "BuildResult",
    "EvidenceHit",
    "EvidenceIndex",
    "EvidenceIndexError",
    "EvidenceRecord",
    "Granularity",
    "IncompleteIndexError",
    "IndexBuildError",
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
#: Between an index name and a generation number, in a generation's collection name.
GENERATION_SEPARATOR: Final = "__g"
# 3-52 characters, so that "{name}__g{N}" fits the 63 characters older Chroma servers allow.
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,50}[A-Za-z0-9]$")
# The pointer's metadata: the current generation, whether it is complete, its size, and
# how many in-place updates (``add_records``) its generation has had.
_GENERATION_KEY: Final = "lr_generation"
_COMPLETE_KEY: Final = "lr_complete"
_ENTRIES_KEY: Final = "lr_entries"
_REVISION_KEY: Final = "lr_revision"
_RECORDS_KEY: Final = "lr_records"
_BUILT_AT_KEY: Final = "lr_built_at"
_COSINE: Final[dict[str, Any]] = {"hnsw": {"space": "cosine"}}
#: Hybrid search fuses the first this-many entries of the dense and of the BM25 ranking.
FUSION_DEPTH: Final = 20
# The unfiltered dense query asks for this many more entries than the share of the wanted
# granularity predicts (and at least 10 more), doubling while it comes back short, up to
# _OVERSAMPLE_CAP entries; then a filtered query answers.
_OVERSAMPLE: Final = 1.25
_OVERSAMPLE_CAP: Final = 2048

Scalar: TypeAlias = str | int | float | bool
_T = TypeVar("_T")


class EvidenceIndexError(LangchainReferencesError, RuntimeError):
    """The evidence index cannot be opened, written or searched."""


class IndexNotFoundError(EvidenceIndexError, LookupError):
    """No index of that name exists at that location."""


class IncompleteIndexError(EvidenceIndexError):
    """The index has no complete generation to serve.

    Its first build was interrupted or failed, its generation is missing or short of entries,
    an in-place update was interrupted, or an older version built it without a completion
    mark. The message is one line that says which, and to run ``index build`` again.
    """


class IndexBuildError(EvidenceIndexError):
    """A build failed and was undone: the message says what still serves (or that none does)."""


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


def _bibliography(
    obj: Mapping[str, Any],
    read_str: Callable[[Mapping[str, Any], str], str | None],
    read_int: Callable[[Mapping[str, Any], str], int | None],
) -> dict[str, Any]:
    """The :class:`Bibliography` fields read from a record or an entry's metadata."""
    return {
        **{key: read_str(obj, key) for key in _KNOWN_STR},
        **{key: read_int(obj, key) for key in _KNOWN_INT},
    }


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
        for key in (*_KNOWN_STR, *_KNOWN_INT):
            value = getattr(self, key)
            if value is not None:
                meta[key] = value
        return meta


@dataclass(frozen=True, slots=True)
class EvidenceHit(Bibliography):
    """One search result, with its record's :class:`Bibliography` fields.

    Attributes:
        id: The entry's id (``"{record_id}:abstract"`` or ``"{record_id}:phrase:{i}"``).
        record_id: The corpus record it comes from.
        title: The record's title.
        text: The entry's text (the abstract, or one sentence of it).
        similarity: ``(cosine + 1) / 2``, in ``[0, 1]``.
        granularity: ``"abstract"`` or ``"phrase"``.
        metadata: Every metadata key stored with the entry (the record's extra keys included).
    """

    id: str
    record_id: str
    title: str
    text: str
    similarity: float
    granularity: Granularity
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


def parse_evidence_record(
    obj: Any, *, location: str | None = None, max_chars: int = MAX_RECORD_CHARS
) -> EvidenceRecord:
    """Validate one corpus record (a :func:`~langchain_references.loading.load_records` parser).

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
    for key in ("id", "title", "text", *_KNOWN_STR):
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
        **_bibliography(
            obj,
            lambda o, key: _optional_str(o, key, location),
            lambda o, key: _optional_int(o, key, location),
        ),
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


def _chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    """``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _batches(
    records: Iterable[EvidenceRecord], limit: int
) -> Iterator[tuple[list[str], list[_Entry]]]:
    """The records' entries in batches of about ``limit``: ``(record ids, entries)``.

    A batch closes after the record that brings it to ``limit`` entries or more (a record's
    entries stay in one batch), so every engine writes the same batches.
    """
    pending: list[_Entry] = []
    pending_records: list[str] = []
    for record in records:
        pending.extend(_entries(record))
        pending_records.append(record.id)
        if len(pending) >= limit:
            yield pending_records, pending
            pending, pending_records = [], []
    if pending:
        yield pending_records, pending


def _upsert(
    collection: Collection, entries: Sequence[_Entry], vectors: Sequence[Sequence[float]]
) -> None:
    """Upsert entries with their vectors (at most Chroma's batch limit of them)."""
    collection.upsert(
        ids=[e.id for e in entries],
        embeddings=cast("Any", list(vectors)),
        documents=[e.text for e in entries],
        metadatas=cast("Any", [e.metadata for e in entries]),
    )


def _embed_and_write(
    entries: Sequence[_Entry],
    embeddings: Embeddings,
    limit: int,
    write: Callable[[Sequence[_Entry], list[list[float]]], None],
) -> int:
    """Embed a batch of entries ``limit`` at a time and hand each slice to ``write``.

    The one way entries are embedded, in this process (:meth:`EvidenceIndex.build`,
    :meth:`EvidenceIndex.add_records`) and in Ray workers
    (:mod:`~langchain_references.server.index_ray`): a text repeated in a slice (a
    one-sentence record's phrase is its abstract) is embedded once.

    Args:
        entries: The entries.
        embeddings: Their embeddings.
        limit: Entries per slice (at most Chroma's batch limit).
        write: Called with each slice and its vectors, in order (e.g. an upsert).

    Returns:
        The number of entries written.
    """
    for chunk in _chunks(entries, limit):
        texts = list(dict.fromkeys(e.text for e in chunk))
        by_text = dict(zip(texts, embeddings.embed_documents(texts), strict=True))
        write(chunk, [by_text[e.text] for e in chunk])
    return len(entries)


def _bm25_of_records(records: Iterable[EvidenceRecord]) -> dict[Granularity, BM25Index]:
    """The BM25 index of each granularity of the records' entries."""
    ids: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
    texts: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
    for record in records:
        for entry in _entries(record):
            granularity = cast("Granularity", entry.metadata["granularity"])
            ids[granularity].append(entry.id)
            texts[granularity].append(entry.text)
    return {g: BM25Index.build(ids[g], texts[g]) for g in GRANULARITIES}


def load_embeddings(spec: str | None = None) -> Embeddings:
    """The embeddings named by ``spec``.

    Args:
        spec: ``None`` or ``"minilm"`` for the offline all-MiniLM-L6-v2 (the process's one
            instance, :func:`~langchain_references.embeddings.shared_minilm`), or
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
        from langchain_references.embeddings import shared_minilm

        return shared_minilm()
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


def _str_or_none(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return value if isinstance(value, str) and value else None


def _int_or_none(meta: Mapping[str, Any], key: str) -> int | None:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _hit(
    entry_id: str, doc: str | None, meta: Mapping[str, Any] | None, distance: float
) -> EvidenceHit:
    """One hit from a Chroma entry and its cosine distance to the query."""
    meta = dict(meta or {})
    similarity = min(1.0, max(0.0, 1.0 - float(distance) / 2.0))
    granularity = meta.get("granularity")
    return EvidenceHit(
        id=entry_id,
        record_id=str(meta.get("record_id", entry_id.rsplit(":", 2)[0])),
        title=str(meta.get("title", "")),
        text=doc or "",
        similarity=similarity,
        granularity=granularity if granularity in GRANULARITIES else "phrase",
        **_bibliography(meta, _str_or_none, _int_or_none),
        metadata=cast("dict[str, Scalar]", meta),
    )


def _granularity_of(entry_id: str) -> Granularity:
    """An entry's granularity, from its id (``"{record}:abstract"``, ``"{record}:phrase:{i}"``)."""
    return "abstract" if entry_id.endswith(":abstract") else "phrase"


def _cosine_distances(query: Sequence[float], vectors: Any) -> list[float]:
    """``1 - cosine`` of the query with each vector (1 when one of the two is zero)."""
    if len(vectors) == 0:
        return []
    numpy: Any = require("numpy", "server", feature="The evidence index")
    a = numpy.asarray(query, dtype=numpy.float64)
    b = numpy.asarray(vectors, dtype=numpy.float64)
    norms = numpy.linalg.norm(b, axis=1) * numpy.linalg.norm(a)
    dots = b @ a
    safe = numpy.where(norms > 0, norms, 1.0)
    return [float(d) for d in numpy.where(norms > 0, 1.0 - dots / safe, 1.0)]


@dataclass(frozen=True, slots=True)
class _Saved:
    """A granularity's saved snapshot (rows in its BM25 order) and the row of each entry id.

    ``entries`` is ``None`` when only the vectors were saved.
    """

    matrix: Any  # a read-only numpy array (memory-mapped)
    rows: Mapping[str, int]
    entries: bm25_store.SavedEntries | None = None

    def take(self, ids: Sequence[str]) -> Any:
        """The vectors of these entries, in order."""
        return self.matrix[[self.rows[e] for e in ids]]


def _check_query(granularity: str, k: int) -> None:
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _client(persist_dir: Path | None, chroma_url: str | None, *, fresh: bool = False) -> ClientAPI:
    """A client of the package's one factory (:mod:`langchain_references._chroma`).

    ``fresh``: an embedded directory is loaded anew (see :func:`persistent_client`).
    """
    feature = "The evidence index"
    if chroma_url is not None:
        try:
            return http_client(chroma_url, feature=feature)
        except ValueError as exc:
            raise EvidenceIndexError(str(exc)) from exc
        except MissingDependencyError:
            raise
        except Exception as exc:  # chromadb raises plain exceptions when unreachable
            raise EvidenceIndexError(f"cannot reach Chroma at {chroma_url}: {exc}") from exc
    if persist_dir is None:
        raise EvidenceIndexError("give persist_dir or chroma_url")
    return persistent_client(persist_dir, feature=feature, fresh=fresh)


def _is_not_found(exc: Exception) -> bool:
    """Whether a Chroma error says that a collection does not exist."""
    return type(exc).__name__ == "NotFoundError" or "does not exist" in str(exc).lower()


def _collection(client: ClientAPI, name: str) -> Collection | None:
    """The collection ``name``, or ``None`` if there is none."""
    try:
        return client.get_collection(name, embedding_function=None)
    except Exception as exc:  # chromadb's NotFoundError, connection errors...
        if _is_not_found(exc):
            return None
        raise


def _revision(meta: Mapping[str, Any]) -> int:
    """The in-place update count in a pointer's metadata (0 when absent or malformed)."""
    value = meta.get(_REVISION_KEY, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _generations(client: ClientAPI, name: str) -> dict[int, str]:
    """The generation collections of index ``name``, by number."""
    pattern = re.compile(re.escape(name + GENERATION_SEPARATOR) + r"([1-9][0-9]{0,8})")
    found: dict[int, str] = {}
    for item in client.list_collections():
        collection_name = item if isinstance(item, str) else item.name
        match = pattern.fullmatch(collection_name)
        if match:
            found[int(match.group(1))] = collection_name
    return found


def _max_batch(client: ClientAPI) -> int:
    try:
        return int(client.get_max_batch_size())
    except Exception:  # a client that cannot tell: Chroma's smallest limit
        return 1000


@dataclass(frozen=True, slots=True)
class _State:
    """What the pointer of an index says, and why the index cannot be served (if it cannot)."""

    pointer: Collection | None = None
    generation: Collection | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    entries: int = 0
    problem: str | None = None
    legacy: bool = False

    @property
    def missing(self) -> bool:
        return self.pointer is None and self.problem is None

    @property
    def complete(self) -> bool:
        return self.generation is not None and self.problem is None


def _resolve(client: ClientAPI, name: str, location: str) -> _State:
    """Read the pointer of index ``name`` and check the generation it names."""
    where = f"index {name!r} in {location}"
    again = "run `index build` again"
    pointer = _collection(client, name)
    if pointer is None:
        unfinished = _generations(client, name)
        if unfinished:
            return _State(
                problem=f"{where} has no complete build: an interrupted or failed build left "
                f"{len(unfinished)} unfinished generation(s); {again}"
            )
        return _State()
    meta = dict(pointer.metadata or {})
    generation_name = meta.get(_GENERATION_KEY)
    if not isinstance(generation_name, str):
        return _State(
            pointer=pointer,
            metadata=meta,
            legacy=True,
            problem=f"{where} was built by an older version that did not mark complete "
            f"builds, so it may be partial; {again}",
        )
    generation = _collection(client, generation_name)
    if generation is None:
        return _State(
            pointer=pointer,
            metadata=meta,
            problem=f"{where} is incomplete: its generation {generation_name!r} is missing; "
            f"{again}",
        )
    entries = int(generation.count())
    expected = meta.get(_ENTRIES_KEY)
    problem = None
    if meta.get(_COMPLETE_KEY) is not True:
        problem = (
            f"{where} is incomplete: an update of its generation {generation_name!r} was "
            f"interrupted or failed; {again}"
        )
    elif entries != expected:
        problem = (
            f"{where} is incomplete: its generation {generation_name!r} holds {entries} of "
            f"its {expected} entries; {again}"
        )
    return _State(pointer, generation, meta, entries, problem)


def _left_as(state: _State, name: str) -> str:
    """What a failed build leaves, in words."""
    if state.complete:
        assert state.generation is not None
        return (
            f"index {name!r} left as it was: generation {state.generation.name!r} "
            f"({state.entries} entries) still current"
        )
    if state.missing:
        return f"no index {name!r} was made"
    return f"index {name!r} left as it was, still without a complete build"


def _drop(client: ClientAPI, collection_name: str) -> bool:
    """Delete a collection, logging (not raising) a failure."""
    try:
        client.delete_collection(collection_name)
    except Exception as exc:  # already gone, Chroma unreachable...
        if not _is_not_found(exc):
            logger.warning("could not delete collection %r: %s", collection_name, exc)
            return False
    return True


def _drop_unless_current(
    client: ClientAPI, name: str, generation_name: str, bm25_root: Path | None = None
) -> None:
    """Undo a build: delete its generation (and BM25 indexes) unless the pointer names it."""
    try:
        pointer = _collection(client, name)
        if pointer is not None and (pointer.metadata or {}).get(_GENERATION_KEY) == (
            generation_name
        ):
            return
    except Exception as exc:  # Chroma unreachable: nothing names it then, as far as we know
        logger.warning("could not read the pointer of index %r: %s", name, exc)
    _drop(client, generation_name)
    if bm25_root is not None:
        bm25_store.drop(bm25_root, generation_name)


def _switch(client: ClientAPI, state: _State, name: str, meta: dict[str, Any]) -> Collection:
    """Point index ``name`` at a generation, in one metadata write; returns the pointer."""
    if state.pointer is not None and not state.legacy:
        state.pointer.modify(metadata=meta)
        return state.pointer
    if state.pointer is not None:  # an older version's index: the name becomes the pointer
        client.delete_collection(name)
    return client.create_collection(
        name, configuration=cast("Any", _COSINE), metadata=meta, embedding_function=None
    )


def _connect(
    name: str,
    persist_dir: str | Path | None,
    chroma_url: str | None,
    *,
    create: bool,
    fresh: bool = False,
) -> tuple[ClientAPI, str]:
    """Check the name and the location, and connect: ``(client, location)``."""
    if not _NAME.match(name) or GENERATION_SEPARATOR[:2] in name:
        raise ValueError(
            f"invalid index name {name!r}: use 3-52 letters, digits, '.', '_' or '-', "
            "starting and ending with a letter or digit, without '__'"
        )
    if (persist_dir is None) == (chroma_url is None):
        raise ValueError("give exactly one of persist_dir and chroma_url")
    if persist_dir is not None:
        path = Path(persist_dir)
        if not create and not path.is_dir():
            raise IndexNotFoundError(f"no index directory {path}")
        return _client(path, None, fresh=fresh), str(persist_dir)
    assert chroma_url is not None
    return _client(None, chroma_url), chroma_url


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What :meth:`EvidenceIndex.build` did.

    Attributes:
        index: The index, open on its new generation.
        records: Records indexed (a repeated id counts once).
        entries: Entries in the new generation.
        previous_generation: The generation that was current before, if any (kept until the
            next build, for a ``serve`` still running on it).
        previous_entries: Its entries (0 when there was none).
        deleted: Older generations (and unfinished ones) deleted after the switch.
    """

    index: EvidenceIndex
    records: int
    entries: int
    previous_generation: str | None
    previous_entries: int
    deleted: tuple[str, ...]

    @property
    def generation(self) -> str:
        """The new generation's collection name."""
        return self.index.generation


class EvidenceIndex:
    """A named evidence index in an embedded Chroma directory or on a Chroma server.

    Build one with :meth:`build` (atomic: a new generation, switched to when complete); open
    its current generation with :meth:`open`; search it with :meth:`search` / :meth:`asearch`
    (or several queries at once with :meth:`search_many` / :meth:`asearch_many`).

    Args:
        collection: The Chroma collection of the generation (cosine space).
        embeddings: The embeddings of the entries and the queries.
        name: The index name.
        location: Where it lives (a directory or a URL), for messages.
        max_batch_size: The most entries Chroma accepts in one write.
        pointer: The index's pointer collection, kept up to date by :meth:`add_records`
            (``None``: the collection is written as is).
        retrieval: How searches rank: ``"dense"``, ``"bm25"`` or ``"hybrid"``.
        bm25: The BM25 index of each granularity (built from the entries when a search needs
            them and they are not given).
        bm25_root: Where the BM25 indexes of an embedded index are saved
            (:func:`~langchain_references.server.bm25_store.bm25_root`); ``None`` on a server.

    Raises:
        ValueError: If ``retrieval`` is not a mode.
    """

    def __init__(
        self,
        collection: Collection,
        embeddings: Embeddings,
        *,
        name: str,
        location: str,
        max_batch_size: int = 1000,
        pointer: Collection | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        bm25: Mapping[Granularity, BM25Index] | None = None,
        bm25_root: Path | None = None,
    ) -> None:
        self._collection = collection
        self._pointer = pointer
        self.max_batch_size = max(1, max_batch_size)
        self.embeddings = embeddings
        self.name = name
        self.location = location
        self.retrieval: Retrieval = check_retrieval(retrieval)
        self._bm25: dict[Granularity, BM25Index] | None = dict(bm25) if bm25 else None
        self._bm25_root = bm25_root
        # the saved snapshot of the BM25 indexes' entries (vectors, documents), rows by id
        self._saved: dict[Granularity, _Saved] | None = None
        self._sizes: dict[Granularity, int] | None = None
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._client: ClientAPI | None = None  # set by _on: the pointer is read through it
        # (persist_dir, chroma_url) of an index opened by open(): reopen() opens it again
        self._opened_from: tuple[str | Path | None, str | None] | None = None

    @classmethod
    def _on(
        cls,
        client: ClientAPI,
        collection: Collection,
        embeddings: Embeddings,
        name: str,
        location: str,
        *,
        pointer: Collection | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        bm25_root: Path | None = None,
    ) -> EvidenceIndex:
        """The index on ``collection``, with the batch limit of ``client``."""
        index = cls(
            collection,
            embeddings,
            name=name,
            location=location,
            max_batch_size=_max_batch(client),
            pointer=pointer,
            retrieval=retrieval,
            bm25_root=bm25_root,
        )
        index._client = client
        return index

    @property
    def generation(self) -> str:
        """The name of the Chroma collection searched (``"{name}__g{N}"``)."""
        return str(self._collection.name)

    @classmethod
    def open(
        cls,
        name: str,
        *,
        persist_dir: str | Path | None = None,
        chroma_url: str | None = None,
        embeddings: Embeddings | None = None,
        create: bool = False,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        reread: bool = False,
    ) -> EvidenceIndex:
        """Open the current generation of an index (or create an empty one).

        Args:
            name: The index name: 3-52 characters, letters, digits, ``.``, ``_`` and ``-``,
                starting and ending with a letter or digit, without ``__``.
            persist_dir: Directory of an embedded Chroma.
            chroma_url: URL of a Chroma server (``http://host:port``), instead.
            embeddings: Embeddings for entries and queries (default: the offline MiniLM).
                Use the same ones to build and to search.
            create: For writing with :meth:`add_records`: create an empty generation if the
                index is missing or has no complete one, and open an incomplete generation
                as it is (a re-run of :meth:`add_records` completes it).
            retrieval: How searches rank (``"hybrid"`` by default); ``"bm25"`` and
                ``"hybrid"`` load the generation's BM25 indexes now (or build them from the
                entries, with a warning, when it has none).
            reread: Load an embedded Chroma's directory anew, with what other processes
                wrote since this process opened it (:meth:`reopen` does); otherwise its
                vectors are searched as this process loaded them.

        Returns:
            The index.

        Raises:
            ValueError: If the name is invalid, both or neither locations are given, or
                ``retrieval`` is not a mode.
            IndexNotFoundError: If the index does not exist and ``create`` is false.
            IncompleteIndexError: If it has no complete generation and ``create`` is false.
            EvidenceIndexError: If Chroma cannot be reached or opened.
        """
        retrieval = check_retrieval(retrieval)
        client, location = _connect(name, persist_dir, chroma_url, create=create, fresh=reread)
        root = None if persist_dir is None else bm25_store.bm25_root(persist_dir)
        if embeddings is None:
            embeddings = load_embeddings()
        try:
            state = _resolve(client, name, location)
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot open index {name!r} in {location}: {exc}") from exc
        if not create and state.missing:
            raise IndexNotFoundError(f"no index {name!r} in {location}")
        if not create and state.problem is not None:
            raise IncompleteIndexError(state.problem)
        if state.legacy and state.pointer is not None:
            logger.warning("%s; writing into it as it is", state.problem)
            collection, pointer = state.pointer, None
        elif state.generation is not None and state.pointer is not None:
            if state.problem is not None:
                logger.warning("%s; opening it for writing", state.problem)
            collection, pointer = state.generation, state.pointer
        else:
            built = cls._build(client, name, location, embeddings, [], batch_size=1, bm25_root=root)
            built.index.retrieval = retrieval
            return built.index
        built_with = (collection.metadata or {}).get("embeddings")
        kind = type(embeddings).__name__
        if built_with is not None and built_with != kind:
            logger.warning(
                "index %r was built with %s embeddings, searching with %s", name, built_with, kind
            )
        index = cls._on(
            client,
            collection,
            embeddings,
            name,
            location,
            pointer=pointer,
            retrieval=retrieval,
            bm25_root=root,
        )
        index._granularity_sizes()  # read now what the first search would wait for
        if retrieval != "dense":
            index._lexical()  # load (or build) the BM25 indexes now, not on the first search
        if not create:
            index._opened_from = (persist_dir, chroma_url)
        return index

    def pointed_generation(self) -> str | None:
        """The complete generation the index's pointer names now: one read of its metadata.

        Nothing is written.

        Returns:
            The generation's collection name, or ``None`` when the pointer names none marked
            complete (an in-place update running, the pointer gone) or this index has no
            pointer (not opened by :meth:`open` or :meth:`build`).

        Raises:
            EvidenceIndexError: If Chroma cannot be read.
        """
        version = self.pointed_version()
        return None if version is None else version[0]

    def pointed_version(self) -> tuple[str, int] | None:
        """The complete generation the pointer names now and its :attr:`revision`: one read.

        Nothing is written. A running service compares it with ``(generation, revision)`` to
        notice a build that switched the index or an ``add_records`` that updated its
        generation in place (:mod:`~langchain_references.server.live`).

        Returns:
            ``(generation, revision)``, or ``None`` as for :meth:`pointed_generation`.

        Raises:
            EvidenceIndexError: If Chroma cannot be read.
        """
        if self._client is None or self._pointer is None:
            return None
        try:
            pointer = _collection(self._client, self.name)
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot read index {self.name!r}: {exc}") from exc
        meta = {} if pointer is None else dict(pointer.metadata or {})
        generation = meta.get(_GENERATION_KEY)
        if not isinstance(generation, str) or meta.get(_COMPLETE_KEY) is not True:
            return None
        return generation, _revision(meta)

    @property
    def revision(self) -> int:
        """How many in-place updates (:meth:`add_records`) the generation had when opened.

        0 for a fresh build, or an index without a pointer.
        """
        return 0 if self._pointer is None else _revision(dict(self._pointer.metadata or {}))

    @property
    def reopenable(self) -> bool:
        """Whether :meth:`reopen` can open this index again (it was opened by :meth:`open`)."""
        return self._opened_from is not None

    def reopen(self) -> EvidenceIndex:
        """Open the index again, as :meth:`open` opened this one, on its current generation.

        Same location, embeddings and retrieval mode; the BM25 indexes are loaded as
        :meth:`open` loads them, and an embedded Chroma's vectors are loaded anew
        (``reread``), so that records another process added (an in-place ``add_records``) are
        found by meaning too. Nothing is written (``create`` is false).

        Returns:
            A new index object on the generation the pointer names now.

        Raises:
            EvidenceIndexError: If this index was not opened by :meth:`open`.
            IndexNotFoundError: If the index is gone.
            IncompleteIndexError: If the pointer names no complete generation (the message
                says why).
        """
        if self._opened_from is None:
            raise EvidenceIndexError(f"index {self.name!r} was not opened by open(): no reopen")
        persist_dir, chroma_url = self._opened_from
        return type(self).open(
            self.name,
            persist_dir=persist_dir,
            chroma_url=chroma_url,
            embeddings=self.embeddings,
            retrieval=self.retrieval,
            reread=True,
        )

    @classmethod
    def build(
        cls,
        name: str,
        records: Iterable[EvidenceRecord],
        *,
        persist_dir: str | Path | None = None,
        chroma_url: str | None = None,
        embeddings: Embeddings | str | None = None,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        engine: Engine = DEFAULT_ENGINE,
        ray: RayOptions | None = None,
    ) -> BuildResult:
        """Build a new generation of an index from records and switch to it when complete.

        The records go into a new collection ``"{name}__g{N}"``; once every entry is written
        and counted, the pointer names it (one write). On any failure or interruption the new
        generation is deleted and the index is left as it was: the previous generation still
        serves, or there is still no index. After the switch, generations older than the
        previous one are deleted (and unfinished ones of killed builds).

        With ``engine="ray"`` the batches are embedded on Ray actors (``ray`` says where Ray
        runs and how many actors; a local Ray on 127.0.0.1 by default), each of which loads the
        embeddings once: from ``embeddings`` when it is a spec (``None``, ``"minilm"``,
        ``"module:factory"``), or a pickled copy of the object given. Into an embedded Chroma
        the actors return the vectors and this process writes them in input order; into a
        Chroma server (``chroma_url``) each actor writes its batches itself. Either way the
        generation, its checks and the switch are as with the local engine, and so are the
        entries written.

        Args:
            name: The index name (see :meth:`open`).
            records: The records; when an id repeats, the last record with it wins.
            persist_dir: Directory of an embedded Chroma (created if missing).
            chroma_url: URL of a Chroma server, instead.
            embeddings: Embeddings of the entries, or the spec of some
                (:func:`load_embeddings`; default: the offline MiniLM).
            batch_size: Entries embedded and written per batch (capped by Chroma's limit).
            progress: Called with the number of records done after each batch (in input
                order, with either engine).
            retrieval: The mode the returned index searches in. Unless ``"dense"``, an
                embedded index saves the generation's BM25 indexes with it, before the switch
                (``"dense"`` saves none: opening it for BM25 later builds them in memory).
            engine: ``"local"`` (embed in this process) or ``"ray"`` (on Ray actors).
            ray: Where Ray runs and how many actors (``workers``) embed, for ``"ray"``
                (default: ``RayOptions()``). Each actor embeds one batch at a time; the
                options' ``batch_size`` and ``max_concurrency`` are not used.

        Returns:
            The new index and what was replaced.

        Raises:
            ValueError: If the name, the locations, ``batch_size``, ``engine`` or the
                embeddings spec are invalid, or ``ray`` is given with the local engine.
            ImportError: If the embeddings spec names a module that cannot be imported.
            MissingDependencyError: If the engine is ``"ray"`` and Ray is not installed.
            IndexBuildError: If writing failed (the message ends with what still serves).
            EvidenceIndexError: If Chroma cannot be reached.
            KeyboardInterrupt: Re-raised after undoing the build, with a note saying what
                still serves.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if ray is not None and engine != "ray":
            raise ValueError(f"ray options are for engine='ray', not {engine!r}")
        retrieval = check_retrieval(retrieval)
        remote = None
        if engine == "ray":
            from langchain_references.server.index_ray import RayWriter

            remote = RayWriter(embeddings, chroma_url=chroma_url, options=ray or RayOptions())
        client, location = _connect(name, persist_dir, chroma_url, create=True)
        if embeddings is None or isinstance(embeddings, str):
            embeddings = load_embeddings(embeddings)
        root = None if persist_dir is None else bm25_store.bm25_root(persist_dir)
        result = cls._build(
            client,
            name,
            location,
            embeddings,
            records,
            batch_size=batch_size,
            progress=progress,
            bm25_root=root if retrieval != "dense" else None,
            remote=remote,
        )
        result.index.retrieval = retrieval
        result.index._bm25_root = root
        return result

    @classmethod
    def _build(
        cls,
        client: ClientAPI,
        name: str,
        location: str,
        embeddings: Embeddings,
        records: Iterable[EvidenceRecord],
        *,
        batch_size: int,
        progress: Callable[[int], None] | None = None,
        bm25_root: Path | None = None,
        remote: RayWriter | None = None,
    ) -> BuildResult:
        unique = _last_of_each_id(records)
        try:
            state = _resolve(client, name, location)
            number = max(_generations(client, name), default=0) + 1
            generation_name = f"{name}{GENERATION_SEPARATOR}{number}"
            collection = client.create_collection(
                generation_name,
                configuration=cast("Any", _COSINE),
                metadata={"embeddings": type(embeddings).__name__, "lr_index": name},
                embedding_function=None,
            )
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot build index {name!r} in {location}: {exc}") from exc
        left = _left_as(state, name)
        index = cls._on(client, collection, embeddings, name, location, bm25_root=bm25_root)
        try:
            limit = min(batch_size, index.max_batch_size)
            written = index._write(unique, limit, progress, remote=remote)
            entries = int(collection.count())
            if entries != written:
                raise EvidenceIndexError(
                    f"generation {generation_name!r} holds {entries} entries, {written} written"
                )
            if bm25_root is not None:  # saved with the generation, before the switch
                index._bm25 = _bm25_of_records(unique)
                vectors, stored = index._snapshot(index._bm25)
                bm25_store.save_generation(bm25_root, generation_name, index._bm25, vectors, stored)
                index._load_saved(bm25_root, index._bm25)
            meta = {
                _GENERATION_KEY: generation_name,
                _COMPLETE_KEY: True,
                _ENTRIES_KEY: entries,
                _RECORDS_KEY: len(unique),
                _REVISION_KEY: 0,  # no in-place update yet
                _BUILT_AT_KEY: datetime.now(UTC).isoformat(timespec="seconds"),
                "embeddings": type(embeddings).__name__,
            }
            index._pointer = _switch(client, state, name, meta)
        except Exception as exc:
            _drop_unless_current(client, name, generation_name, bm25_root)
            cause = (
                str(exc) if isinstance(exc, EvidenceIndexError) else f"{type(exc).__name__}: {exc}"
            )
            raise IndexBuildError(f"build of index {name!r} failed: {cause}; {left}") from exc
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: undo, then let it go on
            _drop_unless_current(client, name, generation_name, bm25_root)
            exc.add_note(left)
            raise
        previous = state.generation.name if state.complete and state.generation else None
        deleted = tuple(
            old
            for _, old in sorted(_generations(client, name).items())  # oldest first
            if old not in (generation_name, previous) and _drop(client, old)
        )
        if bm25_root is not None:
            bm25_store.prune(bm25_root, name, keep=set(_generations(client, name).values()))
        logger.info(
            "index %r in %s: generation %r is current (%d entries)%s",
            name,
            location,
            generation_name,
            entries,
            f"; deleted {', '.join(deleted)}" if deleted else "",
        )
        return BuildResult(
            index=index,
            records=len(unique),
            entries=entries,
            previous_generation=previous,
            previous_entries=state.entries if previous else 0,
            deleted=deleted,
        )

    def count(self, granularity: Granularity | None = None) -> int:
        """Number of entries, of one granularity or of both.

        Args:
            granularity: ``"abstract"``, ``"phrase"`` or ``None`` for all entries.

        Returns:
            The count.

        Raises:
            ValueError: If ``granularity`` is invalid.
            EvidenceIndexError: If Chroma fails.
        """
        if granularity is not None:
            _check_query(granularity, 1)
        try:
            if granularity is None:
                return int(self._collection.count())
            found = self._collection.get(where={"granularity": granularity}, include=[])
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot read index {self.name!r}: {exc}") from exc
        return len(found["ids"])

    def add_records(
        self,
        records: Iterable[EvidenceRecord],
        *,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Upsert records (both granularities) into this generation, in batches of entries.

        Re-adding a record replaces its entries; sentences it no longer has are deleted. When
        an id repeats, the last record with it wins (a warning is logged). This changes the
        generation in place: while it runs (and if it fails) the index is marked incomplete,
        so that :meth:`open` refuses it; re-running it completes the index. Use :meth:`build`
        to replace an index atomically.

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
        unique = _last_of_each_id(records)
        with self._write_lock:
            self._mark(complete=False)
            written = self._write(
                unique, min(batch_size, self.max_batch_size), progress, prune=True
            )
            self._refresh_lexical()
            self._mark(complete=True)
        return written

    def _refresh_lexical(self) -> None:
        """After an update: rebuild the BM25 indexes that exist (saved, or in memory)."""
        with self._read_lock:
            self._sizes = None
            root = self._bm25_root
            saved = root is not None and (root / self.generation).is_dir()
            if not saved and self._bm25 is None:
                return
            self._bm25 = self._bm25_from_entries()
            self._saved = None
            if saved:
                assert root is not None
                vectors, stored = self._snapshot(self._bm25)
                try:
                    bm25_store.save_generation(root, self.generation, self._bm25, vectors, stored)
                except LexicalIndexError as exc:
                    raise EvidenceIndexError(f"cannot update index {self.name!r}: {exc}") from exc
                self._load_saved(root, self._bm25)

    def _mark(self, *, complete: bool) -> None:
        """Record in the pointer whether this generation is complete, and its size."""
        if self._pointer is None:
            return
        try:
            meta = dict(self._pointer.metadata or {})
            meta[_GENERATION_KEY] = self.generation
            meta[_COMPLETE_KEY] = complete
            if complete:
                meta[_ENTRIES_KEY] = int(self._collection.count())
                meta[_REVISION_KEY] = _revision(meta) + 1
            self._pointer.modify(metadata=meta)
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot update index {self.name!r}: {exc}") from exc

    def _write(
        self,
        records: Sequence[EvidenceRecord],
        limit: int,
        progress: Callable[[int], None] | None,
        *,
        prune: bool = False,
        remote: RayWriter | None = None,
    ) -> int:
        """Write records (ids unique) in batches of about ``limit`` entries.

        The batches are embedded here, or by ``remote``'s Ray workers (a build only).
        """
        batches = _batches(records, limit)
        if remote is None:
            done: Generator[tuple[list[str], int], None, None] = (
                (ids, self._flush(entries, ids, limit, prune=prune)) for ids, entries in batches
            )
        else:
            done = remote.write(self, batches, limit)
        written = 0
        with contextlib.closing(done):
            for record_ids, count in done:
                written += count
                if progress is not None:
                    progress(len(record_ids))
        return written

    def _write_error(self, exc: BaseException | str) -> EvidenceIndexError:
        return EvidenceIndexError(f"cannot write to index {self.name!r}: {exc}")

    def _upsert(self, entries: Sequence[_Entry], vectors: Sequence[Sequence[float]]) -> None:
        """Upsert entries embedded elsewhere (by Ray workers), ``max_batch_size`` at a time."""
        try:
            for chunk, chunk_vectors in zip(
                _chunks(entries, self.max_batch_size),
                _chunks(vectors, self.max_batch_size),
                strict=True,
            ):
                _upsert(self._collection, chunk, chunk_vectors)
        except Exception as exc:  # chromadb's errors share no base class
            raise self._write_error(exc) from exc

    def _flush(
        self, entries: Sequence[_Entry], record_ids: Sequence[str], limit: int, *, prune: bool
    ) -> int:
        try:
            _embed_and_write(
                entries, self.embeddings, limit, functools.partial(_upsert, self._collection)
            )
            if prune:  # a record's sentences it no longer has
                fresh = {e.id for e in entries}
                owners = {"record_id": {"$in": list(dict.fromkeys(record_ids))}}
                existing = self._collection.get(where=cast("Any", owners), include=[])
                stale = [i for i in existing["ids"] if i not in fresh]
                if stale:
                    self._collection.delete(ids=stale)
        except Exception as exc:  # chromadb's errors share no base class
            raise self._write_error(exc) from exc
        return len(entries)

    # ------------------------------------------------------------------ searching

    def _granularity_sizes(self) -> dict[Granularity, int]:
        """How many entries of each granularity the generation holds (read once)."""
        with self._read_lock:
            if self._sizes is None:
                total = self.count()
                abstracts = self.count("abstract")
                self._sizes = {"abstract": abstracts, "phrase": total - abstracts}
            return self._sizes

    def _lexical(self) -> dict[Granularity, BM25Index]:
        """The BM25 index of each granularity: loaded with the generation, else built."""
        with self._read_lock:
            if self._bm25 is None:
                self._bm25 = self._load_or_build_bm25()
            return self._bm25

    def _load_or_build_bm25(self) -> dict[Granularity, BM25Index]:
        if self._bm25_root is not None:
            try:
                loaded = cast(
                    "dict[Granularity, BM25Index]",
                    bm25_store.load_generation(self._bm25_root, self.generation, GRANULARITIES),
                )
            except LexicalIndexError as exc:
                logger.warning(
                    "index %r: %s; building the BM25 index in memory (run `index build` to "
                    "save it with the index)",
                    self.name,
                    exc,
                )
            else:
                self._load_saved(self._bm25_root, loaded)
                return loaded
        return self._bm25_from_entries()

    def _snapshot(
        self, bm25: Mapping[Granularity, BM25Index]
    ) -> tuple[
        dict[Granularity, npt.NDArray[np.float32]],
        dict[Granularity, list[tuple[str | None, dict[str, Any] | None]]],
    ]:
        """The stored vectors, documents and metadata of the BM25 indexes' entries.

        One row per id of each index, in its order (vectors float32, as Chroma keeps
        them); read back from what the generation holds, whichever engine embedded it.
        """
        numpy: Any = require("numpy", "server", feature="The evidence index")
        vectors: dict[Granularity, npt.NDArray[np.float32]] = {}
        entries: dict[Granularity, list[tuple[str | None, dict[str, Any] | None]]] = {}
        for granularity, lexical in bm25.items():
            ids = lexical.ids
            rows: npt.NDArray[np.float32] | None = None
            entries[granularity] = []
            for start in range(0, len(ids), self.max_batch_size):
                chunk = ids[start : start + self.max_batch_size]
                try:
                    got = self._collection.get(
                        ids=list(chunk), include=["documents", "metadatas", "embeddings"]
                    )
                except Exception as exc:  # chromadb's errors share no base class
                    raise EvidenceIndexError(f"cannot read index {self.name!r}: {exc}") from exc
                stored = got.get("embeddings")
                blank: list[Any] = [None] * len(got["ids"])
                by_id = {
                    entry_id: (vector, doc, meta)
                    for entry_id, vector, doc, meta in zip(
                        got["ids"],
                        blank if stored is None else stored,
                        got.get("documents") or blank,
                        got.get("metadatas") or blank,
                        strict=True,
                    )
                }
                missing = [e for e in chunk if e not in by_id or by_id[e][0] is None]
                if missing:
                    raise EvidenceIndexError(
                        f"index {self.name!r} has no vector for {len(missing)} entries "
                        f"(first: {missing[0]!r})"
                    )
                block = numpy.asarray([by_id[e][0] for e in chunk], dtype=numpy.float32)
                if rows is None:
                    rows = numpy.empty((len(ids), block.shape[1]), dtype=numpy.float32)
                rows[start : start + len(chunk)] = block
                entries[granularity].extend(
                    (by_id[e][1], None if by_id[e][2] is None else dict(by_id[e][2])) for e in chunk
                )
            vectors[granularity] = (
                numpy.zeros((0, 0), dtype=numpy.float32) if rows is None else rows
            )
        return vectors, entries

    def _load_saved(self, root: Path, bm25: Mapping[Granularity, BM25Index]) -> None:
        """Search with the generation's saved snapshot (memory-mapped), if it has one."""
        vectors = bm25_store.load_vectors(root, self.generation, bm25)
        if vectors is None:
            self._saved = None
            return
        entries = bm25_store.load_entries(root, self.generation, bm25)
        self._saved = {
            g: _Saved(
                matrix,
                {e: i for i, e in enumerate(bm25[g].ids)},
                None if entries is None else entries[g],
            )
            for g, matrix in vectors.items()
        }

    def _bm25_from_entries(self) -> dict[Granularity, BM25Index]:
        """Build the BM25 indexes from the generation's stored entries."""
        ids: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
        texts: dict[Granularity, list[str]] = {g: [] for g in GRANULARITIES}
        try:
            offset = 0
            while True:
                page = self._collection.get(
                    include=["documents", "metadatas"], limit=self.max_batch_size, offset=offset
                )
                docs = page.get("documents") or []
                metas = page.get("metadatas") or []
                for entry_id, doc, meta in zip(page["ids"], docs, metas, strict=True):
                    granularity = (meta or {}).get("granularity")
                    if granularity in GRANULARITIES:
                        ids[granularity].append(entry_id)
                        texts[granularity].append(doc or "")
                if len(page["ids"]) < self.max_batch_size:
                    break
                offset += len(page["ids"])
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot read index {self.name!r}: {exc}") from exc
        return {g: BM25Index.build(ids[g], texts[g]) for g in GRANULARITIES}

    def _chroma_query(
        self, vectors: Sequence[Sequence[float]], n: int, where: dict[str, Any] | None
    ) -> list[list[tuple[str, float]]]:
        """The ``n`` nearest entries of each vector: ``(id, cosine distance)``, nearest first.

        Only the ids and distances: reading the documents and metadata of every candidate
        costs more than the search itself; the hits kept are read afterwards.
        """
        try:
            result = self._collection.query(
                query_embeddings=cast("Any", list(vectors)),
                n_results=n,
                where=cast("Any", where),
                include=["distances"],
            )
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"search failed in index {self.name!r}: {exc}") from exc
        distances = result.get("distances") or [[] for _ in result["ids"]]
        return [
            list(zip(ids, map(float, dists), strict=True))
            for ids, dists in zip(result["ids"], distances, strict=True)
        ]

    def _dense(
        self, vectors: Sequence[Sequence[float]], granularity: Granularity, n: int
    ) -> list[list[tuple[str, float]]]:
        """The ``n`` nearest entries of ``granularity`` for each vector, nearest first.

        Unfiltered queries, oversampled by the granularity's share and doubled while short;
        a filtered query for the vectors still short at :data:`_OVERSAMPLE_CAP`.
        """
        sizes = self._granularity_sizes()
        total, wanted = sum(sizes.values()), sizes[granularity]
        n = min(n, wanted)
        if n == 0:
            return [[] for _ in vectors]
        ask = min(total, max(n + 10, math.ceil(n * total / wanted * _OVERSAMPLE)))
        found: dict[int, list[tuple[str, float]]] = {}
        todo = list(range(len(vectors)))
        while todo and ask <= max(_OVERSAMPLE_CAP, n):
            nearest_per_query = self._chroma_query([vectors[i] for i in todo], ask, None)
            short = []
            for i, nearest in zip(todo, nearest_per_query, strict=True):
                mine = [pair for pair in nearest if _granularity_of(pair[0]) == granularity]
                if len(mine) >= n or ask >= total:
                    found[i] = mine[:n]
                else:
                    short.append(i)
            todo, ask = short, min(total, ask * 2)
        if todo:
            filtered = self._chroma_query(
                [vectors[i] for i in todo], n, {"granularity": granularity}
            )
            found.update(zip(todo, filtered, strict=True))
        return [found[i] for i in range(len(vectors))]

    def _read_hits(
        self,
        ranked: Sequence[Sequence[str]],
        vectors: Sequence[Sequence[float]],
        distances: Sequence[Mapping[str, float]],
        granularity: Granularity,
        *,
        queried: bool,
    ) -> list[list[EvidenceHit]]:
        """The hits of ranked entry ids: from the generation's saved snapshot, else one ``get``.

        An entry whose distance to its query is not known (found by BM25 alone) gets it from
        its stored vector: from the snapshot's vectors when it has them, else read from
        Chroma with the hits. With the snapshot's entries too, a search that ``queried`` the
        collection (dense or hybrid) reads nothing more from Chroma.
        """
        wanted = list(dict.fromkeys(entry_id for ids in ranked for entry_id in ids))
        if not wanted:
            return [[] for _ in ranked]
        unknown = [
            [e for e in ids if e not in known] for ids, known in zip(ranked, distances, strict=True)
        ]
        saved = (self._saved or {}).get(granularity)
        snapshot = saved is not None and all(e in saved.rows for e in wanted)
        if snapshot:
            assert saved is not None
            distances = [
                {**known, **dict(zip(ids, _cosine_distances(vector, saved.take(ids)), strict=True))}
                if ids
                else known
                for ids, vector, known in zip(unknown, vectors, distances, strict=True)
            ]
            unknown = [[] for _ in ranked]
        # The snapshot's entries answer only a search that queried the collection too (hybrid):
        # a generation deleted by a build then fails the search, and LiveIndex moves on.
        if snapshot and saved is not None and saved.entries is not None and queried:
            got: Any = {"ids": wanted, "documents": [], "metadatas": []}
            for entry_id in wanted:
                doc, meta = saved.entries.row(saved.rows[entry_id])
                got["documents"].append(doc)
                got["metadatas"].append(meta)
        else:
            include = ["documents", "metadatas", *(["embeddings"] if any(unknown) else [])]
            try:
                got = self._collection.get(ids=wanted, include=cast("Any", include))
            except Exception as exc:  # chromadb's errors share no base class
                raise EvidenceIndexError(f"search failed in index {self.name!r}: {exc}") from exc
        nothing: list[Any] = [None] * len(got["ids"])
        docs: list[Any] = got.get("documents") or nothing
        metas: list[Any] = got.get("metadatas") or nothing
        stored = got.get("embeddings")
        embedded: list[Any] = nothing if stored is None else list(stored)
        entries = {
            entry_id: (doc, meta, vector)
            for entry_id, doc, meta, vector in zip(got["ids"], docs, metas, embedded, strict=True)
        }
        out: list[list[EvidenceHit]] = []
        for ids, vector, known, missing in zip(ranked, vectors, distances, unknown, strict=True):
            if missing:  # read with the hits: their stored vectors (1.0 without one)
                found = [e for e in missing if e in entries and entries[e][2] is not None]
                read = _cosine_distances(vector, [entries[e][2] for e in found])
                known = {**known, **dict(zip(found, read, strict=True))}
            hits = []
            for entry_id in ids:
                if entry_id not in entries:  # deleted since the search: left out
                    continue
                doc, meta, _ = entries[entry_id]
                hits.append(_hit(entry_id, doc, meta, known.get(entry_id, 1.0)))
            out.append(hits)
        return out

    def _rank(
        self,
        queries: Sequence[str],
        vectors: Sequence[Sequence[float]],
        granularity: Granularity,
        k: int,
    ) -> list[list[EvidenceHit]]:
        """The hits of each query in the index's retrieval mode (blocking)."""
        if self.retrieval == "bm25":
            dense: list[list[tuple[str, float]]] = [[] for _ in queries]
        else:
            depth = k if self.retrieval == "dense" else max(k, FUSION_DEPTH)
            dense = self._dense(vectors, granularity, depth)
        if self.retrieval == "dense":
            ranked = [[entry_id for entry_id, _ in nearest] for nearest in dense]
        else:
            lexical = self._lexical()[granularity]
            depth = k if self.retrieval == "bm25" else max(k, FUSION_DEPTH)
            best = [[entry_id for entry_id, _ in lexical.top(query, depth)] for query in queries]
            if self.retrieval == "bm25":
                ranked = best
            else:
                ranked = [
                    [e for e, _ in reciprocal_rank_fusion([[e for e, _ in d], b])][:k]
                    for d, b in zip(dense, best, strict=True)
                ]
        distances = [dict(nearest) for nearest in dense]
        queried = self.retrieval != "bm25"
        return self._read_hits(ranked, vectors, distances, granularity, queried=queried)

    def search(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
        """The ``k`` entries of one granularity that best match ``query``, best first.

        "Best" is in the index's :attr:`retrieval` mode: the nearest by cosine (``dense``),
        the best BM25 scores (``bm25``) or both rankings fused (``hybrid``).

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
        """:meth:`search` for several queries (one Chroma query for all, in dense mode).

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
        return self._rank(queries, vectors, granularity, k)

    async def asearch_many(
        self, queries: Sequence[str], *, granularity: Granularity, k: int
    ) -> list[list[EvidenceHit]]:
        """Async :meth:`search_many`."""
        _check_query(granularity, k)
        if not queries:
            return []
        vectors = list(await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries)))
        return await asyncio.to_thread(self._rank, queries, vectors, granularity, k)
