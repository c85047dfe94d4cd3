"""The search-provider interface and helpers shared by every provider."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.runnables.config import run_in_executor

from langchain_references.errors import LangchainReferencesError
from langchain_references.factcheck.types import SearchHit, SearchReport
from langchain_references.failures import Failure

__all__ = [
    "BaseSearchProvider",
    "SearchError",
    "SearchProvider",
    "asearch_report",
    "hits_from_records",
    "search_report",
]

logger = logging.getLogger(__name__)

DEFAULT_K = 10


@runtime_checkable
class SearchProvider(Protocol):
    """Anything that turns a query into ranked :class:`SearchHit` objects."""

    def search(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """Return at most ``k`` hits for ``query``, best first, ranks 0..n-1."""
        ...

    async def asearch(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """Async :meth:`search`."""
        ...


class SearchError(LangchainReferencesError, RuntimeError):
    """A search provider failed (network error, bad credentials, quota...).

    Attributes:
        provider: Name of the provider.
        query: The query.
    """

    def __init__(self, provider: str, query: str, cause: BaseException) -> None:
        super().__init__(f"{provider} search failed for {query!r}: {type(cause).__name__}: {cause}")
        self.provider = provider
        self.query = query


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def hits_from_records(
    records: Iterable[Mapping[str, Any]],
    *,
    k: int,
    title_key: str = "title",
    snippet_key: str = "snippet",
    link_key: str = "link",
) -> list[SearchHit]:
    """Map provider result dicts to hits, ranked 0..n-1 in the given order.

    Records without a link (e.g. the ``{"Result": "No good ... Result was found"}`` placeholder
    of LangChain's wrappers) and non-mapping records are skipped; ranks stay contiguous.

    Args:
        records: Result dicts, best first.
        k: Maximum number of hits.
        title_key: Key of the title.
        snippet_key: Key of the snippet.
        link_key: Key of the URL.

    Returns:
        Up to ``k`` hits.
    """
    hits: list[SearchHit] = []
    for record in records:
        if len(hits) >= k:
            break
        if not isinstance(record, Mapping):
            logger.debug("Skipping non-mapping search record %r", record)
            continue
        link = _text(record.get(link_key))
        if not link:
            logger.debug("Skipping search record without %r: %r", link_key, record)
            continue
        hits.append(
            SearchHit(
                title=_text(record.get(title_key)),
                snippet=_text(record.get(snippet_key)),
                link=link,
                rank=len(hits),
            )
        )
    return hits


def _check_args(query: str, k: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"query must be a non-empty string, got {query!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


@contextmanager
def _provider_errors(provider: str, query: str, k: int) -> Iterator[None]:
    """Check the arguments, then turn any error of the block into a :class:`SearchError`."""
    _check_args(query, k)
    try:
        yield
    except SearchError:
        raise
    except Exception as exc:
        raise SearchError(provider, query, exc) from exc


class BaseSearchProvider(ABC):
    """Base class for providers: checks arguments, wraps provider errors in :class:`SearchError`.

    Subclasses implement :meth:`_search` and, when the client has a native async API,
    :meth:`_asearch` (by default :meth:`_search` runs in the default executor).
    """

    #: Short provider name used in errors and logs.
    name: ClassVar[str] = "search"

    @abstractmethod
    def _search(self, query: str, k: int) -> list[SearchHit]:
        """Return at most ``k`` hits (arguments already checked)."""

    async def _asearch(self, query: str, k: int) -> list[SearchHit]:
        """Async :meth:`_search`; runs it in the default executor unless overridden."""
        return await run_in_executor(None, self._search, query, k)

    def search(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """Return at most ``k`` hits for ``query``, best first, ranks 0..n-1.

        Args:
            query: The query.
            k: Maximum number of hits.

        Returns:
            The hits.

        Raises:
            ValueError: If the query is empty or ``k`` < 1.
            SearchError: If the provider failed.
        """
        with _provider_errors(self.name, query, k):
            return self._search(query, k)

    async def asearch(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """Async :meth:`search` (through :meth:`_asearch`); same arguments, result, errors."""
        with _provider_errors(self.name, query, k):
            return await self._asearch(query, k)

    def as_runnable(self, k: int = DEFAULT_K) -> Runnable[str, list[SearchHit]]:
        """Wrap the provider as a LangChain Runnable ``query -> list[SearchHit]``.

        Args:
            k: Maximum number of hits per query.

        Returns:
            A Runnable with sync and async paths.
        """

        def _run(query: str) -> list[SearchHit]:
            return self.search(query, k)

        async def _arun(query: str) -> list[SearchHit]:
            return await self.asearch(query, k)

        return RunnableLambda(_run, afunc=_arun, name=f"{self.name}_search")


@dataclass
class _Search:
    """One search whose failure is recorded instead of raised (see :func:`_recorded`)."""

    query: str
    hits: list[SearchHit] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    @property
    def report(self) -> SearchReport:
        """The hits, or an empty report with the failure."""
        return SearchReport(query=self.query, hits=self.hits, failures=self.failures)


@contextmanager
def _recorded(provider: SearchProvider, query: str, k: int) -> Iterator[_Search]:
    """The decisions of :func:`search_report`, shared by its sync and async drivers.

    Bad arguments raise on entry; the driver sets the hits inside the block, and an exception
    raised there becomes the report's ``"search"`` failure.
    """
    _check_args(query, k)
    search = _Search(query)
    try:
        yield search
    except Exception as exc:  # a failed search is recorded, the run goes on
        name = getattr(provider, "name", type(provider).__name__)
        logger.warning("Search with %s failed for %r: %s", name, query, exc)
        reason = str(exc) if isinstance(exc, SearchError) else f"{type(exc).__name__}: {exc}"
        search.failures = [Failure(url="", stage="search", reason=reason, query=query)]


def search_report(provider: SearchProvider, query: str, k: int = DEFAULT_K) -> SearchReport:
    """Search, recording a provider failure instead of raising.

    Args:
        provider: Any search provider.
        query: The query.
        k: Maximum number of hits.

    Returns:
        The hits, or an empty report with one ``"search"`` failure.

    Raises:
        ValueError: If the query is empty or ``k`` < 1 (bad arguments are not recorded).
    """
    with _recorded(provider, query, k) as search:
        search.hits = provider.search(query, k)
    return search.report


async def asearch_report(provider: SearchProvider, query: str, k: int = DEFAULT_K) -> SearchReport:
    """Async :func:`search_report` (the provider's ``asearch``); same arguments, result, errors."""
    with _recorded(provider, query, k) as search:
        search.hits = await provider.asearch(query, k)
    return search.report
