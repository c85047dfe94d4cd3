"""``--version``, ``--help`` and every command's ``--help`` load nothing heavy.

The parser is built from :mod:`langchain_references.cli.parsers`; the judges, embeddings,
LangChain tracers, engines and servers load only when a command runs. Checked in a fresh
interpreter (``sys.modules`` of this one holds everything the other tests imported); the
time it takes is measured by ``benchmarks/bench_cli_import.py``, never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from langchain_references.cli import build_parser
from langchain_references.cli._commands import LazyCommand
from tests.unit_tests.conftest import REPO_ROOT

#: Every small command: the program's options and each command's ``--help``.
SMALL_COMMANDS = [
    ["--version"],
    ["--help"],
    ["factcheck", "--help"],
    ["factuality", "--help"],
    ["citations", "--help"],
    ["demo", "--help"],
    ["index", "--help"],
    ["index", "build", "--help"],
    ["index", "add", "--help"],
    ["serve", "--help"],
]

#: Module prefixes none of them may import (``import langchain_core`` imports no tracer).
HEAVY = (
    "langchain_references.judges",
    "langchain_references.services.embeddings",
    "langchain_references.factcheck.chain",
    "langchain_core.tracers",
    "chromadb",
    "ray",
    "fastapi",
    "numpy",
    "onnxruntime",
)


def imported_after(argv: list[str]) -> dict[str, object]:
    """Run ``main(argv)`` in a fresh interpreter: its exit status and the modules it loaded."""
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        import langchain_core

        before = set(sys.modules)
        from langchain_references.cli import main

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main({argv!r}, out=out, err=out)
        print(json.dumps({{"status": status, "output": out.getvalue(),
                          "before": sorted(before), "after": sorted(sys.modules)}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def _heavy(modules: object) -> list[str]:
    assert isinstance(modules, list)
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in HEAVY)]


def test_import_langchain_core_itself_loads_none_of_the_heavy_modules() -> None:
    # the baseline of the test below: what is forbidden is the CLI's doing, not langchain_core's
    assert _heavy(imported_after(["--version"])["before"]) == []


@pytest.mark.parametrize("argv", SMALL_COMMANDS, ids=" ".join)
def test_small_commands_import_no_judge_embeddings_tracer_or_engine(argv: list[str]) -> None:
    report = imported_after(argv)
    assert report["status"] == 0, report["output"]
    assert _heavy(report["after"]) == [], argv


def test_the_commands_are_loaded_when_they_run_and_the_arguments_still_pickle() -> None:
    import pickle

    args = build_parser().parse_args(["citations", "--input", "answers.jsonl"])
    assert args.func == LazyCommand("langchain_references.cli.citations")
    assert pickle.loads(pickle.dumps(args)).func == args.func  # the arguments travel to Ray
    build = build_parser().parse_args(["index", "build", "--input", "c.jsonl", "--name", "n"])
    assert build.func == LazyCommand("langchain_references.cli.index", "run_build")
    add = build_parser().parse_args(["index", "add", "--input", "c.jsonl", "--name", "n"])
    assert add.func == LazyCommand("langchain_references.cli.index", "run_add")


def test_each_command_module_uses_the_options_of_its_parser_module() -> None:
    # one definition of each option: the command modules re-export their parser's
    from langchain_references.cli import citations, demo, factcheck, factuality, index, serve
    from langchain_references.cli.parsers import citations as p_citations
    from langchain_references.cli.parsers import demo as p_demo
    from langchain_references.cli.parsers import factcheck as p_factcheck
    from langchain_references.cli.parsers import factuality as p_factuality
    from langchain_references.cli.parsers import index as p_index
    from langchain_references.cli.parsers import serve as p_serve

    pairs = [
        (citations, p_citations),
        (demo, p_demo),
        (factcheck, p_factcheck),
        (factuality, p_factuality),
        (serve, p_serve),
    ]
    for command, parser in pairs:
        assert command.configure_parser is parser.configure_parser, command.__name__
        assert (command.HELP, command.DESCRIPTION) == (parser.HELP, parser.DESCRIPTION)
    assert index.add_parser is p_index.add_parser
    assert index.configure_build_parser is p_index.configure_build_parser
