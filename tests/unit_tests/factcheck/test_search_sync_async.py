"""The sync and async search paths share their argument checks and error handling."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from langchain_references.errors import LangchainReferencesError
from langchain_references.factcheck.search import BaseSearchProvider, SearchError
from langchain_references.factcheck.search.base import asearch_report, search_report
from langchain_references.factcheck.types import SearchHit, SearchReport

HIT = SearchHit(title="t", snippet="s", link="https://x.example/", rank=0)


class Interrupted(BaseException):
    """Not an ``Exception``: never recorded, never wrapped."""


class Scripted(BaseSearchProvider):
    """Returns ``[HIT]`` or raises what the query names, on both paths."""

    name: ClassVar[str] = "scripted"
    errors: ClassVar[dict[str, BaseException]] = {
        "boom": ConnectionError("network unreachable"),
        "quota": SearchError("upstream", "quota", RuntimeError("quota exceeded")),
        "stop": Interrupted("stop"),
    }

    def _search(self, query: str, k: int) -> list[SearchHit]:
        if query in self.errors:
            raise self.errors[query]
        return [HIT][:k]

    async def _asearch(self, query: str, k: int) -> list[SearchHit]:
        await asyncio.sleep(0)
        return self._search(query, k)


def search(query: str, k: int = 10, *, use_async: bool) -> list[SearchHit]:
    provider = Scripted()
    return asyncio.run(provider.asearch(query, k)) if use_async else provider.search(query, k)


def report(provider: Any, query: str, k: int = 10, *, use_async: bool) -> SearchReport:
    if use_async:
        return asyncio.run(asearch_report(provider, query, k))
    return search_report(provider, query, k)


def test_search_error_is_a_package_error() -> None:
    assert issubclass(SearchError, LangchainReferencesError)
    assert issubclass(SearchError, RuntimeError)


@pytest.mark.parametrize("use_async", [False, True])
def test_provider_errors_are_wrapped_the_same_way(use_async: bool) -> None:
    assert search("q", use_async=use_async) == [HIT]
    with pytest.raises(SearchError) as info:
        search("boom", use_async=use_async)
    assert str(info.value) == (
        "scripted search failed for 'boom': ConnectionError: network unreachable"
    )
    assert (info.value.provider, info.value.query) == ("scripted", "boom")
    assert isinstance(info.value.__cause__, ConnectionError)
    with pytest.raises(SearchError) as passed_through:
        search("quota", use_async=use_async)
    assert passed_through.value.provider == "upstream"  # a SearchError is not wrapped again
    with pytest.raises(Interrupted):
        search("stop", use_async=use_async)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(("query", "k", "message"), [(" ", 1, "query"), ("q", 0, "k must be")])
def test_bad_arguments_raise_on_both_paths(
    query: str, k: int, message: str, use_async: bool
) -> None:
    with pytest.raises(ValueError, match=message) as info:
        search(query, k, use_async=use_async)
    assert not isinstance(info.value, SearchError)
    with pytest.raises(ValueError, match=message):
        report(Scripted(), query, k, use_async=use_async)


@pytest.mark.parametrize("use_async", [False, True])
def test_reports_are_the_same_on_both_paths(use_async: bool) -> None:
    assert report(Scripted(), "q", use_async=use_async) == SearchReport(query="q", hits=[HIT])
    failed = report(Scripted(), "boom", use_async=use_async)
    assert failed.hits == []
    (failure,) = failed.failures
    assert failure.reason == (
        "scripted search failed for 'boom': ConnectionError: network unreachable"
    )
    (quota,) = report(Scripted(), "quota", use_async=use_async).failures
    assert quota.reason == "upstream search failed for 'quota': RuntimeError: quota exceeded"
    with pytest.raises(Interrupted):
        report(Scripted(), "stop", use_async=use_async)
