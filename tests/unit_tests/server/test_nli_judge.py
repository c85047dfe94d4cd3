"""The service with ``judge="nli:MODEL"``: the setting, the workers' variable, the verdicts, /docs.

Runs the tiny cross-encoder built in ``tests/unit_tests/_tiny_nli.py`` (offline).
"""

from __future__ import annotations

import io
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from langchain_references.judges import CrossEncoderNLIJudge
from langchain_references.server.app import app_from_env, build_services, create_app
from langchain_references.server.index import EvidenceIndex
from langchain_references.server.settings import ServerSettings, SettingsError
from tests.unit_tests._tiny_nli import NAME, reference_probabilities, tiny_nli
from tests.unit_tests.server._native_fixtures import (
    NATIVE_INDEX,
    native_index,
    native_index_dir,
    native_settings,
)

__all__ = ["native_index", "native_index_dir", "native_settings", "tiny_nli"]

NLI = {"kind": "nli", "model": NAME, "description": "a cross-encoder NLI model"}
LABELS = ["REFUTES", "SUPPORTS", "NOT_ENOUGH_INFO"]
CLAIM = "The Eiffel Tower is 330 metres tall."


@pytest.fixture
def nli_client(native_settings: ServerSettings, native_index: EvidenceIndex, tiny_nli: Path) -> Any:
    settings = replace(native_settings, judge=f"nli:{tiny_nli}")
    services = build_services(settings, index=native_index)  # the judge of the setting
    with TestClient(create_app(settings, services=services), base_url="http://localhost") as c:
        yield c


def test_the_nli_setting_travels_to_the_workers(tiny_nli: Path) -> None:
    settings = ServerSettings(judge=f"nli:{tiny_nli}")
    env = settings.to_env()
    assert env["LANGCHAIN_REFERENCES_SERVER_JUDGE"] == f"nli:{tiny_nli}"
    assert ServerSettings.from_env(env) == settings
    assert ServerSettings(judge="nli:org/model@v1").judge == "nli:org/model@v1"  # unchecked here
    with pytest.raises(SettingsError) as caught:
        ServerSettings(judge="nli:")
    assert str(caught.value) == (
        "judge must be 'heuristic', 'heuristic-lexical', 'llm:PROVIDER:MODEL' or 'nli:MODEL', "
        "got 'nli:'"
    )


def test_a_worker_builds_the_nli_judge_from_the_environment(
    native_settings: ServerSettings, tiny_nli: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in replace(native_settings, judge=f"nli:{tiny_nli}").to_env().items():
        monkeypatch.setenv(name, value)
    app = app_from_env()  # what uvicorn calls in each worker
    services = app.state.services
    assert isinstance(services.judge, CrossEncoderNLIJudge)
    assert services.judge_info.to_dict() == NLI


def test_a_missing_model_in_the_setting_is_a_settings_error(
    native_settings: ServerSettings, native_index: EvidenceIndex, tmp_path: Path
) -> None:
    settings = replace(native_settings, judge=f"nli:{tmp_path / 'none'}")
    with pytest.raises(SettingsError) as caught:
        build_services(settings, index=native_index)
    assert str(caught.value) == (
        f"cannot load the judge nli:{tmp_path / 'none'}: no such model folder or .onnx file"
    )


def test_every_verified_item_is_judged_and_named_by_the_model(
    nli_client: TestClient, tiny_nli: Path
) -> None:
    response = nli_client.post("/api/phrase/verify?filter_nei=false", json={"claim": CLAIM})
    assert response.status_code == 200
    items = response.json()
    assert len(items) == 10  # the default top_k
    for item in items:
        assert item["judge"] == NLI
        title = item["title"].strip().rstrip(".")  # judged: "title. text" (include_title)
        passage = f"{title}. {item['text']}" if title else item["text"]
        want = reference_probabilities(tiny_nli, CLAIM, passage)
        assert item["label"] == LABELS[want.index(max(want))]
        assert item["probability"] == pytest.approx(max(want), rel=1e-6)


def test_the_native_verdicts_name_the_model(nli_client: TestClient) -> None:
    data = nli_client.post("/v1/factcheck", json={"statement": CLAIM, "top_k": 2}).json()
    assert data["judge"] == NLI
    article = nli_client.post("/v1/article", json={"text": CLAIM, "top_k": 1}).json()
    assert article["judge"] == NLI
    assert [claim["judge"] for claim in article["claims"]] == [NLI]


def test_the_docs_describe_the_judge_and_the_specs(nli_client: TestClient) -> None:
    description = nli_client.get("/openapi.json").json()["info"]["description"]
    assert description.splitlines()[2] == (
        f"**Judge of the verdicts**: nli ({NAME}) — a cross-encoder NLI model. Every verdict "
        "names it (a `judge` key: `kind`, `model`, `description`; an NLI judge is named after "
        "its model). The operator sets it with `langchain-references serve --judge SPEC`: "
        "`heuristic`, `heuristic-lexical`, `llm:PROVIDER:MODEL` or `nli:MODEL` (an ONNX "
        "cross-encoder: a local folder or `.onnx` file, or a Hugging Face Hub id)."
    )


# --------------------------------------------------------------------------- serve


def _serve_argv(native_index_dir: Path, judge: str, *more: str) -> list[str]:
    return [
        "serve", "--index", NATIVE_INDEX, "--persist-dir", str(native_index_dir),
        "--judge", judge, *more,
    ]  # fmt: skip


def test_serve_loads_a_relative_model_and_gives_the_workers_its_absolute_path(
    native_index_dir: Path, tiny_nli: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from langchain_references.cli import main

    started: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(app))
    monkeypatch.setattr(os, "environ", dict(os.environ))  # serve writes the workers' variables
    monkeypatch.chdir(tiny_nli.parent)
    out, err = io.StringIO(), io.StringIO()
    argv = _serve_argv(native_index_dir, f"nli:{NAME}", "--workers", "2")
    assert main(argv, out=out, err=err) == 0, err.getvalue()
    assert out.getvalue().splitlines()[1] == f"judge: nli ({NAME}) — a cross-encoder NLI model"
    assert started == ["langchain_references.server.app:app_from_env"]
    assert os.environ["LANGCHAIN_REFERENCES_SERVER_JUDGE"] == f"nli:{tiny_nli.absolute()}"


def test_serve_refuses_a_missing_model_in_one_line(native_index_dir: Path, tmp_path: Path) -> None:
    from langchain_references.cli import main

    missing = tmp_path / "none.onnx"
    out, err = io.StringIO(), io.StringIO()
    assert main(_serve_argv(native_index_dir, f"nli:{missing}"), out=out, err=err) == 2
    assert (out.getvalue(), err.getvalue()) == (
        "",
        f"error: --judge nli:{missing}: no such model folder or .onnx file\n",
    )
