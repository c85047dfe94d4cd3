"""Ctrl-C: one ``error: interrupted; ...`` line, exit status 130, what finished is kept."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda

from langchain_references.citations import evaluate_answers
from langchain_references.cli import citations as citations_cli
from langchain_references.cli import factcheck as factcheck_cli
from langchain_references.cli import factuality as factuality_cli
from langchain_references.cli import main
from langchain_references.factcheck.result import FactCheckResult
from langchain_references.factuality.pipeline import create_factuality_evaluator
from tests.unit_tests.conftest import REPO_ROOT

FLAHERTY = "factreasoner_flaherty_wikipedia.json"


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def record(topic: str) -> dict[str, Any]:
    return {
        "input": f"Where is {topic}?",
        "output": f"{topic} is in France.",
        "topic": topic,
        "atoms": [{"id": "a0", "text": f"{topic} is in France.", "contexts": ["c0"]}],
        "contexts": [{"id": "c0", "title": topic, "text": f"{topic} is a city of France."}],
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class InterruptAt:
    """Wraps a callable: raises KeyboardInterrupt on call number ``at`` (1-based)."""

    def __init__(self, wrapped: Any, at: int) -> None:
        self.wrapped = wrapped
        self.at = at
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.wrapped(*args, **kwargs)


def interrupt_factuality_at(monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    build = create_factuality_evaluator

    class Evaluator:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.invoke = InterruptAt(build(*args, **kwargs).invoke, at)

    monkeypatch.setattr(factuality_cli, "create_factuality_evaluator", Evaluator)


def test_factuality_ctrl_c_keeps_the_finished_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris"), record("Lyon"), record("Nice")])
    output = tmp_path / "out.jsonl"
    interrupt_factuality_at(monkeypatch, 3)
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)]
    code, out, err = run_main("factuality", *argv)
    assert code == 130
    assert err.splitlines()[-1] == (
        f"error: interrupted; 2 of 3 record(s) scored and written to {output}"
    )
    assert [line for line in err.splitlines() if "interrupt" in line] == [err.splitlines()[-1]]
    assert "Traceback" not in err
    # Only the finished records, in order; the interrupted one is not a result.
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["topic"] for r in written] == ["Paris", "Lyon"]
    assert all(r["num_atoms"] == 1 for r in written)
    assert out.splitlines()[1].startswith("Judge: heuristic (no model) — offline heuristic")
    rows = [line.split()[0] for line in out.splitlines()[4:]]
    assert rows == ["Paris", "Lyon"]


def test_factuality_ctrl_c_before_any_result_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris"), record("Lyon")])
    output = tmp_path / "out.jsonl"
    output.write_text("previous results\n", encoding="utf-8")
    interrupt_factuality_at(monkeypatch, 1)
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)]
    code, _, err = run_main("factuality", *argv)
    assert code == 130
    assert err.splitlines()[-1] == (
        f"error: interrupted; 0 of 2 record(s) scored; nothing written to {output}"
    )
    assert output.read_text(encoding="utf-8") == "previous results\n"  # left as it was


def test_factuality_ctrl_c_without_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris"), record("Lyon")])
    interrupt_factuality_at(monkeypatch, 2)
    code, out, err = run_main("factuality", "--input", str(path), "--judge", "heuristic-lexical")
    assert code == 130
    assert err.splitlines()[-1] == "error: interrupted; 1 of 2 record(s) scored"
    assert [line.split()[0] for line in out.splitlines()[4:]] == ["Paris"]


ANSWER = {
    "answer": "Seattle gets a lot of rain every year [1](id=1).",
    "documents": [{"page_content": "Seattle gets a lot of rain every year."}],
}


def test_citations_ctrl_c_prints_the_report_of_the_answers_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "answers.jsonl", [ANSWER, ANSWER, ANSWER])
    evaluate = InterruptAt(evaluate_answers, 2)
    monkeypatch.setattr(citations_cli, "evaluate_answers", evaluate)
    code, out, err = run_main("citations", "--input", str(path), "--judge", "heuristic-lexical")
    assert code == 130
    assert err.splitlines()[-1] == "error: interrupted; 1 of 3 answer(s) checked and reported"
    assert evaluate.calls == 2
    rows = [line.split()[0] for line in out.splitlines() if line[:1].isalnum()]
    assert rows[:3] == ["answer", "0", "all"]  # the report of answer 0 only
    assert "1" not in rows


def test_a_bare_interrupt_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "answers.jsonl", [ANSWER])

    def build_judge(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(citations_cli, "build_judge", build_judge)
    assert run_main("citations", "--input", str(path)) == (130, "", "error: interrupted\n")


def test_factcheck_ctrl_c_keeps_the_reports_written(monkeypatch: pytest.MonkeyPatch) -> None:
    async def check(statement: str) -> FactCheckResult:
        if statement.startswith("Second"):
            await asyncio.sleep(0.2)  # the first one is reported by then
            raise KeyboardInterrupt
        return FactCheckResult.could_not_check(statement, "test")

    monkeypatch.setattr(factcheck_cli, "build_chain", lambda *args: RunnableLambda(check))
    argv = ["First statement.", "Second statement.", "Third statement.", "--json"]
    code, out, err = run_main("factcheck", *argv, "--concurrency", "1", "-q")
    assert code == 130
    assert [json.loads(line)["statement"] for line in out.splitlines()] == ["First statement."]
    assert err == "error: interrupted; 1 of 3 statement(s) reported\n"


# ------------------------------------------------------------------ a real SIGINT


def _read_line(stream: Any, deadline: float) -> str:
    readable = select.poll()  # select() refuses descriptors from 1024 on (a long session)
    readable.register(stream, select.POLLIN)
    while time.monotonic() < deadline:
        if readable.poll(100):
            return str(stream.readline())
    raise AssertionError("no progress line in time")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_during_factuality(shared_data: Path, tmp_path: Path) -> None:
    # The MiniLM judge takes most of each record's time: the interrupt lands in its batch.
    flaherty = json.loads((shared_data / FLAHERTY).read_text(encoding="utf-8"))
    topics = [f"T{i}" for i in range(4)]
    path = write_jsonl(tmp_path / "in.jsonl", [{**flaherty, "topic": t} for t in topics])
    output = tmp_path / "out.jsonl"
    argv = ["--input", str(path), "--judge", "heuristic", "--output", str(output)]
    process = subprocess.Popen(
        [sys.executable, "-m", "langchain_references.cli", "factuality", *argv],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # A shell may start background jobs with SIGINT ignored; a terminal's Ctrl-C is not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 180
        before: list[str] = []
        while not before or not before[-1].startswith("[1/4] T0: 26 atom(s)"):
            before.append(_read_line(process.stderr, deadline))
        time.sleep(1)  # record T1 is being judged
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, rest = process.communicate(timeout=120)
        stopped_in = time.monotonic() - sent
    finally:
        process.kill()
    err = "".join(before) + rest
    assert process.returncode == 130, err
    assert stopped_in < 15  # not after the other records (about 8 s each)
    assert "Traceback" not in err
    assert "judgements failed" not in err  # the interrupt was not recorded as failures
    last = err.splitlines()[-1]
    assert [line for line in err.splitlines() if "interrupt" in line] == [last]
    match = re.fullmatch(
        rf"error: interrupted; (\d+) of 4 record\(s\) scored and written to {output}", last
    )
    assert match is not None, last
    kept = int(match[1])
    assert 1 <= kept < 4
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["topic"] for r in written] == topics[:kept]  # finished records only, in order
    assert all(r["num_atoms"] == 26 and r["num_judged_pairs"] == 546 for r in written)
    assert all(f["stage"] != "judge" for r in written for f in r["failures"])
    assert "FactReasoner FR2, 4 record(s)" in out
