"""Evidence sources of the fact-check chain: the web, an index, or both.

A :class:`~langchain_references.factcheck.chain.FactCheckChain` finds the passages it judges
in one of two ways, or both side by side:

* **the web**: a search provider, then the guarded fetcher, extraction, passages and
  relevance (the stages of :mod:`~langchain_references.factcheck.stages`);
* **an index**: a :class:`PassageIndex`, anything that returns passages already cut and
  ranked for a statement, with their cosine similarity: any LangChain vector store through
  :class:`VectorStoreIndex`, or the service's evidence index
  (:class:`~langchain_references.server.factcheck_api.IndexPassages`). Its passages are not
  pages: nothing is fetched or extracted, and the state's ``pages`` and ``extracted`` stay
  empty.

:class:`IndexStage` runs the index as the chain's ``search`` stage (the index search is the
search and the relevance ranking at once); with both sources, :func:`merge_evidence` joins the
two branches' states before the judge.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore
from typing_extensions import override

from langchain_references.factcheck.result import Stage
from langchain_references.factcheck.stages import FactCheckStage, FactCheckState, StageEnd
from langchain_references.factcheck.types import Passage, SearchHit
from langchain_references.failures import Failure

__all__ = [
    "IndexStage",
    "IndexedPassage",
    "PassageIndex",
    "VectorStoreIndex",
    "merge_evidence",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexedPassage:
    """A passage found by a :class:`PassageIndex`.

    Attributes:
        passage: The passage (its ``url`` may be ``""`` when the record has no link).
        similarity: Cosine similarity to the statement, in ``[-1, 1]``.
        id: The entry's id in the index (the search hit's link when the passage has no URL).
    """

    passage: Passage
    similarity: float
    id: str


@runtime_checkable
class PassageIndex(Protocol):
    """An evidence source that returns ranked passages for a statement (an index).

    Attributes:
        name: Shown in progress events and part of the run-cache key of a check.
    """

    name: str

    def find(self, statement: str, k: int) -> list[IndexedPassage]:
        """The ``k`` passages closest to ``statement``, most similar first.

        Args:
            statement: The statement being checked.
            k: How many passages.

        Returns:
            The passages.
        """
        ...

    async def afind(self, statement: str, k: int) -> list[IndexedPassage]:
        """Async :meth:`find`.

        Args:
            statement: The statement being checked.
            k: How many passages.

        Returns:
            The passages.
        """
        ...


class VectorStoreIndex:
    """A LangChain vector store as a :class:`PassageIndex`.

    Each document found is a passage: its ``page_content``, the URL in
    ``metadata[url_key]`` (else ``metadata["source"]`` when it is an http(s) URL, as
    LangChain's web loaders set it, else ``""``) and the title in ``metadata[title_key]``
    (else the URL or the document id). The similarity is the store's relevance score
    (``similarity_search_with_relevance_scores``): the cosine for a store in cosine space,
    such as ``Chroma(collection_metadata={"hnsw:space": "cosine"})``.

    Args:
        store: The vector store.
        name: Shown in progress events and part of the run-cache key of a check (default:
            the store's class name).
        url_key: Metadata key of a document's URL.
        title_key: Metadata key of a document's title.
    """

    def __init__(
        self,
        store: VectorStore,
        *,
        name: str | None = None,
        url_key: str = "url",
        title_key: str = "title",
    ) -> None:
        if not isinstance(store, VectorStore):
            raise TypeError(f"store must be a VectorStore, not {type(store).__name__}")
        self.store = store
        self.name = name or type(store).__name__
        self.url_key = url_key
        self.title_key = title_key

    def find(self, statement: str, k: int) -> list[IndexedPassage]:
        """The ``k`` documents closest to ``statement`` as passages (see the class docs).

        Args:
            statement: The statement being checked.
            k: How many documents.

        Returns:
            The passages, most similar first.
        """
        return self._passages(self.store.similarity_search_with_relevance_scores(statement, k=k))

    async def afind(self, statement: str, k: int) -> list[IndexedPassage]:
        """Async :meth:`find` (the store's async search).

        Args:
            statement: The statement being checked.
            k: How many documents.

        Returns:
            The passages, most similar first.
        """
        found = await self.store.asimilarity_search_with_relevance_scores(statement, k=k)
        return self._passages(found)

    def _passages(self, found: list[tuple[Document, float]]) -> list[IndexedPassage]:
        passages = []
        for rank, (document, score) in enumerate(found):
            if not document.page_content.strip():
                continue
            metadata = document.metadata
            url = metadata.get(self.url_key)
            if not isinstance(url, str) or not url:
                source = metadata.get("source")
                is_web = isinstance(source, str) and source.startswith(("http://", "https://"))
                url = source if is_web else ""
            entry_id = document.id or str(rank)
            title = metadata.get(self.title_key)
            position = metadata.get("position", 0)
            passage = Passage(
                text=document.page_content,
                url=url,
                title=title if isinstance(title, str) and title else url or entry_id,
                rank=rank,
                index_in_page=position if isinstance(position, int) and position >= 0 else 0,
                n_tokens=max(1, len(document.page_content.split())),
            )
            passages.append(IndexedPassage(passage, float(score), entry_id))
        return passages


_IndexOutcome = tuple[list[IndexedPassage], list[Failure]]


def _finite_cosine(value: float) -> float:
    return max(-1.0, min(1.0, value)) if math.isfinite(value) else 0.0


class IndexStage(FactCheckStage[_IndexOutcome]):
    """Take the passages to judge from a :class:`PassageIndex` (the ``search`` stage of a check).

    Every passage found is a search hit and a passage selected for judging, in the index's
    order. A failing index is recorded as a ``search`` failure and the check goes on (to the
    chain's "search failed" error verdict).

    Args:
        index: The index.
        k: Number of passages taken.
    """

    stage = "search"

    def __init__(self, index: PassageIndex, k: int) -> None:
        self.index = index
        self.k = k

    @override
    def describe(self, state: FactCheckState) -> str:
        return f"searching the evidence index {self.index.name!r}"

    @override
    def work(self, state: FactCheckState, config: RunnableConfig) -> _IndexOutcome:
        return self.index.find(state.statement, self.k), []

    @override
    async def awork(self, state: FactCheckState, config: RunnableConfig) -> _IndexOutcome:
        return await self.index.afind(state.statement, self.k), []

    @override
    def recover(self, state: FactCheckState, exc: Exception) -> _IndexOutcome:
        logger.warning("The evidence index failed: %s: %s", type(exc).__name__, exc)
        reason = f"evidence index: {type(exc).__name__}: {exc}"
        return [], [Failure(stage="search", reason=reason, query=state.statement)]

    @override
    def finish(self, state: FactCheckState, outcome: _IndexOutcome) -> StageEnd:
        found, failures = outcome
        hits = tuple(
            SearchHit(
                title=item.passage.title,
                snippet=item.passage.text,
                link=item.passage.url or f"index:{item.id}",
                rank=rank,
            )
            for rank, item in enumerate(found)
        )
        selected = tuple((item.passage, _finite_cosine(item.similarity)) for item in found)
        n = len(found)
        detail = f"{n} index {'entry' if n == 1 else 'entries'}"
        if failures:
            detail += f"; search failed: {failures[0].reason}"
        return StageEnd(
            state.advance(
                failures,
                {"hits": n, "passages": n, "judged": n},
                hits=hits,
                passages=tuple(p for p, _ in selected),
                selected=selected,
            ),
            detail,
            {"hits": n, "failed": len(failures)},
        )


def merge_evidence(states: Mapping[str, FactCheckState]) -> FactCheckState:
    """Join the index branch and the web branch of a check into one state for the judge.

    Both branches started from the same state. Hits, pages and passages are concatenated (web
    first), the selected passages are ordered by similarity (most similar first, the web's
    first on a tie), failures are concatenated and counts added; a stage that ran in both
    branches is timed by the longer of the two, since they ran side by side.

    Args:
        states: ``{"index": state, "web": state}``.

    Returns:
        The merged state.
    """
    index, web = states["index"], states["web"]
    counts = dict(web.counts)
    for key, value in index.counts.items():
        counts[key] = counts.get(key, 0) + value
    timings: dict[Stage, float] = {}
    for stage, seconds in (*web.timings, *index.timings):
        timings[stage] = max(seconds, timings.get(stage, 0.0))
    both = (*web.selected, *index.selected)
    order = {id(item): i for i, item in enumerate(both)}
    selected = sorted(both, key=lambda p: (-p[1], order[id(p)]))
    return FactCheckState(
        statement=web.statement,
        query=web.query,
        started=min(web.started, index.started),
        failures=(*web.failures, *index.failures),
        timings=tuple(timings.items()),
        counts=counts,
        hits=(*web.hits, *index.hits),
        pages=web.pages,
        extracted=web.extracted,
        passages=(*web.passages, *index.passages),
        selected=tuple(selected),
    )
