"""The local demo site: serving pages, searching the demo corpus, the origin allow-list."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.demo.corpus import load_articles, render_pages
from langchain_references.demo.site import (
    DemoSiteSearch,
    LocalOriginGuard,
    pages_from_folder,
    serve_demo_site,
    serve_pages,
)
from langchain_references.factcheck.extract import aextract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.netguard import BlockedURLError
from tests.unit_tests.conftest import LocalSite

FAKE_BASE = "http://127.0.0.1:9/"


@pytest.fixture(scope="module")
def demo_base_url() -> object:
    with serve_demo_site() as base_url:
        yield base_url


def test_serve_pages_serves_html_text_and_404() -> None:
    pages = {"/a": "<p>é</p>", "/dir/notes.txt": "plain", "/with space.html": "<p>s</p>"}
    with serve_pages(pages) as base_url, httpx.Client(trust_env=False) as client:
        assert base_url.startswith("http://127.0.0.1:")
        html_page = client.get(base_url + "a")
        text_page = client.get(base_url + "dir/notes.txt?x=1")
        spaced = client.get(base_url + "with%20space.html")
        missing = client.get(base_url + "nope")
        head = client.head(base_url + "a")
    assert (html_page.status_code, html_page.text) == (200, "<p>é</p>")
    assert html_page.headers["content-type"] == "text/html; charset=utf-8"
    assert text_page.headers["content-type"] == "text/plain; charset=utf-8"
    assert text_page.text == "plain"
    assert spaced.text == "<p>s</p>"
    assert missing.status_code == 404
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-length"] == str(len("<p>é</p>".encode()))


def test_the_server_stops_with_the_block() -> None:
    with serve_pages({"/a": "x"}) as base_url:
        pass
    with httpx.Client(trust_env=False) as client, pytest.raises(httpx.ConnectError):
        client.get(base_url + "a", timeout=2)


def test_byte_pages_are_served_verbatim_without_a_charset() -> None:
    body = "Le café".encode("latin-1")
    with serve_pages({"/f.txt": body}) as base_url, httpx.Client(trust_env=False) as client:
        response = client.get(base_url + "f.txt")
    assert response.content == body
    assert response.headers["content-type"] == "text/plain"


@pytest.mark.parametrize("pages", [{"a": "x"}, {"/a": 3}])
def test_bad_pages_are_refused(pages: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="page"), serve_pages(pages):  # type: ignore[arg-type]
        pass


def test_the_demo_site_serves_every_corpus_page(demo_base_url: str) -> None:
    expected = render_pages()
    with httpx.Client(trust_env=False) as client:
        for path, body in expected.items():
            response = client.get(demo_base_url + path.lstrip("/"))
            assert response.status_code == 200
            assert response.text == body


def test_search_ranks_the_matching_article_first_with_local_links(demo_base_url: str) -> None:
    search = DemoSiteSearch(demo_base_url)

    hits = search.search("Europa ocean under the ice of Jupiter", k=3)

    assert hits[0].link == demo_base_url + "space/europa"
    assert hits[0].title == "Europa, Jupiter's Ocean Moon"
    assert "ocean" in hits[0].snippet.lower()
    assert [h.rank for h in hits] == list(range(len(hits)))
    assert len(hits) <= 3


def test_search_returns_nothing_for_words_the_corpus_lacks() -> None:
    assert DemoSiteSearch(FAKE_BASE).search("zyzzyva quokka", k=5) == []


@settings(max_examples=40, deadline=None)
@given(query=st.text(min_size=1, max_size=40).filter(str.strip), k=st.integers(1, 12))
def test_search_hits_are_ranked_and_local(query: str, k: int) -> None:
    hits = DemoSiteSearch(FAKE_BASE).search(query, k=k)
    assert len(hits) <= min(k, len(load_articles()))
    assert [h.rank for h in hits] == list(range(len(hits)))
    assert all(h.link.startswith(FAKE_BASE) for h in hits)
    assert len({h.link for h in hits}) == len(hits)


def test_search_refuses_a_non_http_base_url() -> None:
    with pytest.raises(BlockedURLError):
        DemoSiteSearch("file:///tmp/")


async def test_guard_allows_only_the_listed_origin() -> None:
    guard = LocalOriginGuard(["http://127.0.0.1:8123/any/path"])

    allowed = await guard.check("http://127.0.0.1:8123/space/europa")
    assert allowed.pinned_ip == "127.0.0.1"
    assert allowed.port == 8123
    with pytest.raises(BlockedURLError, match="loopback"):
        await guard.check("http://127.0.0.1:8124/")  # another local port
    with pytest.raises(BlockedURLError, match="private"):
        await guard.check("http://10.1.2.3:8123/")
    with pytest.raises(BlockedURLError, match="scheme"):
        await guard.check("file:///etc/passwd")
    public = await guard.check("http://93.184.216.34/")  # a public IP literal: no DNS needed
    assert public.pinned_ip == "93.184.216.34"


def test_guard_origins_must_be_ip_literals() -> None:
    with pytest.raises(ValueError, match="IP address"):
        LocalOriginGuard(["http://localhost:8000/"])


async def test_fetching_through_the_guard_reaches_the_demo_site_only(
    demo_base_url: str, local_site: LocalSite
) -> None:
    fetcher = PageFetcher(guard=LocalOriginGuard([demo_base_url]))
    europa = demo_base_url + "space/europa"

    report = await fetcher.afetch_all([europa, local_site.url("/page/x")])

    assert [p.url for p in report.pages] == [europa]
    [failure] = report.failures
    assert failure.url == local_site.url("/page/x")
    assert failure.reason.startswith("refused: loopback")
    extracted = await aextract_all(report.pages)
    assert "Beneath its ice shell" in extracted.pages[0].text
    assert extracted.pages[0].title.startswith("Europa, Jupiter's Ocean Moon")


def test_pages_from_folder_reads_html_and_text_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.html").write_text("<p>a</p>", encoding="utf-8")
    latin = "Le café est très bon, et la crème brûlée à côté aussi."
    (tmp_path / "sub" / "b.txt").write_bytes(latin.encode("latin-1"))
    (tmp_path / "c.pdf").write_bytes(b"%PDF")

    pages = pages_from_folder(tmp_path)

    assert set(pages) == {"/a.html", "/sub/b.txt"}
    assert pages["/a.html"] == b"<p>a</p>"
    assert pages["/sub/b.txt"] == latin.encode("latin-1")
    with pytest.raises(ValueError, match="not a directory"):
        pages_from_folder(tmp_path / "a.html")
