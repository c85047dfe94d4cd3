"""The search back-end named by a spec string: one parser for the CLI and the server.

A spec is ``ddgs``, ``tavily``, ``bing``, ``searx[:URL]`` (a web search API; each needs its
optional package) or ``recorded:FILE`` (a recording replayed, ``.jsonl`` or ``.json``, for tests
and benchmarks). ``langchain-references factcheck --search`` takes these and more (a demo or
local corpus served on a local port); ``serve --search-backend`` takes exactly these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from langchain_references.factcheck.search.base import SearchProvider
from langchain_references.factcheck.search.recorded import RecordedSearch
from langchain_references.factcheck.search.web import (
    BingSearch,
    DuckDuckGoSearch,
    SearxSearch,
    TavilySearch,
)

__all__ = ["SEARCH_SPECS", "search_from_spec"]

#: The specs :func:`search_from_spec` knows, for error messages.
SEARCH_SPECS: Final = "ddgs, tavily, bing, searx[:URL] or recorded:FILE"


def search_from_spec(spec: str) -> SearchProvider | None:
    """The search provider named by ``spec``.

    Args:
        spec: ``ddgs``, ``tavily``, ``bing``, ``searx[:URL]`` or ``recorded:FILE``.

    Returns:
        The provider, or None if ``spec`` names none of these (each caller words that error).

    Raises:
        MissingDependencyError: If the provider's package is not installed.
        OSError: If the recording cannot be read.
        ValueError: If the recording is malformed.
    """
    kind, _, value = spec.partition(":")
    if kind == "ddgs" and not value:
        return DuckDuckGoSearch()
    if kind == "tavily" and not value:
        return TavilySearch()
    if kind == "bing" and not value:
        return BingSearch()
    if kind == "searx":
        return SearxSearch(searx_host=value or None)
    if kind == "recorded" and value:
        path = Path(value)
        if path.suffix.lower() == ".jsonl":
            return RecordedSearch.from_jsonl(path)
        return RecordedSearch.from_json(path)
    return None
