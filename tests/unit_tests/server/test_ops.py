"""Operational behaviour: limits, auth, CORS, request ids, errors, settings, a real uvicorn."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from langchain_references.server.app import create_app
from langchain_references.server.index import EvidenceIndex
from langchain_references.server.services import Services
from langchain_references.server.settings import (
    ENV_PREFIX,
    LimitExceededError,
    ServerSettings,
    SettingsError,
)

from .conftest import free_port


def _client(services: Services, **changes: Any) -> TestClient:
    settings = ServerSettings(
        index_name=services.settings.index_name,
        persist_dir=services.settings.persist_dir,
        **changes,
    )
    return TestClient(create_app(settings, services=services), base_url="http://localhost")


# ------------------------------------------------------------------ limits


def test_body_size_limit_by_content_length(services: Services) -> None:
    client = _client(services, max_body_bytes=200)
    response = client.post("/api/phrase/evidence", json={"claim": "x" * 300})
    assert response.status_code == 413
    body = response.json()
    assert body["limit"] == "max_body_bytes"
    assert body["maximum"] == 200
    assert "max_body_bytes" in body["detail"]
    assert client.post("/api/phrase/evidence", json={"claim": "sea", "top_k": 1}).status_code == 200


def test_body_size_limit_while_streaming(services: Services) -> None:
    client = _client(services, max_body_bytes=100)

    def chunks() -> Iterator[bytes]:
        yield b'{"claim": "'
        for _ in range(10):
            yield b"x" * 20
        yield b'"}'

    response = client.post(
        "/api/phrase/evidence", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert "max_body_bytes" in response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "body", "limit", "status"),
    [
        ("/api/phrase/evidence/batch", {"claims": ["a", "b", "c", "d"]}, "max_claims", 413),
        ("/api/phrase/verify", {"claim": "a", "top_k": 21}, "max_top_k", 400),
        ("/api/phrase/verify", {"claim": "a", "top_k": 0}, "min_top_k", 400),
        ("/api/abstract/evidence", {"claim": "a" * 51}, "max_claim_chars", 413),
        ("/api/split", {"text": "b" * 101}, "max_article_chars", 413),
    ],
)
def test_request_limits_answer_json_naming_the_limit(
    services: Services, path: str, body: dict[str, Any], limit: str, status: int
) -> None:
    client = _client(
        services,
        max_claims=3,
        max_top_k=20,
        max_claim_chars=50,
        max_article_chars=100,
    )
    response = client.post(path, json=body)
    assert response.status_code == status
    payload = response.json()
    assert payload["limit"] == limit
    assert limit in payload["detail"]


def test_limits_at_the_boundary_pass(services: Services) -> None:
    client = _client(services, max_claims=3, max_top_k=20, max_article_chars=100)
    ok = client.post("/api/phrase/evidence/batch", json={"claims": ["a", "b", "c"], "top_k": 20})
    assert ok.status_code == 200
    assert client.post("/api/split", json={"text": "b" * 100}).status_code == 200


# ------------------------------------------------------------------ auth


def test_bearer_token(services: Services) -> None:
    client = _client(services, api_key="s3cret")
    body = {"claim": "sea", "top_k": 1}
    missing = client.post("/api/phrase/evidence", json=body)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {"detail": "missing or invalid bearer token"}
    wrong = client.post("/api/phrase/evidence", json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    basic = client.post(
        "/api/phrase/evidence", json=body, headers={"Authorization": "Basic s3cret"}
    )
    assert basic.status_code == 401
    good = client.post(
        "/api/phrase/evidence", json=body, headers={"Authorization": "Bearer s3cret"}
    )
    assert good.status_code == 200
    assert client.get("/healthcheck").status_code == 200  # public
    assert client.get("/openapi.json").status_code == 200  # public


def test_no_auth_without_key(client: TestClient) -> None:
    response = client.post("/api/phrase/evidence", json={"claim": "sea", "top_k": 1})
    assert response.status_code == 200


# ------------------------------------------------------------------ CORS


def test_cors_is_off_by_default(client: TestClient) -> None:
    response = client.get("/healthcheck", headers={"Origin": "https://example.org"})
    assert "access-control-allow-origin" not in response.headers
    preflight = client.options(
        "/api/phrase/evidence",
        headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_for_configured_origins(services: Services) -> None:
    client = _client(services, cors_origins=("https://example.org",), api_key="k")
    preflight = client.options(
        "/api/phrase/evidence",
        headers={
            "Origin": "https://example.org",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    assert preflight.status_code == 200  # no token needed for a preflight
    assert preflight.headers["access-control-allow-origin"] == "https://example.org"
    response = client.get("/healthcheck", headers={"Origin": "https://example.org"})
    assert response.headers["access-control-allow-origin"] == "https://example.org"
    other = client.get("/healthcheck", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


# ------------------------------------------------------------------ request ids, pids, logs


def test_request_ids_are_echoed_or_made(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="langchain_references.server.app"):
        given = client.get("/healthcheck", headers={"X-Request-ID": "req-42"})
    assert given.headers["x-request-id"] == "req-42"
    assert given.headers["x-worker-pid"] == str(os.getpid())
    assert any(
        "req-42" in r.getMessage() and "/healthcheck" in r.getMessage() for r in caplog.records
    )
    made = client.get("/healthcheck")
    assert len(made.headers["x-request-id"]) == 32
    unsafe = client.get("/healthcheck", headers={"X-Request-ID": "bad id\twith spaces"})
    assert unsafe.headers["x-request-id"] != "bad id\twith spaces"
    assert made.headers["x-request-id"] != unsafe.headers["x-request-id"]


def test_request_id_filter_sets_the_record_attribute() -> None:
    from langchain_references.server.app import RequestIdFilter

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    assert RequestIdFilter().filter(record)
    assert record.request_id == "-"  # outside a request


# ------------------------------------------------------------------ errors


class _BrokenCollection:
    """Every Chroma call fails (query, get, count: whichever the retrieval mode uses)."""

    name = "broken__g1"

    def __getattr__(self, method: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("disk on fire")

        return fail


def test_index_failure_is_a_503(services: Services) -> None:
    broken = EvidenceIndex(
        _BrokenCollection(),  # type: ignore[arg-type]
        services.index.embeddings,
        name="broken",
        location="nowhere",
    )
    settings = services.settings
    client = TestClient(
        create_app(
            settings, services=Services(settings=settings, index=broken, judge=services.judge)
        ),
        base_url="http://localhost",
    )
    response = client.post("/api/phrase/evidence", json={"claim": "x"})
    assert response.status_code == 503
    assert "disk on fire" in response.json()["detail"]
    assert client.get("/healthcheck").status_code == 200


def test_docs_are_served(client: TestClient) -> None:
    response = client.get("/docs")
    assert response.status_code == 200
    assert "swagger" in response.text.lower()


# ------------------------------------------------------------------ settings


def test_settings_round_trip_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "abc")
    settings = ServerSettings(
        index_name="idx",
        chroma_url="http://127.0.0.1:9",
        max_claims=7,
        api_key="abc",
        api_key_env="MY_KEY",
        cors_origins=("https://a.example", "https://b.example"),
        search_backend="ddgs",
    )
    env = settings.to_env()
    assert "abc" not in env.values()  # the key travels by its variable's name only
    assert env[ENV_PREFIX + "API_KEY_ENV"] == "MY_KEY"
    assert ServerSettings.from_env({**env, "MY_KEY": "abc"}) == settings
    with pytest.raises(SettingsError, match="MY_KEY"):
        ServerSettings.from_env(env)


@pytest.mark.parametrize(
    "changes",
    [
        {"max_claims": 0},
        {"max_top_k": True},
        {"default_top_k": 50, "max_top_k": 10},
        {"index_name": " "},
        {"persist_dir": "x", "chroma_url": "http://h:1"},
        {"api_key": "  "},
    ],
)
def test_invalid_settings(changes: dict[str, Any]) -> None:
    with pytest.raises(SettingsError):
        ServerSettings(**changes)


def test_limit_checks() -> None:
    settings = ServerSettings(max_top_k=5, default_top_k=3)
    assert settings.check_top_k(None) == 3
    assert settings.check_top_k(5) == 5
    with pytest.raises(LimitExceededError) as info:
        settings.check_top_k(6)
    assert (info.value.limit, info.value.maximum, info.value.actual) == ("max_top_k", 5, 6)


# ------------------------------------------------------------------ a real uvicorn


def test_real_uvicorn_on_localhost(settings: ServerSettings, services: Services) -> None:
    port = free_port()
    config = uvicorn.Config(
        create_app(settings, services=services), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as http:
            assert http.get("/healthcheck").json() == "Seems to be running"
            response = http.post(
                "/api/phrase/verify/batch?filter_nei=false",
                json={"claims": ["sea level rise", "honey bees"], "top_k": 2},
                headers={"X-Request-ID": "live-1"},
            )
            assert response.status_code == 200
            assert response.headers["x-request-id"] == "live-1"
            assert [len(items) for items in response.json()] == [2, 2]
            too_big = http.post("/api/split", content=b"x" * 2_000_000)
            assert too_big.status_code == 413
    finally:
        server.should_exit = True
        thread.join(timeout=10)
