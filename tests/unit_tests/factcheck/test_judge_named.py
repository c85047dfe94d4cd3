"""Every fact-check verdict names its judge: in the result, its JSON and every report format."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from langchain_references.factcheck.report import render_report
from langchain_references.factcheck.result import FactCheckResult
from langchain_references.factcheck.search import RecordedSearch
from langchain_references.factcheck.verdict import Verdict
from langchain_references.judges import (
    HeuristicJudge,
    Judge,
    JudgeInfo,
    Judgement,
    Label,
    LLMJudge,
)
from tests.unit_tests.factcheck.test_chain import (
    RULES,
    STATEMENT,
    TERN_PAGES,
    KeywordJudge,
    make_chain,
    recording,
    tern_site,
)
from tests.unit_tests.factcheck.test_report import evidence, result
from tests.unit_tests.fakes import ChatScripted, tool_reply

__all__ = ["tern_site"]

KEYWORD_JUDGE = {"kind": "custom", "model": None, "description": "custom judge KeywordJudge"}


def keyword_reply(messages: list[BaseMessage]) -> AIMessage:
    """An LLM judge's reply: entails a passage that says "supportive", else unknown."""
    passage = messages[-1].text.split("<passage>")[-1]
    label = "entails" if "supportive" in passage else "unknown"
    return tool_reply("JudgeReply", label=label, confidence=0.8, rationale=f"said {label}")


def scripted_llm_judge(calls: int = 10) -> LLMJudge:
    return LLMJudge(ChatScripted(script=[keyword_reply] * calls), retry_wait=False)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_result_and_its_json_name_the_judge(tern_site: str, mode: str) -> None:
    search = recording(tern_site, list(TERN_PAGES))
    chain = make_chain(search, KeywordJudge(RULES), weight_by="search")
    assert chain.judge_info.to_dict() == KEYWORD_JUDGE

    result = chain.invoke(STATEMENT) if mode == "sync" else await chain.ainvoke(STATEMENT)

    assert result.verdict is Verdict.SUPPORTED
    assert result.judge == chain.judge_info
    assert json.loads(result.to_json())["judge"] == KEYWORD_JUDGE


async def test_a_verdict_of_a_scripted_llm_judge_names_kind_llm_and_its_model(
    tern_site: str,
) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), scripted_llm_judge())

    result = await chain.ainvoke(STATEMENT)

    assert result.verdict is Verdict.SUPPORTED
    assert [e.rationale for e in result.supporting] == ["said entails", "said entails"]
    assert json.loads(result.to_json())["judge"] == {
        "kind": "llm",
        "model": "scripted:scripted-judge-1",
        "description": "a chat model asked for a label, its confidence and a rationale",
    }
    text = render_report(result, fmt="text")
    assert text.splitlines()[2] == (
        "Judge: llm (scripted:scripted-judge-1) — a chat model asked for a label, its "
        "confidence and a rationale"
    )


async def test_a_statement_that_could_not_be_checked_names_the_judge_too() -> None:
    chain = make_chain(RecordedSearch({STATEMENT: []}), HeuristicJudge())

    result = await chain.ainvoke(STATEMENT)

    assert result.verdict is Verdict.ERROR
    assert result.judge is not None
    assert (result.judge.kind, result.judge.model) == ("heuristic", None)
    raised = FactCheckResult.could_not_check(STATEMENT, "boom", judge=chain.judge_info)
    assert raised.judge == chain.judge_info


HEURISTIC = HeuristicJudge().info()


def named(judge: JudgeInfo | None) -> FactCheckResult:
    return result([evidence("The Moon is close.", "https://example.org/moon")]).model_copy(
        update={"judge": judge}
    )


def test_the_text_report_has_the_judge_line_under_the_verdict() -> None:
    lines = render_report(named(HEURISTIC), fmt="text").splitlines()
    assert lines[1].startswith("Verdict: SUPPORTED")
    assert lines[2] == (
        "Judge: heuristic (no model) — offline heuristic (word overlap and similarity), not an "
        "NLI model: rough; set an LLM judge for real checks"
    )


def test_the_markdown_report_has_the_judge_line_under_the_verdict() -> None:
    lines = render_report(named(HEURISTIC), fmt="markdown").splitlines()
    assert lines[2].startswith("**Verdict: Supported**")
    assert lines[3:5] == [
        "",
        "*Judge: heuristic \\(no model\\) — offline heuristic \\(word overlap and similarity\\), "
        "not an NLI model: rough; set an LLM judge for real checks*",
    ]


def test_the_html_report_has_the_judge_paragraph_escaped() -> None:
    hostile = JudgeInfo(
        kind="custom", model='<img src=x onerror="alert(1)">', description="<b>bold</b> & co"
    )
    report = render_report(named(hostile), fmt="html")
    section = ET.fromstring(report)  # still well-formed
    (judge,) = section.findall("p[@class='judge judge-custom']")
    assert judge.text == 'Judge: custom (<img src=x onerror="alert(1)">) — <b>bold</b> & co'
    assert "<img" not in report
    assert "<b>" not in report
    paragraphs = [p.get("class") for p in section.findall("p")]
    assert paragraphs[:2] == ["verdict verdict-supported", "judge judge-custom"]


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_a_result_without_a_judge_has_no_judge_line(fmt: str) -> None:
    assert "Judge:" not in render_report(named(None), fmt=fmt)  # type: ignore[arg-type]


class LabeledJudge(Judge):
    """A custom judge with a model of its own."""

    def info(self) -> JudgeInfo:
        return JudgeInfo.of("nli", model="org/tiny-nli")

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return Judgement(label=Label.ENTAILS, confidence=0.9)


async def test_a_judge_that_names_its_model_is_named_so(tern_site: str) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), LabeledJudge())
    result = await chain.ainvoke(STATEMENT)
    assert result.judge is not None
    assert (result.judge.kind, result.judge.model) == ("nli", "org/tiny-nli")
