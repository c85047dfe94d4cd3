"""A stage's end event, its timing entry and its debug line carry the same elapsed time."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from langchain_core.runnables import RunnableConfig

from langchain_references.factcheck import stages
from langchain_references.factcheck.stages import FactCheckStage, FactCheckState, StageEnd


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
