"""Fact-check chain: search, fetch, judge and aggregate evidence for a statement.

Build the chain with :func:`create_fact_check_chain` and render its
:class:`FactCheckResult` with :func:`render_report`; every stage is also usable on its own,
from its module. Search providers are in :mod:`langchain_references.factcheck.search`, judges
in :mod:`langchain_references.judges`.
The names below are imported lazily, on first access, so ``import
langchain_references.factcheck`` stays light: the heavy optional dependencies (``chromadb``,
``trafilatura``, ``httpx``, ``tiktoken``) load only with the module that needs them.

Examples:
    >>> from langchain_references.factcheck import create_fact_check_chain  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_references._optional import lazy_exports

if TYPE_CHECKING:
    from langchain_references.factcheck.cache import PageCache
    from langchain_references.factcheck.chain import (
        PROGRESS_EVENT,
        FactCheckChain,
        FactCheckRequest,
        create_fact_check_chain,
    )
    from langchain_references.factcheck.evidence import PassageIndex, VectorStoreIndex
    from langchain_references.factcheck.fetch import PageFetcher
    from langchain_references.factcheck.passages import PassageSplitter
    from langchain_references.factcheck.report import render_json, render_report
    from langchain_references.factcheck.result import (
        Evidence,
        FactCheckProgress,
        FactCheckResult,
    )
    from langchain_references.factcheck.search import SearchProvider
    from langchain_references.factcheck.verdict import (
        Aggregator,
        Verdict,
        WeightedVoteAggregator,
    )


#: Public name -> submodule that defines it.
_EXPORTS: dict[str, str] = {
    "PROGRESS_EVENT": "chain",
    "FactCheckChain": "chain",
    "FactCheckRequest": "chain",
    "create_fact_check_chain": "chain",
    "Evidence": "result",
    "FactCheckProgress": "result",
    "FactCheckResult": "result",
    "render_json": "report",
    "render_report": "report",
    "SearchProvider": "search",
    "PageCache": "cache",
    "PageFetcher": "fetch",
    "PassageIndex": "evidence",
    "VectorStoreIndex": "evidence",
    "PassageSplitter": "passages",
    "Aggregator": "verdict",
    "Verdict": "verdict",
    "WeightedVoteAggregator": "verdict",
}

__all__ = [
    "PROGRESS_EVENT",
    "Aggregator",
    "Evidence",
    "FactCheckChain",
    "FactCheckProgress",
    "FactCheckRequest",
    "FactCheckResult",
    "PageCache",
    "PageFetcher",
    "PassageIndex",
    "PassageSplitter",
    "SearchProvider",
    "VectorStoreIndex",
    "Verdict",
    "WeightedVoteAggregator",
    "create_fact_check_chain",
    "render_json",
    "render_report",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
