"""Search providers: web APIs, a local corpus, a vector store, or a replayed recording.

Every provider returns :class:`~langchain_references.factcheck.types.SearchHit` objects ranked
0..n-1 (best first) from ``search(query, k)`` / ``asearch(query, k)``.
"""

from langchain_references.factcheck.search.base import (
    BaseSearchProvider,
    SearchError,
    SearchProvider,
)
from langchain_references.factcheck.search.local import LocalCorpusSearch, VectorStoreSearch
from langchain_references.factcheck.search.recorded import RecordedSearch
from langchain_references.factcheck.search.web import (
    BingSearch,
    DuckDuckGoSearch,
    SearxSearch,
    TavilySearch,
)
from langchain_references.factcheck.types import SearchHit

__all__ = [
    "BaseSearchProvider",
    "BingSearch",
    "DuckDuckGoSearch",
    "LocalCorpusSearch",
    "RecordedSearch",
    "SearchError",
    "SearchHit",
    "SearchProvider",
    "SearxSearch",
    "TavilySearch",
    "VectorStoreSearch",
]
