"""The climate-evidence-compatible API: schemas against the reference, and behaviour."""

from __future__ import annotations

import dataclasses
import json
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from langchain_references.server import compat
from langchain_references.server.app import create_app
from langchain_references.server.compat import (
    RankedHit,
    afind_evidence,
    averify_claims,
    select_evidence,
    verification_units,
)
from langchain_references.server.index import EvidenceHit, EvidenceIndex, split_sentences
from langchain_references.server.services import Services
from langchain_references.server.settings import LimitExceededError, ServerSettings

from .conftest import DATA, ScriptedJudge

REFERENCE = json.loads((DATA / "cc_evidences_openapi.json").read_text(encoding="utf-8"))
EVIDENCE_KEYS = {
    "num",
    "title",
    "text",
    "similarity",
    "doi",
    "openalex_id",
    "year",
    "citation_count",
    "influential_citation_count",
}
LABELS = {"SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO"}


@pytest.fixture
def scripted() -> ScriptedJudge:
    return ScriptedJudge(
        {"fossil": "supports", "El Nino": "refutes", "explode": "explode", "Thinner": "explode"}
    )


@pytest.fixture
def scripted_client(
    settings: ServerSettings, evidence_index: EvidenceIndex, scripted: ScriptedJudge
) -> Iterator[TestClient]:
    services = Services(settings=settings, index=evidence_index, judge=scripted)
    with TestClient(
        create_app(settings, services=services), base_url="http://localhost"
    ) as test_client:
        yield test_client


def _rerank_key(item: dict[str, Any]) -> tuple[tuple[bool, int], ...]:
    keys = ("influential_citation_count", "citation_count", "year")
    return tuple((item[k] is None, -(item[k] or 0)) for k in keys)


# ------------------------------------------------------------------ schema


def _resolve_name(schema: dict[str, Any]) -> str:
    return str(schema["$ref"]).rsplit("/", 1)[-1]


@pytest.mark.parametrize(
    ("path", "method"),
    [(path, method) for path, item in REFERENCE["paths"].items() for method in item],
)
def test_paths_match_the_reference(client: TestClient, path: str, method: str) -> None:
    ours = client.get("/openapi.json").json()["paths"][path][method]
    theirs = REFERENCE["paths"][path][method]
    assert ours["operationId"] == theirs["operationId"]
    assert ours["summary"] == theirs["summary"]
    assert ours.get("description") == theirs.get("description") or "description" not in theirs
    ours_params = [
        (p["name"], p["in"], p["required"], p["schema"]) for p in ours.get("parameters", [])
    ]
    theirs_params = [
        (p["name"], p["in"], p["required"], p["schema"]) for p in theirs.get("parameters", [])
    ]
    assert ours_params == theirs_params
    if "requestBody" in theirs:
        ours_body = ours["requestBody"]["content"]["application/json"]["schema"]
        theirs_body = theirs["requestBody"]["content"]["application/json"]["schema"]
        assert _resolve_name(ours_body) == _resolve_name(theirs_body)
        assert ours["requestBody"]["required"] is True
    ours_ok = ours["responses"]["200"]["content"]["application/json"]["schema"]
    theirs_ok = theirs["responses"]["200"]["content"]["application/json"]["schema"]
    assert ours_ok == theirs_ok
    assert set(theirs["responses"]) <= set(ours["responses"])


@pytest.mark.parametrize("name", sorted(REFERENCE["components"]["schemas"]))
def test_schemas_match_the_reference(client: TestClient, name: str) -> None:
    ours = client.get("/openapi.json").json()["components"]["schemas"][name]
    theirs = REFERENCE["components"]["schemas"][name]
    assert ours["title"] == theirs["title"]
    assert ours["type"] == theirs["type"]
    assert ours["required"] == theirs["required"]
    for prop, schema in theirs["properties"].items():
        assert ours["properties"][prop] == schema, prop
    # Extensions are optional extra keys only.
    assert set(ours["properties"]) - set(theirs["properties"]) <= {"url", "error", "judge"}
    if name in ("Claim", "Claims"):
        assert ours["example"] == theirs["example"]


# ------------------------------------------------------------------ evidence


def test_evidence_items_have_the_reference_shape(client: TestClient) -> None:
    response = client.post("/api/phrase/evidence", json={"claim": "CO2 drives global warming"})
    assert response.status_code == 200
    items = response.json()
    assert len(items) == 10  # the default top_k
    for item in items:
        assert set(item) >= EVIDENCE_KEYS
        assert isinstance(item["num"], int)
        assert item["num"] >= 1
        assert 0.0 <= item["similarity"] <= 1.0
        assert isinstance(item["title"], str)
        assert isinstance(item["text"], str)
    assert max(item["num"] for item in items) <= 15  # ranks among top_k + 5 retrieved


def test_without_re_rank_items_keep_retrieval_order(client: TestClient) -> None:
    items = client.post(
        "/api/phrase/evidence?re_rank=false", json={"claim": "sea level", "top_k": 6}
    ).json()
    assert [item["num"] for item in items] == [1, 2, 3, 4, 5, 6]
    sims = [item["similarity"] for item in items]
    assert sims == sorted(sims, reverse=True)


def test_re_rank_orders_the_top_k_plus_5_by_citations(client: TestClient) -> None:
    claim = {"claim": "climate change and ice", "top_k": 3}
    retrieved = client.post("/api/phrase/evidence?re_rank=false", json={**claim, "top_k": 8}).json()
    items = client.post("/api/phrase/evidence", json=claim).json()
    expected = sorted(retrieved, key=_rerank_key)[:3]  # sorted() is stable, like the service
    assert [(i["num"], i["text"]) for i in items] == [(i["num"], i["text"]) for i in expected]
    assert [_rerank_key(i) for i in items] == sorted(_rerank_key(i) for i in items)


def test_threshold_keeps_only_higher_similarity(client: TestClient) -> None:
    everything = client.post(
        "/api/phrase/evidence?re_rank=false", json={"claim": "sea level rise", "top_k": 12}
    ).json()
    cut = everything[3]["similarity"]
    kept = client.post(
        "/api/phrase/evidence?re_rank=false",
        json={"claim": "sea level rise", "top_k": 12, "threshold": cut},
    ).json()
    assert [i["num"] for i in kept] == [1, 2, 3]  # strictly greater than the threshold
    assert (
        client.post(
            "/api/phrase/evidence", json={"claim": "sea level rise", "threshold": 0.999}
        ).json()
        == []
    )


def test_abstract_evidence_returns_whole_abstracts(client: TestClient) -> None:
    items = client.post("/api/abstract/evidence", json={"claim": "coral reefs", "top_k": 8}).json()
    assert len(items) == 8  # the whole corpus, top_k + 5 > 8 records
    coral = next(i for i in items if i["title"] == "Coral bleaching")
    assert len(split_sentences(coral["text"])) == 2
    # Records without citation data sort last, never crash.
    assert items[-1]["influential_citation_count"] is None
    assert items[-1]["citation_count"] is None


def test_batch_answers_each_claim_like_the_single_endpoint(client: TestClient) -> None:
    claims = ["honey bees", "", "arctic sea ice"]
    path = "/api/abstract/evidence/batch?re_rank=false"
    batch = client.post(path, json={"claims": claims, "top_k": 2, "threshold": 0.5}).json()
    assert len(batch) == 3
    assert batch[1] == []  # a blank claim gets no evidence
    for claim, items in zip(claims, batch, strict=True):
        if claim:
            single = client.post(
                "/api/abstract/evidence?re_rank=false",
                json={"claim": claim, "top_k": 2, "threshold": 0.5},
            ).json()
            assert items == single
    assert batch[0][0]["title"] == "Honey bees"


# ------------------------------------------------------------------ verify


def test_phrase_verify_maps_labels_and_filters_nei(
    scripted_client: TestClient, scripted: ScriptedJudge
) -> None:
    body = {"claim": "fossil fuels warm the planet", "top_k": 15}
    everything = scripted_client.post("/api/phrase/verify?filter_nei=false", json=body).json()
    assert {i["label"] for i in everything} <= LABELS
    by_text = {i["text"]: i for i in everything}
    fossil = next(t for t in by_text if "fossil" in t)
    nino = next(t for t in by_text if "El Nino" in t)
    assert (by_text[fossil]["label"], by_text[fossil]["probability"]) == ("SUPPORTS", 0.9)
    assert (by_text[nino]["label"], by_text[nino]["probability"]) == ("REFUTES", 0.8)
    plain = [i for i in everything if i["error"] is None and i["label"] == "NOT_ENOUGH_INFO"]
    assert plain
    assert all(i["probability"] == 0.6 for i in plain)
    evidence = scripted_client.post("/api/phrase/evidence", json=body).json()
    assert [(i["num"], i["text"]) for i in everything] == [(i["num"], i["text"]) for i in evidence]
    for item in everything:
        assert EVIDENCE_KEYS | {"label", "probability"} <= set(item)

    filtered = scripted_client.post("/api/phrase/verify", json=body).json()
    assert {i["label"] for i in filtered if i["error"] is None} <= {"SUPPORTS", "REFUTES"}
    assert len(filtered) == len(everything) - len(plain)


def test_include_title_prefixes_the_judged_passage(
    scripted_client: TestClient, scripted: ScriptedJudge
) -> None:
    body = {"claim": "honey", "top_k": 1}
    item = scripted_client.post(
        "/api/phrase/verify?filter_nei=false&re_rank=false", json=body
    ).json()[0]
    assert scripted.passages[-1] == f"{item['title']}. {item['text']}"
    scripted_client.post(
        "/api/phrase/verify?filter_nei=false&re_rank=false&include_title=false", json=body
    )
    assert scripted.passages[-1] == item["text"]


def test_abstract_verify_judges_each_sentence(
    scripted_client: TestClient, scripted: ScriptedJudge
) -> None:
    body = {"claim": "global warming causes", "top_k": 3}
    abstracts = scripted_client.post("/api/abstract/evidence", json=body).json()
    items = scripted_client.post("/api/abstract/verify?filter_nei=false", json=body).json()
    expected = [(a["num"], s) for a in abstracts for s in split_sentences(a["text"])]
    assert [(i["num"], i["text"]) for i in items] == expected
    by_num = {a["num"]: a for a in abstracts}
    for item in items:
        assert item["similarity"] == by_num[item["num"]]["similarity"]
        assert item["title"] == by_num[item["num"]]["title"]


def test_the_verify_work_runs_in_the_services_fair_worker_threads(
    settings: ServerSettings,
    evidence_index: EvidenceIndex,
    scripted: ScriptedJudge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The abstracts' splitting and the index count go through the fair pool, by client.

    They ran in Starlette's own thread pool, which the per-client share does not govern.
    """
    threads: dict[str, list[str]] = {"split": [], "count": []}
    split, count = compat.verification_units, EvidenceIndex.count

    def recorded_split(*args: Any, **kwargs: Any) -> Any:
        threads["split"].append(threading.current_thread().name)
        return split(*args, **kwargs)

    def recorded_count(index: EvidenceIndex, granularity: Any) -> int:
        threads["count"].append(threading.current_thread().name)
        return count(index, granularity)

    monkeypatch.setattr(compat, "verification_units", recorded_split)
    monkeypatch.setattr(EvidenceIndex, "count", recorded_count)
    # the counts are cached per index object: an earlier test may have counted this one
    monkeypatch.setattr(compat, "_ENTRIES", weakref.WeakKeyDictionary())

    def post(limits: ServerSettings, path: str, body: dict[str, Any]) -> int:
        services = Services(settings=limits, index=evidence_index, judge=scripted)
        with TestClient(create_app(limits, services=services), base_url="http://localhost") as c:
            return c.post(path, json=body).status_code

    # 2 claims x top_k 2 may exceed max_judged 3: the index is counted before any search
    tight = dataclasses.replace(settings, max_judged=3)
    claims = {"claims": ["global warming causes", "sea level rise"], "top_k": 2}
    assert post(tight, "/api/abstract/verify/batch", claims) == 413
    assert post(settings, "/api/abstract/verify", {"claim": "global warming", "top_k": 2}) == 200
    assert len(threads["count"]) == 1
    assert len(threads["split"]) == 1  # one per claim
    assert all(name.startswith("fair-") for name in threads["count"] + threads["split"]), threads


def test_a_judge_failure_answers_for_its_items_only(
    scripted_client: TestClient,
) -> None:
    body = {"claims": ["arctic sea ice decline", "fossil fuel emissions"], "top_k": 16}
    response = scripted_client.post("/api/phrase/verify/batch", json=body)
    assert response.status_code == 200
    ice, fossil = response.json()
    failed = [i for i in ice if i["error"] is not None]
    assert failed, "the 'Thinner ice' sentence makes the judge raise"
    for item in failed:
        assert item["label"] == "NOT_ENOUGH_INFO"
        assert item["probability"] == 0.0
        assert "exploded" in item["error"]
    assert any(i["label"] == "SUPPORTS" for i in fossil)


def test_verify_with_the_offline_judge(client: TestClient) -> None:
    body = {"claims": ["Burning fossil fuels increases carbon dioxide"], "top_k": 5}
    response = client.post("/api/phrase/verify/batch?filter_nei=false", json=body)
    assert response.status_code == 200
    (items,) = response.json()
    assert len(items) == 5
    for item in items:
        assert item["label"] in LABELS
        assert 0.0 <= item["probability"] <= 1.0


# ------------------------------------------------------------------ split, health, bad bodies


def test_split_and_healthcheck(client: TestClient) -> None:
    text = "There is no climate emergency. OPINION: The science says otherwise. You would be wrong."
    assert client.post("/api/split", json={"text": text}).json() == [
        "There is no climate emergency.",
        "OPINION: The science says otherwise.",
        "You would be wrong.",
    ]
    response = client.get("/healthcheck")
    assert response.status_code == 200
    assert response.json() == "Seems to be running"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/phrase/evidence", {}),
        ("/api/phrase/evidence", {"claim": ["a list"]}),
        ("/api/phrase/evidence", {"claim": "x", "top_k": "many"}),
        ("/api/phrase/evidence", {"claim": "x", "threshold": "high"}),
        ("/api/abstract/verify/batch", {"claims": "not a list"}),
        ("/api/abstract/verify/batch", {"claim": "singular"}),
        ("/api/split", {"texts": "x"}),
    ],
)
def test_bad_bodies_get_fastapi_validation_errors(
    client: TestClient, path: str, body: dict[str, Any]
) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert isinstance(detail, list)
    assert detail
    assert {"loc", "msg", "type"} <= set(detail[0])


def test_malformed_json_and_bad_query(client: TestClient) -> None:
    response = client.post(
        "/api/phrase/evidence", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    response = client.post("/api/phrase/evidence?re_rank=maybe", json={"claim": "x"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "re_rank"]


# ------------------------------------------------------------------ the pure selection step


def _hit(n: int, similarity: float, **meta: int | None) -> EvidenceHit:
    return EvidenceHit(
        id=f"r{n}:abstract",
        record_id=f"r{n}",
        title=f"T{n}",
        text=f"text {n}",
        similarity=similarity,
        granularity="abstract",
        **meta,  # type: ignore[arg-type]
    )


def test_select_evidence_threshold_rerank_and_cut() -> None:
    hits = [
        _hit(1, 0.9),
        _hit(2, 0.8, influential_citation_count=1),
        _hit(3, 0.7, citation_count=500),
        _hit(4, 0.6, influential_citation_count=1, citation_count=2),
        _hit(5, 0.5, year=2024),
        _hit(6, 0.4, influential_citation_count=1, citation_count=2, year=2000),
    ]
    plain = select_evidence(hits, threshold=None, top_k=3, re_rank=False)
    assert [r.num for r in plain] == [1, 2, 3]
    ranked = select_evidence(hits, threshold=None, top_k=6, re_rank=True)
    assert [r.num for r in ranked] == [6, 4, 2, 3, 5, 1]
    above = select_evidence(hits, threshold=0.6, top_k=6, re_rank=False)
    assert [r.num for r in above] == [1, 2, 3]  # 0.6 itself is not above the threshold
    assert select_evidence([], threshold=0.1, top_k=3, re_rank=True) == []
    # a count of 0 is known, and lower than 1: it is not a tie broken by retrieval order
    zero_and_one = [
        _hit(1, 0.9, influential_citation_count=0),
        _hit(2, 0.8, influential_citation_count=1),
    ]
    assert [
        r.num for r in select_evidence(zero_and_one, threshold=None, top_k=2, re_rank=True)
    ] == [2, 1]


# ------------------------------------------------------------------ values, not just keys

BIBLIOGRAPHY = (
    "url",
    "doi",
    "openalex_id",
    "year",
    "citation_count",
    "influential_citation_count",
)


def _corpus_bibliography() -> dict[str, tuple[Any, ...]]:
    records = [
        json.loads(line)
        for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return {r["title"]: tuple(r.get(key) for key in BIBLIOGRAPHY) for r in records}


@pytest.mark.parametrize("endpoint", ["evidence", "verify?filter_nei=false"])
def test_each_item_carries_its_own_records_bibliography(client: TestClient, endpoint: str) -> None:
    expected = _corpus_bibliography()
    body = {"claim": "CO2 drives global warming", "top_k": len(expected)}
    items = client.post(f"/api/abstract/{endpoint}", json=body).json()
    titles = [item["title"] for item in items]
    assert "Carbon dioxide and warming" in titles  # the record with every field set
    assert None not in expected["Carbon dioxide and warming"]
    assert len(set(titles)) > 2
    for item in items:
        assert tuple(item[key] for key in BIBLIOGRAPHY) == expected[item["title"]], item["title"]


def _ranked(text: str, title: str) -> RankedHit:
    hit = EvidenceHit(
        id="r:phrase:0", record_id="r", title=title, text=text, similarity=0.5, granularity="phrase"
    )
    return RankedHit(num=1, hit=hit)


def test_verification_units_split_abstracts_only_and_join_the_title_with_one_period() -> None:
    ranked = [_ranked("Ice melts. Seas rise.", "Report X.")]
    phrase = verification_units(ranked, granularity="phrase", include_title=True)
    assert [(u.text, u.passage) for u in phrase] == [
        ("Ice melts. Seas rise.", "Report X. Ice melts. Seas rise.")
    ]
    abstract = verification_units(ranked, granularity="abstract", include_title=True)
    assert [(u.text, u.passage) for u in abstract] == [
        ("Ice melts.", "Report X. Ice melts."),
        ("Seas rise.", "Report X. Seas rise."),
    ]
    bare = verification_units(ranked, granularity="abstract", include_title=False)
    assert [u.passage for u in bare] == ["Ice melts.", "Seas rise."]
    untitled = verification_units(
        [_ranked("Ice melts.", " . ")], granularity="phrase", include_title=True
    )
    assert [u.passage for u in untitled] == ["Ice melts."]


def test_averify_claims_on_a_bare_index_refuses_a_request_sure_to_exceed_max_judged(
    settings: ServerSettings, evidence_index: EvidenceIndex, scripted: ScriptedJudge
) -> None:
    """The function API on an :class:`EvidenceIndex` (no :class:`LiveIndex`): counted as is."""
    import asyncio

    tight = dataclasses.replace(settings, max_judged=3)
    services = Services(settings=tight, index=evidence_index, judge=scripted)
    claims = ["global warming causes", "sea level rise"]
    with pytest.raises(LimitExceededError) as refused:
        asyncio.run(averify_claims(services, claims, granularity="abstract", top_k=2))
    error = refused.value
    assert (error.status_code, error.limit, error.maximum, error.actual) == (
        413,
        "max_judged",
        3,
        4,
    )
    assert scripted.passages == []  # refused before any search or judgement


def test_averify_claims_judges_titled_passages_and_drops_nei_by_default(
    settings: ServerSettings, evidence_index: EvidenceIndex
) -> None:
    import asyncio

    # the judge supports a passage naming the title: only a titled passage can be supported
    judge = ScriptedJudge({"Carbon dioxide and warming": "supports"})
    services = Services(settings=settings, index=evidence_index, judge=judge)
    claims = ["CO2 drives global warming"]
    (items,) = asyncio.run(averify_claims(services, claims, granularity="abstract", top_k=4))
    titles = set(_corpus_bibliography())
    assert len(judge.passages) > len(items)  # some were not supported, and were dropped
    assert all(p.split(". ", 1)[0] in titles for p in judge.passages)
    assert [(i.title, i.label, i.probability) for i in items] == [
        ("Carbon dioxide and warming", "SUPPORTS", 0.9)
    ] * len(items)
    assert items


def test_an_index_answering_fewer_queries_than_asked_is_an_error_not_empty_evidence() -> None:
    from langchain_references.server.compat import _Plan, _selected

    plan = _Plan(["sea ice", " ", "bees"], [0, 2], fetch_k=3, top_k=3)
    hits = [_hit(1, 0.9)]
    assert [
        [r.num for r in c] for c in _selected(plan, [hits, hits], threshold=None, re_rank=False)
    ] == [
        [1],
        [],
        [1],
    ]
    with pytest.raises(ValueError, match="zip"):
        _selected(plan, [hits], threshold=None, re_rank=False)


def test_in_process_evidence_is_re_ranked_by_default(services: Services) -> None:
    import asyncio

    def titles(**options: Any) -> list[str]:
        (claim,) = asyncio.run(
            afind_evidence(
                services, ["CO2 drives global warming"], granularity="abstract", **options
            )
        )
        return [item.title for item in claim]

    by_citations = titles(top_k=5, re_rank=True)
    assert by_citations != titles(top_k=5, re_rank=False)
    assert titles(top_k=5) == by_citations
