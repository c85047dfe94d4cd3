from __future__ import annotations

import json

import pytest

from langchain_references.cli import build_parser, main


@pytest.mark.parametrize(
    "argv",
    [["factcheck", "x"], ["factuality", "--input", "f.jsonl"], ["citations", "--input", "f.jsonl"]],
)
def test_subcommands_are_registered(argv: list[str]) -> None:
    assert callable(build_parser().parse_args(argv).func)


def test_factcheck_dispatch_runs_the_offline_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["factcheck", "The Moon orbits the Earth.", "--search", "demo", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["statement"] == "The Moon orbits the Earth."
    assert result["verdict"] in {"supported", "refuted", "not_enough_evidence", "disputed"}
    evidence = result["supporting"] + result["contradicting"]
    assert evidence
    assert all(e["url"].startswith("http://127.0.0.1:") for e in evidence)


def test_demo_dispatch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--style", "text"]) == 0
    assert "- [1] " in capsys.readouterr().out
