"""Progress of the long commands on stderr (``[i/n] ...``), off with ``--quiet``."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from langchain_references.cli import main
from langchain_references.cli._progress import ProgressLines


def test_progress_lines_one_line_per_finished_step() -> None:
    stream = io.StringIO()
    display = ProgressLines(stream, 3, live=False)
    display.step(0, "judge")  # under way: not shown without a live line
    display.step(0, "judge", elapsed_s=1.5)
    display.done(2, "A: done")
    assert stream.getvalue() == "[1/3] judge (1.50s)\n[3/3] A: done\n"


def test_progress_lines_live_line_is_rewritten() -> None:
    stream = io.StringIO()
    display = ProgressLines(stream, 2, live=True)
    display.step(1, "judge")
    display.step(1, "judge", elapsed_s=0.25)
    display.done(1, "B: done")
    assert stream.getvalue() == (
        "\r\x1b[K[2/2] judge…" + "\r\x1b[K[2/2] judge (0.25s)" + "\r\x1b[K[2/2] B: done\n"
    )


def test_progress_lines_disabled_and_terminal_detection() -> None:
    quiet = io.StringIO()
    display = ProgressLines(quiet, 1, live=True, enabled=False)
    display.step(0, "judge")
    display.done(0, "done")
    assert quiet.getvalue() == ""
    assert ProgressLines(io.StringIO(), 1).live is False  # not a terminal


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


@pytest.fixture
def records(tmp_path: Path) -> str:
    path = tmp_path / "records.jsonl"
    path.write_text(
        "".join(json.dumps(record(t)) + "\n" for t in ("Paris", "Lyon")), encoding="utf-8"
    )
    return str(path)


def progress(err: str) -> list[str]:
    """The progress lines, durations replaced by ``#``."""
    lines = [line for line in err.splitlines() if line.startswith(("[", "scored "))]
    return [re.sub(r"\d+\.\d\ds", "#s", line) for line in lines]


def test_factuality_shows_each_stage_and_record(records: str) -> None:
    code, _, err = run_main("factuality", "--input", records, "--judge", "heuristic-lexical")
    assert code == 0, err
    assert progress(err) == [
        *[f"[1/2] {stage} (#s)" for stage in ("atomize", "retrieve", "judge", "infer")],
        "[1/2] Paris: 1 atom(s), precision 0.000 in #s",
        *[f"[2/2] {stage} (#s)" for stage in ("atomize", "retrieve", "judge", "infer")],
        "[2/2] Lyon: 1 atom(s), precision 0.000 in #s",
        "scored 2 of 2 record(s) in #s",
    ]


@pytest.mark.parametrize("flag", ["--quiet", "-q"])
def test_factuality_quiet(records: str, flag: str) -> None:
    code, out, err = run_main(
        "factuality", "--input", records, "--judge", "heuristic-lexical", flag
    )
    assert code == 0
    assert progress(err) == []
    assert "HeuristicJudge" in err  # notices are not progress
    assert "Paris" in out


@pytest.fixture
def answers(tmp_path: Path) -> str:
    answer = {
        "answer": "Seattle gets a lot of rain every year [1](id=1).",
        "documents": [{"page_content": "Seattle gets a lot of rain every year."}],
    }
    path = tmp_path / "answers.jsonl"
    path.write_text((json.dumps(answer) + "\n") * 2, encoding="utf-8")
    return str(path)


def test_citations_shows_each_answer(answers: str) -> None:
    code, _, err = run_main("citations", "--input", answers, "--judge", "heuristic-lexical")
    assert code == 0, err
    assert progress(err) == [
        f"[{i}/2] answer {i - 1}: recall 1.000, precision 1.000 (0 of 1 judgements failed) in #s"
        for i in (1, 2)
    ]
    code, _, err = run_main("citations", "--input", answers, "--judge", "heuristic-lexical", "-q")
    assert progress(err) == []
