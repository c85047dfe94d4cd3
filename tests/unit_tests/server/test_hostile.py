"""Hostile requests: CPU-bound work off the event loop and bounded, JSON errors, hosts, logs."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import Request
from fastapi.testclient import TestClient
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references.demo import answerer as answerer_module
from langchain_references.demo.answerer import ExtractiveAnswerer
from langchain_references.judges import Judgement
from langchain_references.server import article as article_module
from langchain_references.server import compat
from langchain_references.server.answer import get_answer_model
from langchain_references.server.app import EscapingFormatter, create_app
from langchain_references.server.article import split_with_offsets
from langchain_references.server.guard import ClientDisconnectedError, guarded
from langchain_references.server.index import EvidenceIndex, split_sentences
from langchain_references.server.services import Services
from langchain_references.server.settings import LimitExceededError
from tests.unit_tests.server._native_fixtures import (
    make_app,
    make_client,
    native_index,
    native_index_dir,
    native_settings,
    parse_sse,
)
from tests.unit_tests.server.conftest import ScriptedJudge, free_port

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


def test_splitting_reads_no_more_than_a_window_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pysbd

    from langchain_references.citations.sentences import SEGMENT_WINDOW

    read: list[int] = []
    real = pysbd.Segmenter.processor

    def counting(self: pysbd.Segmenter, text: str) -> Any:
        read.append(len(text))
        return real(self, text)

    monkeypatch.setattr(pysbd.Segmenter, "processor", counting)
    with pytest.raises(LimitExceededError):
        split_with_offsets("a. " * 100_000, max_sentences=200)  # 300,000 characters
    assert read == [SEGMENT_WINDOW]  # 333 sentences: the first window is past the budget
    read.clear()
    with pytest.raises(LimitExceededError):
        split_with_offsets("Sea level rises.\n" * 10_000, max_sentences=200)  # a line each
    assert read == [16] * 201


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


def test_article_splitting_runs_in_the_cpu_worker_process(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[tuple[Any, ...]] = []
    real = article_module.run_cpu_bound

    async def recording(function: Callable[..., Any], *args: Any) -> Any:
        handed.append((function, *args))
        return await real(function, *args)

    monkeypatch.setattr(article_module, "run_cpu_bound", recording)
    client = make_client()
    response = client.post("/v1/article", json={"text": "The Eiffel Tower is 330 metres tall."})
    assert response.status_code == 200
    assert [c["text"] for c in response.json()["claims"]] == [
        "The Eiffel Tower is 330 metres tall."
    ]
    assert handed == [
        (
            article_module._sentences_and_claims,
            "The Eiffel Tower is 330 metres tall.",
            client.app.state.services.settings.max_sentences,  # type: ignore[attr-defined]
        )
    ]


def test_api_split_runs_in_the_cpu_worker_process(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[tuple[Any, ...]] = []
    real = compat.run_cpu_bound

    async def recording(function: Callable[..., Any], *args: Any) -> Any:
        handed.append((function, *args))
        return await real(function, *args)

    monkeypatch.setattr(compat, "run_cpu_bound", recording)
    client = TestClient(
        create_app(services.settings, services=services), base_url="http://localhost"
    )
    response = client.post("/api/split", json={"text": "Sea level rises. Ice melts."})
    assert response.json() == ["Sea level rises.", "Ice melts."]
    assert handed == [(compat.split_sentences, "Sea level rises. Ice melts.")]


# --------------------------------------------------------------------------- verify budgets


class SlowJudge(ScriptedJudge):
    """A scripted judge that takes ``delay`` seconds per pair and counts its calls."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        time.sleep(self.delay)
        return super()._judge(statement, passage, config=config)


def _compat_client(services: Services, judge: Any, **limits: Any) -> TestClient:
    settings = replace(services.settings, **limits)
    return TestClient(
        create_app(
            settings, services=Services(settings=settings, index=services.index, judge=judge)
        ),
        base_url="http://localhost",
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
    # the request's own top_k counts, not the server's default: 2 claims x 1 entry is within
    two = client.post(
        "/api/abstract/verify/batch?filter_nei=false",
        json={"claims": ["ice", "honey bees"], "top_k": 1},
    )
    assert two.status_code == 200
    assert len(two.json()) == 2


def test_a_verify_request_that_may_meet_the_budget_exactly_is_answered(
    services: Services,
) -> None:
    """One claim with a top_k past the index's size judges each sentence entry once:
    exactly the budget when the budget is the number of entries, which is allowed."""
    entries = services.index.count("phrase")
    settings = {"max_judged": entries, "max_top_k": entries + 1}
    client = _compat_client(services, ScriptedJudge(), **settings)
    body = {"claims": ["sea level rise"], "top_k": entries + 1}
    response = client.post("/api/phrase/verify/batch?filter_nei=false", json=body)
    assert response.status_code == 200, response.json()
    assert len(response.json()[0]) == entries


def _recorded_queries(services: Services, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The queries the index embeds from now on, in order (they are still embedded)."""
    embedded: list[str] = []
    embeddings = services.index.embeddings
    embed_query = embeddings.embed_query

    def counting(text: str) -> list[float]:
        embedded.append(text)
        return embed_query(text)

    monkeypatch.setattr(embeddings, "embed_query", counting)
    return embedded


def test_a_verify_request_sure_to_exceed_the_budget_embeds_nothing(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 claims x top_k 10 is at least 1,000 pairs: refused before its 100 queries are
    embedded (their embedding used to hold the threads that other searches wait for)."""
    embedded = _recorded_queries(services, monkeypatch)
    judge = ScriptedJudge()
    client = _compat_client(services, judge, max_judged=100)
    claims = [f"claim {i} on sea ice" for i in range(100)]
    response = client.post("/api/abstract/verify/batch", json={"claims": claims, "top_k": 10})
    assert response.status_code == 413
    assert response.json()["limit"] == "max_judged"
    assert response.json()["actual"] == 100 * min(10, services.index.count("abstract"))
    assert response.json()["maximum"] == 100
    assert embedded == []
    # with a threshold the count is only known after the search: checked there
    thresholded = client.post(
        "/api/abstract/verify/batch", json={"claims": claims, "top_k": 10, "threshold": -1.0}
    )
    assert thresholded.status_code == 413
    assert len(embedded) == 100
    # within the budget by the count before the search: searched and judged
    within = client.post("/api/phrase/verify/batch", json={"claims": claims[:10], "top_k": 10})
    assert within.status_code == 200
    assert len(embedded) == 110
    assert judge.passages != []


def test_the_early_refusal_counts_the_requests_own_top_k_not_the_default(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count before the search uses the top_k the request asks for: a request within the
    budget by its own top_k is answered even when the server's default would exceed it, and
    one over it by its own top_k is refused before any query is embedded, even when the
    default would be within it."""
    embedded = _recorded_queries(services, monkeypatch)
    assert services.index.count("phrase") > 3
    path = "/api/phrase/verify/batch?filter_nei=false"
    judge = ScriptedJudge()
    claims = ["sea level rise", "honey bees", "glaciers"]
    generous = _compat_client(services, judge, max_judged=5, default_top_k=3)
    within = generous.post(path, json={"claims": claims[:2], "top_k": 2})
    assert within.status_code == 200, within.json()
    assert [len(items) for items in within.json()] == [2, 2]
    assert len(embedded) == 2
    strict = _compat_client(services, judge, max_judged=5, default_top_k=1)
    over = strict.post(path, json={"claims": claims, "top_k": 2})
    assert over.status_code == 413
    assert (over.json()["limit"], over.json()["maximum"], over.json()["actual"]) == (
        "max_judged",
        5,
        3 * 2,
    )
    assert len(embedded) == 2  # refused before its searches


def test_in_process_a_verify_call_sure_to_exceed_the_budget_is_refused_naming_the_count(
    services: Services,
) -> None:
    """averify_claims over the index itself (not the live index the app wraps it in): the
    count before the search reads the index's size of the granularity asked for."""
    assert isinstance(services.index, EvidenceIndex)
    entries = services.index.count("abstract")
    tight = Services(
        settings=replace(services.settings, max_judged=entries),
        index=services.index,
        judge=ScriptedJudge(),
    )
    claims = ["sea ice", "honey bees"]
    with pytest.raises(LimitExceededError) as raised:
        asyncio.run(compat.averify_claims(tight, claims, granularity="abstract", top_k=entries + 1))
    error = raised.value
    assert (error.limit, error.maximum, error.actual, error.status_code) == (
        "max_judged",
        entries,
        2 * entries,
        413,
    )


def test_a_verify_call_whose_sentences_exceed_the_budget_is_refused_with_their_count(
    services: Services,
) -> None:
    """The early count passes (2 entries per claim fit), the abstracts' sentences do not."""
    claims = ["sea ice", "honey bees"]
    evidence = asyncio.run(compat.afind_evidence(services, claims, granularity="abstract", top_k=2))
    sentences = sum(len(split_sentences(item.text)) for claim in evidence for item in claim)
    assert sentences > 4
    judge = ScriptedJudge()
    tight = Services(
        settings=replace(services.settings, max_judged=4),
        index=services.index,
        judge=judge,
    )
    with pytest.raises(LimitExceededError) as raised:
        asyncio.run(compat.averify_claims(tight, claims, granularity="abstract", top_k=2))
    error = raised.value
    assert (error.limit, error.maximum, error.actual, error.status_code) == (
        "max_judged",
        4,
        sentences,
        413,
    )
    assert judge.passages == []


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


class SlowEmbeddings(Embeddings):
    """Bag-of-words vectors that take ``delay`` seconds per text; records when each was done."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.done: list[float] = []  # time.monotonic() at the end of each text
        self.lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            time.sleep(self.delay)
            with self.lock:
                self.done.append(time.monotonic())
            vectors.append(self.embed_query(text))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        lowered = text.lower()
        return [float(lowered.count(word)) for word in ("tall", "metres", "tower", "built")]

    def after(self, moment: float) -> int:
        """How many texts were embedded after ``moment``."""
        with self.lock:
            return sum(1 for done in self.done if done > moment)


def _slow_answer_client(
    make_client: ClientFactory, embeddings: SlowEmbeddings, batch: int
) -> TestClient:
    client = make_client(max_request_seconds=1)
    model = ExtractiveAnswerer(embeddings=embeddings, embedding_batch_size=batch)
    client.app.dependency_overrides[get_answer_model] = lambda: model  # type: ignore[attr-defined]
    return client


#: Sentences of the 7 landmarks records (the answerer embeds each).
LANDMARK_SENTENCES = 20


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_past_its_time_budget_stops_embedding(
    make_client: ClientFactory, stream: bool
) -> None:
    embeddings = SlowEmbeddings(0.1)  # 2 s for every sentence: past the 1 s budget
    client = _slow_answer_client(make_client, embeddings, batch=4)
    body = {"question": "How tall is the Space Needle?", "top_k": 7}
    headers = {"Accept": "text/event-stream"} if stream else {}
    response = client.post("/v1/answer", json=body, headers=headers)
    answered = time.monotonic()
    if stream:
        assert response.status_code == 200
        events = parse_sse(response.text)
        assert [name for name, _, _ in events] == ["documents", "error"]
        error = events[-1][1]
    else:
        assert response.status_code == 503
        error = response.json()
    assert error == {
        "detail": f"max_request_seconds is 1, the request has {error['actual']}",
        "code": "limit_exceeded",
        "limit": "max_request_seconds",
        "maximum": 1,
        "actual": error["actual"],
    }
    assert error["actual"] == 2  # ended within the second past the budget
    time.sleep(1.5)  # what the answer would still embed
    assert embeddings.after(answered) <= 4  # the batch in flight at most
    assert len(embeddings.done) < LANDMARK_SENTENCES  # stopped before the end


async def test_a_cancelled_answer_stops_splitting_before_the_next_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    split: list[str] = []
    splitting = threading.Event()

    def slow_split(text: str) -> list[str]:
        splitting.set()
        time.sleep(0.2)
        split.append(text)
        return [text]

    monkeypatch.setattr(answerer_module, "split_sentences", slow_split)
    documents = "".join(f"<document id={i}>Bees make honey {i}.</document>" for i in range(1, 21))
    messages = [SystemMessage(documents), HumanMessage("What do bees make?")]
    task = asyncio.create_task(ExtractiveAnswerer().ainvoke(messages))
    assert await asyncio.to_thread(splitting.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(1.0)  # five more documents' time
    assert split == ["Bees make honey 1."]  # the one in flight, then nothing


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


# --------------------------------------------------------------------------- hosts, logs


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost", 200),
        ("127.0.0.1:8000", 200),
        ("[::1]:8000", 200),
        ("LOCALHOST", 200),
        ("evil.example", 400),  # DNS rebinding: a page of evil.example resolved to 127.0.0.1
        ("localhost.evil.example", 400),
        ("", 400),
    ],
)
def test_only_allowed_hosts_are_answered(services: Services, host: str, status: int) -> None:
    client = _compat_client(services, services.judge)
    response = client.get("/healthcheck", headers={"Host": host})
    assert response.status_code == status
    if status == 400:
        assert response.json() == {
            "detail": f"host {host!r} is not allowed",
            "limit": "allowed_hosts",
        }
    else:
        assert response.json() == "Seems to be running"


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example@localhost",  # userinfo: a URL parser's host is "localhost"
        "localhost@attacker.example",
        "@localhost",
        "localhost:8000@attacker.example",
        "localhost:",
        "localhost:99999",
        "localhost:80:80",
        "localhost:http",
        "localhost/evil",
        "localhost?x=1",
        "localhost#x",
        "local host",
        " localhost",
        "localhost%2e",
        "::1",  # IPv6 without brackets
        "[::1",
        "[::1]x",
        "[::1]:",
        "[zz::1]",
        "[localhost]",
        "localhost.",
        ".localhost",
    ],
)
def test_malformed_hosts_are_refused(services: Services, host: str) -> None:
    client = _compat_client(services, services.judge)
    response = client.get("/healthcheck", headers={"Host": host})
    assert response.status_code == 400
    assert response.json() == {"detail": f"host {host!r} is not allowed", "limit": "allowed_hosts"}


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost", ("localhost",)),
        ("localhost:65535", ("localhost",)),
        ("LocalHost:1", ("localhost",)),
        ("127.0.0.1", ("127.0.0.1",)),
        ("[::1]", ("::1",)),
        ("[0:0:0:0:0:0:0:1]:8000", ("::1",)),
        ("my_service:8000", ("my_service",)),
        ("a.example.org", ("*.example.org",)),
    ],
)
def test_well_formed_hosts_are_answered(
    services: Services, host: str, allowed: tuple[str, ...]
) -> None:
    client = _compat_client(services, services.judge, allowed_hosts=allowed)
    response = client.get("/healthcheck", headers={"Host": host})
    assert (response.status_code, response.json()) == (200, "Seems to be running")


async def test_exactly_one_host_header_is_answered(services: Services) -> None:
    app = create_app(services.settings, services=services)

    async def status(*hosts: bytes) -> tuple[int, bytes]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/healthcheck",
            "raw_path": b"/healthcheck",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", host) for host in hosts],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
        }
        await app(scope, receive, send)  # type: ignore[arg-type]
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return sent[0]["status"], body

    assert await status(b"localhost") == (200, b'"Seems to be running"')
    assert await status(b"localhost", b"localhost") == (
        400,
        b'{"detail": "host \'localhost, localhost\' is not allowed", "limit": "allowed_hosts"}',
    )
    assert await status(b"localhost", b"attacker.example") == (
        400,
        b'{"detail": "host \'localhost, attacker.example\' is not allowed", '
        b'"limit": "allowed_hosts"}',
    )
    assert (await status())[0] == 400


def test_allowed_hosts_are_configurable(services: Services) -> None:
    client = _compat_client(services, services.judge, allowed_hosts=("*.example.org", "api.test"))
    assert client.get("/healthcheck", headers={"Host": "a.example.org"}).status_code == 200
    assert client.get("/healthcheck", headers={"Host": "api.test:443"}).status_code == 200
    assert client.get("/healthcheck", headers={"Host": "localhost"}).status_code == 400
    assert client.get("/healthcheck", headers={"Host": "example.org.evil"}).status_code == 400


def test_serve_allows_the_loopback_names_and_its_own_host() -> None:
    from langchain_references.cli import build_parser
    from langchain_references.cli.serve import settings_from_args

    def hosts(*argv: str) -> tuple[str, ...]:
        args = build_parser().parse_args(["serve", "--index", "abc", *argv])
        return settings_from_args(args).allowed_hosts

    assert hosts() == ("localhost", "127.0.0.1", "::1")
    assert hosts("--host", "0.0.0.0") == ("localhost", "127.0.0.1", "::1")
    assert hosts("--host", "10.0.0.5") == ("localhost", "127.0.0.1", "::1", "10.0.0.5")
    assert hosts("--allowed-host", "api.test", "--host", "0.0.0.0") == ("api.test",)


def test_a_line_feed_in_the_path_cannot_forge_a_log_line(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    client = _compat_client(services, services.judge, api_key="k")
    with caplog.at_level(logging.INFO, logger="langchain_references.server.app"):
        response = client.get("/x%0A2026-01-01 INFO forged%0D")
    assert response.status_code == 401
    (line,) = [r.getMessage() for r in caplog.records if "forged" in r.getMessage()]
    assert "\n" not in line
    assert "\r" not in line
    assert "/x\\n2026-01-01 INFO forged\\r 401" in line


def test_the_service_formatter_escapes_every_message() -> None:
    from langchain_references.cli.serve import log_config

    config = log_config("info")["formatters"]["service"]
    formatter = EscapingFormatter(config["format"].replace("%(request_id)s", "-"))
    record = logging.LogRecord("x", logging.INFO, "f", 1, "title %s", ("a\nb\x1b[31m",), None)
    assert config["()"] == "langchain_references.server.app.EscapingFormatter"
    assert formatter.format(record).endswith("x: title a\\nb\\x1b[31m")


# --------------------------------------------------------------------------- shutdown


def test_serve_gives_requests_in_flight_a_bounded_grace_on_sigterm(
    native_index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from langchain_references.cli import build_parser, serve

    started: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(kwargs))
    argv = ["serve", "--index", "native-landmarks", "--persist-dir", str(native_index_dir)]
    assert serve.run(build_parser().parse_args(argv), out=io.StringIO()) == 0
    assert (
        serve.run(build_parser().parse_args([*argv, "--graceful-timeout", "2"]), out=io.StringIO())
        == 0
    )
    assert [kwargs["timeout_graceful_shutdown"] for kwargs in started] == [5, 2]


def test_shutdown_cancels_a_long_request_within_the_grace(services: Services) -> None:
    judge = SlowJudge(0.05)
    settings = replace(services.settings, max_request_seconds=600)
    app = create_app(
        settings, services=Services(settings=settings, index=services.index, judge=judge)
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    claims = {"claims": [f"claim {i} about sea ice" for i in range(20)], "top_k": 10}
    failures: list[BaseException] = []

    def long_request() -> None:
        try:
            httpx.post(
                f"http://127.0.0.1:{port}/api/abstract/verify/batch", json=claims, timeout=60
            )
        except httpx.HTTPError as exc:
            failures.append(exc)

    client = threading.Thread(target=long_request, daemon=True)
    client.start()
    while not judge.passages:
        assert time.monotonic() < deadline, "the request did not start judging"
        time.sleep(0.05)
    server.should_exit = True  # what uvicorn's SIGTERM handler does
    thread.join(timeout=10)
    assert not thread.is_alive(), "the server did not stop"
    judged = len(judge.passages)
    time.sleep(0.5)
    assert len(judge.passages) - judged <= compat.JUDGE_SLICE
    assert judged < 20 * 10
    client.join(timeout=10)


# --------------------------------------------------------------------------- JSON errors

_SURROGATE = b'"bad \\ud800 text"'  # valid JSON; a lone surrogate once decoded


@pytest.mark.parametrize(
    ("path", "body", "location"),
    [
        ("/api/split", b'{"text": %s}', ["body", "text"]),
        ("/api/phrase/evidence", b'{"claim": %s}', ["body", "claim"]),
        ("/api/abstract/verify/batch", b'{"claims": ["ok", %s]}', ["body", "claims", 1]),
        ("/v1/factcheck", b'{"statement": %s}', ["body", "statement"]),
        ("/v1/article", b'{"text": %s}', ["body", "text"]),
        ("/v1/answer", b'{"question": %s}', ["body", "question"]),
    ],
)
def test_a_lone_surrogate_is_a_422_naming_the_field(
    make_client: ClientFactory, path: str, body: bytes, location: list[Any]
) -> None:
    client = make_client()
    response = client.post(
        path, content=body % _SURROGATE, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == location
    # ours, or pydantic's own when a pattern constraint reads the string first
    assert error["msg"] in (
        "Value error, holds a lone surrogate (U+D800) at character 4",
        "Input should be a valid string, unable to parse raw data as a unicode string",
    )


def test_an_unexpected_failure_is_a_json_500(make_app: Callable[..., Any]) -> None:
    app = make_app()

    @app.get("/boom")
    async def boom() -> None:
        raise KeyError("secret internals")

    client = TestClient(app, base_url="http://localhost", raise_server_exceptions=False)
    response = client.get("/boom")
    assert response.status_code == 500
    assert response.json() == {
        "detail": "the request failed on the server",
        "code": "internal_error",
    }


def test_a_judge_runnable_that_raises_is_a_failed_item_with_no_confidence(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    """A judge that is any runnable (not a Judge, which records its own errors) raising:
    each pair it raised on is NOT_ENOUGH_INFO with probability 0 and the error, logged."""

    def explode(pair: Any) -> Judgement:
        raise RuntimeError("judge exploded")

    client = _compat_client(services, RunnableLambda(explode))
    body = {"claims": ["sea level rise"], "top_k": 1}
    with caplog.at_level("WARNING", logger="langchain_references.server.compat"):
        response = client.post("/api/phrase/verify/batch?filter_nei=false", json=body)
    assert response.status_code == 200
    ((item,),) = response.json()
    assert (item["label"], item["probability"]) == ("NOT_ENOUGH_INFO", 0.0)
    assert item["error"] == "RuntimeError: judge exploded"
    logged = [r.getMessage() for r in caplog.records if r.name.endswith(".compat")]
    assert logged == ["judging failed: RuntimeError: judge exploded"]


def test_verified_items_refuses_judgements_that_do_not_match_the_units() -> None:
    judgement = Judgement(label="entails", confidence=0.9)
    with pytest.raises(ValueError, match="zip"):
        compat.verified_items([], [judgement], filter_nei=False)
