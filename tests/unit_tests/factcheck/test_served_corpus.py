"""A corpus served on a new port every run is known in the run cache by its content."""

from __future__ import annotations

import asyncio

import pytest

from langchain_references.factcheck.cache import PageCache
from langchain_references.factcheck.search.cached import SEARCH_NAMESPACE, CachedSearch
from langchain_references.factcheck.search.recorded import RecordedSearch
from langchain_references.factcheck.served import ServedCorpus, pages_digest
from langchain_references.factcheck.types import SearchHit
from langchain_references.services.runcache import RunCache

PAGES = {"/a.html": "<p>A</p>", "/b c.txt": b"B"}
RUN_1 = "http://127.0.0.1:41001/"
RUN_2 = "http://127.0.0.1:52002/"


def test_pages_digest_is_the_content() -> None:
    digest = pages_digest(PAGES)
    assert len(digest) == 64
    assert pages_digest(dict(reversed(PAGES.items()))) == digest  # order does not matter
    assert pages_digest({**PAGES, "/a.html": "<p>A!</p>"}) != digest  # a page's text does
    assert pages_digest({**PAGES, "/b c.txt": "B"}) != digest  # text and bytes are served apart
    assert pages_digest({"/a.html": "<p>A</p>/b c.txtB"}) != digest  # so do the boundaries
    assert pages_digest({}) == pages_digest({})


def test_stable_and_served_forms() -> None:
    corpus = ServedCorpus.of_pages(RUN_1.rstrip("/"), PAGES)
    assert corpus.base_url == RUN_1
    assert corpus.identity == f"corpus:{pages_digest(PAGES)}"
    stable = corpus.stable(RUN_1 + "b%20c.txt")
    assert stable == f"corpus:{corpus.digest}/b%20c.txt"
    assert ServedCorpus(RUN_2, corpus.digest).served(stable) == RUN_2 + "b%20c.txt"
    assert corpus.stable("https://example.org/a.html") == "https://example.org/a.html"
    assert corpus.served("https://example.org/a.html") == "https://example.org/a.html"
    other = ServedCorpus(RUN_1, "0" * 64)
    assert other.served(stable) == stable  # another corpus's stable form is not this one's
    with pytest.raises(ValueError, match="digest"):
        ServedCorpus(RUN_1, "")


class Links:
    """A search whose hits link to one run's server."""

    name = "links"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.calls = 0

    def search(self, query: str, k: int = 10) -> list[SearchHit]:
        self.calls += 1
        return [SearchHit(title="A", link=self.base_url + "a.html", rank=0)]

    async def asearch(self, query: str, k: int = 10) -> list[SearchHit]:
        return self.search(query, k)


def test_cached_search_of_a_served_corpus_is_reused_on_another_port() -> None:
    cache = RunCache(":memory:")
    digest = pages_digest(PAGES)
    first = Links(RUN_1)
    corpus_1 = ServedCorpus(RUN_1, digest)
    hits = CachedSearch(first, cache, identity=corpus_1.identity, corpus=corpus_1).search("q", 3)
    assert [h.link for h in hits] == [RUN_1 + "a.html"]
    [stored] = cache._execute("SELECT value FROM entries WHERE namespace = ?", (SEARCH_NAMESPACE,))
    assert RUN_1 not in stored[0]
    assert f"corpus:{digest}/a.html" in stored[0]

    second = Links(RUN_2)
    corpus_2 = ServedCorpus(RUN_2, digest)
    search = CachedSearch(second, cache, identity=corpus_2.identity, corpus=corpus_2)
    assert [h.link for h in search.search("q", 3)] == [RUN_2 + "a.html"]
    assert [h.link for h in asyncio.run(search.asearch("q", 3))] == [RUN_2 + "a.html"]
    assert second.calls == 0  # answered from the cache, linking to this run's server

    changed = ServedCorpus(RUN_2, pages_digest({**PAGES, "/a.html": "<p>A!</p>"}))
    CachedSearch(second, cache, identity=changed.identity, corpus=changed).search("q", 3)
    assert second.calls == 1  # other pages: searched again


def test_page_cache_of_a_served_corpus_is_reused_on_another_port() -> None:
    store = RunCache(":memory:")
    digest = pages_digest(PAGES)
    PageCache(store=store, corpus=ServedCorpus(RUN_1, digest)).put(
        RUN_1 + "a.html",
        final_url=RUN_1 + "a.html",
        status=200,
        content_type="text/html",
        body="<p>A</p>",
        private=True,
    )
    entry = PageCache(store=store, corpus=ServedCorpus(RUN_2, digest)).get(RUN_2 + "a.html")
    assert entry is not None
    assert (entry.url, entry.final_url, entry.body) == (
        RUN_2 + "a.html",
        RUN_2 + "a.html",
        "<p>A</p>",
    )
    assert (
        PageCache(store=store, corpus=ServedCorpus(RUN_2, "0" * 64)).get(RUN_2 + "a.html") is None
    )
    assert PageCache(store=store).get(RUN_2 + "a.html") is None  # no corpus: keyed by the URL


def test_recorded_search_digest_is_what_it_replays() -> None:
    hit = {"title": "T", "snippet": "", "link": "https://example.org/"}
    recording = RecordedSearch({"q": [hit], "r": []})
    assert recording.digest == RecordedSearch({"q": [dict(hit)], "r": []}).digest
    assert recording.digest != RecordedSearch({"q": [hit | {"snippet": "s"}], "r": []}).digest
    assert recording.digest != RecordedSearch({"r": [], "q": [hit]}).digest  # order: fallbacks
