"""Failed judgements (no key, no network) are counted, never shown as measured scores."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from langchain_references.cli import citations as citations_cli
from langchain_references.cli import factuality as factuality_cli
from langchain_references.cli import main
from langchain_references.judges import Judge, Judgement, Label


class NetworkJudge(Judge):
    """Entails when the passage mentions ``rain`` or ``France``; ``down`` passages fail."""

    def __init__(self, down: tuple[str, ...]) -> None:
        self.down = down

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        if any(word in passage for word in self.down):
            raise ConnectionError("network is unreachable")
        if "rain" in passage or "France" in passage:
            return Judgement(label=Label.ENTAILS, confidence=0.9)
        return Judgement(label=Label.UNKNOWN, confidence=0.9)


def use_judge(monkeypatch: pytest.MonkeyPatch, module: Any, *down: str) -> None:
    def build_judge(spec: str, **kwargs: Any) -> tuple[NetworkJudge, None]:
        return NetworkJudge(down), None

    monkeypatch.setattr(module, "build_judge", build_judge)


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines() if line[:1].isalnum()}


ANSWER = {
    "answer": "Seattle gets a lot of rain every year [1](id=1). "
    "Seattle was founded on the moon [2](id=2). Seattle has no rain at all.",
    "documents": [
        {"page_content": "Seattle gets a lot of rain every year, more than Boston."},
        {"page_content": "Tokyo is the capital of Japan."},
    ],
}


@pytest.fixture
def answers(tmp_path: Path) -> str:
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(ANSWER) + "\n", encoding="utf-8")
    return str(path)


def test_citations_when_every_judgement_failed(
    answers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, citations_cli, "Seattle", "Tokyo")
    code, out, err = run_main("citations", "--input", answers, "--judge", "llm:x:y")
    assert code == 1
    table = rows(out)
    assert table["0"] == ["0", "3", "0", "-", "2", "0", "-"]  # recall and precision: -
    assert table["all"] == ["all", "3", "0", "-", "2", "0", "-"]
    assert (
        "no scores: 2 of 2 judgements failed (first: ConnectionError: network is unreachable)"
        in out.splitlines()
    )
    assert "0.000" not in out
    assert "[1/1] answer 0: not measured (2 of 2 judgements failed)" in err


def test_citations_json_when_every_judgement_failed(
    answers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, citations_cli, "Seattle", "Tokyo")
    code, out, _ = run_main("citations", "--input", answers, "--json", "-q")
    assert code == 1
    report = json.loads(out)
    assert [report[k] for k in ("citation_recall", "citation_precision")] == [None, None]
    assert [report[k] for k in ("macro_recall", "macro_precision")] == [None, None]
    assert (report["failed_judgements"], report["num_judgements"]) == (2, 2)


def test_citations_when_some_judgements_failed(
    answers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, citations_cli, "Tokyo")
    code, out, _ = run_main("citations", "--input", answers)
    assert code == 0
    assert rows(out)["all"] == ["all", "3", "1", "0.333", "2", "1", "0.500"]
    assert "macro recall 0.333, macro precision 0.500; 1 of 2 judgements failed" in out
    assert "sentence 1, id=2: judge failed: ConnectionError: network is unreachable" in out


def test_citations_when_no_judgement_failed(answers: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use_judge(monkeypatch, citations_cli)
    code, out, _ = run_main("citations", "--input", answers, "--json")
    assert code == 0
    report = json.loads(out)
    assert (report["failed_judgements"], report["num_judgements"]) == (0, 2)
    assert report["citation_recall"] == pytest.approx(1 / 3)


def record(topic: str, context: str) -> dict[str, Any]:
    return {
        "input": f"Where is {topic}?",
        "output": f"{topic} is in France.",
        "topic": topic,
        "atoms": [{"id": "a0", "text": f"{topic} is in France.", "contexts": ["c0", "c1"]}],
        "contexts": [
            {"id": "c0", "title": topic, "text": context},
            {"id": "c1", "title": topic, "text": f"{context} Again."},
        ],
    }


@pytest.fixture
def records(tmp_path: Path) -> Path:
    path = tmp_path / "records.jsonl"
    lines = [
        record("Paris", "Paris is the capital of France."),
        record("Rome", "Rome is the capital of Italy."),  # the judge is down for it
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def test_factuality_record_whose_judgements_all_failed_is_not_scored(
    records: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, factuality_cli, "Rome")
    output = tmp_path / "out.jsonl"
    code, out, err = run_main("factuality", "--input", str(records), "--output", str(output))
    assert code == 1
    assert (
        f"error: {records}:2: 2 of 2 judgements failed (ConnectionError: network is "
        "unreachable); not scored"
    ) in err.splitlines()
    table = rows(out)
    assert table["Rome"] == ["Rome", "1", *["-"] * 10, "2"]  # no scores, 2 failures
    assert table["Paris"][5] == "1.000"
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["topic"] for r in written] == ["Paris"]
    assert f"wrote 1 result(s) to {output}" in out


def test_factuality_when_every_record_failed(
    records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, factuality_cli, "Paris", "Rome")
    code, out, err = run_main("factuality", "--input", str(records), "-q")
    assert code == 1
    assert out.splitlines()[1] == "Judge: custom (no model) — custom judge NetworkJudge"
    assert [line.split()[0] for line in out.splitlines()[4:]] == ["Paris", "Rome"]
    assert "0.000" not in out
    assert "1.000" not in out
    assert sum("2 of 2 judgements failed" in line for line in err.splitlines()) == 2


def test_factuality_some_judgements_failed_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, factuality_cli, "Again")  # c1 fails, c0 is judged
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(record("Paris", "Paris is in France.")) + "\n", encoding="utf-8")
    code, out, err = run_main("factuality", "--input", str(path), "-q")
    assert code == 0
    assert f"warning: {path}:1: 1 of 2 judgements failed; the scores use the other 1" in err
    assert rows(out)["Paris"][5] == "1.000"
