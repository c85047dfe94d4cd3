from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import ValidationError

from langchain_references.judges import Judge, JudgeInput, Judgement, Label
from langchain_references.judges.base import coerce_judge_input

# --------------------------------------------------------------------------- types


def test_label_values() -> None:
    assert [label.value for label in Label] == ["entails", "contradicts", "unknown"]
    assert Label("contradicts") is Label.CONTRADICTS


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_judgement_confidence_must_be_in_unit_interval(value: float) -> None:
    if math.isfinite(value) and 0.0 <= value <= 1.0:
        assert Judgement(label=Label.ENTAILS, confidence=value).confidence == value
    else:
        with pytest.raises(ValidationError):
            Judgement(label=Label.ENTAILS, confidence=value)


def test_judgement_validation() -> None:
    with pytest.raises(ValidationError):
        Judgement(label="maybe", confidence=0.5)
    with pytest.raises(ValidationError, match="error"):
        Judgement(label=Label.ENTAILS, confidence=0.0, error="boom")
    with pytest.raises(ValidationError, match="error"):
        Judgement(label=Label.UNKNOWN, confidence=0.3, error="boom")
    with pytest.raises(ValidationError, match="probability"):
        Judgement(label=Label.ENTAILS, confidence=0.5, probabilities={Label.ENTAILS: 1.5})
    j = Judgement(label="entails", confidence=1)
    assert j.label is Label.ENTAILS
    assert j.ok
    with pytest.raises(ValidationError):
        j.confidence = 0.2  # type: ignore[misc]


def test_failed_judgement() -> None:
    j = Judgement.failed("x" * 2000)
    assert j.label is Label.UNKNOWN
    assert j.confidence == 0.0
    assert not j.ok
    assert j.error is not None
    assert len(j.error) == 500


def test_coerce_judge_input() -> None:
    item = coerce_judge_input({"statement": "s", "passage": "p", "source": "ignored"})
    assert item == JudgeInput(statement="s", passage="p")
    assert coerce_judge_input(item) is item
    with pytest.raises(ValueError, match="passage"):
        coerce_judge_input({"statement": "s"})
    with pytest.raises(ValueError, match="blank"):
        coerce_judge_input({"statement": "  ", "passage": "p"})
    with pytest.raises(ValueError, match="string"):
        coerce_judge_input({"statement": 3, "passage": "p"})
    with pytest.raises(TypeError, match="JudgeInput"):
        coerce_judge_input("statement")


# --------------------------------------------------------------------------- judges


class KeywordJudge(Judge):
    """Entails if the passage contains the statement, contradicts if it contains 'not'."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self.lock:
            self.calls.append((statement, passage))
        if "explode" in passage:
            raise RuntimeError("judge exploded")
        if "not" in passage.split():
            return Judgement(label=Label.CONTRADICTS, confidence=0.8, rationale="negated")
        if statement.lower() in passage.lower():
            return Judgement(label=Label.ENTAILS, confidence=0.9, rationale="substring")
        return Judgement(label=Label.UNKNOWN, confidence=0.6)


def test_invoke_accepts_dict_and_model() -> None:
    judge = KeywordJudge()
    assert judge.invoke({"statement": "ice melts", "passage": "Ice melts."}).label is Label.ENTAILS
    assert judge.invoke(JudgeInput(statement="ice melts", passage="it is not")).label is (
        Label.CONTRADICTS
    )
    assert judge.judge("ice melts", "The sky is blue.").label is Label.UNKNOWN


def test_blank_passage_is_unknown_without_calling_the_judge() -> None:
    judge = KeywordJudge()
    j = judge.invoke({"statement": "s", "passage": "  \n"})
    assert j.label is Label.UNKNOWN
    assert j.ok
    assert judge.calls == []


def test_exception_is_recorded_not_raised() -> None:
    judge = KeywordJudge()
    out = judge.batch(
        [
            {"statement": "a", "passage": "explode now"},
            {"statement": "a", "passage": "a b"},
        ]
    )
    assert out[0].error is not None
    assert "RuntimeError: judge exploded" in out[0].error
    assert out[1].label is Label.ENTAILS


def test_raise_errors() -> None:
    judge = KeywordJudge()
    judge.raise_errors = True
    with pytest.raises(RuntimeError, match="exploded"):
        judge.invoke({"statement": "a", "passage": "explode"})


def test_invalid_input_raises_or_is_returned() -> None:
    judge = KeywordJudge()
    with pytest.raises(ValueError, match="blank"):
        judge.invoke({"statement": "", "passage": "p"})
    out = judge.batch(
        [{"statement": "a", "passage": "a"}, {"passage": "p"}],
        return_exceptions=True,
    )
    assert isinstance(out[0], Judgement)
    assert isinstance(out[1], ValueError)


def test_judge_must_return_a_judgement() -> None:
    class Broken(Judge):
        def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
            return "entails"  # type: ignore[return-value]

    j = Broken().invoke({"statement": "a", "passage": "b"})
    assert j.error is not None
    assert "TypeError" in j.error


def test_judge_composes_with_runnables_and_callbacks() -> None:
    seen: list[str] = []

    class Recorder(BaseCallbackHandler):
        def on_chain_start(self, serialized: object, inputs: object, **kwargs: object) -> None:
            seen.append(str(kwargs.get("name")))

    def to_pair(s: str) -> dict[str, str]:
        return {"statement": s, "passage": s + " indeed"}

    chain: Runnable[str, Judgement] = RunnableLambda(to_pair) | KeywordJudge()
    out = chain.invoke("ice melts", {"callbacks": [Recorder()]})
    assert out.label is Label.ENTAILS
    assert "KeywordJudge" in seen


class BarrierJudge(Judge):
    """Tracks how many calls run at once; the first two must overlap (barrier)."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=5)
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.count = 0

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.count += 1
            first_wave = self.count <= self.barrier.parties
        try:
            if first_wave:
                self.barrier.wait()
            return Judgement(label=Label.UNKNOWN, confidence=0.5, rationale=passage)
        finally:
            with self.lock:
                self.active -= 1


def test_batch_respects_max_concurrency_and_order() -> None:
    judge = BarrierJudge(parties=2)
    inputs = [{"statement": "s", "passage": f"p{i}"} for i in range(8)]
    out = judge.batch(inputs, {"max_concurrency": 2})  # type: ignore[arg-type]
    assert [j.rationale for j in out] == [f"p{i}" for i in range(8)]
    assert all(j.ok for j in out)  # the barrier was reached: 2 calls did overlap
    assert judge.peak == 2


class AsyncJudge(Judge):
    def __init__(self) -> None:
        self.active = 0
        self.peak = 0

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        raise AssertionError("the async path must not call _judge")

    async def _ajudge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        if passage == "explode":
            raise ConnectionError("down")
        return Judgement(label=Label.ENTAILS, confidence=1.0, rationale=passage)


async def test_abatch_uses_ajudge_and_respects_max_concurrency() -> None:
    judge = AsyncJudge()
    inputs = [{"statement": "s", "passage": f"p{i}"} for i in range(9)] + [
        {"statement": "s", "passage": "explode"}
    ]
    out = await judge.abatch(inputs, {"max_concurrency": 3})  # type: ignore[arg-type]
    assert [j.rationale for j in out[:9]] == [f"p{i}" for i in range(9)]
    assert out[9].error is not None
    assert "ConnectionError" in out[9].error
    assert 1 < judge.peak <= 3
    single = await judge.ainvoke({"statement": "s", "passage": "x"})
    assert single.rationale == "x"


async def test_default_ajudge_runs_judge() -> None:
    out = await KeywordJudge().ainvoke({"statement": "ice", "passage": "ice"})
    assert out.label is Label.ENTAILS


class VectorJudge(Judge):
    """Implements _judge_batch: records chunk sizes."""

    batch_size = 3

    def __init__(self) -> None:
        self.chunks: list[list[str]] = []

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return self._judge_batch([JudgeInput(statement=statement, passage=passage)], config=config)[
            0
        ]

    def _judge_batch(
        self, items: Sequence[JudgeInput], *, config: RunnableConfig
    ) -> list[Judgement]:
        self.chunks.append([i.passage for i in items])
        if any(i.passage == "explode" for i in items):
            raise RuntimeError("chunk failed")
        return [Judgement(label=Label.ENTAILS, confidence=1.0, rationale=i.passage) for i in items]


def test_native_batch_chunks_and_records_chunk_failures() -> None:
    judge = VectorJudge()
    passages = ["a", "", "b", "c", "d", "explode", "e", "f"]
    out = judge.batch([{"statement": "s", "passage": p} for p in passages])
    # Blank passages never reach the judge; the rest goes in chunks of batch_size.
    assert judge.chunks == [["a", "b", "c"], ["d", "explode", "e"], ["f"]]
    assert out[1].label is Label.UNKNOWN
    assert out[1].ok
    assert [out[i].rationale for i in (0, 2, 3, 7)] == ["a", "b", "c", "f"]
    assert all(out[i].error is not None for i in (4, 5, 6))


async def test_native_abatch_and_invalid_items() -> None:
    judge = VectorJudge()
    out = await judge.abatch(
        [{"statement": "s", "passage": "a"}, {"statement": 1, "passage": "b"}],
        return_exceptions=True,
    )
    assert out[0].rationale == "a"
    assert isinstance(out[1], ValueError)
    with pytest.raises(ValueError, match="statement"):
        judge.batch([{"statement": "s", "passage": "a"}, {"statement": 1, "passage": "b"}])


def test_native_batch_wrong_length_is_recorded() -> None:
    class Short(VectorJudge):
        def _judge_batch(
            self, items: Sequence[JudgeInput], *, config: RunnableConfig
        ) -> list[Judgement]:
            return super()._judge_batch(items, config=config)[:-1]

    out = Short().batch([{"statement": "s", "passage": p} for p in "ab"])
    assert all(j.error is not None and "returned 1 judgements for 2" in j.error for j in out)


# ------------------------------------------------------------- one decision, two drivers


def _invoke(judge: Judge, pair: dict[str, str], *, use_async: bool) -> Judgement:
    if use_async:
        return asyncio.run(judge.ainvoke(pair))
    return judge.invoke(pair)


@pytest.mark.parametrize("use_async", [False, True])
def test_both_paths_answer_a_blank_passage_without_calling_the_judge(use_async: bool) -> None:
    judge = KeywordJudge()
    j = _invoke(judge, {"statement": "s", "passage": " \t"}, use_async=use_async)
    assert (j.label, j.ok, j.rationale) == (Label.UNKNOWN, True, "The passage is empty.")
    assert judge.calls == []


@pytest.mark.parametrize("use_async", [False, True])
def test_both_paths_record_errors_and_bad_outputs(use_async: bool) -> None:
    class Odd(KeywordJudge):
        def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
            if passage == "odd":
                return None  # type: ignore[return-value]
            return super()._judge(statement, passage, config=config)

    judge = Odd()
    failed = _invoke(judge, {"statement": "s", "passage": "explode"}, use_async=use_async)
    assert failed.error == "RuntimeError: judge exploded"
    odd = _invoke(judge, {"statement": "s", "passage": "odd"}, use_async=use_async)
    assert odd.error == "TypeError: a judge must return a Judgement, not NoneType"
    judge.raise_errors = True
    with pytest.raises(RuntimeError, match="exploded"):
        _invoke(judge, {"statement": "s", "passage": "explode"}, use_async=use_async)
    with pytest.raises(ValueError, match="blank"):
        _invoke(judge, {"statement": " ", "passage": "p"}, use_async=use_async)
