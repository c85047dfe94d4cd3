"""What :class:`~langchain_references.factcheck.chain.FactCheckChain` is built from (internal).

The chain's constructor only names its arguments and keeps what these pieces give it:

1. :class:`ChainOptions` checks the arguments (every error the constructor raises, in the
   same order, with the same messages);
2. :func:`wire` fills in the default components (embeddings, fetcher, splitter, aggregator),
   decorates the search and the judge with the rate limiter and the run cache
   (:func:`decorate_search`, :func:`decorate_judge`) and computes the fingerprint of the
   chain's settings (:func:`fingerprint`), part of every finished check's cache key;
3. :func:`build_stages` makes the stage objects the chain composes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable

from langchain_references.factcheck.cache import PageCache
from langchain_references.factcheck.evidence import IndexStage, PassageIndex
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PassageSplitter
from langchain_references.factcheck.search.base import SearchProvider
from langchain_references.factcheck.search.cached import CachedSearch, provider_name
from langchain_references.factcheck.search.limited import RateLimitedSearch
from langchain_references.factcheck.served import ServedCorpus
from langchain_references.factcheck.stages import (
    AggregateStage,
    ExtractStage,
    FactCheckStage,
    FetchStage,
    JudgeStage,
    PassagesStage,
    RelevanceStage,
    SearchStage,
)
from langchain_references.factcheck.verdict import Aggregator, WeightedVoteAggregator
from langchain_references.judges.base import JudgeInputLike, Judgement
from langchain_references.judges.cached import CachedJudge, judge_fingerprint
from langchain_references.services.ratelimit import RateLimiter
from langchain_references.services.retrieval import Retrieval
from langchain_references.services.runcache import RunCache, object_settings

if TYPE_CHECKING:
    from langchain_chroma import Chroma

__all__ = ["ChainOptions", "ChainStages", "Wiring", "build_stages", "wire"]

_Judge = Runnable[JudgeInputLike, Judgement]

#: A type check: the argument's name, its value, the type it must have, what the error says
#: it must be, and whether ``None`` is allowed.
_TypeCheck = tuple[str, object, type[Any], str, bool]


def _check_types(checks: Iterable[_TypeCheck]) -> None:
    """Raise ``TypeError`` at the first argument that has the wrong type."""
    for label, value, expected, must, optional in checks:
        if optional and value is None:
            continue
        if not isinstance(value, expected):
            raise TypeError(f"{label} must {must}, not {type(value).__name__}")


def _check_counts(counts: Iterable[tuple[str, object]]) -> None:
    """Raise ``ValueError`` at the first count that is not an integer >= 1 (``bool`` is not)."""
    for label, value in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainOptions:
    """The arguments of the chain's constructor, checked (their documentation is the chain's).

    Raises:
        TypeError: If a component has the wrong type.
        ValueError: If a number is out of range, both ``embeddings`` and ``vector_store`` are
            given, or neither ``search`` nor ``index`` is.
    """

    search: SearchProvider | None
    judge: _Judge
    embeddings: Embeddings | None
    fetcher: PageFetcher | None
    splitter: PassageSplitter | None
    aggregator: Aggregator | None
    k: int
    max_results: int
    vector_store: Chroma | None
    max_concurrency: int
    weight_by: Literal["relevance", "search"]
    retrieval: Retrieval
    name: str | None
    cache: RunCache | None
    limiter: RateLimiter | None
    search_identity: str
    index: PassageIndex | None
    corpus: ServedCorpus | None

    def __post_init__(self) -> None:
        if self.search is None and self.index is None:
            raise ValueError("give a search provider, an index, or both: there is no evidence")
        _check_types(
            [
                ("index", self.index, PassageIndex, "have name, find() and afind()", True),
                (
                    "search",
                    self.search,
                    SearchProvider,
                    "have search() and asearch() methods",
                    True,
                ),
                ("judge", self.judge, Runnable, "be a Runnable", False),
                ("embeddings", self.embeddings, Embeddings, "be an Embeddings", True),
            ]
        )
        if self.embeddings is not None and self.vector_store is not None:
            raise ValueError("pass embeddings or vector_store, not both: the store embeds itself")
        _check_types(
            [
                ("fetcher", self.fetcher, PageFetcher, "be a PageFetcher", True),
                ("splitter", self.splitter, PassageSplitter, "be a PassageSplitter", True),
                ("aggregator", self.aggregator, Aggregator, "have an aggregate() method", True),
            ]
        )
        _check_counts(
            [
                ("k", self.k),
                ("max_results", self.max_results),
                ("max_concurrency", self.max_concurrency),
            ]
        )
        if self.weight_by not in ("relevance", "search"):
            raise ValueError(f"weight_by must be 'relevance' or 'search', got {self.weight_by!r}")
        _check_types(
            [
                ("cache", self.cache, RunCache, "be a RunCache", True),
                ("limiter", self.limiter, RateLimiter, "be a RateLimiter", True),
            ]
        )

    @property
    def resolved_identity(self) -> str:
        """The search's identity in the cache keys: ``search_identity``, else the corpus's."""
        corpus = self.corpus
        return self.search_identity or (corpus.identity if corpus is not None else "")


@dataclass(frozen=True, slots=True)
class Wiring:
    """The chain's components once defaulted and decorated, and its fingerprint.

    Attributes:
        search: The search provider behind the rate limiter and the run cache, if any.
        judge: The judge behind the run cache.
        embeddings: The relevance stage's embeddings (the shared MiniLM by default).
        fetcher: The page fetcher (the default one reads and fills the run cache).
        splitter: The passage splitter.
        aggregator: The aggregator.
        search_identity: The search's identity in the cache keys.
        fingerprint: What a finished check depends on besides its statement and query.
    """

    search: SearchProvider | None
    judge: _Judge
    embeddings: Embeddings | None
    fetcher: PageFetcher
    splitter: PassageSplitter
    aggregator: Aggregator
    search_identity: str
    fingerprint: dict[str, Any]


def default_embeddings(options: ChainOptions) -> Embeddings | None:
    """The given embeddings; the shared MiniLM when the web stages need some and none is given."""
    if options.search is not None and options.embeddings is None and options.vector_store is None:
        from langchain_references.services.embeddings import shared_minilm

        return shared_minilm()
    return options.embeddings


def fingerprint(
    options: ChainOptions, embeddings: Embeddings | None, search_identity: str
) -> dict[str, Any]:
    """What a finished check depends on besides its statement and query.

    Args:
        options: The chain's options (the components as given, undecorated).
        embeddings: The relevance stage's embeddings, defaulted.
        search_identity: The search's identity in the cache keys.

    Returns:
        The settings, a JSON-able mapping.
    """
    search, index = options.search, options.index
    return {
        "search": [provider_name(search), search_identity] if search else None,
        "judge": judge_fingerprint(options.judge),
        "aggregator": object_settings(options.aggregator or WeightedVoteAggregator()),
        "splitter": object_settings(options.splitter or PassageSplitter()),
        "embeddings": type(embeddings).__qualname__ if embeddings is not None else None,
        "k": options.k,
        "max_results": options.max_results,
        "weight_by": options.weight_by,
        "retrieval": options.retrieval,
        "index": index.name if index is not None else None,
    }


def decorate_search(options: ChainOptions, search_identity: str) -> SearchProvider | None:
    """The search behind the rate limiter (key ``"search"``), then the run cache."""
    search = options.search
    if search is None:
        return None
    if options.limiter is not None:
        search = RateLimitedSearch(search, options.limiter)
    if options.cache is not None:
        search = CachedSearch(
            search, options.cache, identity=search_identity, corpus=options.corpus
        )
    return search


def decorate_judge(options: ChainOptions) -> _Judge:
    """The judge behind the run cache, if there is one."""
    return options.judge if options.cache is None else CachedJudge(options.judge, options.cache)


def default_fetcher(options: ChainOptions) -> PageFetcher:
    """The given fetcher, or one that reads the run cache and waits for the rate limiter."""
    if options.fetcher is not None:
        return options.fetcher
    cache = options.cache
    page_cache = PageCache(store=cache, corpus=options.corpus) if cache is not None else None
    return PageFetcher(cache=page_cache, limiter=options.limiter)


def wire(options: ChainOptions) -> Wiring:
    """Default and decorate the components of checked options, and fingerprint them.

    Args:
        options: The checked options.

    Returns:
        The components the chain runs, and its fingerprint.
    """
    embeddings = default_embeddings(options)
    identity = options.resolved_identity
    settings = fingerprint(options, embeddings, identity)
    return Wiring(
        search=decorate_search(options, identity),
        judge=decorate_judge(options),
        embeddings=embeddings,
        fetcher=default_fetcher(options),
        splitter=options.splitter if options.splitter is not None else PassageSplitter(),
        aggregator=(
            options.aggregator if options.aggregator is not None else WeightedVoteAggregator()
        ),
        search_identity=identity,
        fingerprint=settings,
    )


@dataclass(frozen=True, slots=True)
class ChainStages:
    """The stage objects of a chain.

    Attributes:
        web: The web's stages in run order (none without a search).
        index: The index's stage, if there is an index.
        judge: The judge stage.
        aggregate: The aggregate stage.
    """

    web: tuple[FactCheckStage[Any], ...]
    index: IndexStage | None
    judge: JudgeStage
    aggregate: AggregateStage

    @property
    def all(self) -> tuple[FactCheckStage[Any], ...]:
        """The web's stages, then the index's, the judge and the aggregate stage."""
        index_stages = () if self.index is None else (self.index,)
        return (*self.web, *index_stages, self.judge, self.aggregate)


def build_stages(options: ChainOptions, wiring: Wiring) -> ChainStages:
    """The stage objects of the wired components.

    Args:
        options: The checked options (counts, rank weighting, retrieval, vector store, index).
        wiring: The components.

    Returns:
        The stages.
    """
    web: tuple[FactCheckStage[Any], ...] = ()
    if wiring.search is not None:
        web = (
            SearchStage(wiring.search, options.max_results),
            FetchStage(wiring.fetcher),
            ExtractStage(),
            PassagesStage(wiring.splitter),
            RelevanceStage(
                embeddings=wiring.embeddings,
                vector_store=options.vector_store,
                k=options.k,
                retrieval=options.retrieval,
            ),
        )
    index = options.index
    return ChainStages(
        web=web,
        index=IndexStage(index, options.k) if index is not None else None,
        judge=JudgeStage(wiring.judge, options.max_concurrency),
        aggregate=AggregateStage(wiring.aggregator, options.weight_by),
    )
