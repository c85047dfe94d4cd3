"""Fixtures of the native endpoint and page tests: a landmarks index, apps, a live server.

Import the fixtures into a test module (``from tests.unit_tests.server._native_fixtures
import ...``); the ``embeddings`` and ``judge`` fixtures come from the package's conftest.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service needs the [server] extra")
pytest.importorskip("chromadb", reason="the evidence index needs the [server] extra")

import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.judges import Judge
from langchain_references.server.app import create_app
from langchain_references.server.factcheck_api import get_page_fetcher
from langchain_references.server.index import EvidenceIndex, parse_evidence_record
from langchain_references.server.services import Services
from langchain_references.server.settings import ServerSettings
from langchain_references.services.embeddings import MiniLMEmbeddings
from langchain_references.services.loading import load_records
from tests.unit_tests.server.conftest import free_port

NATIVE_CORPUS = Path(__file__).parent / "data" / "native_corpus.jsonl"
NATIVE_INDEX = "native-landmarks"

AppFactory = Callable[..., FastAPI]


@pytest.fixture(scope="session")
def native_index_dir(
    tmp_path_factory: pytest.TempPathFactory, embeddings: MiniLMEmbeddings
) -> Path:
    """An embedded Chroma directory with the landmarks corpus as ``native-landmarks``."""
    directory = tmp_path_factory.mktemp("native-index")
    index = EvidenceIndex.open(
        NATIVE_INDEX, persist_dir=directory, embeddings=embeddings, create=True
    )
    index.add_records(load_records(NATIVE_CORPUS, parse_evidence_record).records)
    return directory


@pytest.fixture(scope="session")
def native_index(native_index_dir: Path, embeddings: MiniLMEmbeddings) -> EvidenceIndex:
    """The landmarks index, opened once."""
    return EvidenceIndex.open(NATIVE_INDEX, persist_dir=native_index_dir, embeddings=embeddings)


@pytest.fixture
def native_settings(native_index_dir: Path) -> ServerSettings:
    """Settings of the landmarks index (default limits)."""
    return ServerSettings(index_name=NATIVE_INDEX, persist_dir=native_index_dir)


@pytest.fixture
def make_app(
    native_settings: ServerSettings, native_index: EvidenceIndex, judge: Judge
) -> AppFactory:
    """Build an app over the landmarks index: ``make_app(use_judge=..., search=..., **limits)``.

    ``allow_private=True`` lets the page fetcher reach 127.0.0.1 (the test sites).
    """

    def build(
        *,
        use_judge: Judge | None = None,
        search: Any = None,
        allow_private: bool = False,
        **limits: Any,
    ) -> FastAPI:
        settings = replace(native_settings, **limits)
        services = Services(
            settings=settings, index=native_index, judge=use_judge or judge, search=search
        )
        app = create_app(settings, services=services)
        if allow_private:
            app.dependency_overrides[get_page_fetcher] = lambda: PageFetcher(
                allow_private=True, timeout_s=5.0
            )
        return app

    return build


@pytest.fixture
def make_client(make_app: AppFactory) -> Iterator[Callable[..., TestClient]]:
    """``make_client(**make_app_kwargs)``: a TestClient of a fresh app (closed afterwards)."""
    clients: list[TestClient] = []

    def build(**kwargs: Any) -> TestClient:
        client = TestClient(make_app(**kwargs), base_url="http://localhost")
        clients.append(client)
        return client

    yield build
    for client in clients:
        client.close()


def parse_sse(body: str) -> list[tuple[str, dict[str, Any], str | None]]:
    """The events of an SSE body: ``(event, JSON data, id)``; comments skipped."""
    events: list[tuple[str, dict[str, Any], str | None]] = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        name, data, event_id = "message", [], None
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                event_id = value
        if data:
            events.append((name, json.loads("\n".join(data)), event_id))
    return events


class LiveServer:
    """A uvicorn server on 127.0.0.1 in a thread, for real HTTP and the browser."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
