"""The evidence index as the fact-check chain's PassageIndex: each hit becomes one passage."""

from __future__ import annotations

import asyncio
import math

import pytest

from langchain_references.factcheck.evidence import IndexedPassage, PassageIndex
from langchain_references.factcheck.types import Passage
from langchain_references.server.factcheck_api import IndexPassages, evidence_link
from langchain_references.server.index import EvidenceHit, Granularity

HITS = [
    EvidenceHit(
        id="r1:phrase:2",
        record_id="r1",
        title="Sea ice",
        text="Arctic sea ice has declined.",
        similarity=0.9,
        granularity="phrase",
        metadata={"position": 2},
        url="https://ice.example/1",
    ),
    EvidenceHit(
        id="r2:phrase:0",
        record_id="r2",
        title="",  # no title: the record id stands for it
        text="Melting.",
        similarity=0.25,
        granularity="phrase",
        doi="10.1/xyz",
    ),
]


class Hits:
    """An index stand-in that returns HITS and records the calls."""

    name = "stub"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Granularity, int]] = []

    def search(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
        self.calls.append(("search", query, granularity, k))
        return HITS[:k]

    async def asearch(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
        self.calls.append(("asearch", query, granularity, k))
        return HITS[:k]


EXPECTED = [
    IndexedPassage(
        passage=Passage(
            text="Arctic sea ice has declined.",
            url="https://ice.example/1",
            title="Sea ice",
            rank=0,
            index_in_page=2,
            n_tokens=5,
        ),
        similarity=pytest.approx(0.8),  # type: ignore[arg-type]
        id="r1:phrase:2",
    ),
    IndexedPassage(
        passage=Passage(
            text="Melting.",
            url="https://doi.org/10.1/xyz",
            title="r2",
            rank=1,
            index_in_page=0,
            n_tokens=1,
        ),
        similarity=pytest.approx(-0.5),  # type: ignore[arg-type]
        id="r2:phrase:0",
    ),
]


def test_each_hit_is_a_passage_with_its_cosine_on_both_drivers() -> None:
    index = Hits()
    passages = IndexPassages(index, "phrase")  # type: ignore[arg-type]

    assert isinstance(passages, PassageIndex)
    assert passages.name == "stub"
    assert passages.find("ice", 2) == EXPECTED
    assert asyncio.run(passages.afind("ice", 2)) == EXPECTED
    assert index.calls == [("search", "ice", "phrase", 2), ("asearch", "ice", "phrase", 2)]


def _hit(
    similarity: float = 0.5,
    *,
    url: str | None = None,
    doi: str | None = None,
    openalex_id: str | None = None,
) -> EvidenceHit:
    return EvidenceHit(
        id="r:phrase:0",
        record_id="r",
        title="T",
        text="Some text.",
        similarity=similarity,
        granularity="phrase",
        url=url,
        doi=doi,
        openalex_id=openalex_id,
    )


@pytest.mark.parametrize(
    ("bibliography", "link"),
    [
        # the record's URL wins over its DOI and OpenAlex id
        ({"url": "https://a.example/p", "doi": "10.1/x"}, "https://a.example/p"),
        # a bare DOI or OpenAlex id becomes the resolver's page (blanks around it stripped)
        ({"doi": " 10.1/x ", "openalex_id": "W1"}, "https://doi.org/10.1/x"),
        ({"openalex_id": " W123 "}, "https://openalex.org/W123"),
        # one already given as a link is kept as it is, whatever the scheme's case
        ({"doi": "https://doi.org/10.1/x"}, "https://doi.org/10.1/x"),
        ({"doi": " http://dx.doi.org/10.1/x"}, "http://dx.doi.org/10.1/x"),
        ({"doi": "HTTPS://DOI.ORG/10.1/X"}, "HTTPS://DOI.ORG/10.1/X"),
        ({"doi": "Http://doi.org/10.1/x"}, "Http://doi.org/10.1/x"),
        ({"openalex_id": "https://openalex.org/W1 "}, "https://openalex.org/W1"),
        ({"openalex_id": "http://openalex.org/W2"}, "http://openalex.org/W2"),
        ({"openalex_id": "HTTPS://OPENALEX.ORG/W3"}, "HTTPS://OPENALEX.ORG/W3"),
        ({"openalex_id": "Http://openalex.org/W4"}, "Http://openalex.org/W4"),
        # nothing to link to: no link at all
        ({}, ""),
        ({"url": "", "doi": "", "openalex_id": ""}, ""),
    ],
)
def test_a_passage_links_to_its_url_else_its_doi_else_its_openalex_page(
    bibliography: dict[str, str], link: str
) -> None:
    assert evidence_link(_hit(**bibliography)) == link  # type: ignore[arg-type]


def test_similarities_are_cosines_clamped_to_their_range_and_a_non_number_is_zero() -> None:
    """The index's ``(cosine + 1) / 2`` rounded just past [0, 1] is still a cosine in
    [-1, 1]; a similarity that is not a finite number is no evidence of closeness (0)."""
    similarities = [1.0 + 1e-7, 1.0, 0.75, 0.5, 0.0, -1e-7, math.nan, math.inf, -math.inf]

    class Index(Hits):
        def search(self, query: str, *, granularity: Granularity, k: int) -> list[EvidenceHit]:
            return [_hit(s) for s in similarities]

    found = IndexPassages(Index(), "phrase").find("ice", len(similarities))  # type: ignore[arg-type]

    assert [p.similarity for p in found] == [1.0, 1.0, 0.5, 0.0, -1.0, -1.0, 0.0, 0.0, 0.0]
    assert [p.passage.rank for p in found] == list(range(len(similarities)))
