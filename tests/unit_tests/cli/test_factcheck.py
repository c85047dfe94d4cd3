"""The ``factcheck`` command line, end to end and offline (demo site, recorded search)."""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references.cli import _models, main
from langchain_references.cli import factcheck as cli
from langchain_references.cli._commands import add_command
from langchain_references.factcheck.result import (
    PROGRESS_EVENT,
    FactCheckProgress,
    FactCheckResult,
)
from langchain_references.factcheck.verdict import Verdict
from tests.unit_tests.conftest import REPO_ROOT, LocalSite
from tests.unit_tests.fakes import ChatScripted

MOON = "The Moon is closer to Earth than Europa is to Jupiter"
#: Issue 34: the demo's top passage says the Moon orbits Earth.
ORBIT = "The Moon orbits the Earth."
VERDICTS = {v.value for v in Verdict}
#: How the default judge names itself in the JSON (and, as ``KIND (MODEL) — ...``, in reports).
HEURISTIC = {
    "kind": "heuristic",
    "model": None,
    "description": "offline heuristic (word overlap and similarity), not an NLI model: rough; "
    "set an LLM judge for real checks",
}


#: Fewer results and passages than the defaults, so each run embeds less (a test's own
#: values come later and win).
SMALL = ("--max-results", "5", "--k", "5")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``langchain-references factcheck ...`` through the package's single entry point."""
    code = main(["factcheck", *SMALL, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_demo_search_runs_offline_and_reports_with_citations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, ORBIT, "--search", "demo", "--style", "text")

    assert code == 0
    assert out.startswith(f"Fact check: {ORBIT}\nVerdict: SUPPORTED ")
    assert out.splitlines()[2] == f"Judge: heuristic (no model) — {HEURISTIC['description']}"
    assert "\nReferences:\n- [1] " in out
    assert "(http://127.0.0.1:" in out  # evidence fetched from the local demo server
    assert "Earth's Moon at a Glance" in out
    assert cli.HEURISTIC_NOTICE in err
    assert "search: demo corpus served at http://127.0.0.1:" in err
    for stage in ("search", "fetch", "extract", "passages", "relevance", "judge", "aggregate"):
        assert f"[1/1] {stage}: " in err
    assert "checked 1 of 1 statement(s)" in err


def test_demo_search_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, MOON, "--search", "demo", "--json", "-q", "--k", "5")

    assert code == 0
    assert err == ""  # --quiet
    [data] = json_lines(out)
    assert data["judge"] == HEURISTIC
    result = FactCheckResult.model_validate(data)
    assert result.statement == MOON
    assert result.verdict.value in VERDICTS
    assert result.counts.judged == 5
    assert result.counts.fetched == result.counts.hits == 5
    assert all(e.url.startswith("http://127.0.0.1:") for e in result.evidence)
    assert list(result.timings) == [
        "search",
        "fetch",
        "extract",
        "passages",
        "relevance",
        "judge",
        "aggregate",
    ]


@pytest.mark.parametrize(
    ("style", "start", "judge_line"),
    [
        ("markdown", "### Fact check:", "*Judge: heuristic \\(no model\\) — offline heuristic "),
        ("html", "<sec", '<p class="judge judge-heuristic">Judge: heuristic (no model) — offline '),
    ],
)
def test_styles(
    capsys: pytest.CaptureFixture[str], style: str, start: str, judge_line: str
) -> None:
    code, out, _ = run_cli(capsys, MOON, "--search", "demo", "--style", style, "-q", "--k", "3")
    assert code == 0
    assert out.startswith(start)
    assert sum(line.startswith(judge_line) for line in out.splitlines()) == 1


def write_recording(tmp_path: Path, statement: str, links: Sequence[str]) -> Path:
    path = tmp_path / "recording.json"
    results = [{"title": f"result {i}", "snippet": "", "link": u} for i, u in enumerate(links)]
    path.write_text(json.dumps({statement: results}), encoding="utf-8")
    return path


def test_recorded_search_with_a_local_server_records_dead_sources(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    local_site: LocalSite,
    dead_local_url: str,
) -> None:
    statement = "Arctic terns fly from pole to pole"
    links = [local_site.url("/page/arctic-terns"), dead_local_url, local_site.url("/404")]
    recording = write_recording(tmp_path, statement, links)

    code, out, _ = run_cli(
        capsys, statement, "--search", f"recorded:{recording}", "--allow-private", "--json", "-q"
    )

    assert code == 0
    [data] = json_lines(out)
    failures = {f["url"]: (f["stage"], f["reason"]) for f in data["failed_sources"]}
    assert failures[dead_local_url][0] == "fetch"
    assert failures[dead_local_url][1].startswith("connection failed")
    assert failures[local_site.url("/404")] == ("fetch", "HTTP 404")
    assert data["counts"]["fetched"] == 1
    assert data["counts"]["judged"] >= 1
    assert local_site.requests["/page/arctic-terns"] == 1


def test_local_servers_are_refused_without_allow_private(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, local_site: LocalSite
) -> None:
    statement = "Arctic terns fly from pole to pole"
    recording = write_recording(tmp_path, statement, [local_site.url("/page/arctic-terns")])

    code, out, _ = run_cli(capsys, statement, "--search", f"recorded:{recording}", "--json", "-q")

    assert code == 1  # nothing could be fetched: the statement was not checked
    [data] = json_lines(out)
    [failure] = data["failed_sources"]
    assert failure["reason"] == "refused: loopback address 127.0.0.1"
    assert data["verdict"] == "error"
    assert data["error"] == "no page could be fetched (1 hit): refused: loopback address 127.0.0.1"
    assert local_site.requests["/page/arctic-terns"] == 0


def test_local_folder_search_serves_and_fetches_the_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "terns.html").write_text(
        "<html><head><title>Terns</title></head><body><article><p>"
        + "Arctic terns fly from pole to pole every year, the longest migration known. " * 3
        + "</p></article></body></html>",
        encoding="utf-8",
    )
    (tmp_path / "notes.txt").write_text(
        "Puffins dig burrows on grassy cliffs and come back to them every spring.\n",
        encoding="utf-8",
    )

    code, out, err = run_cli(
        capsys, "Arctic terns fly from pole to pole", "--search", f"local:{tmp_path}", "--json"
    )

    assert code == 0, err
    assert "2 file(s) of" in err
    [data] = json_lines(out)
    assert data["counts"]["hits"] >= 1
    assert data["failed_sources"] == []
    assert any(e["url"].endswith("/terns.html") for e in data["supporting"] + data["contradicting"])


def test_statements_from_a_file_are_checked_concurrently_in_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    statements = ["Europa has an ocean under its ice", "Honeybees dance to share directions"]
    file = tmp_path / "statements.txt"
    file.write_text(f"# a comment\n{statements[0]}\n\n   \n{statements[1]}\n", encoding="utf-8")

    code, out, err = run_cli(
        capsys, "--file", str(file), "--search", "demo", "--json", "--concurrency", "2", "--k", "4"
    )

    assert code == 0
    assert [d["statement"] for d in json_lines(out)] == statements
    assert "[1/2] aggregate: " in err
    assert "[2/2] aggregate: " in err
    assert "checked 2 of 2 statement(s)" in err


def test_a_statement_file_that_is_not_utf8_names_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    file = tmp_path / "statements.txt"
    file.write_bytes(b"# a comment\nEuropa has an ocean\nCaf\xe9 au lait is sweet\n")
    code, out, err = run_cli(capsys, "--file", str(file), "--search", "demo")
    assert code == 2
    assert out == ""
    assert err == f"error: cannot read {file}: {file}:3: not UTF-8: byte 0xE9 at column 4\n"


def keyword_judge_reply(keyword: str) -> Callable[[list[BaseMessage]], AIMessage]:
    """A scripted judge reply: entails if the passage mentions ``keyword``, else unknown."""

    def step(messages: list[BaseMessage]) -> AIMessage:
        passage = str(messages[-1].content).split("<passage>", 1)[-1]
        entails = keyword in passage.lower()
        args = {
            "label": "entails" if entails else "unknown",
            "confidence": 0.95 if entails else 0.7,
            "rationale": f"scripted: keyword {'found' if entails else 'absent'}",
        }
        return AIMessage(
            content="",
            tool_calls=[{"name": "JudgeReply", "args": args, "id": "c1", "type": "tool_call"}],
        )

    return step


@pytest.mark.parametrize(
    "judge_args", [("--judge", "llm:scripted:judge"), ("--model", "scripted:judge")]
)
def test_judge_option_uses_an_llm_judge(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    judge_args: tuple[str, str],
) -> None:
    model = ChatScripted(model="judge", script=[keyword_judge_reply("europa")] * 50)
    loaded: list[str] = []

    def fake_loader(name: str, **kwargs: Any) -> BaseChatModel:
        loaded.append(name)
        return model

    monkeypatch.setattr(_models, "load_chat_model", fake_loader)

    code, out, err = run_cli(capsys, MOON, "--search", "demo", *judge_args, "--json", "--k", "6")

    assert code == 0
    assert loaded == ["scripted:judge"]
    assert "judge: LLMJudge with scripted:judge" in err
    deprecated = cli.MODEL_DEPRECATED.format(model="scripted:judge")
    assert (deprecated in err) == (judge_args[0] == "--model")
    assert "warning: --model is deprecated; use --judge llm:scripted:judge" in deprecated
    assert cli.HEURISTIC_NOTICE not in err
    [data] = json_lines(out)
    assert len(model.calls) == data["counts"]["judged"] == 6
    assert data["supporting"]
    assert all("europa" in e["text"].lower() for e in data["supporting"])
    assert all(e["rationale"] == "scripted: keyword found" for e in data["supporting"])
    assert data["contradicting"] == []
    assert data["verdict"] == "supported"
    assert (data["judge"]["kind"], data["judge"]["model"]) == ("llm", "scripted:judge")


@pytest.mark.skipif(
    importlib.util.find_spec("langchain") is not None, reason="langchain is installed"
)
def test_judge_option_without_langchain_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, MOON, "--search", "demo", "--judge", "llm:openai:gpt-4o-mini")
    assert code == 2
    assert out == ""
    assert "needs the optional package 'langchain.chat_models' (extra [llm])" in err
    assert 'pip install ".[llm]"' in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([MOON, "--search", "altavista"], "unknown --search 'altavista'"),
        ([MOON, "--search", "local:/no/such/folder"], "is not a directory"),
        ([MOON, "--search", "recorded:/no/such/file.json"], "--search recorded:"),
        (["--search", "demo"], "no statement to check"),
        (["--file", "/no/such/statements.txt", "--search", "demo"], "cannot read"),
        ([MOON, "--search", "demo", "--judge", "oracle"], "--judge must be 'heuristic'"),
        (
            [MOON, "--search", "demo", "--judge", "heuristic-lexical", "--model", "a:b"],
            "give --judge or the deprecated --model, not both",
        ),
    ],
)
def test_bad_options_exit_with_status_2_and_a_message(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err


@pytest.mark.parametrize(
    "argv", [["x", "--k", "0"], ["x", "--timeout", "-1"], ["x", "--style", "pdf"]]
)
def test_argument_types_are_checked_by_argparse(argv: list[str]) -> None:
    err = io.StringIO()
    assert main(["factcheck", *argv], err=err) == 2
    assert "error: argument" in err.getvalue()


def test_the_module_has_no_entry_point_of_its_own() -> None:
    assert not hasattr(cli, "main")
    assert not hasattr(cli, "build_parser")


def test_add_command_wires_the_subcommand() -> None:
    parser = argparse.ArgumentParser(prog="langchain-references")
    sub = parser.add_subparsers(dest="command", required=True)
    add_command(sub, "factcheck", cli)

    args = parser.parse_args(["factcheck", "a statement", "--search", "demo", "--json"])

    assert args.func is cli.run
    assert args.statements == ["a statement"]
    assert args.search == "demo"
    assert args.json is True


def test_progress_display_live_line_and_plain_lines() -> None:
    event = FactCheckProgress(
        statement="s", stage="fetch", done=True, detail="2 pages", elapsed_s=1
    )
    start = FactCheckProgress(statement="s", stage="fetch", done=False, detail="fetching")

    live = io.StringIO()
    display = cli.ProgressDisplay(live, 3, live=True)
    display.progress(1, start)
    display.progress(1, event)
    assert live.getvalue() == "\r\x1b[K[2/3] fetch: fetching…\r\x1b[K[2/3] fetch: 2 pages (1.00s)"

    plain = io.StringIO()
    display = cli.ProgressDisplay(plain, 3, live=False)
    display.progress(0, start)  # start events are only shown on a live line
    display.progress(0, event)
    assert plain.getvalue() == "[1/3] fetch: 2 pages (1.00s)\n"

    quiet = io.StringIO()
    cli.ProgressDisplay(quiet, 3, enabled=False).progress(0, event)
    assert quiet.getvalue() == ""


def _verdict(verdict: Verdict, confidence: float, score: float) -> FactCheckResult:
    return FactCheckResult(
        statement="s",
        verdict=verdict,
        confidence=confidence,
        score=score,
        total_s=1.5,
        verdict_details={"threshold": 0.3},
    )


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        # not enough evidence: the score beside its threshold, no "confidence 100%"
        (
            _verdict(Verdict.NOT_ENOUGH_EVIDENCE, 1.0, 0.0),
            "not_enough_evidence (score +0.00 < 0.30)",
        ),
        (
            _verdict(Verdict.NOT_ENOUGH_EVIDENCE, 0.6, 0.12),
            "not_enough_evidence (score +0.12 < 0.30)",
        ),
        (
            _verdict(Verdict.NOT_ENOUGH_EVIDENCE, 0.6, -0.12),
            "not_enough_evidence (score -0.12 > -0.30)",
        ),
        (_verdict(Verdict.SUPPORTED, 0.75, 0.75), "supported (confidence 75%, score +0.75 ≥ 0.30)"),
        (
            FactCheckResult.could_not_check("s", "search failed"),
            "error: could not check (search failed)",
        ),
    ],
)
def test_progress_display_finished_and_reused_lines(result: FactCheckResult, outcome: str) -> None:
    plain = io.StringIO()
    display = cli.ProgressDisplay(plain, 3, live=False)
    display.finished(0, result)
    display.reused(1, result)
    assert plain.getvalue().splitlines() == [
        f"[1/3] {outcome} in {result.total_s:.2f}s: s",
        f"[2/3] {outcome}, reused from the run cache: s",
    ]


def test_module_entry_point_runs_the_offline_demo() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "langchain_references.cli",
            "factcheck",
            MOON,
            "--search",
            "demo",
            "--json",
            "--quiet",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    [data] = json_lines(completed.stdout)
    assert data["statement"] == MOON
    assert data["verdict"] in VERDICTS


async def stub_check(statement: str, config: RunnableConfig) -> FactCheckResult:
    """Dispatches one progress event, then fails for statements containing 'boom'."""
    await adispatch_custom_event(
        PROGRESS_EVENT,
        FactCheckProgress(statement=statement, stage="search", done=True, detail="0 hits"),
        config=config,
    )
    await adispatch_custom_event("unrelated", {"ignored": True}, config=config)
    if "boom" in statement:
        raise RuntimeError("index corrupted")
    return FactCheckResult(
        statement=statement, verdict=Verdict.NOT_ENOUGH_EVIDENCE, confidence=1.0, score=0.0
    )


def test_a_failing_statement_is_reported_and_the_others_are_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "build_chain", lambda args, stack, err: RunnableLambda(stub_check))

    code, out, err = run_cli(capsys, "first", "boom now", "third", "--search", "demo", "--json")

    assert code == 1
    lines = json_lines(out)
    assert [d["statement"] for d in lines] == ["first", "boom now", "third"]
    assert [d["verdict"] == "error" for d in lines] == [False, True, False]
    assert lines[1]["error"] == "RuntimeError: index corrupted"
    for tag in ("[1/3]", "[2/3]", "[3/3]"):  # progress came through the callback handler
        assert f"{tag} search: 0 hits (0.00s)" in err
    assert "[2/3] error: RuntimeError: index corrupted (statement: boom now)" in err
    assert "checked 2 of 3 statement(s)" in err
