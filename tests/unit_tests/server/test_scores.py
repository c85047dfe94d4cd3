"""Scores to the bit: what the APIs report for a hit, from the cosine distance it was found at.

The index finds a hit at a cosine distance ``d`` (Chroma's, or computed from stored vectors
for a hit that BM25 alone found). The compatible API reports ``(cosine + 1) / 2`` as
``1 - d / 2`` clamped to [0, 1]; the fact-check passages carry the cosine itself, ``1 - d``
clamped to [-1, 1], not mapped back from that similarity (``2 * s - 1``, which differs from
it in the last bit for some distances: the round trip the index once made). Both are pinned
here exactly, so that a change of either is a decision, not an accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from fastapi.testclient import TestClient

from langchain_references.server import factcheck_api
from langchain_references.server.factcheck_api import IndexPassages
from langchain_references.server.index import EvidenceHit, EvidenceIndex
from langchain_references.server.index import hits as index_hits

CLAIMS = ("CO2 drives global warming", "sea level rise", "climate change and ice")


@pytest.fixture
def distances(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """``(text, cosine distance)`` of every hit the index makes, in order."""
    found: list[tuple[str, float]] = []
    real = index_hits._hit

    def spy(entry_id: str, doc: str | None, meta: Mapping[str, Any] | None, d: float) -> Any:
        found.append((doc or "", d))
        return real(entry_id, doc, meta, d)

    monkeypatch.setattr(index_hits, "_hit", spy)
    return found


def _similarity(d: float) -> float:
    return min(1.0, max(0.0, 1.0 - d / 2.0))


def _cosine(d: float) -> float:
    return max(-1.0, min(1.0, 1.0 - d))


def _mapped_back(d: float) -> float:
    return max(-1.0, min(1.0, 2.0 * _similarity(d) - 1.0))


def test_the_compatible_api_reports_one_minus_half_the_distance(
    client: TestClient, distances: list[tuple[str, float]]
) -> None:
    for claim in CLAIMS:
        distances.clear()
        items = client.post(
            "/api/phrase/evidence?re_rank=false", json={"claim": claim, "top_k": 10}
        ).json()
        assert len(items) == 10
        assert [i["text"] for i in items] == [text for text, _ in distances[:10]]
        assert [i["similarity"] for i in items] == [_similarity(d) for _, d in distances[:10]]


def test_the_fact_check_passages_carry_the_cosine_as_the_index_found_it(
    evidence_index: EvidenceIndex, distances: list[tuple[str, float]]
) -> None:
    passages = IndexPassages(evidence_index, "phrase")
    for claim in CLAIMS:
        distances.clear()
        found = passages.find(claim, 10)
        assert [p.passage.text for p in found] == [text for text, _ in distances]
        assert [p.similarity for p in found] == [_cosine(d) for _, d in distances]


#: A float32 distance (Chroma's) and float64 ones (from stored vectors), edges included.
DISTANCES = (0.0, 2.0**-24, 0.3333333432674408, 0.6241214241009282, 1.0, 1.9999999, 2.0000001)


def test_a_hit_carries_both_scores_from_its_distance_to_the_bit() -> None:
    for d in DISTANCES:
        hit = index_hits._hit("r:phrase:0", "text", {"record_id": "r"}, d)
        assert hit.similarity == _similarity(d)
        assert hit.cosine == _cosine(d)
        assert hit.cosine_similarity() == _cosine(d)
    assert index_hits._hit("r:phrase:0", "", None, float("nan")).cosine == 0.0


def test_the_cosine_is_not_the_similarity_mapped_back() -> None:
    # the round trip loses the last bit: 2 * (1 - d / 2) - 1 != 1 - d for this distance
    d = 0.6241214241009282
    assert _mapped_back(d) != _cosine(d)
    assert index_hits._hit("r:phrase:0", "", None, d).cosine_similarity() == _cosine(d)


def test_the_fact_check_api_passes_the_hits_cosine_not_its_similarity_mapped_back() -> None:
    # a distance where the round trip loses the last bit: the API edge must not redo it
    d = 0.6241214241009282
    hit = index_hits._hit("r:phrase:0", "text", {"record_id": "r"}, d)
    [passage] = factcheck_api._passages([hit])
    assert passage.similarity == _cosine(d)
    assert passage.similarity != _mapped_back(d)


def test_a_hit_built_without_a_cosine_maps_its_similarity_back() -> None:
    for d in DISTANCES:
        hit = EvidenceHit(
            id="r:phrase:0",
            record_id="r",
            title="",
            text="",
            similarity=index_hits.similarity(d),
            granularity="phrase",
        )
        assert hit.cosine is None
        assert hit.cosine_similarity() == _mapped_back(d)
