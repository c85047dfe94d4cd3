"""A check that could not be made ends with an explicit error, never a confident verdict.

The three ways a check finds nothing usable (a search that returns nothing, a search provider
that raises, only dead URLs) each give the ``error`` verdict with confidence 0 and the reason,
in the result, in every report format, in the JSON line and in the CLI's exit status.
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda

from langchain_references.cli import factcheck as cli
from langchain_references.factcheck.report import render_json, render_report
from langchain_references.factcheck.result import FactCheckResult
from langchain_references.factcheck.search import RecordedSearch
from langchain_references.factcheck.types import SearchHit
from langchain_references.factcheck.verdict import Verdict, could_not_check
from tests.unit_tests.factcheck.test_chain import (
    RULES,
    STATEMENT,
    TERN_PAGES,
    KeywordJudge,
    make_chain,
    recording,
)


class RaisingSearch(RecordedSearch):
    """A search provider whose every query fails, as ``ddgs`` does without DNS."""

    def _search(self, query: str, k: int) -> list[SearchHit]:
        raise OSError("[Errno -3] Temporary failure in name resolution")


@pytest.fixture
def dead_links(dead_local_url: str) -> RecordedSearch:
    return RecordedSearch(
        {STATEMENT: [{"title": f"t{i}", "link": f"{dead_local_url}{i}"} for i in range(3)]}
    )


def nothing_found() -> RecordedSearch:
    return RecordedSearch({STATEMENT: []})


def search_raises() -> RecordedSearch:
    return RaisingSearch({})


CASES: dict[str, tuple[Callable[[], RecordedSearch], str]] = {
    "nothing found": (nothing_found, "the search found nothing for"),
    "search raises": (search_raises, "search failed: "),
}


def assert_could_not_check(result: FactCheckResult, reason_start: str) -> None:
    assert result.verdict is Verdict.ERROR  # not "not enough evidence"
    assert (result.confidence, result.score) == (0.0, 0.0)
    assert not result.checked
    assert result.error is not None
    assert result.error.startswith(reason_start), result.error
    assert result.verdict_details == {"error": result.error}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_search_that_fails_or_finds_nothing_is_an_error(case: str, mode: str) -> None:
    build, reason_start = CASES[case]
    judge = KeywordJudge(RULES)
    chain = make_chain(build(), judge)

    result = chain.invoke(STATEMENT) if mode == "sync" else await chain.ainvoke(STATEMENT)

    assert_could_not_check(result, reason_start)
    assert judge.seen == []
    if case == "search raises":
        assert "Temporary failure in name resolution" in result.error  # type: ignore[operator]


async def test_only_dead_urls_is_an_error_naming_the_fetch_failure(
    dead_links: RecordedSearch,
) -> None:
    result = await make_chain(dead_links, KeywordJudge(RULES)).ainvoke(STATEMENT)

    assert_could_not_check(result, "no page could be fetched (3 hits): connection failed")
    assert result.error is not None
    assert result.error.endswith("(and 2 more)")
    assert [f.stage for f in result.failed_sources] == ["fetch"] * 3


async def test_passages_judged_as_saying_nothing_are_still_not_enough_evidence() -> None:
    from langchain_references.demo.site import serve_pages

    with serve_pages(TERN_PAGES) as base_url:
        neutral = KeywordJudge({"no such keyword": RULES["supportive"]})
        result = await make_chain(recording(base_url, list(TERN_PAGES)), neutral).ainvoke(STATEMENT)

    assert result.verdict is Verdict.NOT_ENOUGH_EVIDENCE  # judged, and nothing said: a verdict
    assert result.error is None
    assert result.checked


def error_result() -> FactCheckResult:
    return FactCheckResult.could_not_check(
        STATEMENT, "search failed: <b>DNS</b> [1](id=1) down", failed_sources=[]
    )


@pytest.mark.parametrize(
    ("fmt", "header"),
    [
        ("markdown", "**Verdict: Could not check** (error: search failed: "),
        ("text", "Verdict: COULD NOT CHECK (error: search failed: <b>DNS</b>"),
        ("html", '<p class="verdict verdict-error"><strong>Could not check</strong> (error: '),
    ],
)
def test_every_report_format_shows_the_error_and_no_confidence(fmt: str, header: str) -> None:
    report = render_report(error_result(), fmt=fmt)  # type: ignore[arg-type]

    assert header in report
    [verdict_line] = [line for line in report.splitlines() if header in line]
    assert "confidence" not in verdict_line
    assert "Not enough evidence" not in report
    if fmt == "html":
        assert "&lt;b&gt;DNS&lt;/b&gt;" in report  # the reason is untrusted text


def test_json_carries_the_error_verdict_and_reason() -> None:
    data = json.loads(render_json(error_result()))

    assert data["verdict"] == "error"
    assert data["confidence"] == 0.0
    assert data["error"].startswith("search failed: ")
    assert FactCheckResult.model_validate(data) == error_result()


@pytest.mark.parametrize(
    "fields",
    [
        {"verdict": Verdict.ERROR, "confidence": 0.0, "score": 0.0},  # no reason
        {"verdict": Verdict.ERROR, "confidence": 1.0, "score": 0.0, "error": "x"},
        {"verdict": Verdict.NOT_ENOUGH_EVIDENCE, "confidence": 1.0, "score": 0.0, "error": "x"},
    ],
)
def test_an_error_verdict_always_has_a_reason_and_no_confidence(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="error"):
        FactCheckResult(statement=STATEMENT, **fields)


def test_could_not_check_needs_a_reason() -> None:
    assert could_not_check("x").verdict is Verdict.ERROR
    with pytest.raises(ValueError, match="blank"):
        could_not_check("  ")


# --------------------------------------------------------------------------- the CLI


def cli_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure_parser(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def offline_chain(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``build_chain`` replaced: a chain over the search in ``holder["search"]``."""
    holder: dict[str, Any] = {}

    def broken(statement: str) -> FactCheckResult:
        raise RuntimeError("chain broke")

    def build_chain(args: argparse.Namespace, stack: Any, err: Any) -> Any:
        if holder.get("raise"):
            chain = make_chain(nothing_found(), KeywordJudge(RULES))
            chain.pipeline = RunnableLambda(broken)
            return chain
        return make_chain(holder["search"], KeywordJudge(RULES))

    monkeypatch.setattr(cli, "build_chain", build_chain)
    return holder


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_exits_1_and_the_json_line_says_why(case: str, offline_chain: dict[str, Any]) -> None:
    offline_chain["search"] = CASES[case][0]()
    out, err = io.StringIO(), io.StringIO()

    code = cli.run(cli_args(STATEMENT, "--json"), out=out, err=err)

    assert code == 1
    [line] = out.getvalue().splitlines()
    data = json.loads(line)
    assert (data["verdict"], data["confidence"]) == ("error", 0.0)
    assert data["error"].startswith(CASES[case][1])
    assert "[1/1] error: could not check (" in err.getvalue()
    assert "checked 0 of 1 statement(s)" in err.getvalue()
    assert "error: 1 of 1 statement(s) could not be checked" in err.getvalue()


def test_cli_text_report_shows_could_not_check(offline_chain: dict[str, Any]) -> None:
    offline_chain["search"] = RaisingSearch({})
    out = io.StringIO()

    code = cli.run(cli_args(STATEMENT, "--style", "text", "-q"), out=out, err=io.StringIO())

    assert code == 1
    assert "Verdict: COULD NOT CHECK (error: search failed: " in out.getvalue()
    assert "NOT ENOUGH EVIDENCE" not in out.getvalue()


def test_cli_writes_a_json_line_for_a_statement_whose_check_raised(
    offline_chain: dict[str, Any],
) -> None:
    offline_chain["raise"] = True
    out, err = io.StringIO(), io.StringIO()

    code = cli.run(cli_args(STATEMENT, "other statement", "--json"), out=out, err=err)

    assert code == 1
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [d["statement"] for d in lines] == [STATEMENT, "other statement"]
    assert {d["verdict"] for d in lines} == {"error"}
    assert {d["error"] for d in lines} == {"RuntimeError: chain broke"}
    # the chain's judge is named even by a check that raised
    assert [d["judge"] for d in lines] == [
        {"kind": "custom", "model": None, "description": "custom judge KeywordJudge"}
    ] * 2
    assert "error: 2 of 2 statement(s) could not be checked" in err.getvalue()
