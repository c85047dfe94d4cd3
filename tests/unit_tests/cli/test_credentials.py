"""A model that needs an API key is checked before any work: one line naming the variable."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel

from langchain_references.cli import _models, main
from langchain_references.cli import factcheck as factcheck_cli
from langchain_references.cli._errors import CLIError
from langchain_references.cli._models import API_KEY_VARIABLES, check_api_key
from tests.unit_tests.conftest import REPO_ROOT

ALL_VARIABLES = sorted({v for variables in API_KEY_VARIABLES.values() for v in variables})


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ALL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A fake ``langchain.chat_models``: records the models ``init_chat_model`` loads."""
    names: list[str] = []

    def init_chat_model(name: str, **kwargs: Any) -> GenericFakeChatModel:
        names.append(name)
        return GenericFakeChatModel(messages=iter(["ok"]))

    module = types.ModuleType("langchain.chat_models")
    module.init_chat_model = init_chat_model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain", types.ModuleType("langchain"))
    monkeypatch.setitem(sys.modules, "langchain.chat_models", module)
    return names


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def missing(given: str, variable: str) -> str:
    return (
        f"error: {given} needs an API key: set the environment variable {variable} (it is not set)"
    )


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    record = {
        "input": "Where is Paris?",
        "output": "Paris is in France.",
        "atoms": [{"id": "a0", "text": "Paris is in France.", "contexts": ["c0"]}],
        "contexts": [{"id": "c0", "title": "Paris", "text": "Paris is in France."}],
    }
    answer = {"answer": "Paris is in France [1](id=1).", "documents": [{"page_content": "x"}]}
    (tmp_path / "records.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    (tmp_path / "answers.jsonl").write_text(json.dumps(answer) + "\n", encoding="utf-8")
    return {"records": str(tmp_path / "records.jsonl"), "answers": str(tmp_path / "answers.jsonl")}


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize(
    ("argv", "given", "variable"),
    [
        (
            ["factcheck", "x", "--search", "demo", "--judge", "llm:openai:gpt-4o-mini"],
            "--judge llm:openai:gpt-4o-mini",
            "OPENAI_API_KEY",
        ),
        (["demo", "--model", "anthropic:claude-3-5-haiku-latest"], None, "ANTHROPIC_API_KEY"),
        (["demo", "--model", "gpt-4o-mini"], None, "OPENAI_API_KEY"),  # provider inferred
        (
            ["factuality", "--input", "{records}", "--judge", "llm:mistralai:mistral-small"],
            "--judge llm:mistralai:mistral-small",
            "MISTRAL_API_KEY",
        ),
        (
            ["citations", "--input", "{answers}", "--judge", "llm:google_genai:gemini-2.0-flash"],
            "--judge llm:google_genai:gemini-2.0-flash",
            "GOOGLE_API_KEY",
        ),
        (
            ["citations", "--input", "{answers}", "--judge", "llm:perplexity:sonar"],
            "--judge llm:perplexity:sonar",
            "PPLX_API_KEY",
        ),
    ],
)
def test_a_missing_key_is_one_line_naming_the_variable(
    argv: list[str], given: str | None, variable: str, loaded: list[str], inputs: dict[str, str]
) -> None:
    code, out, err = run_main(*[a.format(**inputs) for a in argv])
    assert code == 2
    assert out == ""
    assert err.splitlines() == [missing(given or f"--model {argv[-1]}", variable)]
    assert loaded == []  # checked before the model is loaded


def test_factuality_llm_option_is_checked_before_scoring(
    no_keys: None, loaded: list[str], inputs: dict[str, str]
) -> None:
    argv = ["--input", inputs["records"], "--judge", "heuristic-lexical", "--llm", "groq:llama3"]
    code, out, err = run_main("factuality", *argv)
    assert code == 2
    assert out == ""
    assert err.splitlines()[-1] == missing("--llm groq:llama3", "GROQ_API_KEY")
    assert "Traceback" not in err
    assert loaded == []


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize(
    ("name", "environment", "needed"),
    [
        ("openai:gpt-4o-mini", {"OPENAI_API_KEY": "sk-x"}, None),
        ("openai:gpt-4o-mini", {"OPENAI_API_KEY": "  "}, "OPENAI_API_KEY"),  # blank
        ("openai:gpt-4o-mini", {"ANTHROPIC_API_KEY": "k"}, "OPENAI_API_KEY"),
        ("google_genai:gemini-2.0-flash", {"GEMINI_API_KEY": "k"}, None),  # an alternative
        ("perplexity:sonar", {"PERPLEXITY_API_KEY": "k"}, None),
        ("cohere:command-r", {}, "COHERE_API_KEY"),
        ("claude-3-5-haiku-latest", {}, "ANTHROPIC_API_KEY"),
        ("ollama:llama3", {}, None),  # a local provider: no key
        ("someprovider:model", {}, None),
    ],
)
def test_check_api_key(
    monkeypatch: pytest.MonkeyPatch, name: str, environment: dict[str, str], needed: str | None
) -> None:
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    if needed is None:
        check_api_key(name, option="--model")
        return
    with pytest.raises(CLIError) as caught:
        check_api_key(name, option="--model")
    assert str(caught.value) == missing(f"--model {name}", needed).removeprefix("error: ")


def test_with_the_key_the_model_is_loaded(
    monkeypatch: pytest.MonkeyPatch, no_keys: None, loaded: list[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    _models.load_chat_model("openai:gpt-4o-mini", option="--judge llm:")
    assert loaded == ["openai:gpt-4o-mini"]


@pytest.mark.slow
def test_python_dash_m_without_a_key_has_no_traceback() -> None:
    environment = {k: v for k, v in os.environ.items() if k not in ALL_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-m", "langchain_references.cli", "demo", "--model", "openai:gpt-4o-mini"],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [missing("--model openai:gpt-4o-mini", "OPENAI_API_KEY")]


def test_factcheck_checks_the_key_before_search_and_embeddings(
    monkeypatch: pytest.MonkeyPatch, no_keys: None, loaded: list[str]
) -> None:
    def no_work(*args: Any) -> Any:
        raise AssertionError("work started before the key check")

    monkeypatch.setattr(factcheck_cli, "build_search", no_work)
    monkeypatch.setattr(factcheck_cli, "_embeddings", no_work)
    code, _, err = run_main("factcheck", "x", "--search", "demo", "--model", "openai:gpt-4o")
    assert code == 2
    assert err.splitlines()[-1] == missing("--judge llm:openai:gpt-4o", "OPENAI_API_KEY")
    assert "Traceback" not in err
