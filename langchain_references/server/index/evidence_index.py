"""The evidence index: a named index's generation in Chroma, built, updated and searched.

:class:`EvidenceIndex` puts the jobs of the package together: it builds a generation
(:mod:`~langchain_references.server.index.writing`, on Ray actors with
:mod:`~langchain_references.server.index.ray_writer`) and switches the pointer to it
(:mod:`~langchain_references.server.index.generations`), keeps its BM25 indexes and their
snapshot (:mod:`~langchain_references.server.index.snapshot`), and searches it
(:mod:`~langchain_references.server.index.search`,
:mod:`~langchain_references.server.index.hits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain_references.server import bm25_store
from langchain_references.server.index import generations, search, snapshot, writing
from langchain_references.server.index.chroma import max_batch
from langchain_references.server.index.embeddings_spec import load_embeddings
from langchain_references.server.index.errors import EvidenceIndexError
from langchain_references.server.index.hits import EvidenceHit, read_hits
from langchain_references.server.index.ray_writer import RayWriter
from langchain_references.server.index.records import (
    Entry,
    EvidenceRecord,
    Granularity,
    last_of_each_id,
)
from langchain_references.services.engine import DEFAULT_ENGINE, ENGINES, Engine, RayOptions
from langchain_references.services.retrieval import (
    DEFAULT_RETRIEVAL,
    BM25Index,
    LexicalIndexError,
    Retrieval,
    check_retrieval,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from langchain_core.embeddings import Embeddings

__all__ = ["BuildResult", "EvidenceIndex"]

# one logger name for the whole index (the CLI's log lines name it)
logger = logging.getLogger(__package__)


def _warn_if_built_with_others(collection: Collection, embeddings: Embeddings, name: str) -> None:
    """Warn when a generation was built with embeddings of another class than these."""
    built_with = (collection.metadata or {}).get("embeddings")
    kind = type(embeddings).__name__
    if built_with is not None and built_with != kind:
        logger.warning(
            "index %r was built with %s embeddings, searching with %s", name, built_with, kind
        )


def _check_build(batch_size: int, engine: Engine, ray: RayOptions | None) -> None:
    """Refuse a build's batch size, engine or Ray options (see :meth:`EvidenceIndex.build`)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if ray is not None and engine != "ray":
        raise ValueError(f"ray options are for engine='ray', not {engine!r}")


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
        self._saved: dict[Granularity, snapshot.Saved] | None = None
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
            max_batch_size=max_batch(client),
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

    # ------------------------------------------------------------------ opening

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
        client, location = generations.connect(
            name, persist_dir, chroma_url, create=create, fresh=reread
        )
        root = None if persist_dir is None else bm25_store.bm25_root(persist_dir)
        if embeddings is None:
            embeddings = load_embeddings()
        try:
            state = generations.resolve(client, name, location)
        except Exception as exc:  # chromadb's errors share no base class
            raise EvidenceIndexError(f"cannot open index {name!r} in {location}: {exc}") from exc
        found = generations.serving(state, name, location, create=create)
        if found is None:
            built = cls._build(client, name, location, embeddings, [], batch_size=1, bm25_root=root)
            built.index.retrieval = retrieval
            return built.index
        collection, pointer = found
        _warn_if_built_with_others(collection, embeddings, name)
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
        return generations.pointed_version(self._client, self.name)

    @property
    def revision(self) -> int:
        """How many in-place updates (:meth:`add_records`) the generation had when opened.

        0 for a fresh build, or an index without a pointer.
        """
        return 0 if self._pointer is None else generations.revision(self._pointer.metadata or {})

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

    # ------------------------------------------------------------------ building

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
        _check_build(batch_size, engine, ray)
        retrieval = check_retrieval(retrieval)
        remote = None
        if engine == "ray":
            remote = RayWriter(embeddings, chroma_url=chroma_url, options=ray or RayOptions())
        client, location = generations.connect(name, persist_dir, chroma_url, create=True)
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
        unique = last_of_each_id(records)
        kind = type(embeddings).__name__
        state, collection = generations.create_generation(client, name, location, kind)
        generation_name = str(collection.name)
        index = cls._on(client, collection, embeddings, name, location, bm25_root=bm25_root)
        with generations.undone_on_failure(client, state, name, generation_name, bm25_root):
            limit = min(batch_size, index.max_batch_size)
            written = index._write(unique, limit, progress, remote=remote)
            entries = int(collection.count())
            if entries != written:
                raise EvidenceIndexError(
                    f"generation {generation_name!r} holds {entries} entries, {written} written"
                )
            if bm25_root is not None:  # saved with the generation, before the switch
                index._bm25 = snapshot.bm25_of_records(unique)
                vectors, stored = index._snapshot(index._bm25)
                bm25_store.save_generation(bm25_root, generation_name, index._bm25, vectors, stored)
                index._load_saved(bm25_root, index._bm25)
            meta = generations.completed(generation_name, entries, len(unique), kind)
            index._pointer = generations.switch(client, state, name, meta)
        previous, deleted = generations.retire(client, state, name, generation_name, bm25_root)
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

    # ------------------------------------------------------------------ writing

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
            search.check_query(granularity, 1)
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
        unique = last_of_each_id(records)
        with self._write_lock:
            self._mark(complete=False)
            written = self._write(
                unique, min(batch_size, self.max_batch_size), progress, prune=True
            )
            self._refresh_lexical()
            self._mark(complete=True)
        return written

    def _mark(self, *, complete: bool) -> None:
        """Record in the pointer whether this generation is complete, and its size."""
        if self._pointer is None:
            return
        try:
            meta = self._pointer.metadata or {}
            entries = int(self._collection.count()) if complete else None
            marked = generations.marked(meta, self.generation, complete=complete, entries=entries)
            self._pointer.modify(metadata=marked)
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
        batches = writing.batches(records, limit)
        if remote is None:
            done: Generator[tuple[list[str], int], None, None] = (
                (ids, self._flush(entries, ids, limit, prune=prune)) for ids, entries in batches
            )
        else:
            done = remote.write(
                self.generation,
                batches,
                limit,
                upsert_vectors=self._upsert,
                error=self._write_error,
            )
        written = 0
        with contextlib.closing(done):
            for record_ids, count in done:
                written += count
                if progress is not None:
                    progress(len(record_ids))
        return written

    def _write_error(self, exc: BaseException | str) -> EvidenceIndexError:
        return EvidenceIndexError(f"cannot write to index {self.name!r}: {exc}")

    def _upsert(self, entries: Sequence[Entry], vectors: Sequence[Sequence[float]]) -> None:
        """Upsert entries embedded elsewhere (by Ray workers), ``max_batch_size`` at a time."""
        try:
            writing.upsert_chunks(self._collection, entries, vectors, self.max_batch_size)
        except Exception as exc:  # chromadb's errors share no base class
            raise self._write_error(exc) from exc

    def _flush(
        self, entries: Sequence[Entry], record_ids: Sequence[str], limit: int, *, prune: bool
    ) -> int:
        """Embed and write one batch here (see :func:`~.writing.write_batch`)."""
        try:
            return writing.write_batch(
                self._collection, entries, record_ids, self.embeddings, limit, prune=prune
            )
        except Exception as exc:  # chromadb's errors share no base class
            raise self._write_error(exc) from exc

    # ------------------------------------------------------------------ BM25 and snapshot

    def _lexical(self) -> dict[Granularity, BM25Index]:
        """The BM25 index of each granularity: loaded with the generation, else built."""
        with self._read_lock:
            if self._bm25 is None:
                self._bm25 = self._load_or_build_bm25()
            return self._bm25

    def _load_or_build_bm25(self) -> dict[Granularity, BM25Index]:
        if self._bm25_root is not None:
            loaded = snapshot.load_lexical(self._bm25_root, self.generation, self.name)
            if loaded is not None:
                self._load_saved(self._bm25_root, loaded)
                return loaded
        return self._bm25_from_entries()

    def _bm25_from_entries(self) -> dict[Granularity, BM25Index]:
        """Build the BM25 indexes from the generation's stored entries."""
        return snapshot.bm25_from_entries(self._collection, self.max_batch_size, self.name)

    def _snapshot(
        self, bm25: Mapping[Granularity, BM25Index]
    ) -> tuple[
        dict[Granularity, npt.NDArray[np.float32]], dict[Granularity, list[snapshot.StoredEntry]]
    ]:
        """The stored vectors, documents and metadata of the BM25 indexes' entries."""
        return snapshot.read_snapshot(self._collection, bm25, self.max_batch_size, self.name)

    def _load_saved(self, root: Path, bm25: Mapping[Granularity, BM25Index]) -> None:
        """Search with the generation's saved snapshot (memory-mapped), if it has one."""
        self._saved = snapshot.load_saved(root, self.generation, bm25)

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

    # ------------------------------------------------------------------ searching

    def _granularity_sizes(self) -> dict[Granularity, int]:
        """How many entries of each granularity the generation holds (read once)."""
        with self._read_lock:
            if self._sizes is None:
                total = self.count()
                abstracts = self.count("abstract")
                self._sizes = {"abstract": abstracts, "phrase": total - abstracts}
            return self._sizes

    def _chroma_query(
        self, vectors: Sequence[Sequence[float]], n: int, where: dict[str, Any] | None
    ) -> search.Nearest:
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
    ) -> search.Nearest:
        """The ``n`` nearest entries of ``granularity`` for each vector, nearest first."""
        sizes = self._granularity_sizes()
        return search.nearest(self._chroma_query, sizes, vectors, granularity, n)

    def _rank(
        self,
        queries: Sequence[str],
        vectors: Sequence[Sequence[float]],
        granularity: Granularity,
        k: int,
    ) -> list[list[EvidenceHit]]:
        """The hits of each query in the index's retrieval mode (blocking)."""
        depth = search.depth(self.retrieval, k)
        dense: search.Nearest = [[] for _ in queries]
        if self.retrieval != "bm25":
            dense = self._dense(vectors, granularity, depth)
        lexical = None
        if self.retrieval != "dense":
            bm25 = self._lexical()[granularity]
            lexical = [[entry_id for entry_id, _ in bm25.top(query, depth)] for query in queries]
        return read_hits(
            search.fuse(self.retrieval, dense, lexical, k),
            vectors,
            [dict(near) for near in dense],
            (self._saved or {}).get(granularity),
            queried=self.retrieval != "bm25",
            collection=self._collection,
            name=self.name,
        )

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
        search.check_query(granularity, k)
        if not queries:
            return []
        vectors = [self.embeddings.embed_query(q) for q in queries]
        return self._rank(queries, vectors, granularity, k)

    async def asearch_many(
        self, queries: Sequence[str], *, granularity: Granularity, k: int
    ) -> list[list[EvidenceHit]]:
        """Async :meth:`search_many`."""
        search.check_query(granularity, k)
        if not queries:
            return []
        vectors = list(await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries)))
        return await asyncio.to_thread(self._rank, queries, vectors, granularity, k)
