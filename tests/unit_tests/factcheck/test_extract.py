from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import langchain_references.factcheck.extract as extract_module
from langchain_references import Failure
from langchain_references.factcheck.extract import (
    aextract_all,
    extract_all,
    extract_html,
    extract_page,
)
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.types import ExtractedPage, FetchedPage, SearchHit
from tests.unit_tests.conftest import LocalSite
from tests.unit_tests.factcheck import _worker_pages

# (fixture file, title, sentences from the article body, navigation text that must not appear)
FIXTURE_PAGES = [
    (
        "blog.python.org.html",
        "Python 3.6.0 is now available!",
        [
            "Python 3.6.0 is the newest major release of the Python language",
            "most third-party distributors of Python should be making 3.6.0 packages",
        ],
        ["Older Post", "Blog Archive"],
    ),
    (
        "github.blog.spiceland.html",
        "Leader spotlight: Erin Spiceland",
        [
            "Erin Spiceland is a Software Engineer for SpaceX.",
            "How would you summarize your career (so far) in a single sentence?",
        ],
        ["Customer stories", "Changelog", "Pricing"],
    ),
    (
        "wikimediafoundation.org.turkey.html",
        "Access to Wikipedia restored in Turkey after more than two and a half years",
        [
            "access to Wikipedia in Turkey is actively being restored",
            "ruling by the Constitutional Court of Turkey",
        ],
        ["The Wikimedia Foundation, Inc is a nonprofit", "Careers"],
    ),
]


def _page(
    body: str, *, content_type: str = "text/html", hit: SearchHit | None = None, rank: int = 0
) -> FetchedPage:
    return FetchedPage(
        url="https://example.org/a",
        final_url="https://example.org/a",
        status=200,
        content_type=content_type,
        body=body,
        elapsed_s=0.0,
        rank=hit.rank if hit else rank,
        hit=hit,
    )


def test_fetch_then_extract_the_shared_fixture_pages(
    local_site: LocalSite, html_fixture_dir: Path
) -> None:
    hits = [
        SearchHit(title=f"hit {i}", snippet="", link=local_site.url(f"/fixtures/{name}"), rank=i)
        for i, (name, _, _, _) in enumerate(FIXTURE_PAGES)
    ]
    fetched = PageFetcher(allow_private=True).fetch_all(hits)
    assert fetched.failures == []
    report = extract_all(fetched.pages)
    assert report.failures == []
    assert [p.rank for p in report.pages] == [0, 1, 2]
    for page, (name, title, sentences, navigation) in zip(report.pages, FIXTURE_PAGES, strict=True):
        assert page.url == local_site.url(f"/fixtures/{name}")
        assert page.title == title
        for sentence in sentences:
            assert sentence in page.text, (name, sentence)
        html = (html_fixture_dir / name).read_text(encoding="utf-8")
        for text in navigation:
            assert text in html
            assert text not in page.text, (name, text)


def test_short_main_text_falls_back_to_comments_and_links() -> None:
    comments = "".join(
        f"<p>Comment {i}: the release notes explain every change in the new version clearly.</p>"
        for i in range(3)
    )
    html = (
        "<html><head><title>Release</title></head><body><article><p>Short intro.</p></article>"
        f"<div id='comments' class='comments'>{comments}</div></body></html>"
    )
    page = extract_page(_page(html))
    assert isinstance(page, ExtractedPage)
    assert page.text.startswith("Short intro.")
    assert "Comment 2: the release notes explain every change" in page.text
    strict = extract_page(_page(html), min_main_chars=0)
    assert isinstance(strict, ExtractedPage)
    assert strict.text == "Short intro."


def test_plain_text_passes_through_with_the_search_title() -> None:
    hit = SearchHit(title="Terns", snippet="", link="https://example.org/a", rank=4)
    page = extract_page(_page("  line one\r\n\r\nline two  ", content_type="text/plain", hit=hit))
    assert isinstance(page, ExtractedPage)
    assert page.text == "line one\n\nline two"
    assert (page.title, page.rank, page.is_plain_text) == ("Terns", 4, True)


def test_title_falls_back_to_hit_title_then_url() -> None:
    body = (
        "<html><body><article><p>"
        + "A paragraph with enough words. " * 10
        + "</p></article></body></html>"
    )
    hit = SearchHit(title="From search", snippet="", link="https://example.org/a", rank=0)
    with_hit = extract_page(_page(body, hit=hit))
    without = extract_page(_page(body))
    assert isinstance(with_hit, ExtractedPage)
    assert isinstance(without, ExtractedPage)
    assert with_hit.title == "From search"
    assert without.title == "https://example.org/a"


@pytest.mark.parametrize(
    "body",
    ["", "<html><body></body></html>", "<html><body><script>var x = 1;</script></body></html>"],
)
def test_empty_extraction_is_a_failure(body: str) -> None:
    result = extract_page(_page(body))
    assert isinstance(result, Failure)
    assert (result.stage, result.reason, result.url) == (
        "extract",
        "no main text extracted",
        "https://example.org/a",
    )


async def test_extract_all_keeps_good_pages_and_records_failures() -> None:
    good = (
        "<html><body><article><p>"
        + "Useful evidence sentence here. " * 6
        + "</p></article></body></html>"
    )
    pages = [_page(good), _page("<html></html>"), _page("plain words", content_type="text/plain")]
    report = await aextract_all(pages)
    assert len(report.pages) == 2
    assert [f.stage for f in report.failures] == ["extract"]
    with pytest.raises(ValueError, match="min_main_chars"):
        extract_all(pages, min_main_chars=-1)


def test_extract_html_returns_text_and_title(html_fixture_dir: Path) -> None:
    html = (html_fixture_dir / "blog.python.org.html").read_text(encoding="utf-8")
    text, title = extract_html(html, "https://blog.python.org/")
    assert title == "Python 3.6.0 is now available!"
    assert text.startswith("Python 3.6.0 is now available!")


_GOOD_HTML = "<html><body><article><p>" + "Arctic terns fly from pole to pole. " * 10 + "</p>"


@pytest.fixture
def hostile_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker processes run :func:`_worker_pages.hostile` (SLOW, CRASH and PID pages)."""
    monkeypatch.setattr(extract_module, "_IN_WORKER", _worker_pages.hostile)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.usefixtures("hostile_worker")
def test_a_page_over_its_time_budget_is_a_failure_its_worker_killed_and_the_others_go_on(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    slow = _page(f"<html><body><p>SLOW PID {pid_file}</p></body></html>", rank=0)
    report = extract_all([slow, _page(_GOOD_HTML, rank=1)], timeout_s=0.5, max_workers=1)
    assert [p.rank for p in report.pages] == [1]
    assert [(f.rank, f.reason) for f in report.failures] == [(0, "extraction timeout after 0.5s")]
    assert _gone(int(pid_file.read_text()))  # killed, not left parsing


@pytest.mark.usefixtures("hostile_worker")
async def test_async_extraction_has_the_same_time_budget(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    slow = _page(f"<html><body><p>SLOW PID {pid_file}</p></body></html>", rank=0)
    report = await aextract_all([slow, _page(_GOOD_HTML, rank=1)], timeout_s=0.5, max_workers=1)
    assert [p.rank for p in report.pages] == [1]
    assert [f.reason for f in report.failures] == ["extraction timeout after 0.5s"]
    assert _gone(int(pid_file.read_text()))


@pytest.mark.usefixtures("hostile_worker")
@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_a_crash_while_parsing_is_that_pages_failure_and_the_run_goes_on(
    driver: str,
) -> None:
    # trafilatura crashes now and then (SIGSEGV, SIGABRT in libxml2) when threads of one
    # process call it at once: such a crash must not end the process that asked
    pages = [
        _page(_GOOD_HTML, rank=0),
        _page("<html><body><p>CRASH</p></body></html>", rank=1),
        _page(_GOOD_HTML.replace("terns", "geese"), rank=2),
    ]
    if driver == "sync":
        report = extract_all(pages, max_workers=2)
    else:
        report = await aextract_all(pages, max_workers=2)
    assert [p.rank for p in report.pages] == [0, 2]
    assert ["geese" in p.text for p in report.pages] == [False, True]
    assert [(f.rank, f.stage) for f in report.failures] == [(1, "extract")]
    assert report.failures[0].reason == (
        "extraction process died: the worker process ended (exit code -6)"
    )


async def test_cancelling_an_async_extraction_kills_its_worker(
    hostile_worker: None, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    slow = _page(f"<html><body><p>SLOW PID {pid_file}</p></body></html>")
    task = asyncio.ensure_future(aextract_all([slow], timeout_s=None))
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(40):
        if _gone(pid):
            break
        await asyncio.sleep(0.05)
    assert _gone(pid)


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_html_is_never_parsed_in_the_calling_process(
    monkeypatch: pytest.MonkeyPatch, driver: str
) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("trafilatura called in the calling process")

    monkeypatch.setattr(extract_module.trafilatura, "extract", refuse)
    pages = [_page(_GOOD_HTML, rank=0), _page(_GOOD_HTML.replace("terns", "geese"), rank=1)]
    if driver == "sync":
        report = extract_all(pages)
    else:
        report = await aextract_all(pages)
    assert report.failures == []
    assert [p.text.split()[1] for p in report.pages] == ["terns", "geese"]


@pytest.mark.usefixtures("hostile_worker")
def test_a_page_over_the_size_budget_is_a_failure_without_parsing() -> None:
    # a CRASH page reaching a worker would be "extraction process died": it must not get there
    big = _GOOD_HTML + "<p>CRASH" + "x" * 5_000 + "</p>"
    report = extract_all([_page(big, rank=0), _page(_GOOD_HTML, rank=1)], max_chars=2_000)
    assert [p.rank for p in report.pages] == [1]
    assert [(f.rank, f.reason) for f in report.failures] == [
        (0, f"too large to extract: {len(big)} > 2000 characters")
    ]


def test_extract_all_rejects_bad_budgets() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        extract_all([], max_chars=0)
    with pytest.raises(ValueError, match="timeout_s"):
        extract_all([], timeout_s=0)
    with pytest.raises(ValueError, match="max_workers"):
        extract_all([], max_workers=0)
