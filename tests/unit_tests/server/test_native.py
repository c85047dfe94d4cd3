"""The native endpoints over HTTP (TestClient): /v1/factcheck, /v1/article, /v1/answer."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from langchain_core.callbacks import adispatch_custom_event
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references.core.styles import MAX_TITLE_CHARS
from langchain_references.demo import answerer as answerer_module
from langchain_references.demo.answerer import split_sentences
from langchain_references.demo.site import serve_pages
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.result import PROGRESS_EVENT as FACTCHECK_PROGRESS
from langchain_references.factcheck.result import FactCheckProgress, FactCheckResult
from langchain_references.factcheck.search import RecordedSearch
from langchain_references.factcheck.verdict import Verdict
from langchain_references.server.article import is_claim, split_with_offsets
from langchain_references.server.factcheck_api import build_checker, check_stream
from langchain_references.server.index import EvidenceIndex, parse_evidence_record
from langchain_references.server.links import safe_reference
from langchain_references.server.services import Services
from langchain_references.server.settings import ServerSettings
from langchain_references.services.retrieval import Retrieval
from tests.unit_tests.factcheck.test_report import result as make_result
from tests.unit_tests.server._build_fakes import WordHashEmbeddings
from tests.unit_tests.server._native_fixtures import (
    LiveServer,
    make_app,
    make_client,
    native_index,
    native_index_dir,
    native_settings,
    parse_sse,
)
from tests.unit_tests.server.conftest import ScriptedJudge

__all__ = ["make_app", "make_client", "native_index", "native_index_dir", "native_settings"]

SSE = {"Accept": "text/event-stream"}
ClientFactory = Callable[..., TestClient]

ARTICLE = (
    "Landmarks\n"
    "The Eiffel Tower is 330 metres tall. Is it in Paris?\n\n"
    "The Statue of Liberty was a gift from France. Honey bees make honey from nectar."
)


# --------------------------------------------------------------------------- factcheck


def test_factcheck_json_is_the_chain_result(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client(use_judge=ScriptedJudge({"330 metres": "supports"}))
    with caplog.at_level("INFO", logger="langchain_references.server.factcheck_api"):
        response = client.post(
            "/v1/factcheck",
            json={"statement": "The Eiffel Tower is 330 metres tall.", "top_k": 3},
        )
    logged = [r.getMessage() for r in caplog.records if r.name.endswith(".factcheck_api")]
    assert logged == ["Checked a statement: supported"]
    assert response.status_code == 200
    result = FactCheckResult.model_validate(response.json())
    assert result.verdict.value == "supported"
    assert [e.url for e in result.supporting] == ["https://landmarks.example.org/eiffel-tower"]
    assert result.supporting[0].text == "The tower is 330 metres tall."
    assert result.counts.judged == 3
    # index entries are passages, not pages: nothing was fetched or extracted
    counts = result.counts
    assert (counts.hits, counts.fetched, counts.extracted, counts.passages) == (3, 0, 0, 3)
    assert result.neutral_count == 2
    assert list(result.timings) == ["search", "judge", "aggregate"]


def test_factcheck_streams_progress_then_the_same_result(make_client: ClientFactory) -> None:
    client = make_client(use_judge=ScriptedJudge({"Seattle": "supports"}))
    body = {"statement": "The Space Needle is in Seattle.", "top_k": 2}
    response = client.post("/v1/factcheck", json=body, headers=SSE)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    names = [name for name, _, _ in events]
    assert names == ["progress"] * 6 + ["result"]
    stages = [(data["stage"], data["done"]) for _, data, _ in events[:-1]]
    assert stages == [
        ("search", False),
        ("search", True),
        ("judge", False),
        ("judge", True),
        ("aggregate", False),
        ("aggregate", True),
    ]
    assert [event_id for _, _, event_id in events] == [str(i) for i in range(1, 8)]
    streamed = events[-1][1]
    plain = client.post("/v1/factcheck", json=body).json()
    for key in ("verdict", "confidence", "score", "supporting", "contradicting", "counts"):
        assert streamed[key] == plain[key]
    assert streamed["verdict"] == "supported"


def test_factcheck_judge_failure_is_an_error_verdict_not_a_500(
    make_client: ClientFactory,
) -> None:
    client = make_client(use_judge=ScriptedJudge({"": "explode"}))
    response = client.post("/v1/factcheck", json={"statement": "The Space Needle is in Seattle."})
    assert response.status_code == 200
    data = response.json()
    assert data["verdict"] == "error"
    assert data["error"].startswith("the judge failed on all")
    assert all(f["stage"] == "judge" for f in data["failed_sources"])


def test_factcheck_limits_answer_4xx_naming_the_limit(make_client: ClientFactory) -> None:
    client = make_client(max_claim_chars=40, max_top_k=5, default_top_k=2)
    too_long = client.post("/v1/factcheck", json={"statement": "The Eiffel Tower " * 5})
    assert too_long.status_code == 413
    assert too_long.json()["limit"] == "max_claim_chars"
    too_many = client.post("/v1/factcheck", json={"statement": "Paris.", "top_k": 6}, headers=SSE)
    assert too_many.status_code == 400
    assert too_many.json() == {
        "detail": "max_top_k is 5, the request has 6",
        "limit": "max_top_k",
        "maximum": 5,
        "actual": 6,
    }
    blank = client.post("/v1/factcheck", json={"statement": "   "})
    assert blank.status_code == 422


WEB_PAGE = (
    "<html><head><title>Tower facts</title></head><body><article>"
    "<p>The Eiffel Tower in Paris is 330 metres tall according to the city of Paris, which "
    "measured it again after the new antennas were added at the top.</p>"
    "<p>It is the most visited paid monument in the world, with millions of visitors every "
    "year climbing its stairs or taking its lifts.</p>"
    "</article></body></html>"
)


def test_factcheck_joins_web_and_index_evidence_and_survives_a_dead_url(
    make_client: ClientFactory,
) -> None:
    statement = "The Eiffel Tower is 330 metres tall."
    with serve_pages({"/tower.html": WEB_PAGE}) as base:
        search = RecordedSearch(
            {
                statement: [
                    {"title": "Tower facts", "snippet": "", "link": base + "tower.html"},
                    {"title": "Gone", "snippet": "", "link": base + "missing.html"},
                ]
            }
        )
        client = make_client(
            use_judge=ScriptedJudge({"330 metres": "supports"}), search=search, allow_private=True
        )
        data = client.post("/v1/factcheck", json={"statement": statement, "top_k": 2}).json()
    assert data["verdict"] == "supported"
    urls = {e["url"] for e in data["supporting"]}
    assert urls == {base + "tower.html", "https://landmarks.example.org/eiffel-tower"}
    dead = [f for f in data["failed_sources"] if f["stage"] == "fetch"]
    assert [f["url"] for f in dead] == [base + "missing.html"]
    assert "404" in dead[0]["reason"]
    assert data["counts"]["hits"] == 2 + 2  # two web hits, two index entries
    assert data["counts"]["judged"] == 2 + 2  # two web passages, two index entries


# --------------------------------------------------------------------------- article


@pytest.mark.parametrize(
    "text",
    [
        ARTICLE,
        "Same sentence here. Same sentence here.  Same sentence here.",
        "  Leading blanks. Émile Zola wrote novels 📚 in Paris. Dr. Smith agreed.\r\nNext line",
        "",
        "\n\n  \n",
    ],
)
def test_sentences_carry_exact_offsets(text: str) -> None:
    sentences = split_with_offsets(text)
    for i, sentence in enumerate(sentences):
        assert sentence.index == i
        assert text[sentence.start : sentence.end] == sentence.text
        assert sentence.text == sentence.text.strip()
        assert sentence.text
    starts = [s.start for s in sentences]
    assert starts == sorted(starts)
    assert "".join(text.split()) == "".join("".join(s.text for s in sentences).split())


def test_claims_are_the_check_worthy_sentences() -> None:
    sentences = split_with_offsets(ARTICLE)
    assert [(s.text, is_claim(s)) for s in sentences] == [
        ("Landmarks", False),
        ("The Eiffel Tower is 330 metres tall.", True),
        ("Is it in Paris?", False),
        ("The Statue of Liberty was a gift from France.", True),
        ("Honey bees make honey from nectar.", True),
    ]


def test_article_json_numbers_passages_by_source(make_client: ClientFactory) -> None:
    judge = ScriptedJudge({"Eiffel": "supports", "tower is 330": "supports", "184": "refutes"})
    client = make_client(use_judge=judge)
    response = client.post("/v1/article", json={"text": ARTICLE, "top_k": 3, "style": "text"})
    assert response.status_code == 200
    data = response.json()
    assert data["text"] == ARTICLE
    assert [s["claim"] for s in data["sentences"]] == [None, 0, None, 1, 2]
    assert data["counts"]["claims"] == 3
    eiffel = data["claims"][0]
    assert ARTICLE[eiffel["start"] : eiffel["end"]] == eiffel["text"]
    assert eiffel["verdict"] in {"supported", "refuted", "not_enough_evidence"}
    numbers = {(p["url"], p["number"]) for p in eiffel["passages"]}
    by_url: dict[str, set[int]] = {}
    for url, number in numbers:
        by_url.setdefault(url, set()).add(number)
    assert all(len(n) == 1 for n in by_url.values())  # one number per source
    assert sorted(n for (nums) in by_url.values() for n in nums) == list(range(1, len(by_url) + 1))
    eiffel_number = by_url["https://landmarks.example.org/eiffel-tower"]
    assert eiffel_number == {1}
    assert [p["stance"] for p in eiffel["passages"]][:2] == ["supports", "supports"]
    assert eiffel["references"][0] == {
        "number": 1,
        "source": "https://landmarks.example.org/eiffel-tower",
        "title": "The Eiffel Tower",
        "positions": [1, 2],
    }
    assert eiffel["references_text"].startswith(
        "- [1] The Eiffel Tower (https://landmarks.example.org/eiffel-tower)"
    )


def test_article_streams_each_claim_as_it_ends(make_client: ClientFactory) -> None:
    client = make_client(use_judge=ScriptedJudge({"honey": "supports"}))
    response = client.post("/v1/article", json={"text": ARTICLE, "top_k": 2}, headers=SSE)
    events = parse_sse(response.text)
    names = [name for name, _, _ in events]
    assert names[0] == "article"
    assert names[-1] == "result"
    assert set(names[1:-1]) == {"progress", "claim"}
    head = events[0][1]
    assert [c["text"] for c in head["claims"]] == [
        "The Eiffel Tower is 330 metres tall.",
        "The Statue of Liberty was a gift from France.",
        "Honey bees make honey from nectar.",
    ]
    claims = [data for name, data, _ in events if name == "claim"]
    assert sorted(c["id"] for c in claims) == [0, 1, 2]
    for claim in claims:
        progress = [d for n, d, _ in events if n == "progress" and d["claim"] == claim["id"]]
        assert [p["stage"] for p in progress] == [
            "search",
            "search",
            "judge",
            "judge",
            "aggregate",
            "aggregate",
        ]
        position = next(i for i, (n, d, _) in enumerate(events) if n == "claim" and d is claim)
        last_progress = max(
            i for i, (n, d, _) in enumerate(events) if n == "progress" and d["claim"] == claim["id"]
        )
        assert last_progress < position
    result = events[-1][1]
    assert [c["id"] for c in result["claims"]] == [0, 1, 2]
    assert result["claims"][2]["verdict"] == "supported"
    assert result["counts"]["verdicts"]["supported"] >= 1


def test_article_one_failing_claim_does_not_stop_the_others(make_client: ClientFactory) -> None:
    judge = ScriptedJudge({"gift": "explode", "honey": "supports"})
    client = make_client(use_judge=judge)
    data = client.post("/v1/article", json={"text": ARTICLE, "top_k": 1}).json()
    verdicts = {c["text"]: (c["verdict"], c["error"]) for c in data["claims"]}
    liberty = verdicts["The Statue of Liberty was a gift from France."]
    assert liberty[0] == "error"
    assert "judge failed" in liberty[1]
    assert verdicts["Honey bees make honey from nectar."] == ("supported", None)


def test_article_claims_carry_the_note_the_reports_show(make_client: ClientFactory) -> None:
    judge = ScriptedJudge({"gift": "explode", "honey": "supports"})
    data = (
        make_client(use_judge=judge).post("/v1/article", json={"text": ARTICLE, "top_k": 1}).json()
    )
    notes = {c["text"]: (c["verdict"], c["note"]) for c in data["claims"]}
    assert notes == {
        # no passage leans either way: the score beside the threshold, no "confidence 100%"
        "The Eiffel Tower is 330 metres tall.": ("not_enough_evidence", "score +0.00 < 0.30"),
        "The Statue of Liberty was a gift from France.": ("error", None),  # a reason instead
        "Honey bees make honey from nectar.": ("supported", "confidence 90%, score +0.90 ≥ 0.30"),
    }


def test_article_limits(make_client: ClientFactory) -> None:
    client = make_client(max_claims=2, max_article_chars=len(ARTICLE))
    too_many = client.post("/v1/article", json={"text": ARTICLE})
    assert too_many.status_code == 413
    assert too_many.json()["limit"] == "max_claims"
    assert too_many.json()["actual"] == 3
    too_long = client.post("/v1/article", json={"text": ARTICLE + "!"}, headers=SSE)
    assert too_long.status_code == 413
    assert too_long.json()["limit"] == "max_article_chars"
    both = client.post("/v1/article", json={"text": ARTICLE, "url": "https://a.example"})
    assert both.status_code == 422


ARTICLE_PAGE = (
    "<html><head><title>Two towers</title></head><body><article>"
    "<h1>Two towers</h1>"
    "<p>The Space Needle is an observation tower in Seattle. It was built for the 1962 "
    "World's Fair in Seattle, which drew millions of visitors to the city.</p>"
    "</article></body></html>"
)


def test_article_from_url_through_the_guarded_fetcher(make_client: ClientFactory) -> None:
    with serve_pages({"/towers.html": ARTICLE_PAGE}) as base:
        allowed = make_client(use_judge=ScriptedJudge({"Seattle": "supports"}), allow_private=True)
        data = allowed.post("/v1/article", json={"url": base + "towers.html", "top_k": 1}).json()
        refused = make_client().post("/v1/article", json={"url": base + "towers.html"})
        dead = allowed.post("/v1/article", json={"url": base + "gone.html"})
    assert data["url"] == base + "towers.html"
    assert data["title"] == "Two towers"
    assert "The Space Needle is an observation tower in Seattle." in data["text"]
    assert data["claims"][0]["verdict"] == "supported"
    assert refused.status_code == 422
    assert refused.json()["code"] == "fetch_failed"
    assert "loopback" in refused.json()["detail"]
    assert dead.status_code == 422
    assert "404" in dead.json()["detail"]


def test_article_never_links_unsafe_urls(make_client: ClientFactory) -> None:
    client = make_client(use_judge=ScriptedJudge({"Markup": "supports"}))
    text = "Markup such as script tags in an evidence passage must be shown as text."
    data = client.post("/v1/article", json={"text": text, "top_k": 1, "style": "html"}).json()
    (claim,) = data["claims"]
    (passage,) = claim["passages"]
    assert passage["url"] is None
    assert passage["title"].startswith("<img src=x onerror=alert(1)>")
    assert "javascript:" not in claim["references_text"]
    assert "&lt;img" in claim["references_text"]


#: A page title with bidi controls (U+202E reverses what follows), C0/C1 controls and 100 KB.
HOSTILE_TITLE = "\u202eTower\u202c \u2066facts\u2069\u200e\u200f\x07\x85 " + "A" * 100_000


def test_article_titles_lose_control_and_bidi_characters_and_are_capped(
    make_client: ClientFactory,
) -> None:
    statement = "The Eiffel Tower is 330 metres tall."
    page = WEB_PAGE.replace("<title>Tower facts</title>", f"<title>{HOSTILE_TITLE}</title>")
    with serve_pages({"/tower.html": page, "/article.html": page}) as base:
        hit = {"title": HOSTILE_TITLE, "snippet": "", "link": base + "tower.html"}
        search = RecordedSearch({statement: [hit]})
        client = make_client(
            use_judge=ScriptedJudge({"330 metres": "supports"}), search=search, allow_private=True
        )
        data = client.post("/v1/article", json={"text": statement, "top_k": 1}).json()
        fetched = client.post("/v1/article", json={"url": base + "article.html"}).json()
    shown = "Tower facts " + "A" * (MAX_TITLE_CHARS - len("Tower facts ") - 1) + "…"
    assert len(shown) == MAX_TITLE_CHARS == 300
    (claim,) = data["claims"]
    web = [r for r in claim["references"] if r["source"] == base + "tower.html"]
    assert web == [
        {
            "number": web[0]["number"],
            "source": base + "tower.html",
            "title": shown,
            "positions": web[0]["positions"],
        }
    ]
    passages = [p for p in claim["passages"] if p["url"] == base + "tower.html"]
    assert [p["title"] for p in passages] == [shown] * len(passages)
    assert f"[{shown}]({base}tower.html)" in claim["references_text"]
    assert fetched["title"] == shown


def test_reference_json_titles_lose_bidi_and_control_characters() -> None:
    reference = {"number": 1, "source": None, "positions": [1]}
    titled = safe_reference({**reference, "title": "\u202eevil\u202c\u2066 \x1b[31mred\x9b"})
    assert titled == {**reference, "title": "evil red"}
    assert safe_reference({**reference, "title": HOSTILE_TITLE})["title"] == (
        "Tower facts " + "A" * 287 + "…"
    )
    assert safe_reference({**reference, "title": "\u202e\u202c"})["title"] is None
    assert safe_reference({**reference, "title": None})["title"] is None


# --------------------------------------------------------------------------- answer


def test_answer_json_is_cited(make_client: ClientFactory) -> None:
    client = make_client()
    response = client.post(
        "/v1/answer", json={"question": "How tall is the Space Needle?", "top_k": 3}
    )
    assert response.status_code == 200
    data = response.json()
    assert data["answer"].startswith("The Space Needle is 184 metres tall <sup>[[1](")
    assert data["answer"].endswith(
        "- **1** [The Space Needle](https://landmarks.example.org/space-needle)"
    )
    assert data["references"] == [
        {
            "number": 1,
            "source": "https://landmarks.example.org/space-needle",
            "title": "The Space Needle",
            "positions": [1],
        }
    ]
    assert next(d["record_id"] for d in data["documents"]) == "needle"
    assert data["citation_check"] is None
    assert data["answerer"] == {
        "kind": "extractive",
        "model": None,
        "description": "copies the documents' sentences closest to the question, each cited: "
        "not a generative model",
    }


def test_answer_streams_tokens_that_join_to_the_answer(make_client: ClientFactory) -> None:
    client = make_client()
    body: dict[str, Any] = {
        "question": "How tall is the Space Needle?",
        "top_k": 3,
        "style": "numbers",
        "check_citations": True,
    }
    events = parse_sse(client.post("/v1/answer", json=body, headers=SSE).text)
    names = [name for name, _, _ in events]
    assert names[0] == "documents"
    assert names[-2:] == ["references", "result"]
    assert events[0][1]["answerer"]["kind"] == "extractive"  # named before the answer
    assert events[-1][1]["answerer"] == events[0][1]["answerer"]
    tokens = [data["text"] for name, data, _ in events if name == "token"]
    assert len(tokens) > 3
    result = events[-1][1]
    assert "".join(tokens) == result["answer"] == "The Space Needle is 184 metres tall [1]."
    check = events[-2][1]["citation_check"]
    assert check["num_sentences"] == 1
    assert check["citation_recall"] == result["citation_check"]["citation_recall"]


def test_answer_splits_documents_off_the_event_loop(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, bool]] = []

    def recording(text: str) -> list[str]:
        try:
            asyncio.get_running_loop()
            calls.append((text[:20], True))
        except RuntimeError:
            calls.append((text[:20], False))
        return split_sentences(text)

    monkeypatch.setattr(answerer_module, "split_sentences", recording)
    client = make_client()
    body = {"question": "How tall is the Space Needle?", "top_k": 3}
    assert client.post("/v1/answer", json=body).status_code == 200
    assert len(calls) == 3  # one call per document, none on the event loop
    assert [on_loop for _, on_loop in calls] == [False, False, False]
    events = parse_sse(client.post("/v1/answer", json=body, headers=SSE).text)
    assert events[-1][0] == "result"
    assert [on_loop for _, on_loop in calls] == [False] * 6


def test_a_slow_answer_leaves_the_health_check_responsive(
    make_app: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()

    def slow_split(text: str) -> list[str]:
        started.set()
        time.sleep(3.0)  # stands for seconds of splitting a huge document
        return split_sentences(text)

    monkeypatch.setattr(answerer_module, "split_sentences", slow_split)
    body = {"question": "How tall is the Space Needle?", "top_k": 1}
    with (
        LiveServer(make_app()) as server,
        httpx.Client(base_url=server.base_url, timeout=60) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        answer = pool.submit(client.post, "/v1/answer", json=body)
        assert started.wait(30)
        before = time.monotonic()
        health = client.get("/healthcheck")
        latency = time.monotonic() - before
        assert health.status_code == 200
        assert latency < 1.5, latency  # 3 s when the splitting held the event loop
        assert answer.result().status_code == 200


def test_native_endpoints_are_in_the_openapi_docs(make_client: ClientFactory) -> None:
    schema = make_client().get("/openapi.json").json()
    for path in ("/v1/factcheck", "/v1/article", "/v1/answer"):
        content = schema["paths"][path]["post"]["responses"]["200"]["content"]
        assert "text/event-stream" in content
    assert "/" not in schema["paths"]


# --------------------------------------------------------------------------- unsafe links


def test_factcheck_json_never_carries_an_unsafe_url(make_client: ClientFactory) -> None:
    client = make_client(use_judge=ScriptedJudge({"Markup": "supports"}))
    statement = "Markup such as script tags in an evidence passage must be shown as text."
    for headers in ({}, SSE):
        response = client.post(
            "/v1/factcheck", json={"statement": statement, "top_k": 1}, headers=headers
        )
        assert response.status_code == 200
        data = response.json() if not headers else parse_sse(response.text)[-1][1]
        (evidence,) = data["supporting"]
        assert evidence["url"] == ""  # the record's javascript: URL is dropped
        assert evidence["title"].startswith("<img src=x onerror=alert(1)>")
        assert "javascript:" not in response.text


def test_answer_references_never_carry_an_unsafe_source(make_client: ClientFactory) -> None:
    client = make_client()
    question = "Must browsers run code found in retrieved passages?"
    response = client.post("/v1/answer", json={"question": question, "top_k": 1})
    assert response.status_code == 200
    data = response.json()
    assert data["documents"][0]["record_id"] == "xss"
    assert data["documents"][0]["url"] is None
    assert data["references"] == [
        {
            "number": 1,
            "source": None,
            "title": "<img src=x onerror=alert(1)> Markup in titles",
            "positions": [1],
        }
    ]
    assert "javascript:" not in response.text


def test_article_references_never_carry_an_unsafe_source(make_client: ClientFactory) -> None:
    client = make_client(use_judge=ScriptedJudge({"Markup": "supports"}))
    text = "Markup such as script tags in an evidence passage must be shown as text."
    response = client.post("/v1/article", json={"text": text, "top_k": 1})
    (claim,) = response.json()["claims"]
    assert claim["references"] == [
        {
            "number": 1,
            "source": None,
            "title": "<img src=x onerror=alert(1)> Markup in titles",
            "positions": [1],
        }
    ]
    assert "javascript:" not in response.text


def test_the_service_checker_gives_the_same_result_on_both_drivers(services: Services) -> None:
    checker = build_checker(services, k=3)
    statement = "The Eiffel Tower is 330 metres tall."

    sync = checker.invoke(statement)
    async_ = asyncio.run(checker.ainvoke(statement))

    def comparable(result: FactCheckResult) -> dict[str, Any]:
        return result.model_dump(exclude={"timings", "total_s"})

    assert comparable(sync) == comparable(async_)
    assert (sync.counts.hits, sync.counts.fetched, sync.counts.judged) == (3, 0, 3)
    assert sync.verdict is not Verdict.ERROR


def test_a_check_that_ends_without_a_result_is_an_error_after_its_progress() -> None:
    """A pipeline whose run ends without a FactCheckResult (a programming error) is never
    shown as a result: its progress events pass, then check_stream raises naming the cause."""
    progress = FactCheckProgress(statement="Paris.", stage="search", done=False)

    async def no_result(statement: str) -> str:
        await adispatch_custom_event(FACTCHECK_PROGRESS, progress)
        return "not a result"

    items: list[Any] = []

    async def run() -> None:
        async for item in check_stream(RunnableLambda(no_result), "Paris."):  # type: ignore[arg-type]
            items.append(item)

    with pytest.raises(RuntimeError) as raised:
        asyncio.run(run())
    assert str(raised.value) == "the fact-check pipeline ended without a result"
    assert items == [progress]


def _collect(checker: Any, statement: str) -> list[Any]:
    async def run() -> list[Any]:
        return [item async for item in check_stream(checker, statement)]

    return asyncio.run(run())


def test_only_the_fact_check_progress_events_are_streamed() -> None:
    """A custom event of another name is not progress, even when it carries a progress."""
    ours = FactCheckProgress(statement="Paris.", stage="search", done=False)
    other = FactCheckProgress(statement="Paris.", stage="fetch", done=False)
    final = make_result(statement="Paris.")

    async def check(statement: str) -> Any:
        await adispatch_custom_event("other_progress", other)
        await adispatch_custom_event(FACTCHECK_PROGRESS, ours)
        return final

    assert _collect(RunnableLambda(check), "Paris.") == [ours, final]


def test_the_result_is_the_whole_runs_output_not_an_inner_steps() -> None:
    """An inner runnable that returns a result along the way does not stand for the run's."""
    draft = make_result(statement="Paris.", verdict=Verdict.REFUTED)
    final = make_result(statement="Paris.", verdict=Verdict.SUPPORTED)
    inner = RunnableLambda(lambda _: draft)

    async def check(statement: str, config: RunnableConfig) -> Any:
        await inner.ainvoke(statement, config)
        return final

    assert _collect(RunnableLambda(check), "Paris.") == [final]


class RecordingEmbeddings(WordHashEmbeddings):
    """Word-hash embeddings that record the documents they embed."""

    def __init__(self) -> None:
        super().__init__()
        self.documents: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return super().embed_documents(texts)


GLACIERS = "Glaciers in the Alps are melting fast."
# the closer by cosine (it shares the statement's words, however common) ...
ALPS = (
    "In the Alps the peaks are in the sun and the valleys are in the shade; the Alps are in "
    "the heart of the continent and the Alps are the pride of the region in the summer."
)
# ... and the closer by BM25 (it shares the statement's rarer words)
SURVEY = (
    "Scientists who surveyed valleys over long years report that glaciers melting fast worry "
    "everyone, from farmers to skiers to engineers building dams downstream today."
)
BEES = "Honey bees make honey from nectar."


def test_the_web_passages_are_ranked_by_the_index_model_and_the_servers_retrieval(
    tmp_path: Path,
) -> None:
    """With a web back-end the relevance stage embeds the web passages with the index's
    model (the service's one model, whatever it is) and ranks them as the settings'
    ``retrieval`` says; without one the checker has no relevance stage and no model."""
    model = RecordingEmbeddings()
    records = [parse_evidence_record({"id": "bees", "title": "Bees", "text": BEES})]
    EvidenceIndex.build("web-idx", records, persist_dir=tmp_path, embeddings=model)
    index = EvidenceIndex.open("web-idx", persist_dir=tmp_path, embeddings=model)
    settings = ServerSettings(index_name="web-idx", persist_dir=tmp_path)
    fetcher = PageFetcher(allow_private=True, timeout_s=5.0)
    with serve_pages({"/alps.txt": ALPS, "/survey.txt": SURVEY}) as base:
        hits = [
            {"title": name, "snippet": "", "link": f"{base}{name}.txt"}
            for name in ("alps", "survey")
        ]
        search = RecordedSearch({GLACIERS: hits})

        def judged(retrieval: Retrieval) -> list[str]:
            """The passages judged with k=1: the web passage kept, and the index's entry."""
            judge = ScriptedJudge()
            services = Services(
                settings=replace(settings, retrieval=retrieval),
                index=index,
                judge=judge,
                search=search,
            )
            build_checker(services, k=1, fetcher=fetcher).invoke(GLACIERS)
            return sorted(judge.passages)  # judged concurrently: in no set order

        model.documents.clear()
        assert judged("dense") == sorted([ALPS, BEES])
        assert sorted(model.documents) == sorted([ALPS, SURVEY])
        assert judged("bm25") == sorted([SURVEY, BEES])

    index_only = build_checker(Services(settings=settings, index=index, judge=ScriptedJudge()), k=1)
    assert index_only.embeddings is None


def test_an_llm_answerer_is_named_by_its_model() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from langchain_references.server.answer import answerer_info

    class Named(GenericFakeChatModel):
        model_name: str = "gpt-4o-mini\u202e\x00"

    assert answerer_info(Named(messages=iter([]))) == {
        "kind": "llm",
        "model": "gpt-4o-mini",
        "description": None,
    }
    assert answerer_info(GenericFakeChatModel(messages=iter([])))["model"] == (
        "GenericFakeChatModel"
    )
