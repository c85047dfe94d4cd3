"""Adapters for web search APIs: Bing, DuckDuckGo (ddgs), Tavily and SearxNG.

Each adapter takes an already-built client object (anything with the right method, which is
how tests inject fakes) or builds the real one on first use. The client packages are optional:
a missing one raises an :class:`ImportError` naming the extra to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from langchain_references._optional import MissingDependencyError
from langchain_references.factcheck.search.base import BaseSearchProvider, hits_from_records
from langchain_references.factcheck.types import SearchHit

__all__ = ["BingSearch", "DuckDuckGoSearch", "SearxSearch", "TavilySearch"]


def _client_class(module: str, name: str, *, package: str, extra: str) -> Any:
    """Import the client class ``module.name``, or raise an ImportError naming the extra."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise MissingDependencyError(package, extra, feature="This search provider") from exc


class _ResultsAPI(Protocol):
    def results(self, query: str, num_results: int) -> list[dict[str, Any]]: ...


class _SearxAPI(Protocol):
    def results(self, query: str, num_results: int, **kwargs: Any) -> list[dict[str, Any]]: ...

    async def aresults(
        self, query: str, num_results: int, **kwargs: Any
    ) -> list[dict[str, Any]]: ...


class _DDGSAPI(Protocol):
    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]: ...


class _TavilyAPI(Protocol):
    def search(self, query: str, **kwargs: Any) -> Mapping[str, Any]: ...


class _AsyncTavilyAPI(Protocol):
    async def search(self, query: str, **kwargs: Any) -> Mapping[str, Any]: ...


class BingSearch(BaseSearchProvider):
    """Bing Web Search through LangChain's ``BingSearchAPIWrapper``.

    Args:
        wrapper: A ``BingSearchAPIWrapper`` (or any object with
            ``results(query, num_results) -> list[dict]``). Built from ``wrapper_kwargs`` (or
            the ``BING_SUBSCRIPTION_KEY`` / ``BING_SEARCH_URL`` environment variables) if omitted.
        **wrapper_kwargs: Passed to ``BingSearchAPIWrapper``.

    Raises:
        ImportError: If ``langchain-community`` is not installed and no wrapper is given.
    """

    name: ClassVar[str] = "bing"

    def __init__(self, wrapper: _ResultsAPI | None = None, **wrapper_kwargs: Any) -> None:
        if wrapper is None:
            wrapper_class = _client_class(
                "langchain_community.utilities",
                "BingSearchAPIWrapper",
                package="langchain-community",
                extra="bing",
            )
            wrapper = wrapper_class(**wrapper_kwargs)
        self._wrapper = wrapper

    def _search(self, query: str, k: int) -> list[SearchHit]:
        return hits_from_records(self._wrapper.results(query, k), k=k)


class SearxSearch(BaseSearchProvider):
    """A SearxNG instance through LangChain's ``SearxSearchWrapper``.

    Args:
        wrapper: A ``SearxSearchWrapper`` (or any object with ``results``/``aresults``). Built
            from ``searx_host`` (or the ``SEARX_HOST`` environment variable) if omitted.
        searx_host: URL of the SearxNG instance.
        engines: Engines to query (SearxNG defaults if omitted).
        categories: Categories to query.

    Raises:
        ImportError: If ``langchain-community`` is not installed and no wrapper is given.
    """

    name: ClassVar[str] = "searx"

    def __init__(
        self,
        wrapper: _SearxAPI | None = None,
        *,
        searx_host: str | None = None,
        engines: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
    ) -> None:
        if wrapper is None:
            wrapper_class = _client_class(
                "langchain_community.utilities",
                "SearxSearchWrapper",
                package="langchain-community",
                extra="searx",
            )
            wrapper = wrapper_class(**({"searx_host": searx_host} if searx_host else {}))
        self._wrapper = wrapper
        self._kwargs: dict[str, Any] = {}
        if engines:
            self._kwargs["engines"] = list(engines)
        if categories:
            self._kwargs["categories"] = list(categories)

    def _search(self, query: str, k: int) -> list[SearchHit]:
        return hits_from_records(self._wrapper.results(query, num_results=k, **self._kwargs), k=k)

    async def _asearch(self, query: str, k: int) -> list[SearchHit]:
        records = await self._wrapper.aresults(query, num_results=k, **self._kwargs)
        return hits_from_records(records, k=k)


def _is_no_results(exc: Exception) -> bool:
    # ddgs raises DDGSException("No results found.") rather than returning [].
    return "no results found" in str(exc).lower()


class DuckDuckGoSearch(BaseSearchProvider):
    """DuckDuckGo (and other engines) through the ``ddgs`` package's ``DDGS().text``.

    Args:
        client: A ``ddgs.DDGS`` (or any object with ``text(query, **kwargs) -> list[dict]``).
            Built with default settings if omitted.
        **text_kwargs: Passed to ``text`` (e.g. ``region="us-en"``, ``safesearch="moderate"``,
            ``backend="auto"``).

    Raises:
        ImportError: If ``ddgs`` is not installed and no client is given.
    """

    name: ClassVar[str] = "duckduckgo"

    def __init__(self, client: _DDGSAPI | None = None, **text_kwargs: Any) -> None:
        if client is None:
            client = _client_class("ddgs", "DDGS", package="ddgs", extra="ddgs")()
        self._client = client
        self._text_kwargs = text_kwargs

    def _search(self, query: str, k: int) -> list[SearchHit]:
        try:
            records = self._client.text(query, max_results=k, **self._text_kwargs)
        except Exception as exc:
            if _is_no_results(exc):
                return []
            raise
        return hits_from_records(records, k=k, snippet_key="body", link_key="href")


class TavilySearch(BaseSearchProvider):
    """Tavily search through the ``tavily-python`` package.

    Args:
        client: A ``tavily.TavilyClient`` (or any object with ``search(query, **kwargs)``
            returning ``{"results": [...]}``). Built from ``api_key`` (or ``TAVILY_API_KEY``)
            if omitted.
        async_client: A ``tavily.AsyncTavilyClient`` for :meth:`asearch`; without one the
            sync client runs in a thread.
        api_key: Tavily API key, used when the client is built here.
        **search_kwargs: Passed to ``search`` (e.g. ``search_depth="advanced"``).

    Raises:
        ImportError: If ``tavily-python`` is not installed and no client is given.
    """

    name: ClassVar[str] = "tavily"

    def __init__(
        self,
        client: _TavilyAPI | None = None,
        *,
        async_client: _AsyncTavilyAPI | None = None,
        api_key: str | None = None,
        **search_kwargs: Any,
    ) -> None:
        if client is None:
            client_class = _client_class(
                "tavily", "TavilyClient", package="tavily-python", extra="tavily"
            )
            client = client_class(api_key=api_key)
        self._client = client
        self._async_client = async_client
        self._search_kwargs = search_kwargs

    @staticmethod
    def _hits(response: Mapping[str, Any], k: int) -> list[SearchHit]:
        results = response.get("results", [])
        if not isinstance(results, list):
            raise TypeError(f"Tavily response 'results' is not a list: {type(results).__name__}")
        return hits_from_records(results, k=k, snippet_key="content", link_key="url")

    def _search(self, query: str, k: int) -> list[SearchHit]:
        return self._hits(self._client.search(query, max_results=k, **self._search_kwargs), k)

    async def _asearch(self, query: str, k: int) -> list[SearchHit]:
        if self._async_client is None:
            return await super()._asearch(query, k)
        response = await self._async_client.search(query, max_results=k, **self._search_kwargs)
        return self._hits(response, k)
