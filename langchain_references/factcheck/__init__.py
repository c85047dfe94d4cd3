"""Fact-check chain: search, fetch, judge and aggregate evidence for a statement.

Build the chain with :func:`create_fact_check_chain` and render its
:class:`FactCheckResult` with :func:`render_report`; every stage is also usable on its own.
The names below are imported lazily, on first access, so ``import
langchain_references.factcheck`` stays light: the heavy optional dependencies (``chromadb``,
``trafilatura``, ``httpx``, ``tiktoken``) load only with the module that needs them.

Example:
    >>> from langchain_references.factcheck import create_fact_check_chain  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_references.factcheck.cache import PageCache
    from langchain_references.factcheck.chain import (
        PROGRESS_EVENT,
        FactCheckChain,
        FactCheckRequest,
        create_fact_check_chain,
    )
    from langchain_references.factcheck.demo_site import (
        DemoSiteSearch,
        LocalOriginGuard,
        serve_demo_site,
        serve_pages,
    )
    from langchain_references.factcheck.extract import aextract_all, extract_all
    from langchain_references.factcheck.fetch import PageFetcher
    from langchain_references.factcheck.judges import (
        CrossEncoderNLIJudge,
        HeuristicJudge,
        Judge,
        JudgeInput,
        Judgement,
        Label,
        LLMJudge,
    )
    from langchain_references.factcheck.netguard import BlockedURLError, NetGuard
    from langchain_references.factcheck.passages import PassageSplitter, make_passages
    from langchain_references.factcheck.relevance import aselect_relevant, select_relevant
    from langchain_references.factcheck.report import render_json, render_report, render_reports
    from langchain_references.factcheck.result import (
        Evidence,
        FactCheckCounts,
        FactCheckProgress,
        FactCheckResult,
    )
    from langchain_references.factcheck.search import (
        BaseSearchProvider,
        BingSearch,
        DuckDuckGoSearch,
        LocalCorpusSearch,
        RecordedSearch,
        SearchError,
        SearchProvider,
        SearxSearch,
        TavilySearch,
        VectorStoreSearch,
        asearch_report,
        search_report,
    )
    from langchain_references.factcheck.types import (
        ExtractedPage,
        ExtractReport,
        FetchedPage,
        FetchReport,
        Passage,
        SearchHit,
        SearchReport,
        SourceFailure,
    )
    from langchain_references.factcheck.verdict import (
        Aggregator,
        Verdict,
        VerdictResult,
        WeightedVoteAggregator,
    )

_PACKAGE = "langchain_references.factcheck"

#: Public name -> submodule that defines it.
_EXPORTS: dict[str, str] = {
    # chain and its result
    "PROGRESS_EVENT": "chain",
    "FactCheckChain": "chain",
    "FactCheckRequest": "chain",
    "create_fact_check_chain": "chain",
    "Evidence": "result",
    "FactCheckCounts": "result",
    "FactCheckProgress": "result",
    "FactCheckResult": "result",
    "render_json": "report",
    "render_report": "report",
    "render_reports": "report",
    # stage records
    "ExtractReport": "types",
    "ExtractedPage": "types",
    "FetchReport": "types",
    "FetchedPage": "types",
    "Passage": "types",
    "SearchHit": "types",
    "SearchReport": "types",
    "SourceFailure": "types",
    # search
    "BaseSearchProvider": "search",
    "BingSearch": "search",
    "DuckDuckGoSearch": "search",
    "LocalCorpusSearch": "search",
    "RecordedSearch": "search",
    "SearchError": "search",
    "SearchProvider": "search",
    "SearxSearch": "search",
    "TavilySearch": "search",
    "VectorStoreSearch": "search",
    "asearch_report": "search",
    "search_report": "search",
    # fetch, extract, passages, relevance
    "BlockedURLError": "netguard",
    "NetGuard": "netguard",
    "PageCache": "cache",
    "PageFetcher": "fetch",
    "aextract_all": "extract",
    "extract_all": "extract",
    "PassageSplitter": "passages",
    "make_passages": "passages",
    "aselect_relevant": "relevance",
    "select_relevant": "relevance",
    # judges and verdict
    "CrossEncoderNLIJudge": "judges",
    "HeuristicJudge": "judges",
    "Judge": "judges",
    "JudgeInput": "judges",
    "Judgement": "judges",
    "LLMJudge": "judges",
    "Label": "judges",
    "Aggregator": "verdict",
    "Verdict": "verdict",
    "VerdictResult": "verdict",
    "WeightedVoteAggregator": "verdict",
    # offline demo site
    "DemoSiteSearch": "demo_site",
    "LocalOriginGuard": "demo_site",
    "serve_demo_site": "demo_site",
    "serve_pages": "demo_site",
}

__all__ = [
    "PROGRESS_EVENT",
    "Aggregator",
    "BaseSearchProvider",
    "BingSearch",
    "BlockedURLError",
    "CrossEncoderNLIJudge",
    "DemoSiteSearch",
    "DuckDuckGoSearch",
    "Evidence",
    "ExtractReport",
    "ExtractedPage",
    "FactCheckChain",
    "FactCheckCounts",
    "FactCheckProgress",
    "FactCheckRequest",
    "FactCheckResult",
    "FetchReport",
    "FetchedPage",
    "HeuristicJudge",
    "Judge",
    "JudgeInput",
    "Judgement",
    "LLMJudge",
    "Label",
    "LocalCorpusSearch",
    "LocalOriginGuard",
    "NetGuard",
    "PageCache",
    "PageFetcher",
    "Passage",
    "PassageSplitter",
    "RecordedSearch",
    "SearchError",
    "SearchHit",
    "SearchProvider",
    "SearchReport",
    "SearxSearch",
    "SourceFailure",
    "TavilySearch",
    "VectorStoreSearch",
    "Verdict",
    "VerdictResult",
    "WeightedVoteAggregator",
    "aextract_all",
    "asearch_report",
    "aselect_relevant",
    "create_fact_check_chain",
    "extract_all",
    "make_passages",
    "render_json",
    "render_report",
    "render_reports",
    "search_report",
    "select_relevant",
    "serve_demo_site",
    "serve_pages",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {_PACKAGE!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{_PACKAGE}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
