"""One error policy for the batch commands: an item's failure is reported for that item.

``factcheck``, ``factuality`` and ``citations``, on either engine: an item whose processing
raises (here a ``RuntimeError`` from a component, for one item) is named on stderr with the
error, is never a result or a score, and the other items are reported as usual; the command
exits with status 1. ``--engine ray`` runs in this process here: the actors' Runnable is built
by the command's own build function and the items travel pickled, as to Ray's actors (the Ray
engine itself is tested in ``test_ray_engine.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references.citations import evaluate_answers
from langchain_references.cli import _runner
from langchain_references.cli import citations as citations_cli
from langchain_references.cli import factcheck as factcheck_cli
from langchain_references.cli import factuality as factuality_cli
from langchain_references.factcheck.result import FactCheckResult
from langchain_references.factcheck.verdict import Verdict
from langchain_references.factuality.pipeline import create_factuality_evaluator
from langchain_references.services.engine import RayOptions
from tests.unit_tests.cli.test_interrupts import record, run_main, write_jsonl

ENGINES = {"local": [], "ray": ["--engine", "ray", "--workers", "1"]}


@pytest.fixture(params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The engine options; ``ray``'s actors are this process (the items still travel pickled)."""
    if request.param == "ray":
        pytest.importorskip("ray")  # --engine ray checks that the extra is installed

        @contextlib.contextmanager
        def run_on_ray(
            items: Sequence[Any], build: Any, args: argparse.Namespace, options: RayOptions
        ) -> Iterator[Iterator[tuple[int, Any]]]:
            runnable = build(args)  # as each actor does, once
            travelled = [pickle.loads(pickle.dumps(item)) for item in items]
            outcomes = runnable.batch(travelled, return_exceptions=True)
            yield iter(enumerate(outcomes))

        monkeypatch.setattr(_runner, "run_on_ray", run_on_ray)
    return ENGINES[str(request.param)]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


# ------------------------------------------------------------------ factuality


def explode_on(monkeypatch: pytest.MonkeyPatch, topic: str) -> None:
    """The evaluator raises RuntimeError for the record of ``topic`` (a component's bug)."""
    build = create_factuality_evaluator

    class Evaluator:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            inner = build(*args, **kwargs)

            def invoke(value: Any, config: RunnableConfig | None = None) -> Any:
                if value.topic == topic:
                    raise RuntimeError("the graph exploded")
                return inner.invoke(value, config)

            self.invoke = invoke

    monkeypatch.setattr(factuality_cli, "create_factuality_evaluator", Evaluator)


def test_factuality_a_record_that_raises_is_reported_and_the_others_are_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: list[str]
) -> None:
    explode_on(monkeypatch, "Lyon")
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris"), record("Lyon"), record("Nice")])
    output = tmp_path / "out.jsonl"
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)]
    code, out, err = run_main("factuality", *argv, "--no-cache", *engine)
    assert code == 1
    assert "Traceback" not in err
    assert error_lines(err) == [
        f"error: {path}:2: RuntimeError: the graph exploded (record not scored)"
    ]
    assert "[2/3] Lyon: error" in err.splitlines()
    assert "scored 2 of 3 record(s)" in err
    # the failed record is neither a row nor an output line; the others are, in order
    rows = [line.split()[0] for line in out.splitlines()[4:] if not line.startswith("wrote")]
    assert rows == ["Paris", "Nice"]
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["topic"] for r in written] == ["Paris", "Nice"]
    assert f"wrote 2 result(s) to {output}" in out


def test_factuality_when_every_record_fails_each_is_named_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    # no atoms and no --llm: each record's evaluation raises ValueError (its own message)
    path = write_jsonl(tmp_path / "in.jsonl", [{"response": "A."}, {"response": "B."}])
    output = tmp_path / "out.jsonl"
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)]
    code, out, err = run_main("factuality", *argv, "--no-cache")
    assert code == 1  # items failed, each reported: not a usage error (it was 2)
    no_atoms = "the input has no atoms: pass llm= (or atomizer=) to extract them from the response"
    assert error_lines(err) == [
        f"error: {path}:1: {no_atoms} (record not scored)",
        f"error: {path}:2: {no_atoms} (record not scored)",
        f"error: no record could be scored; nothing written to {output}",
    ]
    assert not output.exists()
    assert out.splitlines()[0] == "FactReasoner FR2, 2 record(s)"


# ------------------------------------------------------------------ citations


def answer(city: str) -> dict[str, Any]:
    return {
        "answer": f"{city} gets a lot of rain every single year [1](id=1).",
        "documents": [{"page_content": f"{city} gets a lot of rain every single year."}],
    }


def explode_on_answer(monkeypatch: pytest.MonkeyPatch, city: str) -> None:
    """Checking the answer about ``city`` raises RuntimeError (a component's bug)."""

    def evaluate(records: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        if city in records[0].answer:
            raise RuntimeError("the judge exploded")
        return evaluate_answers(records, *args, **kwargs)

    monkeypatch.setattr(citations_cli, "evaluate_answers", evaluate)


def test_citations_an_answer_that_raises_is_reported_and_counts_in_no_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: list[str]
) -> None:
    explode_on_answer(monkeypatch, "Bergen")
    cities = ["Seattle", "Bergen", "Galway"]
    path = write_jsonl(tmp_path / "answers.jsonl", [answer(c) for c in cities])
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--no-cache", *engine]
    code, out, err = run_main("citations", *argv, "--json")
    assert code == 1
    assert "Traceback" not in err
    assert error_lines(err) == [
        f"error: {path}:2: RuntimeError: the judge exploded (answer not checked)"
    ]
    assert "[2/3] answer 1: error" in err.splitlines()
    report = json.loads(out)
    assert [a["index"] for a in report["answers"]] == [0, 2]
    assert report["num_answers"] == 2
    # the failed answer is not a 0: the figures are those of the two answers checked
    assert (report["citation_recall"], report["macro_recall"]) == (1.0, 1.0)
    assert (report["citation_precision"], report["macro_precision"]) == (1.0, 1.0)

    code, text, _ = run_main("citations", *argv)
    assert code == 1
    rows = [line.split()[0] for line in text.splitlines() if line[:1].isalnum()]
    assert rows[:4] == ["answer", "0", "2", "all"]


# ------------------------------------------------------------------ factcheck


def check(statement: str) -> FactCheckResult:
    if "boom" in statement:
        raise RuntimeError("index corrupted")
    return FactCheckResult(
        statement=statement, verdict=Verdict.NOT_ENOUGH_EVIDENCE, confidence=1.0, score=0.0
    )


async def acheck(statement: str) -> FactCheckResult:
    return check(statement)


def test_factcheck_a_statement_that_raises_is_a_could_not_check_line(
    monkeypatch: pytest.MonkeyPatch, engine: list[str]
) -> None:
    chain = RunnableLambda(check, afunc=acheck)  # sync for the actors, async locally
    monkeypatch.setattr(factcheck_cli, "build_chain", lambda *args: chain)
    argv = ["first", "boom now", "third", "--json", "--no-cache", *engine]
    code, out, err = run_main("factcheck", *argv)
    assert code == 1
    lines = [json.loads(line) for line in out.splitlines()]
    assert [d["statement"] for d in lines] == ["first", "boom now", "third"]
    assert [d["verdict"] for d in lines] == ["not_enough_evidence", "error", "not_enough_evidence"]
    assert [d["error"] for d in lines] == [None, "RuntimeError: index corrupted", None]
    assert "[2/3] error: RuntimeError: index corrupted (statement: boom now)" in err.splitlines()
    assert error_lines(err) == ["error: 1 of 3 statement(s) could not be checked"]
