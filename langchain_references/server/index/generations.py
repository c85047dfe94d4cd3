"""Generations and the pointer: which collection an index serves, and the switch to a new one.

An index is built atomically: the entries go into a new collection, a *generation* named
``"{name}__g{N}"``; only when every entry is written (and counted) does the index switch to it,
in one step: the metadata of the empty collection ``name`` (the *pointer*) then names the
generation, with its entry count and ``lr_complete: true``. A build that fails or is
interrupted drops its generation and leaves the pointer as it was (:func:`undone_on_failure`),
so the previous generation still serves (or there is still no index); a build killed outright
leaves an unfinished generation that nothing points at, which the next build deletes
(:func:`retire`). :func:`resolve` reads the pointer and says why an index cannot be served: its
first build never finished, its generation is missing or short of entries, its in-place update
was interrupted (:func:`marked`), or an older version built it without a pointer. After a
switch the previous generation is kept, so that the searches a ``serve`` runs on it finish
there; the next build deletes it. One build at a time per index.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from langchain_references.server import bm25_store
from langchain_references.server.index.chroma import COSINE, client, collection, is_not_found
from langchain_references.server.index.errors import (
    EvidenceIndexError,
    IncompleteIndexError,
    IndexBuildError,
    IndexNotFoundError,
)
from langchain_references.server.index.fields import stored_int

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = [
    "GENERATION_SEPARATOR",
    "State",
    "completed",
    "connect",
    "create_generation",
    "drop",
    "generations",
    "marked",
    "pointed_version",
    "resolve",
    "retire",
    "revision",
    "serving",
    "switch",
    "undone_on_failure",
]

# one logger name for the whole index (the CLI's log lines name it)
logger = logging.getLogger(__package__)

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


def connect(
    name: str,
    persist_dir: str | Path | None,
    chroma_url: str | None,
    *,
    create: bool,
    fresh: bool = False,
) -> tuple[ClientAPI, str]:
    """Check the name and the location, and connect.

    Args:
        name: The index name.
        persist_dir: Directory of an embedded Chroma.
        chroma_url: URL of a Chroma server, instead.
        create: Whether a missing directory is fine (it is created).
        fresh: Load an embedded directory anew.

    Returns:
        ``(client, location)``, the location for messages.

    Raises:
        ValueError: If the name is invalid, or not exactly one location is given.
        IndexNotFoundError: If the directory is missing and ``create`` is false.
        EvidenceIndexError: If Chroma cannot be reached.
    """
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
        return client(path, None, fresh=fresh), str(persist_dir)
    assert chroma_url is not None
    return client(None, chroma_url), chroma_url


def revision(meta: Mapping[str, Any]) -> int:
    """The in-place update count in a pointer's metadata (0 when absent or malformed).

    Args:
        meta: The pointer's metadata.

    Returns:
        The count.
    """
    return stored_int(meta, _REVISION_KEY) or 0


def generations(chroma: ClientAPI, name: str) -> dict[int, str]:
    """The generation collections of index ``name``, by number.

    Args:
        chroma: The client.
        name: The index name.

    Returns:
        The collection names, by generation number.
    """
    pattern = re.compile(re.escape(name + GENERATION_SEPARATOR) + r"([1-9][0-9]{0,8})")
    found: dict[int, str] = {}
    for item in chroma.list_collections():
        collection_name = item if isinstance(item, str) else item.name
        match = pattern.fullmatch(collection_name)
        if match:
            found[int(match.group(1))] = collection_name
    return found


@dataclass(frozen=True, slots=True)
class State:
    """What the pointer of an index says, and why the index cannot be served (if it cannot).

    Attributes:
        pointer: The pointer collection, if there is one.
        generation: The generation it names, if that exists.
        metadata: The pointer's metadata.
        entries: The generation's entry count.
        problem: Why the index cannot be served, in one line; ``None`` if it can (or is
            missing).
        legacy: Whether an older version built it, without a pointer.
    """

    pointer: Collection | None = None
    generation: Collection | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    entries: int = 0
    problem: str | None = None
    legacy: bool = False

    @property
    def missing(self) -> bool:
        """Whether there is no index at all."""
        return self.pointer is None and self.problem is None

    @property
    def complete(self) -> bool:
        """Whether the pointer names a complete generation."""
        return self.generation is not None and self.problem is None


def resolve(chroma: ClientAPI, name: str, location: str) -> State:
    """Read the pointer of index ``name`` and check the generation it names.

    Args:
        chroma: The client.
        name: The index name.
        location: Where it lives, for messages.

    Returns:
        The state.
    """
    where = f"index {name!r} in {location}"
    again = "run `index build` again"
    pointer = collection(chroma, name)
    if pointer is None:
        unfinished = generations(chroma, name)
        if unfinished:
            return State(
                problem=f"{where} has no complete build: an interrupted or failed build left "
                f"{len(unfinished)} unfinished generation(s); {again}"
            )
        return State()
    meta = dict(pointer.metadata or {})
    generation_name = meta.get(_GENERATION_KEY)
    if not isinstance(generation_name, str):
        return State(
            pointer=pointer,
            metadata=meta,
            legacy=True,
            problem=f"{where} was built by an older version that did not mark complete "
            f"builds, so it may be partial; {again}",
        )
    generation = collection(chroma, generation_name)
    if generation is None:
        return State(
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
    return State(pointer, generation, meta, entries, problem)


def serving(
    state: State, name: str, location: str, *, create: bool
) -> tuple[Collection, Collection | None] | None:
    """What :meth:`~langchain_references.server.index.EvidenceIndex.open` opens, in a state.

    Args:
        state: The index's state.
        name: The index name.
        location: Where it lives, for messages.
        create: Whether the index is opened for writing (a missing or incomplete one too).

    Returns:
        ``(collection, pointer)``: the generation the pointer names and the pointer, or an
        older version's collection as it is without one; ``None`` when a first generation
        must be created.

    Raises:
        IndexNotFoundError: If the index does not exist and ``create`` is false.
        IncompleteIndexError: If it has no complete generation and ``create`` is false.
    """
    if not create and state.missing:
        raise IndexNotFoundError(f"no index {name!r} in {location}")
    if not create and state.problem is not None:
        raise IncompleteIndexError(state.problem)
    if state.legacy and state.pointer is not None:
        logger.warning("%s; writing into it as it is", state.problem)
        return state.pointer, None
    if state.generation is not None and state.pointer is not None:
        if state.problem is not None:
            logger.warning("%s; opening it for writing", state.problem)
        return state.generation, state.pointer
    return None


def pointed_version(chroma: ClientAPI, name: str) -> tuple[str, int] | None:
    """The complete generation the pointer of index ``name`` names now, and its revision.

    Args:
        chroma: The client.
        name: The index name.

    Returns:
        ``(generation, revision)``, or ``None`` when the pointer is gone or names no
        generation marked complete.

    Raises:
        EvidenceIndexError: If Chroma cannot be read.
    """
    try:
        pointer = collection(chroma, name)
    except Exception as exc:  # chromadb's errors share no base class
        raise EvidenceIndexError(f"cannot read index {name!r}: {exc}") from exc
    meta = {} if pointer is None else dict(pointer.metadata or {})
    generation = meta.get(_GENERATION_KEY)
    if not isinstance(generation, str) or meta.get(_COMPLETE_KEY) is not True:
        return None
    return generation, revision(meta)


def _left_as(state: State, name: str) -> str:
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


def create_generation(
    chroma: ClientAPI, name: str, location: str, embeddings: str
) -> tuple[State, Collection]:
    """Read the pointer of index ``name`` and create its next generation, empty.

    Args:
        chroma: The client.
        name: The index name.
        location: Where it lives, for messages.
        embeddings: The class name of the embeddings, kept in the generation's metadata.

    Returns:
        The state before the build, and the new generation.

    Raises:
        EvidenceIndexError: If Chroma fails.
    """
    try:
        state = resolve(chroma, name, location)
        number = max(generations(chroma, name), default=0) + 1
        generation = chroma.create_collection(
            f"{name}{GENERATION_SEPARATOR}{number}",
            configuration=cast("Any", COSINE),
            metadata={"embeddings": embeddings, "lr_index": name},
            embedding_function=None,
        )
    except Exception as exc:  # chromadb's errors share no base class
        raise EvidenceIndexError(f"cannot build index {name!r} in {location}: {exc}") from exc
    return state, generation


def drop(chroma: ClientAPI, collection_name: str) -> bool:
    """Delete a collection, logging (not raising) a failure.

    Args:
        chroma: The client.
        collection_name: The collection.

    Returns:
        Whether it is gone.
    """
    try:
        chroma.delete_collection(collection_name)
    except Exception as exc:  # already gone, Chroma unreachable...
        if not is_not_found(exc):
            logger.warning("could not delete collection %r: %s", collection_name, exc)
            return False
    return True


def _drop_unless_current(
    chroma: ClientAPI, name: str, generation_name: str, bm25_root: Path | None = None
) -> None:
    """Undo a build: delete its generation (and BM25 indexes) unless the pointer names it."""
    try:
        pointer = collection(chroma, name)
        if pointer is not None and (pointer.metadata or {}).get(_GENERATION_KEY) == (
            generation_name
        ):
            return
    except Exception as exc:  # Chroma unreachable: nothing names it then, as far as we know
        logger.warning("could not read the pointer of index %r: %s", name, exc)
    drop(chroma, generation_name)
    if bm25_root is not None:
        bm25_store.drop(bm25_root, generation_name)


@contextlib.contextmanager
def undone_on_failure(
    chroma: ClientAPI, state: State, name: str, generation_name: str, bm25_root: Path | None
) -> Iterator[None]:
    """Undo a build that fails in the block: its generation (and BM25 indexes) deleted.

    Args:
        chroma: The client.
        state: The state before the build.
        name: The index name.
        generation_name: The build's generation.
        bm25_root: Where its BM25 indexes are saved, if anywhere.

    Yields:
        Nothing: the block builds.

    Raises:
        IndexBuildError: For an error in the block (the message ends with what still serves).
        BaseException: A ``KeyboardInterrupt`` or ``SystemExit`` in the block, re-raised
            with a note saying what still serves.
    """
    left = _left_as(state, name)
    try:
        yield
    except Exception as exc:
        _drop_unless_current(chroma, name, generation_name, bm25_root)
        cause = str(exc) if isinstance(exc, EvidenceIndexError) else f"{type(exc).__name__}: {exc}"
        raise IndexBuildError(f"build of index {name!r} failed: {cause}; {left}") from exc
    except BaseException as exc:  # KeyboardInterrupt, SystemExit: undo, then let it go on
        _drop_unless_current(chroma, name, generation_name, bm25_root)
        exc.add_note(left)
        raise


def completed(generation_name: str, entries: int, records: int, embeddings: str) -> dict[str, Any]:
    """The pointer's metadata naming a freshly built generation, complete.

    Args:
        generation_name: The generation.
        entries: Its entry count.
        records: Its record count.
        embeddings: The class name of its embeddings.

    Returns:
        The metadata (revision 0: no in-place update yet; the build time, UTC).
    """
    return {
        _GENERATION_KEY: generation_name,
        _COMPLETE_KEY: True,
        _ENTRIES_KEY: entries,
        _RECORDS_KEY: records,
        _REVISION_KEY: 0,  # no in-place update yet
        _BUILT_AT_KEY: datetime.now(UTC).isoformat(timespec="seconds"),
        "embeddings": embeddings,
    }


def marked(
    meta: Mapping[str, Any], generation_name: str, *, complete: bool, entries: int | None
) -> dict[str, Any]:
    """The pointer's metadata, marked (in)complete around an in-place update of a generation.

    Args:
        meta: The pointer's metadata now.
        generation_name: The generation updated.
        complete: Whether the update is done.
        entries: The generation's entry count (when done).

    Returns:
        The new metadata: when done, with the count and the revision one higher.
    """
    updated = dict(meta)
    updated[_GENERATION_KEY] = generation_name
    updated[_COMPLETE_KEY] = complete
    if complete:
        updated[_ENTRIES_KEY] = entries
        updated[_REVISION_KEY] = revision(updated) + 1
    return updated


def switch(chroma: ClientAPI, state: State, name: str, meta: dict[str, Any]) -> Collection:
    """Point index ``name`` at a generation, in one metadata write.

    Args:
        chroma: The client.
        state: The state before the build.
        name: The index name.
        meta: The pointer's new metadata (:func:`completed`).

    Returns:
        The pointer.
    """
    if state.pointer is not None and not state.legacy:
        state.pointer.modify(metadata=meta)
        return state.pointer
    if state.pointer is not None:  # an older version's index: the name becomes the pointer
        chroma.delete_collection(name)
    return chroma.create_collection(
        name, configuration=cast("Any", COSINE), metadata=meta, embedding_function=None
    )


def retire(
    chroma: ClientAPI, state: State, name: str, generation_name: str, bm25_root: Path | None
) -> tuple[str | None, tuple[str, ...]]:
    """After a switch: delete the generations older than the previous one (and unfinished ones).

    Args:
        chroma: The client.
        state: The state before the build.
        name: The index name.
        generation_name: The new generation.
        bm25_root: Where the BM25 indexes are saved, if anywhere (pruned to the generations
            left).

    Returns:
        The previous generation (kept, for a ``serve`` still running on it), if any, and the
        generations deleted, oldest first.
    """
    previous = state.generation.name if state.complete and state.generation else None
    deleted = tuple(
        old
        for _, old in sorted(generations(chroma, name).items())  # oldest first
        if old not in (generation_name, previous) and drop(chroma, old)
    )
    if bm25_root is not None:
        bm25_store.prune(bm25_root, name, keep=set(generations(chroma, name).values()))
    return previous, deleted
