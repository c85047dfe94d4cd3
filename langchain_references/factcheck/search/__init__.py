"""Search providers: web APIs, a local corpus, a vector store, or a replayed recording.

Every provider returns :class:`~langchain_references.factcheck.types.SearchHit` objects ranked
0..n-1 (best first) from ``search(query, k)`` / ``asearch(query, k)``.
"""

from langchain_references.factcheck.search.base import (
    BaseSearchProvider,
    SearchError,
    SearchProvider,
    asearch_report,
    hits_from_records,
    search_report,
)
from langchain_references.factcheck.search.local import LocalCorpusSearch, VectorStoreSearch
from langchain_references.factcheck.search.recorded import RecordedSearch, normalise_query
from langchain_references.factcheck.search.web import (
    BingSearch,
    DuckDuckGoSearch,
    SearxSearch,
    TavilySearch,
)

__all__ = [
    "BaseSearchProvider",
    "BingSearch",
    "DuckDuckGoSearch",
    "LocalCorpusSearch",
    "RecordedSearch",
    "SearchError",
    "SearchProvider",
    "SearxSearch",
    "TavilySearch",
    "VectorStoreSearch",
    "asearch_report",
    "hits_from_records",
    "normalise_query",
    "search_report",
]
