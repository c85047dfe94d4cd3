"""The demo corpus: documents, HTML pages, and their extraction."""

from __future__ import annotations

import importlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

import httpx
import pytest
import trafilatura
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.demo import corpus
from langchain_references.demo.corpus import (
    BASE_URL,
    SAMPLE_QUESTION,
    Article,
    CorpusError,
    load_articles,
    load_documents,
    render_page,
    render_pages,
)

SITE_NAME = "Demo Field Guide"
# lxml ships no type hints (lxml-stubs is not a dependency): import it untyped.
lxml_html: Any = importlib.import_module("lxml.html")


def _raw_corpus() -> dict[str, Any]:
    text = (resources.files("langchain_references") / "_data/demo_corpus.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def test_documents_are_chunks_with_source_and_title() -> None:
    documents = load_documents()
    articles = load_articles()
    assert len(articles) >= 8
    assert len({a.section for a in articles}) in {3, 4}
    assert len(documents) == sum(len(a.chunks) for a in articles)
    for doc in documents:
        assert set(doc.metadata) == {"source", "title"}
        assert doc.metadata["source"].startswith(BASE_URL + "/")
        assert ".invalid/" in doc.metadata["source"]
        assert doc.page_content.strip() == doc.page_content != ""
    assert len({doc.id for doc in documents}) == len(documents)


def test_some_sources_span_several_chunks() -> None:
    per_source = Counter(doc.metadata["source"] for doc in load_documents())
    assert sum(1 for n in per_source.values() if n > 1) >= 2
    titles = {doc.metadata["source"]: doc.metadata["title"] for doc in load_documents()}
    assert len(titles) == len(per_source)  # one title per source


def test_documents_follow_the_data_file() -> None:
    raw = _raw_corpus()["articles"]
    expected = [(BASE_URL + a["path"], a["title"], chunk) for a in raw for chunk in a["chunks"]]
    got = [(d.metadata["source"], d.metadata["title"], d.page_content) for d in load_documents()]
    assert got == expected


def test_load_documents_returns_fresh_copies() -> None:
    first = load_documents()
    first[0].metadata["source"] = "changed"
    assert load_documents()[0].metadata["source"] != "changed"


def test_the_sample_question_is_answered_by_two_sources() -> None:
    # Both pages about it mention the 1962 World's Fair and downtown.
    sources = {
        d.metadata["source"]
        for d in load_documents()
        if "1962 World's Fair" in d.page_content and "downtown" in d.page_content.lower()
    }
    assert len(sources) >= 2
    assert "Space Needle" in SAMPLE_QUESTION


def _paragraphs(page: str) -> list[str]:
    tree = lxml_html.fromstring(page)
    return [p.text_content() for p in tree.xpath("//article/p[not(@class)]")]


def test_pages_parse_and_hold_each_chunk_verbatim() -> None:
    pages = render_pages()
    articles = load_articles()
    assert list(pages) == [a.path for a in articles]
    for article in articles:
        page = pages[article.path]
        tree = lxml_html.fromstring(page)
        assert tree.findtext(".//title") == f"{article.title} | {SITE_NAME}"
        assert tree.findtext(".//article/h1") == article.title
        assert _paragraphs(page) == list(article.chunks)
        assert tree.xpath("//link[@rel='canonical']/@href") == [article.url]
        # Boilerplate around the article, as on a real site.
        assert len(tree.xpath("//nav//a")) == len(articles)
        assert tree.xpath("//footer")


def test_special_characters_are_escaped() -> None:
    page = render_pages()["/python/comparisons"]
    assert "a &lt; b &lt; c" in page
    assert "&amp; Friends" in page
    assert "a < b" not in page


@settings(max_examples=40, deadline=None)
@given(
    title=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=60),
    chunks=st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=120),
        min_size=1,
        max_size=3,
    ),
)
def test_any_text_survives_rendering(title: str, chunks: list[str]) -> None:
    article = Article(path="/x/test", section="Python", title=title, chunks=tuple(chunks))
    page = render_page(article)
    tree = lxml_html.fromstring(page)
    assert tree.findtext(".//article/h1") == title
    assert _paragraphs(page) == chunks
    assert len(tree.xpath("//article")) == 1
    assert not tree.xpath("//script")


def _normalize(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def demo_site() -> Iterator[str]:
    pages = render_pages()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            if body is None:
                self.send_error(404)
                return
            data = body.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_served_pages_extract_to_the_document_text(demo_site: str) -> None:
    documents = load_documents()
    with httpx.Client(base_url=demo_site, timeout=5) as client:
        for article in load_articles():
            response = client.get(article.path)
            assert response.status_code == 200
            text = trafilatura.extract(response.text, url=article.url)
            assert text is not None
            extracted = _normalize(text)
            for doc in documents:
                if doc.metadata["source"] == article.url:
                    assert _normalize(doc.page_content) in extracted
            # Navigation and footer are boilerplate, not content.
            assert "Privacy" not in extracted
            assert "Related pages" not in extracted
        assert client.get("/nope").status_code == 404


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("site"), "'site' and 'articles'"),
        (lambda d: d["site"].update(base_url="https://evil.example"), "base_url"),
        (lambda d: d.update(articles=[]), "non-empty list"),
        (lambda d: d["articles"][0].update(path="no-slash"), "must start with '/'"),
        (lambda d: d["articles"][0].update(chunks=[]), "'chunks'"),
        (lambda d: d["articles"][0].update(chunks=["ok", 3]), "'chunks'"),
        (lambda d: d["articles"][0].update(title="  "), "'title'"),
        (lambda d: d["articles"][1].update(path=d["articles"][0]["path"]), "unique"),
    ],
)
def test_malformed_corpus_data_is_rejected(mutate: Any, message: str) -> None:
    data = _raw_corpus()
    mutate(data)
    with pytest.raises(CorpusError, match=message):
        corpus._parse_site(data)
