"""The evidence index as the fact-check chain's PassageIndex: each hit becomes one passage."""

from __future__ import annotations

import asyncio

import pytest

from langchain_references.factcheck.evidence import IndexedPassage, PassageIndex
from langchain_references.factcheck.types import Passage
from langchain_references.server.factcheck_api import IndexPassages
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
