"""Where the evidence contexts of the atoms come from.

A :class:`ContextRetriever` gets the atoms (and the contexts already in the input) and returns
the atoms with their context ids filled in, the contexts, and the failures met on the way. A
failure (a search error, a page that does not download) is recorded, never fatal. Three
implementations:

* :class:`InputContexts`: the contexts given in a FactReasoner input record
  (``atoms[].contexts`` ids into ``contexts[]``), optionally trimmed to ``top_k`` per atom;
  their text becomes :func:`context_premise` (the snippet when the text is empty, as in
  FactReasoner's Google-search files);
* :class:`VectorStoreContexts`: any LangChain retriever or vector store (e.g. Chroma), the
  ``k`` nearest documents per atom;
* :class:`WebContexts`: the fact-check web stack: a search provider, the
  :class:`~langchain_references.factcheck.fetch.PageFetcher`, trafilatura extraction,
  token-bounded passages and the fact-check's relevance selection (hybrid: the embeddings'
  cosine fused with BM25); each URL is fetched once even when several atoms find it.

Contexts found for atom ``a3`` get ids ``c_a3_0``, ``c_a3_1``... as in FactReasoner; the
same text found for several atoms makes several contexts, which the FR2/FR3 graphs merge.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore
from typing_extensions import override

from langchain_references.factcheck.search.base import SearchProvider, asearch_report
from langchain_references.factcheck.types import Passage, SearchHit
from langchain_references.factuality.model import Atom, Context
from langchain_references.failures import Failure
from langchain_references.judges.base import paired_outputs
from langchain_references.services._concurrency import (
    check_concurrency,
    run_sync,
    with_default_concurrency,
)

if TYPE_CHECKING:
    from langchain_references.factcheck.fetch import PageFetcher

__all__ = [
    "ContextRetriever",
    "Failure",
    "InputContexts",
    "RetrievedContexts",
    "VectorStoreContexts",
    "WebContexts",
    "context_premise",
]

logger = logging.getLogger(__name__)

_LINK_KEYS: Final = ("source", "url", "link")


def context_premise(context: Context) -> str:
    r"""The text a context contributes as NLI premise, chosen as FactReasoner chooses it.

    FactReasoner's ``Context.get_text`` (``src/fact_reasoner/core/base.py``): with both a
    snippet and a text, ``"Snippet/Summary of Text:\n\n" + snippet + "\n\nText:\n\n" +
    text``; with only one of them, that one. FactReasoner's Google-search files carry the
    search snippet and an empty ``text``, so the snippet is the premise there. When both are
    blank FactReasoner has no premise at all; the title is used instead (never blank when
    the page had a title), so an atom is not left without evidence for a missing snippet.

    Args:
        context: The context.

    Returns:
        The premise text (``""`` only when text, snippet and title are all blank).
    """
    text, snippet = context.text, context.snippet
    if snippet.strip() and text.strip():
        return f"Snippet/Summary of Text:\n\n{snippet}\n\nText:\n\n{text}"
    if text.strip():
        return text
    if snippet.strip():
        return snippet
    return context.title.strip()


def _with_premise(context: Context) -> Context:
    premise = context_premise(context)
    return context if premise == context.text else replace(context, text=premise)


@dataclass(frozen=True)
class RetrievedContexts:
    """Atoms with their context ids, the contexts, and the failures.

    Attributes:
        atoms: The input atoms, in order, with ``contexts`` set to their own context ids.
        contexts: All contexts, in retrieval order.
        failures: What could not be retrieved.
    """

    atoms: tuple[Atom, ...]
    contexts: tuple[Context, ...]
    failures: tuple[Failure, ...] = ()


def _with_contexts(atom: Atom, context_ids: Sequence[str]) -> Atom:
    return Atom(atom.id, atom.text, atom.original, atom.label, tuple(context_ids))


def _context_id(atom: Atom, j: int) -> str:
    return f"c_{atom.id}_{j}"


def _queries(atoms: Sequence[Atom], topic: str | None, include_topic: bool) -> list[str]:
    """One query per atom: its text, prefixed with ``"topic: "`` when asked to."""
    if include_topic and topic:
        return [f"{topic}: {a.text}" for a in atoms]
    return [a.text for a in atoms]


class ContextRetriever(ABC):
    """Finds evidence contexts for atoms (see module docstring)."""

    @abstractmethod
    def retrieve(
        self,
        atoms: Sequence[Atom],
        contexts: Sequence[Context] = (),
        *,
        topic: str | None = None,
        config: RunnableConfig | None = None,
    ) -> RetrievedContexts:
        """Find the contexts of each atom.

        Args:
            atoms: The atoms.
            contexts: Contexts that came with the input (used by :class:`InputContexts`).
            topic: The response's topic, if known.
            config: Runnable config for the runnables called inside.

        Returns:
            Atoms with context ids, contexts and failures.
        """

    async def aretrieve(
        self,
        atoms: Sequence[Atom],
        contexts: Sequence[Context] = (),
        *,
        topic: str | None = None,
        config: RunnableConfig | None = None,
    ) -> RetrievedContexts:
        """Async :meth:`retrieve` (by default, :meth:`retrieve` in an executor).

        Args:
            atoms: The atoms.
            contexts: Contexts that came with the input.
            topic: The response's topic, if known.
            config: Runnable config.

        Returns:
            Atoms with context ids, contexts and failures.
        """
        return await run_in_executor(
            config, self.retrieve, atoms, contexts, topic=topic, config=config
        )


@dataclass(frozen=True)
class _Request:
    """The arguments of one :meth:`ContextRetriever.retrieve` call."""

    atoms: Sequence[Atom]
    contexts: Sequence[Context]
    topic: str | None
    config: RunnableConfig | None


class _Retriever(ContextRetriever):
    """The retrievers of this module: one signature, forwarded to per-class drivers.

    :meth:`retrieve` and :meth:`aretrieve` pack their arguments into a :class:`_Request`
    and hand it to :meth:`_retrieve` / :meth:`_aretrieve`, the class's thin drivers.
    """

    @override
    def retrieve(
        self,
        atoms: Sequence[Atom],
        contexts: Sequence[Context] = (),
        *,
        topic: str | None = None,
        config: RunnableConfig | None = None,
    ) -> RetrievedContexts:
        """Find the contexts of each atom (see the class docstring)."""
        return self._retrieve(_Request(atoms, contexts, topic, config))

    @override
    async def aretrieve(
        self,
        atoms: Sequence[Atom],
        contexts: Sequence[Context] = (),
        *,
        topic: str | None = None,
        config: RunnableConfig | None = None,
    ) -> RetrievedContexts:
        """Async :meth:`retrieve` (see the class docstring)."""
        return await self._aretrieve(_Request(atoms, contexts, topic, config))

    @abstractmethod
    def _retrieve(self, request: _Request) -> RetrievedContexts:
        """The sync driver."""

    @abstractmethod
    async def _aretrieve(self, request: _Request) -> RetrievedContexts:
        """The async driver."""


def _check_positive(value: int | None, name: str) -> None:
    if value is not None and (isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class InputContexts(_Retriever):
    """Use the contexts that came with the input (FactReasoner's ``atoms[].contexts``).

    Each context's ``text`` becomes its :func:`context_premise`: the snippet when the text
    is empty (FactReasoner's Google-search files), both when both are given, the title when
    neither is. A failure is recorded for each atom without context; ``topic`` and
    ``config`` are unused, and :meth:`aretrieve` does the same as :meth:`retrieve` (no I/O).

    Args:
        top_k: Keep only the first ``top_k`` context ids of each atom, and drop the contexts
            no atom keeps. ``None`` keeps everything as given.

    Raises:
        ValueError: If ``top_k`` is not positive.
    """

    def __init__(self, top_k: int | None = None) -> None:
        _check_positive(top_k, "top_k")
        self.top_k = top_k

    @override
    def _retrieve(self, request: _Request) -> RetrievedContexts:
        """The input atoms and contexts (trimmed to ``top_k`` per atom), premises filled in."""
        atoms, contexts = request.atoms, request.contexts
        if self.top_k is None:
            kept_atoms, kept = tuple(atoms), tuple(contexts)
        else:
            kept_atoms = tuple(_with_contexts(a, a.contexts[: self.top_k]) for a in atoms)
            used = {cid for a in kept_atoms for cid in a.contexts}
            kept = tuple(c for c in contexts if c.id in used)
        premised = tuple(_with_premise(c) for c in kept)
        changed = sum(
            1 for before, after in zip(kept, premised, strict=True) if before is not after
        )
        if changed:
            logger.debug("%d context(s) take their premise from snippet or title", changed)
        kept = premised
        failures = tuple(
            Failure(stage="retrieve", reason="no context given for this atom", item=a.id)
            for a in kept_atoms
            if not a.contexts
        )
        return RetrievedContexts(kept_atoms, kept, failures)

    @override
    async def _aretrieve(self, request: _Request) -> RetrievedContexts:
        """Same as :meth:`_retrieve` (no I/O)."""
        return self._retrieve(request)


def _document_context(cid: str, doc: Document) -> Context:
    metadata: Mapping[str, Any] = doc.metadata or {}
    title = metadata.get("title")
    link = next((v for k in _LINK_KEYS if isinstance(v := metadata.get(k), str) and v.strip()), "")
    return Context(
        id=cid,
        text=doc.page_content,
        title=title if isinstance(title, str) else "",
        link=link,
    )


class VectorStoreContexts(_Retriever):
    """The ``k`` documents nearest to each atom, from a LangChain retriever or vector store.

    One query per atom (``"topic: atom"`` with ``include_topic``), all in one ``batch`` /
    ``abatch`` of the retriever with ``config`` (its ``max_concurrency`` wins over this
    one's). The input contexts are ignored: the retrieved contexts replace them. A query that
    fails, or finds nothing, is a failure of its atom.

    Args:
        source: A ``BaseRetriever`` (used as is, its results cut to ``k``) or a
            ``VectorStore`` (searched with ``as_retriever(search_kwargs={"k": k})``).
        k: Documents per atom.
        include_topic: Prefix each query with the topic (``"topic: atom"``).
        max_concurrency: Parallel queries (unless the config sets ``max_concurrency``).

    Raises:
        TypeError: If ``source`` is neither a retriever nor a vector store.
        ValueError: If ``k`` or ``max_concurrency`` is not positive.
    """

    def __init__(
        self,
        source: BaseRetriever | VectorStore,
        *,
        k: int = 5,
        include_topic: bool = False,
        max_concurrency: int | None = None,
    ) -> None:
        _check_positive(k, "k")
        if isinstance(source, VectorStore):
            self.retriever: BaseRetriever = source.as_retriever(search_kwargs={"k": k})
        elif isinstance(source, BaseRetriever):
            self.retriever = source
        else:
            raise TypeError(
                f"source must be a BaseRetriever or a VectorStore, not {type(source).__name__}"
            )
        self.k = k
        self.include_topic = include_topic
        self.max_concurrency = check_concurrency(max_concurrency)

    # ``retrieve`` and ``aretrieve`` share the requests (:meth:`_requests`) and the reading of
    # the results (:meth:`_collect`); they differ only in ``batch`` / ``abatch``. No atoms: an
    # empty batch, no retriever call.

    def _requests(self, request: _Request) -> tuple[list[str], RunnableConfig]:
        """The queries, one per atom, and the config of their batch."""
        queries = _queries(request.atoms, request.topic, self.include_topic)
        return queries, with_default_concurrency(request.config, self.max_concurrency)

    def _collect(self, atoms: Sequence[Atom], results: Sequence[object]) -> RetrievedContexts:
        out_atoms: list[Atom] = []
        contexts: list[Context] = []
        failures: list[Failure] = []
        # Ctrl-C or a cancellation stops (paired_outputs raises it): not a failed retrieval
        for atom, result in paired_outputs(atoms, results):
            if isinstance(result, Exception):
                reason = f"{type(result).__name__}: {result}"
                logger.warning("retrieval failed for atom %s: %s", atom.id, reason)
                failures.append(Failure(stage="retrieve", reason=reason, item=atom.id))
                out_atoms.append(_with_contexts(atom, ()))
                continue
            docs = (
                [d for d in result if isinstance(d, Document)] if isinstance(result, list) else []
            )
            own = [_document_context(_context_id(atom, j), d) for j, d in enumerate(docs[: self.k])]
            if not own:
                failures.append(Failure(stage="retrieve", reason="no document found", item=atom.id))
            contexts.extend(own)
            out_atoms.append(_with_contexts(atom, [c.id for c in own]))
        return RetrievedContexts(tuple(out_atoms), tuple(contexts), tuple(failures))

    @override
    def _retrieve(self, request: _Request) -> RetrievedContexts:
        """Query the retriever once per atom, in one ``batch``."""
        queries, limited = self._requests(request)
        results = self.retriever.batch(queries, limited, return_exceptions=True)
        return self._collect(request.atoms, results)

    @override
    async def _aretrieve(self, request: _Request) -> RetrievedContexts:
        """Query the retriever once per atom, in one ``abatch``."""
        queries, limited = self._requests(request)
        results = await self.retriever.abatch(queries, limited, return_exceptions=True)
        return self._collect(request.atoms, results)


def _from_source_failure(failure: Failure, atom_id: str | None = None) -> Failure:
    return failure.model_copy(update={"item": atom_id})


class WebContexts(_Retriever):
    """Evidence from the web (or any search provider), through the fact-check stack.

    For each atom: search (``k_hits`` hits); then, over the union of all hits, each URL is
    fetched once (:class:`~langchain_references.factcheck.fetch.PageFetcher`), its main text
    extracted (trafilatura) and split into token-bounded passages; finally the ``k_contexts``
    passages of the atom's own pages closest to the atom are kept
    (:func:`~langchain_references.factcheck.relevance.select_relevant` in its default hybrid
    mode: the given embeddings' exact cosine fused with BM25; no vector store). Without a
    fetcher, or when none of an atom's pages yields a passage, the
    search snippets are used as contexts (``snippet_fallback``). The input contexts are
    ignored (the retrieved contexts replace them), and so is ``config``. The work is async;
    :meth:`retrieve` runs :meth:`aretrieve` to completion.

    Args:
        search: A search provider.
        embeddings: Embeddings for the relevance filter (e.g. ``MiniLMEmbeddings()``).
        fetcher: The page fetcher; ``None`` uses snippets only.
        k_hits: Search hits per atom.
        k_contexts: Contexts kept per atom.
        max_tokens: Passage size bound (tokens).
        min_chars: Paragraphs shorter than this are dropped.
        snippet_fallback: Use snippets when no passage is available for an atom.
        include_topic: Prefix each search query with the topic.

    Raises:
        ValueError: If a bound is not positive.
    """

    def __init__(
        self,
        search: SearchProvider,
        *,
        embeddings: Embeddings,
        fetcher: PageFetcher | None = None,
        k_hits: int = 5,
        k_contexts: int = 3,
        max_tokens: int = 256,
        min_chars: int = 80,
        snippet_fallback: bool = True,
        include_topic: bool = False,
    ) -> None:
        _check_positive(k_hits, "k_hits")
        _check_positive(k_contexts, "k_contexts")
        self.search = search
        self.embeddings = embeddings
        self.fetcher = fetcher
        self.k_hits = k_hits
        self.k_contexts = k_contexts
        self.max_tokens = max_tokens
        self.min_chars = min_chars
        self.snippet_fallback = snippet_fallback
        self.include_topic = include_topic

    @override
    def _retrieve(self, request: _Request) -> RetrievedContexts:
        """Run :meth:`_aretrieve` to completion (see the class docstring)."""
        return run_sync(self._aretrieve(request))

    @override
    async def _aretrieve(self, request: _Request) -> RetrievedContexts:
        """Search, fetch, extract, split and select (see the class docstring)."""
        atoms = request.atoms
        if not atoms:
            return RetrievedContexts((), ())
        failures: list[Failure] = []
        queries = _queries(atoms, request.topic, self.include_topic)
        reports = await asyncio.gather(
            *(asearch_report(self.search, q, self.k_hits) for q in queries)
        )
        hits_by_atom: dict[str, list[SearchHit]] = {}
        for atom, report in zip(atoms, reports, strict=True):
            hits_by_atom[atom.id] = list(report.hits)
            failures.extend(_from_source_failure(f, atom.id) for f in report.failures)
        passages_by_url, page_of = await self._passages(hits_by_atom, failures)

        out_atoms: list[Atom] = []
        out_contexts: list[Context] = []
        for atom in atoms:
            own = await self._select(atom, hits_by_atom[atom.id], passages_by_url, page_of)
            if isinstance(own, Failure):
                failures.append(own)
                own = []
            if not own and self.snippet_fallback:
                own = self._snippet_contexts(atom, hits_by_atom[atom.id])
            if not own:
                failures.append(Failure(stage="retrieve", reason="no context found", item=atom.id))
            out_contexts.extend(own)
            out_atoms.append(_with_contexts(atom, [c.id for c in own]))
        return RetrievedContexts(tuple(out_atoms), tuple(out_contexts), tuple(failures))

    async def _passages(
        self, hits_by_atom: Mapping[str, Sequence[SearchHit]], failures: list[Failure]
    ) -> tuple[dict[str, list[Passage]], dict[str, str]]:
        """Fetch every distinct URL once; passages by final URL, and link -> final URL."""
        if self.fetcher is None:
            return {}, {}
        from langchain_references.factcheck.extract import aextract_all
        from langchain_references.factcheck.passages import PassageSplitter

        unique: dict[str, SearchHit] = {}
        for hits in hits_by_atom.values():
            for hit in hits:
                unique.setdefault(hit.link, hit)
        if not unique:
            return {}, {}
        fetched = await self.fetcher.afetch_all(list(unique.values()))
        failures.extend(_from_source_failure(f) for f in fetched.failures)
        extracted = await aextract_all(fetched.pages)
        failures.extend(_from_source_failure(f) for f in extracted.failures)
        page_of = {page.url: page.final_url for page in extracted.pages}
        splitter = PassageSplitter(max_tokens=self.max_tokens, min_chars=self.min_chars)
        by_url: dict[str, list[Passage]] = {}
        for passage in splitter.split(extracted.pages):
            by_url.setdefault(passage.url, []).append(passage)
        for page in extracted.pages:
            if page.final_url not in by_url:
                failures.append(
                    Failure(stage="passages", reason="no passage long enough", url=page.url)
                )
        return by_url, page_of

    async def _select(
        self,
        atom: Atom,
        hits: Sequence[SearchHit],
        passages_by_url: Mapping[str, Sequence[Passage]],
        page_of: Mapping[str, str],
    ) -> list[Context] | Failure:
        from langchain_references.factcheck.relevance import aselect_relevant

        urls = list(dict.fromkeys(page_of[h.link] for h in hits if h.link in page_of))
        candidates = [p for url in urls for p in passages_by_url.get(url, ())]
        if not candidates:
            return []
        try:
            selected = await aselect_relevant(
                atom.text, candidates, embeddings=self.embeddings, k=self.k_contexts
            )
        except Exception as exc:  # one atom's failure must not stop the others
            logger.warning("relevance selection failed for atom %s: %s", atom.id, exc)
            return Failure(stage="relevance", reason=f"{type(exc).__name__}: {exc}", item=atom.id)
        snippets = {page_of.get(h.link, h.link): h.snippet for h in hits}
        return [
            Context(
                id=_context_id(atom, j),
                text=passage.text,
                title=passage.title,
                snippet=snippets.get(passage.url, ""),
                link=passage.url,
            )
            for j, (passage, _similarity) in enumerate(selected)
        ]

    def _snippet_contexts(self, atom: Atom, hits: Sequence[SearchHit]) -> list[Context]:
        usable = [h for h in hits if h.snippet.strip()][: self.k_contexts]
        return [
            Context(
                id=_context_id(atom, j),
                text=h.snippet,
                title=h.title,
                snippet=h.snippet,
                link=h.link,
            )
            for j, h in enumerate(usable)
        ]
