"""A stage's end: its event, timing and debug line; the judge stage's evidence order."""

from __future__ import annotations

import logging
from dataclasses import replace
from types import SimpleNamespace

import pytest
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references.factcheck import stages
from langchain_references.factcheck.stages import (
    AggregateStage,
    FactCheckStage,
    FactCheckState,
    JudgeStage,
    StageEnd,
)
from langchain_references.factcheck.types import Passage
from langchain_references.factcheck.verdict import WeightedVoteAggregator
from langchain_references.judges import Judgement, Label
from tests.unit_tests.factcheck.test_evidence_sources import passage


class _Counting(FactCheckStage[int]):
    """A stage whose outcome is a number, reported as its detail."""

    stage = "search"

    def describe(self, state: FactCheckState) -> str:
        return "counting"

    def work(self, state: FactCheckState, config: RunnableConfig) -> int:
        return 3

    async def awork(self, state: FactCheckState, config: RunnableConfig) -> int:
        return 3

    def finish(self, state: FactCheckState, outcome: int) -> StageEnd:
        return StageEnd(state=state, detail=f"{outcome} found", counts={"found": outcome})


def test_the_stage_time_runs_from_the_attempt_to_the_end(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stage = _Counting()
    state = FactCheckState.begin("s", "q")
    clock = iter([100.0, 110.0, 112.5])  # run created, attempt started, stage ended
    monkeypatch.setattr(stages, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    run = stages._StageRun(stage, state)
    outcome = run.attempt(lambda: stage.work(state, {}))
    with caplog.at_level(logging.DEBUG, logger=stages.__name__):
        end = run.ended(outcome)
    assert end.elapsed_s == 2.5
    assert (end.done, end.detail, end.counts) == (True, "3 found", {"found": 3})
    assert run.state.timings[-1] == ("search", 2.5)
    assert [r.getMessage() for r in caplog.records] == ["Stage search took 2.500s: 3 found"]


def _selected(n: int) -> tuple[tuple[Passage, float], ...]:
    return tuple(
        (passage(f"passage {i}", f"https://{i}.example/", i), 1.0 - i / 10) for i in range(n)
    )


def test_judged_evidence_is_listed_most_confident_first_then_most_relevant() -> None:
    judge = RunnableLambda(lambda _: Judgement(label=Label.UNKNOWN, confidence=0.0))
    stage = JudgeStage(judge, max_concurrency=1)
    state = replace(FactCheckState.begin("s", "q"), selected=_selected(5))
    outcome = [
        Judgement(label=Label.ENTAILS, confidence=0.6),
        Judgement(label=Label.CONTRADICTS, confidence=0.7),
        Judgement(label=Label.ENTAILS, confidence=0.9),
        Judgement(label=Label.CONTRADICTS, confidence=0.8),
        Judgement(label=Label.ENTAILS, confidence=0.9),
    ]
    end = stage.finish(state, outcome)
    assert [e.relevance_rank for e in end.state.evidence] == [0, 1, 2, 3, 4]
    assert [e.relevance_rank for e in end.state.supporting] == [2, 4, 0]
    assert [e.relevance_rank for e in end.state.contradicting] == [3, 1]
    assert [e.confidence for e in end.state.supporting] == [0.9, 0.9, 0.6]


@pytest.mark.parametrize(
    ("labels", "detail"),
    [
        # no passage leans either way: confidence 1.0 in the data, none in the detail
        ([Label.UNKNOWN], "not_enough_evidence (score +0.00 < 0.30)"),
        ([Label.ENTAILS, Label.UNKNOWN], "supported (confidence 90%, score +0.90 ≥ 0.30)"),
    ],
)
def test_the_aggregate_stage_end_reads_like_the_report(labels: list[Label], detail: str) -> None:
    stage = AggregateStage(WeightedVoteAggregator(), "relevance")
    ranked = [
        (Judgement(label=label, confidence=0.9), rank, None) for rank, label in enumerate(labels)
    ]
    outcome = stage.aggregator.aggregate(ranked)
    end = stage.finish(FactCheckState.begin("s", "q"), outcome)
    assert end.detail == detail
    assert end.state.outcome == outcome  # the data keeps its confidence
