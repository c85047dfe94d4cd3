from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_chroma import Chroma
from langchain_core.embeddings import Embeddings

from langchain_references.factcheck.extract import extract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.relevance import chroma_client
from langchain_references.factcheck.search import LocalCorpusSearch, VectorStoreSearch
from tests.unit_tests.conftest import LocalSite

TERNS = (
    "Arctic terns\n\nThe arctic tern has the longest known migration of any animal: it flies "
    "from its Arctic breeding grounds to the Antarctic and back every year.\n"
)


@pytest.fixture
def corpus(tmp_path: Path, html_fixture_dir: Path) -> Path:
    folder = tmp_path / "corpus"
    (folder / "sub dir").mkdir(parents=True)
    for page in html_fixture_dir.glob("*.html"):
        shutil.copy(page, folder / page.name)
    (folder / "sub dir" / "terns.txt").write_text(TERNS, encoding="utf-8")
    (folder / "ignored.pdf").write_bytes(b"%PDF-1.4 arctic tern")
    return folder


def test_bm25_ranks_the_matching_file_first(corpus: Path) -> None:
    search = LocalCorpusSearch(corpus)
    hits = search.search("Wikipedia access restored in Turkey Constitutional Court", k=5)
    assert hits[0].link == (corpus / "wikimediafoundation.org.turkey.html").resolve().as_uri()
    assert hits[0].title == (
        "Access to Wikipedia restored in Turkey after more than two and a half years"
    )
    assert "Turkey" in hits[0].snippet
    assert [h.rank for h in hits] == list(range(len(hits)))

    terns = search.search("arctic tern migration", k=5)
    assert terns[0].link.endswith("/sub%20dir/terns.txt")
    assert terns[0].title == "terns"
    assert all(not h.link.endswith(".pdf") for h in terns)

    python = search.search("Python 3.6.0 release", k=1)
    assert len(python) == 1
    assert python[0].link.endswith("blog.python.org.html")


def test_files_sharing_no_word_with_the_query_are_not_returned(corpus: Path) -> None:
    assert LocalCorpusSearch(corpus).search("zzyzx qwertyuiop") == []


def test_base_url_links_are_fetchable(local_site: LocalSite, html_fixture_dir: Path) -> None:
    search = LocalCorpusSearch(html_fixture_dir, base_url=local_site.url("/fixtures"))
    hits = search.search("Erin Spiceland SpaceX software engineer", k=2)
    assert hits[0].link == local_site.url("/fixtures/github.blog.spiceland.html")

    fetched = PageFetcher(allow_private=True).fetch_all(hits)
    assert fetched.failures == []
    extracted = extract_all(fetched.pages)
    assert extracted.pages[0].rank == 0
    assert "Erin Spiceland is a Software Engineer for SpaceX." in extracted.pages[0].text


def test_reindex_picks_up_new_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("apples and pears", encoding="utf-8")
    search = LocalCorpusSearch(tmp_path, base_url="http://127.0.0.1:9/docs/")
    assert search.search("bananas") == []
    (tmp_path / "b.txt").write_text("bananas are yellow", encoding="utf-8")
    assert search.reindex() == 2
    (hit,) = search.search("bananas")
    assert hit.link == "http://127.0.0.1:9/docs/b.txt"


def test_empty_folder_and_bad_folder(tmp_path: Path) -> None:
    assert LocalCorpusSearch(tmp_path).search("anything") == []
    with pytest.raises(ValueError, match="not a directory"):
        LocalCorpusSearch(tmp_path / "missing")


class WordHash(Embeddings):
    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 128
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 128] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.fixture
def chroma_store() -> Iterator[Chroma]:
    store = Chroma(
        collection_name="lcr-test-vectorstore-search",
        embedding_function=WordHash(),
        client=chroma_client(),
        collection_configuration={"hnsw": {"space": "cosine"}},
    )
    store.add_texts(
        [
            "Arctic terns migrate from pole to pole.",
            "Honey bees dance to show where flowers are.",
            "A document without a link.",
        ],
        metadatas=[
            {"source": "https://birds.example/terns", "title": "Terns"},
            {"source": "insects/bees.html"},
            {"title": "orphan"},
        ],
        ids=["terns", "bees", "orphan"],
    )
    yield store
    store.delete_collection()


async def test_vector_store_search_maps_documents(chroma_store: Chroma) -> None:
    search = VectorStoreSearch(chroma_store, base_url="http://127.0.0.1:8000/corpus")
    hits = search.search("where do honey bees find flowers", k=3)
    assert hits[0].link == "http://127.0.0.1:8000/corpus/insects/bees.html"
    assert hits[0].title == hits[0].link  # no title metadata
    assert hits[0].snippet == "Honey bees dance to show where flowers are."
    assert all(h.title != "orphan" for h in hits)  # documents without a link are skipped
    assert [h.rank for h in hits] == list(range(len(hits)))

    terns = await search.asearch("arctic terns", k=1)
    assert [(h.link, h.title) for h in terns] == [("https://birds.example/terns", "Terns")]


def test_bm25_ranking_orders_by_score_then_key_and_keeps_word_matches_only() -> None:
    from langchain_references.factcheck.search.local import bm25_ranking, tokenize
    from langchain_references.services.retrieval import BM25Index

    texts = [
        "the end",  # shares only a stop word with the query: score 0, still a match
        "moon moon orbit",
        "sun and stars",  # shares no word: not returned
        "moon orbit",
        "moon orbit",  # ties with the text before it: key order
    ]
    keys = ["a", "b", "c", "e", "d"]
    index = BM25Index.build(keys, texts)
    order, words = bm25_ranking(index, "the moon orbit", [tokenize(t) for t in texts], keys)
    assert words == frozenset({"the", "moon", "orbit"})
    scores = index.scores("the moon orbit")
    assert scores[3] == scores[4] > scores[0] == 0
    assert sorted(order) == [0, 1, 3, 4]  # "sun and stars" shares no word
    assert order.index(4) == order.index(3) - 1  # equal scores: key "d" before "e"
    assert order[-1] == 0  # a stop-word match scores 0: last, but kept
    assert [float(scores[i]) for i in order] == sorted(
        (float(scores[i]) for i in order), reverse=True
    )
    assert bm25_ranking(None, "moon", [], []) == ([], frozenset({"moon"}))
    assert bm25_ranking(index, "!!", [tokenize(t) for t in texts], keys) == ([], frozenset())
