"""Every citation verdict names its judge: sentence verdicts, reports and the streaming check."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_references.citations import CitationReport, evaluate_answers
from langchain_references.citations.sentences import split_cited_sentences
from langchain_references.citations.streaming import citation_report
from langchain_references.citations.verifier import CitationVerifier
from langchain_references.judges import HeuristicJudge, LLMJudge
from tests.unit_tests.citations.test_verifier import DOCS, CoverageJudge
from tests.unit_tests.fakes import ChatScripted, tool_reply

COVERAGE = {"kind": "custom", "model": None, "description": "custom judge CoverageJudge"}
ANSWER = "Seattle is rainy and large [1](id=4). Is it? Portland is sunny and warm [2](id=3)."
RECORD = {"answer": ANSWER, "documents": [{"page_content": DOCS[d]} for d in (1, 2, 3, 4)]}


def test_every_sentence_verdict_names_the_judge_worthy_or_not() -> None:
    verifier = CitationVerifier(CoverageJudge())
    verdicts = [verifier.verify(s, DOCS) for s in split_cited_sentences(ANSWER)]
    assert [v.verification_worthy for v in verdicts] == [True, False, True]
    assert [v.to_dict()["judge"] for v in verdicts] == [COVERAGE] * 3
    assert verifier.info.to_dict() == COVERAGE


def test_the_report_names_the_judge_at_each_level() -> None:
    report = evaluate_answers([RECORD, RECORD], CoverageJudge())
    data = json.loads(json.dumps(report.to_dict()))
    assert data["judge"] == COVERAGE
    assert [a["judge"] for a in data["answers"]] == [COVERAGE, COVERAGE]
    assert {s["judge"]["kind"] for a in data["answers"] for s in a["sentences"]} == {"custom"}


def test_a_report_without_sentences_names_no_judge() -> None:
    assert CitationReport(()).to_dict()["judge"] is None


def test_a_scripted_llm_judge_is_named_with_its_model() -> None:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        return tool_reply("JudgeReply", label="entails", confidence=0.9, rationale="yes")

    judge = LLMJudge(ChatScripted(model="cite-judge", script=[reply] * 10), retry_wait=False)
    report = evaluate_answers([RECORD], judge)
    assert report.citation_recall == 1.0
    assert report.judge is not None
    assert report.to_dict()["judge"] == {
        "kind": "llm",
        "model": "scripted:cite-judge",
        "description": "a chat model asked for a label, its confidence and a rationale",
    }


def test_the_streaming_check_names_the_judge() -> None:
    verifier = CitationVerifier(HeuristicJudge())
    verdicts = [verifier.verify(s, DOCS) for s in split_cited_sentences(ANSWER)]
    data: dict[str, Any]
    data, _ = citation_report(verdicts, {4: 1, 3: 2})
    assert data["judge"]["kind"] == "heuristic"
    assert data["judge"]["model"] is None
    assert "set an LLM judge" in data["judge"]["description"]
