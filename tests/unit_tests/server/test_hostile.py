"""Hostile requests: CPU-bound work off the event loop and bounded, JSON errors, hosts, logs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient
from langchain_core.runnables import RunnableConfig

from langchain_references.judges import Judge, Judgement
from langchain_references.server import article as article_module
from langchain_references.server import compat
from langchain_references.server.app import create_app
from langchain_references.server.article import split_with_offsets
from langchain_references.server.guard import ClientDisconnectedError, guarded
from langchain_references.server.services import Services
from langchain_references.server.settings import LimitExceededError
from tests.unit_tests.server._native_fixtures import (
    make_app,
    make_client,
    native_index,
    native_index_dir,
    native_settings,
)
from tests.unit_tests.server.conftest import ScriptedJudge

__all__ = ["make_app", "make_client", "native_index", "native_index_dir", "native_settings"]

ClientFactory = Callable[..., TestClient]


# --------------------------------------------------------------------------- /v1/article


def test_splitting_stops_at_the_sentence_budget() -> None:
    text = "First one here. Second one here.\nThird one here. " + "a. " * 100_000
    with pytest.raises(LimitExceededError) as caught:
        split_with_offsets(text, max_sentences=3)
    assert (caught.value.limit, caught.value.maximum, caught.value.actual) == (
        "max_sentences",
        3,
        4,
    )
    assert [s.text for s in split_with_offsets(text[:48], max_sentences=3)] == [
        "First one here.",
        "Second one here.",
        "Third one here.",
    ]


def test_article_over_the_sentence_budget_is_a_413_naming_it(make_client: ClientFactory) -> None:
    client = make_client(max_sentences=50)
    response = client.post("/v1/article", json={"text": "a. " * 10_000})
    assert response.status_code == 413
    assert response.json() == {
        "detail": "max_sentences is 50, the request has 51",
        "limit": "max_sentences",
        "maximum": 50,
        "actual": 51,
    }


def on_event_loop() -> bool:
    """Whether the calling thread is running an event loop (a handler, not a worker thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_article_splitting_runs_off_the_event_loop(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    split = article_module._sentences_and_claims

    def recording(*args: Any) -> Any:
        seen.append(on_event_loop())
        return split(*args)

    monkeypatch.setattr(article_module, "_sentences_and_claims", recording)
    client = make_client()
    response = client.post("/v1/article", json={"text": "The Eiffel Tower is 330 metres tall."})
    assert response.status_code == 200
    assert [c["text"] for c in response.json()["claims"]] == [
        "The Eiffel Tower is 330 metres tall."
    ]
    assert seen == [False]


# --------------------------------------------------------------------------- verify budgets


class SlowJudge(ScriptedJudge):
    """A scripted judge that takes ``delay`` seconds per pair and counts its calls."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        time.sleep(self.delay)
        return super()._judge(statement, passage, config=config)


def _compat_client(services: Services, judge: Judge, **limits: Any) -> TestClient:
    settings = replace(services.settings, **limits)
    return TestClient(
        create_app(
            settings, services=Services(settings=settings, index=services.index, judge=judge)
        )
    )


def test_abstract_verify_over_the_judging_budget_is_a_413_and_judges_nothing(
    services: Services,
) -> None:
    judge = ScriptedJudge()
    client = _compat_client(services, judge, max_judged=5)
    claims = {"claims": ["sea level rise", "honey bees"], "top_k": 3}
    response = client.post("/api/abstract/verify/batch", json=claims)
    assert response.status_code == 413
    body = response.json()
    assert (body["limit"], body["maximum"]) == ("max_judged", 5)
    assert body["actual"] > 5
    assert judge.passages == []
    within = client.post(
        "/api/abstract/verify/batch?filter_nei=false",
        json={**claims, "claims": ["ice"], "top_k": 1},
    )
    assert within.status_code == 200
    assert len(judge.passages) == len(within.json()[0]) <= 5


def test_a_request_past_its_time_budget_is_a_503_and_its_judging_stops(
    services: Services,
) -> None:
    judge = SlowJudge(0.05)
    client = _compat_client(services, judge, max_request_seconds=1)
    claims = {"claims": [f"claim {i} about sea ice" for i in range(20)], "top_k": 10}
    response = client.post("/api/abstract/verify/batch?filter_nei=false", json=claims)
    assert response.status_code == 503
    assert response.json() == {
        "detail": response.json()["detail"],
        "limit": "max_request_seconds",
        "maximum": 1,
        "actual": response.json()["actual"],
    }
    judged = len(judge.passages)
    time.sleep(1.0)
    assert len(judge.passages) - judged <= compat.JUDGE_SLICE  # the slice in flight at most
    assert judged < 20 * 10  # stopped well before the end


async def test_guard_cancels_the_work_when_the_client_leaves() -> None:
    messages = iter([{"type": "http.request", "body": b""}, {"type": "http.disconnect"}])

    async def receive() -> dict[str, Any]:
        return next(messages)

    request = Request({"type": "http", "method": "POST", "headers": []}, receive)
    await request.body()
    cancelled = asyncio.Event()

    async def work() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "done"

    with pytest.raises(ClientDisconnectedError):
        await guarded(request, work(), seconds=60)
    assert cancelled.is_set()
