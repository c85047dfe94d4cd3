"""``index build --engine ray``: the batches of a build embedded on Ray actors.

``EvidenceIndex.build(..., engine="ray")``
(:meth:`~langchain_references.server.index.EvidenceIndex.build`) hands its batches of entries
(the same batches as the local engine) to
:func:`~langchain_references.services.engine.map_runnable`: a pool of actors, each of which loads
the embeddings once, embeds a batch with the one function the local engine uses
(:func:`~langchain_references.server.index.writing.embed_and_write`: a text repeated in a slice
embedded once) and

* for an embedded Chroma (one process may write it): returns the vectors, which the driver
  upserts in input order;
* for a Chroma server: upserts them itself into the new generation, through its own client,
  and returns how many entries it wrote.

The driver reports progress as batches come back, in order, and stops at the first batch that
failed: the build then fails and its generation is dropped, as with the local engine (the
previous generation still serves). Everything else (the count check, the BM25 indexes, the
switch) stays in :meth:`~langchain_references.server.index.EvidenceIndex.build`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_references._optional import require
from langchain_references.server.index.chroma import client
from langchain_references.server.index.embeddings_spec import load_embeddings
from langchain_references.server.index.errors import EvidenceIndexError
from langchain_references.server.index.records import Entry
from langchain_references.server.index.writing import embed_and_write, upsert
from langchain_references.services.engine import RayOptions, map_runnable

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.runnables import Runnable

__all__ = ["RayWriter"]


class _BatchWriter:
    """What an actor holds: the embeddings (loaded once), and the generation on a server."""

    def __init__(
        self,
        embeddings: Embeddings | str | None,
        chroma_url: str | None,
        generation: str,
        limit: int,
    ) -> None:
        if embeddings is None or isinstance(embeddings, str):
            embeddings = load_embeddings(embeddings)
        self._embeddings = embeddings
        self._limit = limit
        self._collection = (
            None
            if chroma_url is None
            else client(None, chroma_url).get_collection(generation, embedding_function=None)
        )

    def write(self, entries: Sequence[Entry]) -> int | list[list[float]]:
        """Embed a batch: upsert it (server), or return its vectors (embedded Chroma)."""
        if self._collection is not None:
            return embed_and_write(
                entries, self._embeddings, self._limit, functools.partial(upsert, self._collection)
            )
        vectors: list[list[float]] = []
        embed_and_write(
            entries, self._embeddings, self._limit, lambda _, chunk: vectors.extend(chunk)
        )
        return vectors


def _writer(
    embeddings: Embeddings | str | None, chroma_url: str | None, generation: str, limit: int
) -> Runnable[Sequence[Entry], int | list[list[float]]]:
    """The Runnable of one actor (built there, once)."""
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(_BatchWriter(embeddings, chroma_url, generation, limit).write)


def _ray_error(exc: BaseException) -> str:
    """A Ray failure in one line (its first): Ray's messages carry whole tracebacks."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


@dataclass(frozen=True, slots=True)
class RayWriter:
    """Embeds (and, on a Chroma server, writes) a build's batches on Ray actors.

    Args:
        embeddings: What each actor embeds with: a :func:`load_embeddings` spec (loaded
            once per actor), or an ``Embeddings`` object (pickled to each actor).
        chroma_url: The Chroma server the actors write to; ``None``: the driver writes.
        options: Where Ray runs and how many actors embed.

    Raises:
        MissingDependencyError: If Ray is not installed.
    """

    embeddings: Embeddings | str | None
    chroma_url: str | None
    options: RayOptions

    def __post_init__(self) -> None:
        require("ray", "ray", feature="The Ray engine")

    def write(
        self,
        generation: str,
        batches: Iterable[tuple[list[str], list[Entry]]],
        limit: int,
        *,
        upsert_vectors: Callable[[Sequence[Entry], Sequence[Sequence[float]]], None],
        error: Callable[[BaseException | str], EvidenceIndexError],
    ) -> Generator[tuple[list[str], int], None, None]:
        """Write the batches into a new generation; yield each one done, in order.

        Args:
            generation: The new generation's collection name.
            batches: ``(record ids, entries)`` of each batch.
            limit: Entries per upsert.
            upsert_vectors: How the driver writes a batch's vectors into an embedded Chroma.
            error: The build's write error, with the cause it is given.

        Yields:
            ``(record ids, entries written)`` of each batch, in input order.

        Raises:
            EvidenceIndexError: At the first batch that failed (made by ``error``).
        """
        todo = list(batches)
        factory = functools.partial(_writer, self.embeddings, self.chroma_url, generation, limit)
        # One batch at a time per actor: the actors are the parallelism.
        options = dataclasses.replace(self.options, batch_size=1, max_concurrency=1)
        results = map_runnable([entries for _, entries in todo], factory, options)
        try:
            while True:
                try:
                    number, result = next(results)
                except StopIteration:
                    return
                except Exception as exc:  # Ray's own: an actor that could not start or died
                    raise error(_ray_error(exc)) from exc
                if isinstance(result, BaseException):
                    raise error(result) from result
                record_ids, entries = todo[number]
                if self.chroma_url is None:
                    upsert_vectors(entries, result)
                    yield record_ids, len(entries)
                else:
                    yield record_ids, int(result)
        finally:  # stop the pool (and a Ray started for the build) now, not when collected
            close = getattr(results, "close", None)
            if close is not None:
                close()
