from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from langchain_references.cli import factuality as cli
from langchain_references.factuality.io import parse_result
from tests.unit_tests.fakes import ScriptedChatModel

FLAHERTY = "factreasoner_flaherty_wikipedia.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def table_rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("record"))
    return [line.split() for line in lines[start + 2 :] if line and not line.startswith("wrote")]


def test_factuality_on_flaherty(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out.jsonl"
    code, out, err = run(
        capsys,
        "factuality",
        "--input",
        str(shared_data / FLAHERTY),
        "--version",
        "1",
        "--judge",
        "heuristic-lexical",
        "--output",
        str(output),
    )
    assert code == 0, err
    assert "HeuristicJudge" in err
    assert "weak" in err
    assert "FR1, 1 record(s)" in out
    ((name, atoms, true, false, undecided, precision, entropy, gold, tp, tn, fp, fn, fails),) = [
        r[:1] + r[2:] if r[1] == "Flaherty" else r for r in table_rows(out)
    ]
    assert name == "Lanny"
    (line,) = output.read_text(encoding="utf-8").splitlines()
    data = json.loads(line)
    scores = parse_result(data)
    assert atoms == "26"
    assert gold == "0.269"
    assert int(true) == scores.num_true_atoms
    assert int(true) + int(false) + int(undecided) == 26
    assert precision == f"{scores.factuality_score:.3f}"
    assert entropy == f"{scores.avg_entropy:.3f}"
    assert scores.gold is not None
    assert [int(tp), int(tn), int(fp), int(fn)] == [
        scores.gold.true_positive,
        scores.gold.true_negative,
        scores.gold.false_positive,
        scores.gold.false_negative,
    ]
    assert int(fails) == len(data["failures"]) == 4  # four atoms come without contexts
    assert data["version"] == "FR1"
    assert len(data["atoms"]) == 26
    assert f"wrote 1 result(s) to {output}" in out


def test_factuality_top_k_and_bad_records(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = json.loads((shared_data / FLAHERTY).read_text(encoding="utf-8"))
    path = tmp_path / "in.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(record),
                "{broken",
                json.dumps({"response": "No atoms here."}),
                json.dumps({"atoms": "nope", "input": "", "output": ""}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    output = tmp_path / "out.jsonl"
    code, _out, err = run(
        capsys,
        "factuality",
        "--input",
        str(path),
        "--judge",
        "heuristic-lexical",
        "--top-k",
        "1",
        "--version",
        "2",
        "--output",
        str(output),
    )
    assert code == 1
    assert f"{path}:2" in err
    assert f"{path}:4" in err
    assert f"error: {path}:3" in err
    assert "no atoms" in err
    (data,) = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert all(len(a["contexts"]) <= 1 for a in data["atoms"])
    assert data["num_contexts"] < len(record["contexts"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "/nonexistent/file.json"], "cannot read"),
        (["--judge", "nli"], "--judge must be"),
    ],
)
def test_factuality_setup_errors(
    shared_data: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    argv = ["factuality", "--input", str(shared_data / FLAHERTY), *args]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err


def test_llm_judge_needs_langchain(
    shared_data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)
    code, _, err = run(
        capsys, "factuality", "--input", str(shared_data / FLAHERTY), "--judge", "llm:openai:gpt-x"
    )
    assert code == 2
    assert "pip install langchain" in err


def tool(name: str, **args: Any) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": "1", "type": "tool_call"}]
    )


def answer(messages: list[BaseMessage]) -> AIMessage:
    system, human = messages[0].text, messages[1].text
    if "atomic facts" in system and "self-contained" not in system:
        return tool("AtomicClaims", claims=["Paris is in France.", "It is old."])
    if "self-contained" in system:
        return tool(
            "RevisedAtoms",
            atoms=[
                {"id": "a0", "text": "Paris is in France."},
                {"id": "a1", "text": "Paris is old."},
            ],
        )
    label = "entails" if "capital of France" in human else "contradicts"
    return tool("JudgeReply", label=label, confidence=0.9, rationale="scripted")


def test_llm_judge_and_atomizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedChatModel(script=[answer] * 10)
    loaded: list[str] = []

    def load(name: str, **kwargs: Any) -> ScriptedChatModel:
        loaded.append(name)
        return model

    monkeypatch.setattr(cli, "load_chat_model", load)
    record = {
        "input": "Where is Paris?",
        "output": "Paris is in France.",
        "topic": "Paris",
        "atoms": [{"id": "a0", "text": "Paris is in France.", "label": "S", "contexts": ["c0"]}],
        "contexts": [{"id": "c0", "title": "Paris", "text": "Paris is the capital of France."}],
    }
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps(record)
        + "\n"
        + json.dumps({"response": "Paris is in France. It is old."})
        + "\n",
        encoding="utf-8",
    )
    output = tmp_path / "out.jsonl"
    code, _out, err = run(
        capsys,
        "factuality",
        "--input",
        str(path),
        "--judge",
        "llm:openai:gpt-4o-mini",
        "--output",
        str(output),
    )
    assert code == 0, err
    assert loaded == ["openai:gpt-4o-mini"]
    first, second = (json.loads(line) for line in output.read_text(encoding="utf-8").splitlines())
    assert first["predictions"] == {"a0": "S"}
    assert first["true_positive"] == 1
    assert [a["text"] for a in second["atoms"]] == ["Paris is in France.", "Paris is old."]
    assert second["atoms"][1]["original"] == "It is old."
    assert second["num_atoms"] == 2  # no contexts: both stay undecided
    assert len(model.calls) == 3  # one judge call, the atomizer and the reviser


ANSWERS = [
    {
        "question": "Seattle?",
        "answer": "Seattle gets a lot of rain every year [1](id=1). "
        "Seattle was founded on the moon [2](id=2). Seattle has no rain at all.",
        "documents": [
            {"page_content": "Seattle gets a lot of rain every year, more than Boston."},
            {"page_content": "Tokyo is the capital of Japan."},
        ],
    }
]


def write_answers(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(a) for a in ANSWERS) + "\n" + extra, encoding="utf-8")
    return path


def test_citations_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "citations", "--input", str(write_answers(tmp_path)), "--judge", "heuristic-lexical"
    )
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line[:1].isalnum()}
    assert rows["0"][1:3] == ["3", "1"]  # three worthy sentences, one supported
    assert rows["all"][4:6] == ["2", "1"]  # two citations, one precise
    assert "sentence 2: Seattle has no rain at all." in out
    assert "sentence 1, id=2:" in out


def test_citations_json_min_words_and_bad_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_answers(tmp_path, extra='{"answer": 5}\n')
    code, out, err = run(
        capsys,
        "citations",
        "--input",
        str(path),
        "--judge",
        "heuristic-lexical",
        "--json",
        "--min-words",
        "7",
    )
    assert code == 1
    assert "skipped record" in err
    report = json.loads(out)
    # Only the first sentence has seven words or more.
    assert report["num_verification_worthy"] == 1
    assert report["citation_recall"] == 1.0
    assert report["num_answers"] == 1
    assert len(report["errors"]) == 1
    assert report["answers"][0]["sentences"][0]["citations"][0]["precise"] is True


def test_citations_unreadable_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "citations", "--input", str(tmp_path / "missing.jsonl"))
    assert code == 2
    assert "cannot read" in err


def test_subcommands_plug_into_another_parser() -> None:
    parser = argparse.ArgumentParser(prog="langchain-references")
    subparsers = parser.add_subparsers(dest="command", required=True)
    cli.add_parser(subparsers)
    cli.add_citations_parser(subparsers)
    args = parser.parse_args(["factuality", "--input", "x.json", "--version", "3"])
    assert args.func is cli.run
    assert args.version == 3
    args = parser.parse_args(["citations", "--input", "a.jsonl", "--json"])
    assert args.func is cli.run_citations
    assert args.json
    with pytest.raises(SystemExit):
        parser.parse_args(["factuality", "--input", "x", "--version", "4"])
