"""Hostile requests: CPU-bound work off the event loop and bounded, JSON errors, hosts, logs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from langchain_references.server import article as article_module
from langchain_references.server.article import split_with_offsets
from langchain_references.server.settings import LimitExceededError
from tests.unit_tests.server._native_fixtures import (
    make_app,
    make_client,
    native_index,
    native_index_dir,
    native_settings,
)

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
