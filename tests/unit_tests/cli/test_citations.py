"""The ``citations`` command: citation recall and precision of cited answers."""

from __future__ import annotations

import argparse
import io
import json
import logging
from pathlib import Path

import pytest

from langchain_references.cli import citations as cli
from langchain_references.cli import main
from langchain_references.cli._commands import add_command


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["citations", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


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


def test_citations_table(tmp_path: Path) -> None:
    code, out, err = run("--input", str(write_answers(tmp_path)), "--judge", "heuristic-lexical")
    assert code == 0, err
    assert "HeuristicJudge" in err
    assert "weak" in err
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line[:1].isalnum()}
    assert rows["0"][1:3] == ["3", "1"]  # three worthy sentences, one supported
    assert rows["all"][4:6] == ["2", "1"]  # two citations, one precise
    assert "sentence 2: Seattle has no rain at all." in out
    assert "sentence 1, id=2:" in out
    # the report names its judge once, after the figures
    [figures] = [i for i, line in enumerate(out.splitlines()) if line.startswith("macro recall")]
    assert out.splitlines()[figures + 1] == (
        "Judge: heuristic (no model) — offline heuristic (word overlap and similarity), not an "
        "NLI model: rough; set an LLM judge for real checks"
    )
    assert out.count("Judge: ") == 1


def test_citations_json_min_words_and_bad_record(tmp_path: Path) -> None:
    path = write_answers(tmp_path, extra='{"answer": 5}\n')
    code, out, err = run(
        "--input",
        str(path),
        "--judge",
        "heuristic-lexical",
        "--json",
        "--min-words",
        "7",
    )
    assert code == 1
    assert f"error: {path}:2: answer: must be a string; documents: required field is missing" in err
    assert "(record skipped)" in err
    report = json.loads(out)
    # Only the first sentence has seven words or more.
    assert report["num_verification_worthy"] == 1
    assert report["citation_recall"] == 1.0
    assert report["num_answers"] == 1
    assert len(report["errors"]) == 1
    assert report["answers"][0]["sentences"][0]["citations"][0]["precise"] is True
    assert (report["judge"]["kind"], report["judge"]["model"]) == ("heuristic", None)
    assert report["answers"][0]["judge"] == report["judge"]


def test_citations_unreadable_input(tmp_path: Path) -> None:
    code, out, err = run("--input", str(tmp_path / "missing.jsonl"))
    assert code == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"error: cannot read {tmp_path / 'missing.jsonl'}")


def test_records_without_documents_are_refused(tmp_path: Path) -> None:
    """Problem 3: no ``documents`` (or a misspelt one) used to give recall 0.000 and exit 0."""
    path = tmp_path / "answers.jsonl"
    answer = ANSWERS[0]["answer"]
    path.write_text(
        json.dumps({"answer": answer})
        + "\n"
        + json.dumps({"answer": answer, "docs": ANSWERS[0]["documents"]})
        + "\n",
        encoding="utf-8",
    )
    code, out, err = run("--input", str(path), "--judge", "heuristic-lexical")
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"error: {path}:1: documents: required field is missing (record skipped)",
        f"error: {path}:2: docs: unknown field (did you mean 'documents'?); "
        "documents: required field is missing (record skipped)",
        f"error: no valid record in {path} (2 skipped)",
    ]


def test_each_bad_record_is_reported_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Problem 8: the loader's WARNING log and the command's line reported each one twice."""
    documents = ANSWERS[0]["documents"]
    path = write_answers(tmp_path, extra=json.dumps({"answer": "x", "documnets": documents}))
    with caplog.at_level(logging.WARNING):
        code, _out, err = run("--input", str(path), "--judge", "heuristic-lexical")
    assert code == 1
    logged = [r.getMessage() for r in caplog.records]
    assert sum(f"{path}:2" in text for text in [*err.splitlines(), *logged]) == 1
    assert f"error: {path}:2: documnets: unknown field (did you mean 'documents'?)" in err


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_empty_input_is_an_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(content, encoding="utf-8")
    code, out, err = run("--input", str(path), "--judge", "heuristic-lexical")
    assert code == 2
    assert out == ""
    assert err == f"error: no records in {path}: the file is empty\n"


@pytest.mark.parametrize("layout", ["jsonl", "list", "object"])
def test_deeply_nested_input_is_an_error_line(tmp_path: Path, layout: str) -> None:
    """Problem 8: deep nesting used to end in a RecursionError traceback."""
    deep = json.dumps(dict(ANSWERS[0], question="Q"))[:-1] + ', "x": ' + "[" * 100_000
    deep += "]" * 100_000 + "}"
    good = json.dumps(ANSWERS[0])
    text = {"jsonl": f"{good}\n{deep}\n", "list": f"[\n{good},\n{deep}\n]", "object": deep}
    path = tmp_path / "answers.json"
    path.write_text(text[layout], encoding="utf-8")
    code, out, err = run("--input", str(path), "--judge", "heuristic-lexical")
    assert "Traceback" not in err
    if layout == "object":
        assert code == 2
        assert err == f"error: cannot read {path}: {path}:1: JSON nested deeper than 100 levels\n"
    else:
        assert code == 1
        line = 2 if layout == "jsonl" else 3  # the list's "[" is on line 1
        assert f"error: {path}:{line}: JSON nested deeper than 100 levels (record skipped)" in err
        assert "all" in out


def test_citations_unknown_judge(tmp_path: Path) -> None:
    code, out, err = run("--input", str(write_answers(tmp_path)), "--judge", "nli")
    assert code == 2
    assert out == ""
    assert err.startswith("error: --judge must be")


def test_the_subcommand_plugs_into_another_parser() -> None:
    parser = argparse.ArgumentParser(prog="langchain-references")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_command(subparsers, "citations", cli)
    args = parser.parse_args(["citations", "--input", "a.jsonl", "--json"])
    assert args.func is cli.run
    assert args.json
    assert args.min_words == 4
    with pytest.raises(SystemExit):
        parser.parse_args(["citations", "--input", "a.jsonl", "--min-words", "0"])
