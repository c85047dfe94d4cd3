"""The I/O stages composed: local search -> fetch -> extract -> passages -> relevance."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from langchain_core.embeddings import Embeddings

from langchain_references.factcheck.extract import aextract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PassageSplitter
from langchain_references.factcheck.relevance import aselect_relevant
from langchain_references.factcheck.search import LocalCorpusSearch
from tests.unit_tests.conftest import LocalSite


class WordCounts(Embeddings):
    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 512
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 512] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


async def test_stages_compose_and_keep_the_search_rank(
    local_site: LocalSite, html_fixture_dir: Path
) -> None:
    statement = (
        "The Constitutional Court of Turkey ruled that the Wikipedia block was unconstitutional"
    )
    hits = await LocalCorpusSearch(html_fixture_dir, base_url=local_site.url("/fixtures")).asearch(
        statement, k=3
    )
    assert hits[0].link.endswith("wikimediafoundation.org.turkey.html")

    fetched = await PageFetcher(allow_private=True).afetch_all(hits)
    extracted = await aextract_all(fetched.pages)
    passages = PassageSplitter(max_tokens=128).split(extracted.pages)
    assert fetched.failures == extracted.failures == []
    assert {p.rank for p in passages} == {h.rank for h in hits}
    assert all(p.n_tokens <= 128 for p in passages)

    top = await aselect_relevant(statement, passages, embeddings=WordCounts(), k=3)
    best, score = top[0]
    assert best.url == hits[0].link
    assert best.rank == 0
    assert "Constitutional Court of Turkey" in best.text
    assert 0.0 < score <= 1.0
