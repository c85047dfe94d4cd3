from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from langchain_references.factcheck.cache import PageCache, default_cache_dir
from langchain_references.factcheck.fetch import DEFAULT_USER_AGENT, PageFetcher, decode_body
from langchain_references.factcheck.netguard import NetGuard, ResolvedURL
from langchain_references.factcheck.types import FetchedPage, SearchHit
from langchain_references.failures import Failure
from tests.unit_tests.conftest import PLAIN_TEXT, LocalSite


def _reasons(failures: list[Failure]) -> dict[str, str]:
    return {f.url: f.reason for f in failures}


def test_fetches_pages_and_keeps_search_rank(local_site: LocalSite) -> None:
    hits = [
        SearchHit(title="b", snippet="", link=local_site.url("/page/beta"), rank=3),
        SearchHit(title="a", snippet="", link=local_site.url("/page/alpha"), rank=1),
    ]
    report = PageFetcher(allow_private=True).fetch_all(hits)
    assert report.failures == []
    assert [p.rank for p in report.pages] == [3, 1]
    assert [p.hit for p in report.pages] == hits
    beta = report.pages[0]
    assert beta.status == 200
    assert beta.content_type == "text/html"
    assert "This page is about beta." in beta.body
    assert beta.final_url == beta.url == local_site.url("/page/beta")
    assert not beta.from_cache
    assert local_site.user_agents[0] == DEFAULT_USER_AGENT


def test_bare_urls_get_input_position_as_rank(local_site: LocalSite) -> None:
    urls = [local_site.url("/page/x"), local_site.url("/404"), local_site.url("/page/y")]
    report = PageFetcher(allow_private=True).fetch_all(urls)
    assert [p.rank for p in report.pages] == [0, 2]
    assert [f.rank for f in report.failures] == [1]


def test_plain_text_is_accepted(local_site: LocalSite) -> None:
    report = PageFetcher(allow_private=True).fetch_all([local_site.url("/text")])
    (page,) = report.pages
    assert page.content_type == "text/plain"
    assert page.is_plain_text
    assert page.body == PLAIN_TEXT


def test_each_bad_source_is_recorded_and_the_others_succeed(
    local_site: LocalSite, dead_local_url: str
) -> None:
    good = [local_site.url("/page/one"), local_site.url("/page/two")]
    bad = {
        dead_local_url: "connection failed",
        local_site.url("/slow?s=5"): "timeout after 0.5s",
        local_site.url("/404"): "HTTP 404",
        local_site.url("/pdf"): "content-type application/pdf not HTML or plain text",
        local_site.url("/big"): "too large: > 100000 bytes",
        local_site.url("/big-declared"): "too large: > 100000 bytes",
    }
    urls = [good[0], *bad, good[1]]
    fetcher = PageFetcher(allow_private=True, timeout_s=0.5, max_bytes=100_000)
    report = fetcher.fetch_all(urls)

    assert [p.url for p in report.pages] == good
    reasons = _reasons(report.failures)
    assert set(reasons) == set(bad)
    for url, expected in bad.items():
        assert reasons[url].startswith(expected), (url, reasons[url])
    assert all(f.stage == "fetch" for f in report.failures)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:{port}/page/a", "refused: loopback address 127.0.0.1"),
        ("http://10.0.0.1/", "refused: private address 10.0.0.1"),
        ("http://[::1]:{port}/page/a", "refused: loopback address ::1"),
        ("http://169.254.169.254/latest/meta-data/", "refused: link-local address 169.254.169.254"),
        ("http://[::ffff:10.1.2.3]/", "refused: private address 10.1.2.3 embedded in"),
        ("http://0.0.0.0:{port}/", "refused: unspecified address 0.0.0.0"),
        ("file:///etc/passwd", "refused: scheme 'file' not allowed"),
        ("ftp://example.org/x", "refused: scheme 'ftp' not allowed"),
        ("not a url", "refused: scheme '(none)' not allowed"),
    ],
)
def test_default_guard_refuses_private_addresses_and_other_schemes(
    local_site: LocalSite, url: str, reason: str
) -> None:
    url = url.format(port=local_site.port)
    report = PageFetcher().fetch_all([url])
    assert report.pages == []
    (failure,) = report.failures
    assert failure.stage == "fetch"
    assert failure.reason.startswith(reason), failure.reason
    assert sum(local_site.requests.values()) == 0


async def test_host_names_are_resolved_checked_and_pinned(local_site: LocalSite) -> None:
    calls: list[tuple[str, int]] = []

    async def resolver(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return {"evil.test": ["10.0.0.7"], "docs.example.test": ["127.0.0.1"]}[host]

    evil = f"http://evil.test:{local_site.port}/page/a"
    refused = await PageFetcher(resolver=resolver).afetch_all([evil])
    assert refused.failures[0].reason == "refused: private address 10.0.0.7"

    docs = f"http://docs.example.test:{local_site.port}/page/pinned"
    report = await PageFetcher(allow_private=True, resolver=resolver).afetch_all([docs])
    (page,) = report.pages
    assert "about pinned" in page.body
    assert page.final_url == docs
    # connected to the checked address, with the original name in the Host header
    assert local_site.host_headers == [f"docs.example.test:{local_site.port}"]
    assert calls == [("evil.test", local_site.port), ("docs.example.test", local_site.port)]


async def test_unresolvable_host_is_a_failure() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    report = await PageFetcher(resolver=resolver).afetch_all(["https://nowhere.invalid/"])
    assert report.failures[0].reason == "DNS resolution failed for nowhere.invalid"


def test_redirects_are_followed_and_limited(local_site: LocalSite) -> None:
    fetcher = PageFetcher(allow_private=True, max_redirects=3)
    ok = fetcher.fetch_all([local_site.url("/redirect/3")])
    (page,) = ok.pages
    assert page.url == local_site.url("/redirect/3")
    assert page.final_url == local_site.url("/page/end")

    too_many = fetcher.fetch_all([local_site.url("/redirect/4")])
    assert too_many.failures[0].reason == "too many redirects (> 3)"


class RecordingGuard(NetGuard):
    def __init__(self) -> None:
        super().__init__(allow_private=True)
        self.checked: list[str] = []

    async def check(self, url: str | httpx.URL) -> ResolvedURL:
        self.checked.append(str(url))
        return await super().check(url)


def test_the_guard_sees_every_redirect_hop(local_site: LocalSite) -> None:
    guard = RecordingGuard()
    report = PageFetcher(guard=guard).fetch_all([local_site.url("/redirect/2")])
    assert report.pages[0].final_url == local_site.url("/page/end")
    assert guard.checked == [
        local_site.url("/redirect/2"),
        local_site.url("/redirect/1"),
        local_site.url("/page/end"),
    ]
    with pytest.raises(ValueError, match="not both"):
        PageFetcher(guard=guard, allow_private=True)


def test_redirect_to_another_scheme_is_refused(local_site: LocalSite) -> None:
    url = local_site.url("/redirect-to?to=file:///etc/passwd")
    report = PageFetcher(allow_private=True).fetch_all([url])
    assert report.failures[0].reason.startswith("refused: scheme 'file' not allowed")
    assert local_site.requests["/redirect-to"] == 1


def test_repeated_fetch_hits_the_cache(local_site: LocalSite, tmp_path: Path) -> None:
    cache = PageCache(tmp_path / "pages")
    fetcher = PageFetcher(allow_private=True, cache=cache)
    url = local_site.url("/page/cached")
    first = fetcher.fetch_all([url]).pages[0]
    second = fetcher.fetch_all([url]).pages[0]
    assert local_site.requests["/page/cached"] == 1
    assert not first.from_cache
    assert second.from_cache
    assert second.body == first.body
    assert second.final_url == first.final_url
    assert (tmp_path / "pages" / f"{PageCache.key(url)}.json").is_file()


def test_cache_ttl_expires_entries(
    local_site: LocalSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = PageCache(tmp_path, ttl_s=60)
    fetcher = PageFetcher(allow_private=True, cache=cache)
    url = local_site.url("/page/ttl")
    fetcher.fetch_all([url])
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 120)
    assert cache.get(url) is None
    assert not fetcher.fetch_all([url]).pages[0].from_cache
    assert local_site.requests["/page/ttl"] == 2


def test_cached_private_page_is_not_served_to_a_guarded_fetcher(
    local_site: LocalSite, tmp_path: Path
) -> None:
    cache = PageCache(tmp_path)
    url = local_site.url("/page/secret")
    PageFetcher(allow_private=True, cache=cache).fetch_all([url])
    report = PageFetcher(cache=cache).fetch_all([url])
    assert report.pages == []
    assert report.failures[0].reason == "refused: loopback address 127.0.0.1"


def test_damaged_cache_entry_is_ignored(local_site: LocalSite, tmp_path: Path) -> None:
    cache = PageCache(tmp_path)
    url = local_site.url("/page/damaged")
    fetcher = PageFetcher(allow_private=True, cache=cache)
    fetcher.fetch_all([url])
    (tmp_path / f"{PageCache.key(url)}.body").write_text("tampered", encoding="utf-8")
    assert cache.get(url) is None
    page = fetcher.fetch_all([url]).pages[0]
    assert not page.from_cache
    assert "about damaged" in page.body


def test_cache_round_trip_and_clear(tmp_path: Path) -> None:
    cache = PageCache(tmp_path)
    cache.put(
        "https://example.org/a",
        final_url="https://example.org/b",
        status=200,
        content_type="text/html",
        body="<p>é</p>",
        private=False,
    )
    entry = cache.get("https://example.org/a")
    assert entry is not None
    assert entry.final_url == "https://example.org/b"
    assert (entry.body, entry.private) == ("<p>é</p>", False)
    meta = json.loads((tmp_path / f"{PageCache.key('https://example.org/a')}.json").read_text())
    assert meta["url"] == "https://example.org/a"
    assert cache.get("https://example.org/other") is None
    assert cache.clear() == 1
    assert cache.get("https://example.org/a") is None


def test_default_cache_dir_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "langchain-references" / "pages"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir().parts[-3:] == (".cache", "langchain-references", "pages")


def test_concurrency_is_bounded(local_site: LocalSite) -> None:
    local_site.delay_s = 0.15
    urls = [local_site.url(f"/page/c{i}") for i in range(6)]
    report = PageFetcher(allow_private=True, max_concurrency=2).fetch_all(urls)
    assert len(report.pages) == 6
    assert local_site.max_in_flight == 2


def test_duplicate_urls_are_fetched_once(local_site: LocalSite) -> None:
    url = local_site.url("/page/dup")
    report = PageFetcher(allow_private=True).fetch_all([url, url])
    assert len(report.pages) == 1
    assert local_site.requests["/page/dup"] == 1


async def test_sync_wrapper_works_inside_a_running_loop(local_site: LocalSite) -> None:
    report = PageFetcher(allow_private=True).fetch_all([local_site.url("/page/nested")])
    assert asyncio.get_running_loop().is_running()
    assert [p.url for p in report.pages] == [local_site.url("/page/nested")]


def test_declared_charset_is_used(local_site: LocalSite) -> None:
    page = PageFetcher(allow_private=True).fetch_all([local_site.url("/latin1")]).pages[0]
    assert "Une crème brûlée réussie" in page.body


def test_decode_body_guesses_undeclared_encodings() -> None:
    text = "Příliš žluťoučký kůň úpěl ďábelské ódy. " * 60  # long enough to detect
    assert decode_body(text.encode("utf-8"), None) == text
    assert decode_body(text.encode("cp1250"), None) == text
    assert decode_body("naïve".encode("latin-1"), "bogus-charset") == "naïve"


def test_decode_body_short_unlabeled_latin1_and_meta_charset() -> None:
    short = "Le café est très bon, et la crème brûlée à côté aussi."
    assert decode_body(short.encode("latin-1"), None) == short
    page = f'<html><head><meta charset="iso-8859-2"></head><body>{"Žluťoučký kůň"}</body>'
    assert "Žluťoučký kůň" in decode_body(page.encode("iso-8859-2"), None)


def test_empty_input_and_bad_arguments() -> None:
    assert PageFetcher().fetch_all([]).pages == []
    with pytest.raises(ValueError, match="max_concurrency"):
        PageFetcher(max_concurrency=0)
    with pytest.raises(ValueError, match="timeout_s"):
        PageFetcher(timeout_s=0)
    with pytest.raises(ValueError, match="max_bytes"):
        PageFetcher(max_bytes=0)
    with pytest.raises(ValueError, match="ttl_s"):
        PageCache(ttl_s=0)
    with pytest.raises(TypeError, match="SearchHit"):
        PageFetcher().fetch_all([42])  # type: ignore[list-item]


def test_fetched_page_serializes_to_json(local_site: LocalSite) -> None:
    page = PageFetcher(allow_private=True).fetch_all([local_site.url("/page/json")]).pages[0]
    assert FetchedPage.model_validate_json(page.model_dump_json()) == page


def test_a_cached_page_is_the_downloaded_page(local_site: LocalSite, tmp_path: Path) -> None:
    fetcher = PageFetcher(allow_private=True, cache=PageCache(tmp_path / "pages"))
    hit = SearchHit(title="t", snippet="s", link=local_site.url("/page/same"), rank=4)
    (first,) = fetcher.fetch_all([hit]).pages
    (second,) = fetcher.fetch_all([hit]).pages
    assert (first.from_cache, second.from_cache) == (False, True)
    ignored = {"from_cache", "elapsed_s"}
    assert first.model_dump(exclude=ignored) == second.model_dump(exclude=ignored)
    assert (second.rank, second.hit) == (4, hit)


def test_an_unexpected_error_is_logged_and_recorded(
    local_site: LocalSite, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(self: PageFetcher, client: httpx.AsyncClient, url: str) -> None:
        raise KeyError("lost")

    monkeypatch.setattr(PageFetcher, "_download", broken)
    url = local_site.url("/page/x")
    (failure,) = PageFetcher(allow_private=True).fetch_all([url]).failures
    assert (failure.url, failure.stage, failure.reason) == (
        url,
        "fetch",
        "unexpected KeyError: 'lost'",
    )
    assert f"Unexpected error fetching {url}" in caplog.text


@pytest.mark.parametrize("charset", ["punycode", "idna", "utf-7", "raw_unicode_escape", "rot13"])
def test_decode_body_ignores_charsets_that_are_not_text_encodings(charset: str) -> None:
    body = b"<p>plain-ascii-text, with+signs and-hyphens</p>"
    assert decode_body(body, charset) == body.decode("ascii")
    meta = b'<meta charset="' + charset.encode() + b'">' + body
    assert decode_body(meta, None) == meta.decode("ascii")


def test_decode_body_accepts_real_text_encodings_under_any_alias() -> None:
    assert decode_body("naïve".encode("latin-1"), "ISO_8859-1") == "naïve"
    assert decode_body("Привет".encode("koi8-r"), "KOI8-R") == "Привет"
    assert decode_body("日本語".encode("shift_jis"), "Shift_JIS") == "日本語"
