from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from langchain_references.factcheck.search import (
    BingSearch,
    DuckDuckGoSearch,
    RecordedSearch,
    SearchError,
    SearchProvider,
    SearxSearch,
    TavilySearch,
)
from langchain_references.factcheck.search.base import (
    asearch_report,
    hits_from_records,
    search_report,
)
from langchain_references.factcheck.search.recorded import normalize_query
from langchain_references.factcheck.types import SearchHit

RECORDS = [
    {"title": "One", "snippet": "first", "link": "https://one.example/"},
    {"title": "Two", "snippet": "second", "link": "https://two.example/"},
    {"title": "Three", "snippet": "third", "link": "https://three.example/"},
]


def _expected(records: list[dict[str, str]], k: int | None = None) -> list[SearchHit]:
    return [
        SearchHit(title=r["title"], snippet=r["snippet"], link=r["link"], rank=i)
        for i, r in enumerate(records[:k])
    ]


# ----------------------------------------------------------------- shared mapping


def test_hits_from_records_skips_linkless_records_and_keeps_ranks_contiguous() -> None:
    records: list[Any] = [
        {"Result": "No good Search Result was found"},
        RECORDS[0],
        "garbage",
        {"title": "No link", "link": "  "},
        RECORDS[1],
        RECORDS[2],
    ]
    assert hits_from_records(records, k=10) == _expected(RECORDS)
    assert hits_from_records(records, k=2) == _expected(RECORDS, 2)


# ----------------------------------------------------------------- web adapters with fakes


class FakeBing:
    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self.calls: list[tuple[str, int]] = []

    def results(self, query: str, num_results: int) -> list[dict[str, Any]]:
        self.calls.append((query, num_results))
        return self.records[:num_results]


def test_bing_maps_wrapper_results() -> None:
    fake = FakeBing(RECORDS)
    provider = BingSearch(fake)
    assert provider.search("python release", k=2) == _expected(RECORDS, 2)
    assert fake.calls == [("python release", 2)]


def test_bing_no_result_placeholder_gives_no_hits() -> None:
    provider = BingSearch(FakeBing([{"Result": "No good Bing Search Result was found"}]))
    assert provider.search("nothing") == []


class FakeSearx:
    def __init__(self) -> None:
        self.kwargs: list[dict[str, Any]] = []

    def _records(self, num_results: int) -> list[dict[str, Any]]:
        return [
            {**r, "engines": ["wikipedia"], "category": "general"} for r in RECORDS[:num_results]
        ]

    def results(self, query: str, num_results: int, **kwargs: Any) -> list[dict[str, Any]]:
        self.kwargs.append(kwargs)
        return self._records(num_results)

    async def aresults(self, query: str, num_results: int, **kwargs: Any) -> list[dict[str, Any]]:
        self.kwargs.append(kwargs)
        return self._records(num_results)


async def test_searx_maps_results_sync_and_async() -> None:
    fake = FakeSearx()
    provider = SearxSearch(fake, engines=["wikipedia"], categories=["general"])
    assert provider.search("q", k=3) == _expected(RECORDS)
    assert await provider.asearch("q", k=1) == _expected(RECORDS, 1)
    assert fake.kwargs == [{"engines": ["wikipedia"], "categories": ["general"]}] * 2


class FakeDDGS:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.kwargs: dict[str, Any] = {}

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        self.kwargs = kwargs
        if self.error is not None:
            raise self.error
        records = [{"title": r["title"], "href": r["link"], "body": r["snippet"]} for r in RECORDS]
        return records[: kwargs["max_results"]]


async def test_duckduckgo_maps_href_and_body() -> None:
    fake = FakeDDGS()
    provider = DuckDuckGoSearch(fake, region="us-en")
    assert provider.search("q", k=2) == _expected(RECORDS, 2)
    assert fake.kwargs == {"max_results": 2, "region": "us-en"}
    assert await provider.asearch("q", k=3) == _expected(RECORDS)


def test_duckduckgo_no_results_exception_is_an_empty_list() -> None:
    class DDGSException(Exception):  # noqa: N818 - the real ddgs name
        pass

    assert DuckDuckGoSearch(FakeDDGS(DDGSException("No results found."))).search("q") == []
    with pytest.raises(SearchError, match=r"duckduckgo search failed for 'q': .*Ratelimit"):
        DuckDuckGoSearch(FakeDDGS(RuntimeError("202 Ratelimit"))).search("q")


class FakeTavily:
    def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
        results = [
            {"title": r["title"], "url": r["link"], "content": r["snippet"], "score": 0.9}
            for r in RECORDS[: kwargs["max_results"]]
        ]
        return {"query": query, "results": results, "response_time": 0.1}


class FakeAsyncTavily:
    def __init__(self) -> None:
        self.called = False

    async def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
        self.called = True
        return FakeTavily().search(query, **kwargs)


async def test_tavily_maps_url_and_content() -> None:
    provider = TavilySearch(FakeTavily(), search_depth="basic")
    assert provider.search("q", k=2) == _expected(RECORDS, 2)
    assert await provider.asearch("q", k=1) == _expected(RECORDS, 1)
    fake_async = FakeAsyncTavily()
    with_async = TavilySearch(FakeTavily(), async_client=fake_async)
    assert await with_async.asearch("q", k=3) == _expected(RECORDS)
    assert fake_async.called


@pytest.mark.parametrize(
    ("module", "factory", "extra"),
    [
        ("ddgs", lambda: DuckDuckGoSearch(), "ddgs"),
        ("tavily", lambda: TavilySearch(), "tavily"),
        ("langchain_community", lambda: BingSearch(), "bing"),
        ("langchain_community", lambda: SearxSearch(searx_host="http://127.0.0.1:1"), "searx"),
    ],
)
def test_missing_client_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, factory: Any, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, f"{module}.utilities", None)
    # The hint installs this project (the index name belongs to another one).
    with pytest.raises(ImportError, match=rf'\(extra \[{extra}\]\): pip install "\.\[{extra}\]"'):
        factory()


def test_providers_satisfy_the_protocol() -> None:
    for provider in (
        BingSearch(FakeBing(RECORDS)),
        SearxSearch(FakeSearx()),
        DuckDuckGoSearch(FakeDDGS()),
        TavilySearch(FakeTavily()),
        RecordedSearch({}),
    ):
        assert isinstance(provider, SearchProvider)


def test_bad_arguments_are_errors() -> None:
    provider = BingSearch(FakeBing(RECORDS))
    with pytest.raises(ValueError, match="query"):
        provider.search("   ")
    with pytest.raises(ValueError, match="k must be"):
        provider.search("q", k=0)


# ----------------------------------------------------------------- reports and runnables


class Broken:
    name = "broken"

    def search(self, query: str, k: int = 10) -> list[SearchHit]:
        raise ConnectionError("network unreachable")

    async def asearch(self, query: str, k: int = 10) -> list[SearchHit]:
        raise ConnectionError("network unreachable")


async def test_search_report_records_a_failed_search() -> None:
    report = search_report(Broken(), "q")
    assert report.hits == []
    (failure,) = report.failures
    assert (failure.stage, failure.query, failure.url) == ("search", "q", "")
    assert failure.reason == "ConnectionError: network unreachable"
    assert (await asearch_report(Broken(), "q")).failures == report.failures

    wrapped = search_report(BingSearch(FakeBing(RECORDS)), "q", k=1)
    assert wrapped.hits == _expected(RECORDS, 1)
    assert wrapped.failures == []
    with pytest.raises(ValueError, match="query"):
        search_report(Broken(), "")


async def test_as_runnable_has_sync_and_async_paths() -> None:
    runnable = BingSearch(FakeBing(RECORDS)).as_runnable(k=2)
    assert runnable.invoke("q") == _expected(RECORDS, 2)
    assert await runnable.ainvoke("q") == _expected(RECORDS, 2)
    assert runnable.batch(["a", "b"]) == [_expected(RECORDS, 2)] * 2


# ----------------------------------------------------------------- recorded search


@pytest.fixture
def veriscore(factcheck_data_dir: Path) -> tuple[Path, dict[str, list[dict[str, str]]]]:
    path = factcheck_data_dir / "veriscore_data_sample.jsonl"
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    return path, record["claim_search_results"]


def test_recorded_search_replays_veriscore_results_in_order(veriscore: Any) -> None:
    path, recording = veriscore
    provider = RecordedSearch.from_jsonl(path)
    assert provider.queries == list(recording)
    assert len(provider.queries) == 25
    for claim, results in recording.items():
        hits = provider.search(claim, k=100)
        assert [h.link for h in hits] == [r["link"] for r in results]
        assert [h.rank for h in hits] == list(range(len(results)))
        assert [h.title for h in hits] == [r["title"].strip() for r in results]
    claim = next(iter(recording))
    assert len(provider.search(claim, k=3)) == 3


async def test_recorded_search_normalized_fallback_and_unknown(
    veriscore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path, recording = veriscore
    provider = RecordedSearch.from_jsonl(path)
    claim = next(iter(recording))
    variant = "  “" + claim.upper().replace(" ", "   ").rstrip(".") + "”  "
    assert variant != claim
    assert normalize_query(variant) == normalize_query(claim)
    assert provider.search(variant, k=100) == provider.search(claim, k=100)
    assert await provider.asearch(variant, k=2) == provider.search(claim, k=2)

    with caplog.at_level(logging.WARNING):
        assert provider.search("a query nobody recorded") == []
    assert "No recorded search results" in caplog.text


def test_recorded_search_loads_json_shapes(tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"q": RECORDS}), encoding="utf-8")
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"claim_search_results": {"q": RECORDS[:1]}}), encoding="utf-8")
    listed = tmp_path / "list.json"
    listed.write_text(
        json.dumps([{"claim_search_results": {"q": RECORDS[1:]}}, {"claim_search_results": {}}]),
        encoding="utf-8",
    )
    assert RecordedSearch.from_json(plain).search("q") == _expected(RECORDS)
    assert [h.link for h in RecordedSearch.from_json(record).search("q")] == [RECORDS[0]["link"]]
    assert [h.link for h in RecordedSearch.from_json(listed).search("q")] == [
        RECORDS[1]["link"],
        RECORDS[2]["link"],
    ]


def test_recorded_search_rejects_malformed_recordings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be a list of objects"):
        RecordedSearch({"q": "not a list"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="must be a list of objects"):
        RecordedSearch({"q": [1, 2]})  # type: ignore[list-item]
    bad_line = tmp_path / "bad.jsonl"
    bad_line.write_text('{"claim_search_results": {}}\n{oops\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        RecordedSearch.from_jsonl(bad_line)
    no_field = tmp_path / "nofield.jsonl"
    no_field.write_text('{"question": "x"}\n', encoding="utf-8")
    with pytest.raises(
        ValueError, match="record 1: expected an object with a 'claim_search_results'"
    ):
        RecordedSearch.from_jsonl(no_field)
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"claim_search_results": {}}\n{"claim_search_results": {"caf\xe9": []}}\n')
    with pytest.raises(ValueError, match=r"latin1.jsonl:2: not UTF-8: byte 0xE9 at column 31"):
        RecordedSearch.from_jsonl(latin1)
    with pytest.raises(ValueError, match=r"latin1.jsonl:2: not UTF-8: byte 0xE9 at column 31"):
        RecordedSearch.from_json(latin1)
