"""The one entry point: ``cli.main([...], out=..., err=...)`` and ``python -m ...cli``."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import langchain_references
from langchain_references.cli import build_parser, main
from tests.unit_tests.conftest import REPO_ROOT

#: Every subcommand and options its ``--help`` must show.
COMMANDS = {
    "factcheck": ["STATEMENT", "--file", "--search", "--model", "--json", "--concurrency"],
    "factuality": [
        "--input",
        "--graph-version",
        "--judge",
        "--llm",
        "--output",
        "--top-k",
        "--method",
    ],
    "citations": ["--input", "--judge", "--json", "--min-words", "--judge-concurrency"],
    "demo": ["--question", "--style", "--model", "--offline", "-k"],
}


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ["factcheck", "x"],
        ["factuality", "--input", "f.jsonl"],
        ["citations", "--input", "f.jsonl"],
        ["demo"],
    ],
)
def test_subcommands_are_registered(argv: list[str]) -> None:
    assert callable(build_parser().parse_args(argv).func)


def test_help_lists_every_command() -> None:
    code, out, err = run_main("--help")
    assert code == 0
    assert err == ""
    assert out.startswith("usage: langchain-references ")
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize(("command", "options"), sorted(COMMANDS.items()))
def test_every_subcommand_has_its_own_help(command: str, options: list[str]) -> None:
    code, out, err = run_main(command, "--help")
    assert code == 0
    assert err == ""
    assert out.startswith(f"usage: langchain-references {command} ")
    for option in options:
        assert option in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["nope"], "invalid choice: 'nope'"),
        (["factuality"], "the following arguments are required: --input"),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_exit_2_on_err(argv: list[str], message: str) -> None:
    code, out, err = run_main(*argv)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: langchain-references")
    assert message in err


@pytest.mark.parametrize(
    ("argv", "prog", "unknown"),
    [
        (["demo", "--bogus"], "langchain-references demo", "--bogus"),
        (
            ["factcheck", "x", "--search", "demo", "--bogus"],
            "langchain-references factcheck",
            "--bogus",
        ),
        (
            ["citations", "--input", "a.jsonl", "--bogus", "1"],
            "langchain-references citations",
            "--bogus 1",
        ),
        (
            ["index", "build", "--input", "c", "--name", "n", "-z"],
            "langchain-references index build",
            "-z",
        ),
    ],
)
def test_an_unknown_option_prints_its_commands_usage(
    argv: list[str], prog: str, unknown: str
) -> None:
    code, out, err = run_main(*argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"usage: {prog} [-h]")
    assert err.splitlines()[-1] == f"{prog}: error: unrecognized arguments: {unknown}"


def test_factuality_graph_version_and_its_deprecated_spelling() -> None:
    parser = build_parser()
    assert parser.parse_args(["factuality", "--input", "x.json"]).graph_version == 2
    args = parser.parse_args(["factuality", "--input", "x.json", "--graph-version", "3"])
    assert args.graph_version == 3
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        old = parser.parse_args(["factuality", "--input", "x.json", "--version", "1"])
    assert old.graph_version == 1
    assert err.getvalue() == (
        "warning: factuality --version N is deprecated; use --graph-version N\n"
    )


def test_factuality_version_alone_is_the_programs_version() -> None:
    code, out, err = run_main("factuality", "--version")
    assert (code, err) == (0, "")
    assert out == f"langchain-references {langchain_references.__version__}\n"


@pytest.mark.parametrize("command", ["factuality", "citations", "factcheck"])
def test_judge_concurrency_and_its_deprecated_spelling(command: str) -> None:
    base = {"factuality": ["--input", "x"], "citations": ["--input", "x"], "factcheck": ["s"]}
    parser = build_parser()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert parser.parse_args([command, *base[command]]).max_concurrency == 4
        new = parser.parse_args([command, *base[command], "--judge-concurrency", "7"])
        assert err.getvalue() == ""
        old = parser.parse_args([command, *base[command], "--max-concurrency", "3"])
    assert (new.max_concurrency, old.max_concurrency) == (7, 3)
    assert err.getvalue() == "warning: --max-concurrency is deprecated; use --judge-concurrency\n"


def test_factcheck_has_one_flag_per_concurrency() -> None:
    code, out, _err = run_main("factcheck", "--help")
    assert code == 0
    flags = [w.strip("[],") for w in out.split() if w.strip("[],").endswith("concurrency")]
    assert sorted(set(flags)) == ["--concurrency", "--judge-concurrency", "--max-concurrency"]
    assert "deprecated: same as --judge-concurrency" in " ".join(out.split())


def test_a_command_that_cannot_run_prints_one_error_line() -> None:
    code, out, err = run_main("citations", "--input", "/nonexistent/answers.jsonl")
    assert code == 2
    assert out == ""
    assert err.startswith("error: cannot read /nonexistent/answers.jsonl")
    assert err.count("\n") == 1


def test_factcheck_dispatch_runs_the_offline_demo() -> None:
    code, out, _ = run_main("factcheck", "The Moon orbits the Earth.", "--search", "demo", "--json")
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["statement"] == "The Moon orbits the Earth."
    assert result["verdict"] in {"supported", "refuted", "not_enough_evidence", "disputed"}
    evidence = result["supporting"] + result["contradicting"]
    assert evidence
    assert all(e["url"].startswith("http://127.0.0.1:") for e in evidence)


def test_demo_dispatch() -> None:
    code, out, err = run_main("demo", "--style", "text")
    assert code == 0, err
    assert "- [1] " in out


def test_main_defaults_to_stdout_and_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["citations", "--help"]) == 0
    assert main(["citations", "--input", "/nonexistent/answers.jsonl"]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("usage: langchain-references citations ")
    assert err.startswith("error: cannot read")


def _module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "langchain_references.cli", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_python_dash_m_help() -> None:
    done = _module("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: langchain-references ")
    for command in COMMANDS:
        assert command in done.stdout
    done = _module("demo", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: langchain-references demo ")


@pytest.mark.slow
def test_python_dash_m_user_error_has_no_traceback() -> None:
    done = _module("factuality", "--input", "/nonexistent/records.jsonl")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: cannot read /nonexistent/records.jsonl: ")


@pytest.mark.slow
def test_python_dash_m_reports_each_bad_record_once(tmp_path: Path) -> None:
    """With the real logging set-up: one ``error:`` line per bad record, no traceback."""
    good = {
        "answer": "Seattle gets a lot of rain every year [1](id=1).",
        "documents": [{"page_content": "Seattle gets a lot of rain every year."}],
    }
    path = tmp_path / "answers.jsonl"
    deep = '{"answer": "x", "documents": [], "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    lines = [json.dumps(good), json.dumps({"answer": "x", "document": []}), deep]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = _module("citations", "--input", str(path), "--judge", "heuristic-lexical")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "RecursionError" not in done.stderr
    assert done.stderr.count(f"{path}:2") == 1
    assert done.stderr.count(f"{path}:3") == 1
    assert f"error: {path}:2: document: unknown field (did you mean 'documents'?)" in done.stderr
    assert f"error: {path}:3: JSON nested deeper than 100 levels (record skipped)" in done.stderr


def test_version() -> None:
    code, out, err = run_main("--version")
    assert (code, err) == (0, "")
    assert out == f"langchain-references {importlib.metadata.version('langchain-references')}\n"
    assert out.removeprefix("langchain-references ").strip() == langchain_references.__version__


@pytest.mark.slow
def test_python_dash_m_version() -> None:
    done = _module("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"langchain-references {langchain_references.__version__}\n"


@pytest.mark.slow
def test_python_dash_m_dead_network(tmp_path: Path) -> None:
    """A judge that cannot reach its API: one warning, "k of n judgements failed", exit 1."""
    pytest.importorskip("langchain_openai")
    answer = {
        "answer": "Seattle gets a lot of rain every year [1](id=1). Tokyo is in Japan [2](id=2).",
        "documents": [{"page_content": "Seattle is rainy."}, {"page_content": "Tokyo."}],
    }
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(answer) + "\n", encoding="utf-8")
    environment = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # nothing listens: connection refused
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "langchain_references.cli",
            "citations",
            "--input",
            str(path),
            "--judge",
            "llm:openai:gpt-4o-mini",
        ],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("LLMJudge failed") == 1  # the same warning is not repeated
    assert "no scores: 2 of 2 judgements failed (first: " in done.stdout
    assert "0.000" not in done.stdout


@pytest.mark.slow
def test_version_when_the_distribution_is_not_installed() -> None:
    script = (
        "import importlib.metadata as metadata\n"
        "def version(name):\n"
        "    raise metadata.PackageNotFoundError(name)\n"
        "metadata.version = version\n"
        "import langchain_references\n"
        "print(langchain_references.__version__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "0+unknown\n"), done.stderr
