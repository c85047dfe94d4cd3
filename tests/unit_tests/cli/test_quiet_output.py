"""stdout carries results only, stderr no library's DEBUG or INFO lines (unless ``-v``).

Each batch command runs in a subprocess, as a user runs it: the logging set-up of the entry
point, the libraries imported in the order the command imports them (bm25s sets its own logger
to DEBUG at import), and Ray's own output under ``--engine ray``.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit_tests.cli.test_citations import write_answers
from tests.unit_tests.conftest import REPO_ROOT

MOON = "The Moon is closer to Earth than Europa is to Jupiter"
#: A log line of the CLI's handler (``LEVEL logger: message``) below WARNING.
QUIET_LEVELS = re.compile(r"^(DEBUG|INFO) \S+: ", re.MULTILINE)


def cli(*argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "langchain_references.cli", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def json_records(stdout: str) -> list[dict[str, object]]:
    """Every stdout line parsed as JSON (a line that is not fails the test)."""
    lines = stdout.splitlines()
    assert lines, "no output"
    return [json.loads(line) for line in lines]


def assert_quiet(stderr: str) -> None:
    assert QUIET_LEVELS.findall(stderr) == []
    assert "bm25s" not in stderr
    assert "core_worker" not in stderr


@pytest.mark.slow
def test_factcheck_json_is_results_only(tmp_path: Path) -> None:
    done = cli(
        "factcheck",
        MOON,
        "Europa has an ocean",
        "--search",
        "demo",
        "--json",
        "--k",
        "3",
        "--max-results",
        "3",
        "--cache",
        str(tmp_path / "run.sqlite3"),
    )
    assert done.returncode == 0, done.stderr
    assert [r["statement"] for r in json_records(done.stdout)] == [MOON, "Europa has an ocean"]
    assert_quiet(done.stderr)


@pytest.mark.slow
def test_verbose_shows_info_lines(tmp_path: Path) -> None:
    done = cli(
        "factcheck",
        MOON,
        "--search",
        "demo",
        "--json",
        "-q",
        "-v",
        "--k",
        "3",
        "--max-results",
        "3",
        "--no-cache",
    )
    assert done.returncode == 0, done.stderr
    assert len(json_records(done.stdout)) == 1
    assert "INFO langchain_references.demo.site: Serving 9 page(s) at" in done.stderr
    assert not re.search(r"^DEBUG ", done.stderr, re.MULTILINE)  # -v is INFO, -vv DEBUG


@pytest.mark.slow
def test_citations_json_is_results_only(tmp_path: Path) -> None:
    done = cli(
        "citations",
        "--input",
        str(write_answers(tmp_path)),
        "--json",
        "--cache",
        str(tmp_path / "run.sqlite3"),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # one JSON document (indented), nothing else
    assert report["num_answers"] == 1
    assert_quiet(done.stderr)


@pytest.mark.slow
def test_factuality_writes_its_table_and_jsonl_only(shared_data: Path, tmp_path: Path) -> None:
    output = tmp_path / "scored.jsonl"
    done = cli(
        "factuality",
        "--input",
        str(shared_data / "factreasoner_flaherty_wikipedia.json"),
        "--output",
        str(output),
        "--cache",
        str(tmp_path / "run.sqlite3"),
    )
    assert done.returncode == 0, done.stderr
    assert len(json_records(output.read_text(encoding="utf-8"))) == 1
    assert QUIET_LEVELS.findall(done.stdout) == []
    assert done.stdout.startswith("FactReasoner")  # the table, from its first line
    assert_quiet(done.stderr)


@pytest.mark.slow
def test_factcheck_on_ray_json_is_results_only() -> None:
    # Its own Ray, in the command's process: one of the Ray tests (tests/conftest.py), so that
    # ``make unit`` does not run it beside another Ray.
    pytest.importorskip("ray")
    done = cli(
        "factcheck",
        MOON,
        "Europa has an ocean",
        "--search",
        "demo",
        "--json",
        "--k",
        "3",
        "--max-results",
        "3",
        "--no-cache",
        "--engine",
        "ray",
        "--workers",
        "2",
        "--ray-batch-size",
        "1",
        timeout=400,
    )
    assert done.returncode == 0, done.stderr
    assert [r["statement"] for r in json_records(done.stdout)] == [MOON, "Europa has an ocean"]
    assert_quiet(done.stderr)
    assert "(raylet)" not in done.stderr


def test_bm25s_logger_follows_the_application_whoever_imports_it_first() -> None:
    bm25s = pytest.importorskip("bm25s")
    from langchain_references.services.retrieval import BM25Index

    logger = logging.getLogger("bm25s")
    logger.setLevel(logging.DEBUG)  # as ``import bm25s`` leaves it
    assert bm25s.BM25 is not None
    BM25Index.build(["a"], ["alpha beta"])
    assert logger.level == logging.NOTSET
    assert logger.getEffectiveLevel() == logging.getLogger().getEffectiveLevel()
