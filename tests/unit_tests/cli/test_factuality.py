from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from langchain_references.cli import _models, main
from langchain_references.cli import factuality as cli
from langchain_references.cli._commands import add_command
from langchain_references.factuality.io import parse_result
from tests.unit_tests.fakes import ScriptedChatModel

FLAHERTY = "factreasoner_flaherty_wikipedia.json"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["factuality", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def table_rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("record"))
    return [line.split() for line in lines[start + 2 :] if line and not line.startswith("wrote")]


def test_factuality_on_flaherty(shared_data: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    code, out, err = run(
        "--input",
        str(shared_data / FLAHERTY),
        "--graph-version",
        "1",
        "--judge",
        "heuristic-lexical",
        "--output",
        str(output),
    )
    assert code == 0, err
    assert "HeuristicJudge" in err
    assert "weak" in err
    assert out.splitlines()[:2] == [
        "FactReasoner FR1, 1 record(s)",
        "Judge: heuristic (no model) — offline heuristic (word overlap and similarity), not an "
        "NLI model: rough; set an LLM judge for real checks",
    ]
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
    assert (data["judge"]["kind"], data["judge"]["model"]) == ("heuristic", None)
    assert data["model_name"] == "heuristic-lexical"  # FactReasoner's field, unchanged
    assert len(data["atoms"]) == 26
    assert f"wrote 1 result(s) to {output}" in out


def test_factuality_top_k_and_bad_records(shared_data: Path, tmp_path: Path) -> None:
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
    options = ["--judge", "heuristic-lexical", "--top-k", "1", "--graph-version", "2"]
    code, _out, err = run("--input", str(path), *options, "--output", str(output))
    assert code == 1
    assert f"error: {path}:2: invalid JSON: " in err
    assert f"error: {path}:4: atoms: must be a list (record skipped)" in err
    assert f"error: {path}:3" in err
    assert "no atoms" in err
    assert "skipped record" not in err
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
def test_factuality_setup_errors(shared_data: Path, args: list[str], message: str) -> None:
    code, out, err = run("--input", str(shared_data / FLAHERTY), *args)
    assert code == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("error: ")
    assert message in line


def test_llm_judge_needs_langchain(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)
    code, _, err = run("--input", str(shared_data / FLAHERTY), "--judge", "llm:openai:gpt-x")
    assert code == 2
    assert err.startswith("error: --judge llm: openai:gpt-x needs the optional package")
    assert 'pip install ".[llm]"' in err


def test_llm_option_needs_langchain(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)
    argv = ("--input", str(shared_data / FLAHERTY), "--judge", "heuristic-lexical")
    code, _, err = run(*argv, "--llm", "openai:gpt-x")
    assert code == 2
    assert "error: --llm openai:gpt-x needs the optional package" in err


def test_unwritable_output_is_an_error(shared_data: Path, tmp_path: Path) -> None:
    output = tmp_path / "missing-folder" / "out.jsonl"
    argv = ("--input", str(shared_data / FLAHERTY), "--judge", "heuristic-lexical")
    code, out, err = run(*argv, "--output", str(output))
    assert code == 2
    assert out == ""  # refused before any work
    assert err == f"error: cannot write {output}: no such directory {output.parent}\n"


def write_records(path: Path, *records: Any) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


SMALL = {
    "input": "Where is Paris?",
    "output": "Paris is in France.",
    "topic": "Paris",
    "atoms": [{"id": "a0", "text": "Paris is in France.", "contexts": ["c0"]}],
    "contexts": [{"id": "c0", "title": "Paris", "text": "Paris is the capital of France."}],
}


@pytest.mark.parametrize("how", ["same", "relative", "symlink", "hardlink"])
def test_output_that_is_the_input_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Problem 8: ``--output`` equal to ``--input`` used to overwrite the input with results."""
    path = write_records(tmp_path / "in.jsonl", SMALL)
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    output = {"same": str(path), "relative": "./sub/../in.jsonl"}.get(how, str(tmp_path / "o"))
    (tmp_path / "sub").mkdir()
    if how == "symlink":
        (tmp_path / "o").symlink_to(path)
    elif how == "hardlink":
        (tmp_path / "o").hardlink_to(path)
    code, out, err = run("--input", str(path), "--judge", "heuristic-lexical", "--output", output)
    assert code == 2
    assert out == ""
    assert err == (
        f"error: --output {Path(output)} is the input file {path}; "
        "refusing to overwrite the input\n"
    )
    assert path.read_bytes() == before


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_empty_input_writes_nothing(tmp_path: Path, content: str) -> None:
    """Problem 8: an empty input used to exit 0 and create an empty output file."""
    path = tmp_path / "in.jsonl"
    path.write_text(content, encoding="utf-8")
    output = tmp_path / "out.jsonl"
    code, out, err = run(
        "--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)
    )
    assert code == 2
    assert out == ""
    assert err == f"error: no records in {path}: the file is empty\n"
    assert sorted(tmp_path.iterdir()) == [path]


def test_only_bad_records_write_nothing(tmp_path: Path) -> None:
    path = write_records(tmp_path / "in.jsonl", {"atoms": []}, dict(SMALL, atoms=[{"id": 1}]))
    output = tmp_path / "out.jsonl"
    code, out, err = run(
        "--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)
    )
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"error: {path}:1: input: required field is missing; output: required field is missing"
        " (record skipped)",
        f"error: {path}:2: atoms[0].id: must be a string; atoms[0].text: required field is"
        " missing (record skipped)",
        f"error: no valid record in {path} (2 skipped)",
    ]
    assert not output.exists()


def test_a_lone_surrogate_is_a_skipped_record_not_a_failed_write(tmp_path: Path) -> None:
    """Problem 8: a record whose topic held a lone surrogate (valid JSON: ``"\\ud800"``)
    used to fail the write after the first result line; it is now a bad record, named at its
    line when the file is read (the midway write failure: the next test)."""
    path = tmp_path / "in.jsonl"
    second = json.dumps(dict(SMALL, topic="\ud800"), ensure_ascii=True)
    path.write_text(json.dumps(SMALL) + "\n" + second + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    output.write_text("previous results\n", encoding="utf-8")
    code, _out, err = run(
        "--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)
    )
    assert code == 1
    assert "Traceback" not in err
    assert (
        f"error: {path}:2: topic: holds a lone surrogate (U+D800) at character 0 "
        "(record skipped)" in err.splitlines()
    )
    results = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["topic"] for r in results] == [SMALL["topic"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_a_write_that_fails_midway_keeps_the_old_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_records(tmp_path / "in.jsonl", SMALL, dict(SMALL, topic="Paris 2"))
    output = tmp_path / "out.jsonl"
    output.write_text("previous results\n", encoding="utf-8")
    output.chmod(0o640)

    def failing_dump(handle: Any, objects: Any) -> int:
        handle.write(json.dumps(objects[0]) + "\n")
        handle.flush()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "dump_jsonl", failing_dump)
    code, _out, err = run(
        "--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)
    )
    assert code == 2
    assert (
        err.splitlines()[-1] == f"error: cannot write {output}: [Errno 28] No space left on device"
    )
    assert output.read_text(encoding="utf-8") == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]
    monkeypatch.undo()
    code, _out, err = run(
        "--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)
    )
    assert code == 0, err
    assert [json.loads(line)["topic"] for line in output.read_text().splitlines()] == [
        "Paris",
        "Paris 2",
    ]
    assert output.stat().st_mode & 0o777 == 0o640  # the replaced file keeps its permissions


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


def test_llm_judge_and_atomizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedChatModel(script=[answer] * 10)
    loaded: list[str] = []

    def load(name: str, **kwargs: Any) -> ScriptedChatModel:
        loaded.append(name)
        return model

    monkeypatch.setattr(_models, "load_chat_model", load)  # the judge's model (--judge llm:...)
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
    options = ["--judge", "llm:openai:gpt-4o-mini", "--output", str(output)]
    code, _out, err = run("--input", str(path), *options)
    assert code == 0, err
    assert loaded == ["openai:gpt-4o-mini"]
    first, second = (json.loads(line) for line in output.read_text(encoding="utf-8").splitlines())
    assert first["predictions"] == " a0: S"
    assert first["labels"] == {"a0": "S"}
    assert first["model_name"] == "openai:gpt-4o-mini"
    assert first["true_positive"] == 1
    assert [a["text"] for a in second["atoms"]] == ["Paris is in France.", "Paris is old."]
    assert second["atoms"][1]["original"] == "It is old."
    assert second["num_atoms"] == 2  # no contexts: both stay undecided
    assert len(model.calls) == 3  # one judge call, the atomizer and the reviser


def test_the_subcommand_plugs_into_another_parser() -> None:
    parser = argparse.ArgumentParser(prog="langchain-references")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_command(subparsers, "factuality", cli)
    args = parser.parse_args(["factuality", "--input", "x.json", "--graph-version", "3"])
    assert args.func is cli.run
    assert args.graph_version == 3
    with pytest.raises(SystemExit):
        parser.parse_args(["factuality", "--input", "x", "--graph-version", "4"])
