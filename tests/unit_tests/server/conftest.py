"""Fixtures of the service tests: a small corpus, its index, the services and a client."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service needs the [server] extra")
pytest.importorskip("chromadb", reason="the evidence index needs the [server] extra")

from fastapi.testclient import TestClient
from langchain_core.runnables import RunnableConfig

from langchain_references.judges import Judge, Judgement, Label, offline_judge
from langchain_references.judges.heuristic import HeuristicJudge
from langchain_references.server.app import create_app
from langchain_references.server.index import EvidenceIndex, parse_evidence_record
from langchain_references.server.services import Services
from langchain_references.server.settings import ServerSettings
from langchain_references.services.embeddings import MiniLMEmbeddings, shared_minilm
from langchain_references.services.loading import load_records

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus.jsonl"
INDEX_NAME = "test-corpus"


@pytest.fixture(scope="session")
def embeddings() -> MiniLMEmbeddings:
    """The offline MiniLM embeddings, loaded once: the process's one (the judge's too)."""
    return shared_minilm()


@pytest.fixture(scope="session")
def judge(embeddings: MiniLMEmbeddings) -> HeuristicJudge:
    """The offline judge, loaded once."""
    return offline_judge()


@pytest.fixture
def corpus_path() -> Path:
    """The small corpus: 8 records, with and without citation metadata."""
    return CORPUS


@pytest.fixture(scope="session")
def built_index_dir(tmp_path_factory: pytest.TempPathFactory, embeddings: MiniLMEmbeddings) -> Path:
    """An embedded Chroma directory holding the corpus as the index ``test-corpus``."""
    directory = tmp_path_factory.mktemp("index")
    index = EvidenceIndex.open(
        INDEX_NAME, persist_dir=directory, embeddings=embeddings, create=True
    )
    loaded = load_records(CORPUS, parse_evidence_record)
    index.add_records(loaded.records)
    return directory


@pytest.fixture
def index_copy(built_index_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the built index directory (for tests that write)."""
    target = tmp_path / "index"
    shutil.copytree(built_index_dir, target)
    return target


@pytest.fixture(scope="session")
def evidence_index(built_index_dir: Path, embeddings: MiniLMEmbeddings) -> EvidenceIndex:
    """The built index, opened read-only."""
    return EvidenceIndex.open(INDEX_NAME, persist_dir=built_index_dir, embeddings=embeddings)


@pytest.fixture
def settings(built_index_dir: Path) -> ServerSettings:
    """Default settings pointing at the built index."""
    return ServerSettings(index_name=INDEX_NAME, persist_dir=built_index_dir)


@pytest.fixture
def services(
    settings: ServerSettings, evidence_index: EvidenceIndex, judge: HeuristicJudge
) -> Services:
    """The services over the built index with the offline judge."""
    return Services(settings=settings, index=evidence_index, judge=judge)


@pytest.fixture
def client(settings: ServerSettings, services: Services) -> Iterator[TestClient]:
    """A TestClient of the application with default settings."""
    with TestClient(
        create_app(settings, services=services), base_url="http://localhost"
    ) as test_client:
        yield test_client


class ScriptedJudge(Judge):
    """A judge whose verdict is chosen by words of the passage; it records every passage.

    ``supports`` -> entails (0.9), ``refutes`` -> contradicts (0.8), ``explode`` -> raises,
    anything else -> unknown (0.6).
    """

    def __init__(self, words: Mapping[str, str] | None = None) -> None:
        self.words = dict(words or {})
        self.passages: list[str] = []
        self._lock = threading.Lock()

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self._lock:
            self.passages.append(passage)
        for word, verdict in self.words.items():
            if word.lower() in passage.lower():
                if verdict == "explode":
                    raise RuntimeError(f"judge exploded on {word!r}")
                if verdict == "supports":
                    return Judgement(label=Label.ENTAILS, confidence=0.9)
                if verdict == "refutes":
                    return Judgement(label=Label.CONTRADICTS, confidence=0.8)
        return Judgement(label=Label.UNKNOWN, confidence=0.6)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


#: Debian's browser, which Playwright drives (it cannot download its own here).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for the page tests (skipped where it is not installed)."""
    if shutil.which("chromium") is None and not shutil.which(CHROMIUM):
        pytest.skip("Chromium is not installed: apt-get install -y chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
