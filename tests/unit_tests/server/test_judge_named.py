"""Every verdict the service answers names its judge: native ``/v1/*`` and compatible ``/api/*``.

The compatible API keeps the reference's keys and adds ``judge``; the native documents carry
it on every verdict (a fact-check result, each claim, the citation check). ``serve --judge``
(the ``judge`` setting) chooses the judge; the start-up line names it.
"""

from __future__ import annotations

import argparse
import io
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage, BaseMessage

from langchain_references.judges import HeuristicJudge, LLMJudge
from langchain_references.server import app as app_module
from langchain_references.server.app import build_services
from langchain_references.server.index import EvidenceIndex
from langchain_references.server.settings import ServerSettings, SettingsError
from tests.unit_tests.fakes import ChatScripted, tool_reply
from tests.unit_tests.server._native_fixtures import (
    make_app,
    make_client,
    native_index,
    native_index_dir,
    native_settings,
    parse_sse,
)
from tests.unit_tests.server.conftest import ScriptedJudge
from tests.unit_tests.server.test_compat import EVIDENCE_KEYS

__all__ = ["make_app", "make_client", "native_index", "native_index_dir", "native_settings"]

ClientFactory = Callable[..., TestClient]
HEURISTIC = {
    "kind": "heuristic",
    "model": None,
    "description": "offline heuristic (word overlap and similarity), not an NLI model: rough; "
    "set an LLM judge for real checks",
}
LLM = {
    "kind": "llm",
    "model": "scripted:judge-x",
    "description": "a chat model asked for a label, its confidence and a rationale",
}
SCRIPTED = {"kind": "custom", "model": None, "description": "custom judge ScriptedJudge"}
REFERENCE_KEYS = EVIDENCE_KEYS | {"label", "probability"}


def entails_tower(messages: list[BaseMessage]) -> AIMessage:
    passage = messages[-1].text.split("<passage>")[-1]
    label = "entails" if "330 metres" in passage else "unknown"
    return tool_reply("JudgeReply", label=label, confidence=0.8, rationale=label)


def llm_judge() -> LLMJudge:
    model = ChatScripted(model="judge-x", script=[entails_tower] * 200)
    return LLMJudge(model, retry_wait=False)


# --------------------------------------------------------------------------- compatible API


@pytest.mark.parametrize("granularity", ["phrase", "abstract"])
def test_every_verified_item_names_the_offline_judge(client: TestClient, granularity: str) -> None:
    single = client.post(f"/api/{granularity}/verify?filter_nei=false", json={"claim": "sea ice"})
    batch = client.post(
        f"/api/{granularity}/verify/batch?filter_nei=false",
        json={"claims": ["sea ice", "coral reefs"], "top_k": 2},
    )
    assert single.status_code == batch.status_code == 200
    items = [*single.json(), *(i for claim in batch.json() for i in claim)]
    assert items
    for item in items:
        assert set(item) >= REFERENCE_KEYS  # the reference's keys are all there
        assert item["label"] in {"SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO"}
        assert item["judge"] == HEURISTIC


def test_the_evidence_endpoints_judge_nothing_and_name_no_judge(client: TestClient) -> None:
    items = client.post("/api/phrase/evidence", json={"claim": "sea ice"}).json()
    assert items
    assert all("judge" not in item for item in items)


def test_a_verified_item_names_a_scripted_llm_judge_and_its_model(
    make_client: ClientFactory,
) -> None:
    client = make_client(use_judge=llm_judge())
    items = client.post(
        "/api/phrase/verify?filter_nei=false",
        json={"claim": "The Eiffel Tower is 330 metres tall.", "top_k": 2},
    ).json()
    assert [i["label"] for i in items][:1] == ["SUPPORTS"]
    assert [i["judge"] for i in items] == [LLM] * len(items)


# --------------------------------------------------------------------------- native API


def test_factcheck_json_and_events_name_the_judge(make_client: ClientFactory) -> None:
    client = make_client()
    body = {"statement": "The Eiffel Tower is 330 metres tall.", "top_k": 2}
    assert client.post("/v1/factcheck", json=body).json()["judge"] == HEURISTIC
    events = parse_sse(
        client.post("/v1/factcheck", json=body, headers={"Accept": "text/event-stream"}).text
    )
    assert events[-1][0] == "result"
    assert events[-1][1]["judge"] == HEURISTIC


def test_a_factcheck_verdict_of_a_scripted_llm_judge_names_kind_llm_and_its_model(
    make_client: ClientFactory,
) -> None:
    client = make_client(use_judge=llm_judge())
    data = client.post(
        "/v1/factcheck", json={"statement": "The Eiffel Tower is 330 metres tall.", "top_k": 2}
    ).json()
    assert data["verdict"] == "supported"
    assert data["judge"] == LLM


def test_the_article_and_each_claim_name_the_judge(make_client: ClientFactory) -> None:
    client = make_client(use_judge=ScriptedJudge({"gift": "explode", "honey": "supports"}))
    article = "The Statue of Liberty was a gift from France. Honey bees make honey from nectar."
    data = client.post("/v1/article", json={"text": article, "top_k": 1}).json()
    assert data["judge"] == SCRIPTED
    assert [(c["verdict"], c["judge"]) for c in data["claims"]] == [
        ("error", SCRIPTED),  # a claim that could not be checked names the judge too
        ("supported", SCRIPTED),
    ]
    events = parse_sse(
        client.post(
            "/v1/article",
            json={"text": article, "top_k": 1},
            headers={"Accept": "text/event-stream"},
        ).text
    )
    assert events[0][0] == "article"
    assert events[0][1]["judge"] == SCRIPTED  # before any verdict, for the page's badge
    assert {d["judge"]["kind"] for n, d, _ in events if n == "claim"} == {"custom"}


def test_the_citation_check_of_an_answer_names_the_judge(make_client: ClientFactory) -> None:
    client = make_client()
    body = {"question": "How tall is the Space Needle?", "top_k": 3, "check_citations": True}
    data = client.post("/v1/answer", json=body).json()
    assert data["citation_check"]["judge"] == HEURISTIC
    assert all(s["judge"] == HEURISTIC for s in data["citation_check"]["sentences"])


# --------------------------------------------------------------------------- the judge setting


def test_the_judge_setting_is_checked_and_travels_to_the_workers() -> None:
    settings = ServerSettings(judge="llm:openai:gpt-4o-mini")
    env = settings.to_env()
    assert env["LANGCHAIN_REFERENCES_SERVER_JUDGE"] == "llm:openai:gpt-4o-mini"
    assert ServerSettings.from_env(env) == settings
    assert ServerSettings().judge == "heuristic"
    with pytest.raises(
        SettingsError,
        match="judge must be 'heuristic', 'heuristic-lexical', 'llm:PROVIDER:MODEL' or "
        "'nli:MODEL', got 'oracle'",
    ):
        ServerSettings(judge="oracle")


def test_the_services_run_the_judge_of_the_setting(
    native_settings: ServerSettings, native_index: EvidenceIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    lexical = build_services(
        ServerSettings(**{**native_settings.__dict__, "judge": "heuristic-lexical"}),
        index=native_index,
    )
    assert isinstance(lexical.judge, HeuristicJudge)
    assert lexical.judge.embeddings is None
    assert lexical.judge_info.kind == "heuristic"

    loaded: list[str] = []

    def load(name: str) -> ChatScripted:
        loaded.append(name)
        return ChatScripted(model=name.partition(":")[2])

    monkeypatch.setattr(app_module, "load_judge_model", load)
    llm = build_services(
        ServerSettings(**{**native_settings.__dict__, "judge": "llm:scripted:judge-x"}),
        index=native_index,
    )
    assert loaded == ["scripted:judge-x"]
    assert llm.judge_info.to_dict() == LLM


def _serve(argv: list[str]) -> argparse.Namespace:
    from langchain_references.cli import build_parser

    return build_parser().parse_args(["serve", *argv])


def test_serve_names_its_judge_on_start_up(
    native_index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from langchain_references.cli import serve

    started: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(app))
    args = _serve(
        [
            "--index",
            "native-landmarks",
            "--persist-dir",
            str(native_index_dir),
            "--judge",
            "heuristic-lexical",
        ]
    )
    out = io.StringIO()
    assert serve.run(args, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[1] == f"judge: heuristic (no model) — {HEURISTIC['description']}"
    (app,) = started
    assert isinstance(app.state.services.judge, HeuristicJudge)
    assert app.state.services.judge.embeddings is None  # the judge of --judge, built once


def test_serve_refuses_an_llm_judge_without_its_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_references.cli import main

    def init_chat_model(name: str, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before its API key was checked")

    chat_models = types.ModuleType("langchain.chat_models")
    chat_models.init_chat_model = init_chat_model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain", types.ModuleType("langchain"))
    monkeypatch.setitem(sys.modules, "langchain.chat_models", chat_models)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    err = io.StringIO()
    argv = ["serve", "--index", "abc", "--persist-dir", str(tmp_path), "--judge"]
    assert main([*argv, "llm:openai:gpt-4o"], out=io.StringIO(), err=err) == 2
    assert err.getvalue() == (
        "error: --judge llm:openai:gpt-4o needs an API key: set the environment variable "
        "OPENAI_API_KEY (it is not set)\n"
    )
    err = io.StringIO()
    assert main([*argv, "oracle"], out=io.StringIO(), err=err) == 2
    assert err.getvalue() == (
        "error: judge must be 'heuristic', 'heuristic-lexical', 'llm:PROVIDER:MODEL' or "
        "'nli:MODEL', got 'oracle'\n"
    )
