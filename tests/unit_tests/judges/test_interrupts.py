"""Ctrl-C and cancellation stop a batch of judge calls; they are never a failed judgement."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_references.citations import CitationVerifier, split_cited_sentences
from langchain_references.factcheck.stages import FactCheckState, JudgeStage
from langchain_references.factcheck.types import Passage
from langchain_references.factuality.model import Atom, Context
from langchain_references.factuality.relations import RelationJudge
from langchain_references.factuality.retrieval import VectorStoreContexts
from langchain_references.factuality.reviser import Reviser
from langchain_references.judges import Judge, JudgeInput, Judgement, Label
from langchain_references.judges.base import JudgeInputLike, raise_interrupts
from tests.unit_tests.fakes import ScriptedChatModel

PAIRS: list[JudgeInputLike] = [{"statement": "s", "passage": f"p{i}"} for i in range(6)]
INTERRUPTS = [KeyboardInterrupt, SystemExit, asyncio.CancelledError]


def test_raise_interrupts_raises_the_first_interrupt_only() -> None:
    ok = Judgement(label=Label.ENTAILS, confidence=1.0)
    raise_interrupts([ok, ValueError("bad input"), ConnectionError("down")])  # failures stay
    first, second = KeyboardInterrupt("first"), asyncio.CancelledError("second")
    with pytest.raises(KeyboardInterrupt) as caught:
        raise_interrupts([ok, ValueError("x"), first, second])
    assert caught.value is first


class InterruptingJudge(Judge):
    """Raises ``interrupt`` on passage ``p1``; counts the calls that started."""

    def __init__(self, interrupt: type[BaseException], delay: float = 0.0) -> None:
        self.interrupt = interrupt
        self.delay = delay
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self.lock:
            self.calls.append(passage)
        if passage == "p1":
            raise self.interrupt()
        time.sleep(self.delay)
        return Judgement(label=Label.ENTAILS, confidence=1.0, rationale=passage)


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_batch_raises_an_interrupt_and_cancels_the_calls_not_started(
    interrupt: type[BaseException],
) -> None:
    judge = InterruptingJudge(interrupt, delay=0.2)
    with pytest.raises(interrupt):
        judge.batch(PAIRS, {"max_concurrency": 1}, return_exceptions=True)
    # p0 ran, p1 interrupted; LangChain's batch would have gone on with p2..p5.
    assert judge.calls[:2] == ["p0", "p1"]
    assert len(judge.calls) <= 3


class Blocking(Judge):
    """p0 sends Ctrl-C to the main thread; every call then waits for ``release`` and fails."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started: list[str] = []
        self.ended: list[str] = []
        self.lock = threading.Lock()

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self.lock:
            self.started.append(passage)
        if passage == "p0":
            time.sleep(0.3)  # the main thread has submitted every call and waits for p0
            main = threading.main_thread().ident
            assert main is not None
            signal.pthread_kill(main, signal.SIGINT)
        self.release.wait(5)
        with self.lock:
            self.ended.append(passage)
        raise ConnectionError(f"{passage} is down")


def test_ctrl_c_stops_a_batch_without_waiting_for_the_calls_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judge = Blocking()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            judge.batch(PAIRS, {"max_concurrency": 2})
        elapsed = time.monotonic() - start
    finally:
        signal.signal(signal.SIGINT, previous)
        judge.release.set()
    assert elapsed < 2.5  # LangChain's batch waits for p0 and p1 (5 s)
    deadline = time.monotonic() + 5
    while len(judge.ended) < len(judge.started) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert sorted(judge.started) == ["p0", "p1"]  # in flight; p2..p5 were never started
    assert sorted(judge.ended) == ["p0", "p1"]
    # The calls in flight failed after the interrupt: nothing recorded, nothing logged.
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_invoke_raises_an_interrupt_instead_of_a_failed_judgement(
    interrupt: type[BaseException],
) -> None:
    with pytest.raises(interrupt):
        InterruptingJudge(interrupt).invoke({"statement": "s", "passage": "p1"})


async def test_abatch_raises_a_cancellation_instead_of_a_failed_judgement() -> None:
    class Cancelled(Judge):
        def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
            raise AssertionError("the async path calls _ajudge")

        async def _ajudge(
            self, statement: str, passage: str, *, config: RunnableConfig
        ) -> Judgement:
            if passage == "p1":
                raise asyncio.CancelledError
            return Judgement(label=Label.ENTAILS, confidence=1.0)

    with pytest.raises(asyncio.CancelledError):
        await Cancelled().abatch(PAIRS, return_exceptions=True)


class VectorInterrupt(Judge):
    """A judge with ``_judge_batch`` (LangChain's batch helper catches BaseException)."""

    def __init__(self, interrupt: type[BaseException]) -> None:
        self.interrupt = interrupt

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        raise AssertionError("batched")

    def _judge_batch(
        self, items: Sequence[JudgeInput], *, config: RunnableConfig
    ) -> list[Judgement]:
        raise self.interrupt()


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
async def test_native_batch_raises_an_interrupt_instead_of_recording_it(
    interrupt: type[BaseException],
) -> None:
    judge = VectorInterrupt(interrupt)
    with pytest.raises(interrupt):
        judge.batch(PAIRS, return_exceptions=True)
    with pytest.raises(interrupt):
        judge.batch(PAIRS)
    with pytest.raises(interrupt):
        await judge.abatch(PAIRS, return_exceptions=True)


def test_a_failure_is_still_recorded() -> None:
    class Down(Judge):
        def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
            raise ConnectionError("down")

    out = Down().batch(PAIRS, {"max_concurrency": 2})
    assert [j.error for j in out] == ["ConnectionError: down"] * len(PAIRS)


# ------------------------------------------------- the callers of batch(return_exceptions=True)


class InterruptedBatch(Runnable[JudgeInputLike, Judgement]):
    """A runnable judge whose batch returns an interrupt in a slot, as LangChain's may."""

    def __init__(self, interrupt: type[BaseException]) -> None:
        self.interrupt = interrupt

    def invoke(
        self, input: JudgeInputLike, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Judgement:
        raise self.interrupt()

    def batch(self, inputs: list[JudgeInputLike], config: Any = None, **kwargs: Any) -> list[Any]:
        ok = Judgement(label=Label.ENTAILS, confidence=1.0)
        return [ok, self.interrupt(), *[ok] * (len(inputs) - 2)]

    async def abatch(
        self, inputs: list[JudgeInputLike], config: Any = None, **kwargs: Any
    ) -> list[Any]:
        return self.batch(inputs, config)


ATOMS = [Atom(id="a0", text="Paris is in France."), Atom(id="a1", text="Paris is old.")]
CONTEXTS = [Context(id="c0", title="Paris", text="Paris is the capital of France.")]


@pytest.mark.parametrize("interrupt", INTERRUPTS)
async def test_relation_judge_raises_interrupts(interrupt: type[BaseException]) -> None:
    judge = RelationJudge(InterruptedBatch(interrupt), version=2)
    with pytest.raises(interrupt):
        judge.judge_pairs(ATOMS, CONTEXTS)
    with pytest.raises(interrupt):
        await judge.ajudge_pairs(ATOMS, CONTEXTS)


@pytest.mark.parametrize("interrupt", INTERRUPTS)
async def test_citation_verifier_raises_interrupts(interrupt: type[BaseException]) -> None:
    verifier = CitationVerifier(InterruptedBatch(interrupt))
    (sentence,) = split_cited_sentences("Paris is the capital of France [1](id=1)[2](id=2).")
    passages = {1: "Paris is the capital of France.", 2: "France is in Europe."}
    with pytest.raises(interrupt):
        verifier.verify_many([(sentence, passages)])
    with pytest.raises(interrupt):
        await verifier.averify_many([(sentence, passages)])


@pytest.mark.parametrize("interrupt", INTERRUPTS)
async def test_factcheck_judge_stage_raises_interrupts(interrupt: type[BaseException]) -> None:
    passages = [
        Passage(
            text=f"Paris text {i}.",
            url=f"https://e.x/{i}",
            title="P",
            rank=i,
            index_in_page=0,
            n_tokens=3,
        )
        for i in range(3)
    ]
    state = FactCheckState.begin("Paris is in France.", "Paris")
    state = dataclasses.replace(state, selected=tuple((p, 0.5) for p in passages))
    stage = JudgeStage(InterruptedBatch(interrupt), max_concurrency=2)
    with pytest.raises(interrupt):
        stage.finish(state, stage.work(state, {}))
    with pytest.raises(interrupt):
        stage.finish(state, await stage.awork(state, {}))


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_reviser_raises_interrupts(interrupt: type[BaseException]) -> None:
    # RunnableSequence.batch(return_exceptions=True) returns the interrupt in the chunk's slot.
    atoms = tuple(Atom(f"a{i}", f"fact {i}") for i in range(4))
    model = ScriptedChatModel(script=[interrupt()] * 2)
    reviser = Reviser(model, chunk_size=2, max_concurrency=1, retry_wait=False)
    with pytest.raises(interrupt):
        reviser.invoke({"response": "r", "atoms": atoms})
    reviser._per_chunk = InterruptedBatch(interrupt)  # a chunk runnable that returns it
    with pytest.raises(interrupt):
        reviser.invoke({"response": "r", "atoms": atoms})


class InterruptedRetriever(BaseRetriever):
    """A retriever whose batch returns an interrupt in a slot."""

    interrupt: type[BaseException]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=query)]

    def batch(self, inputs: list[str], config: Any = None, **kwargs: Any) -> list[Any]:
        return [[Document(page_content="x")], self.interrupt()][: len(inputs)]

    async def abatch(self, inputs: list[str], config: Any = None, **kwargs: Any) -> list[Any]:
        return self.batch(inputs, config)


@pytest.mark.parametrize("interrupt", INTERRUPTS)
async def test_retrieval_raises_interrupts(interrupt: type[BaseException]) -> None:
    source = VectorStoreContexts(InterruptedRetriever(interrupt=interrupt), k=1)
    with pytest.raises(interrupt):
        source.retrieve(ATOMS)
    with pytest.raises(interrupt):
        await source.aretrieve(ATOMS)
