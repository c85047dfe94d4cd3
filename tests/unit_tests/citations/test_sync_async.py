"""The sync and async paths of the citation check share their decisions and their limits."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig

from langchain_references.citations.evaluation import (
    AnswerReport,
    aevaluate_answers,
    evaluate_answers,
)
from langchain_references.citations.sentences import CitedSentence, split_cited_sentences
from langchain_references.citations.streaming import (
    DEFAULT_MAX_CONCURRENCY,
    StreamingCitationCheck,
)
from langchain_references.citations.verifier import CitationVerifier, SentenceVerdict
from langchain_references.judges import Judge, Judgement, Label

DOCS = {1: "Seattle is very rainy.", 2: "Seattle is large."}


class ConfigJudge(Judge):
    """Entails when the passage contains the statement; records each call's max_concurrency."""

    def __init__(self) -> None:
        self.limits: list[Any] = []

    def batch(self, inputs: Any, config: Any = None, **kwargs: Any) -> list[Judgement]:
        self.limits.append(config.get("max_concurrency") if config else None)
        return super().batch(inputs, config, **kwargs)

    async def abatch(self, inputs: Any, config: Any = None, **kwargs: Any) -> list[Judgement]:
        self.limits.append(config.get("max_concurrency") if config else None)
        return await super().abatch(inputs, config, **kwargs)

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        if statement.rstrip(".").lower() in passage.lower():
            return Judgement(label=Label.ENTAILS, confidence=1.0)
        return Judgement(label=Label.UNKNOWN, confidence=0.5)


def sentences(answer: str) -> list[tuple[CitedSentence, Mapping[int, str]]]:
    return [(s, DOCS) for s in split_cited_sentences(answer)]


ANSWER = "Seattle is rainy and large [1](id=1)[2](id=2). Seattle is very rainy [1](id=1)."


# ---------------------------------------------------------------------------- verifier


async def test_the_config_limit_wins_over_the_verifier_limit_on_both_paths() -> None:
    judge = ConfigJudge()
    verifier = CitationVerifier(judge, max_concurrency=3)
    items = sentences(ANSWER)
    verifier.verify_many(items)
    await verifier.averify_many(items)
    assert set(judge.limits) == {3}  # the verifier's own default
    judge.limits.clear()
    verifier.verify_many(items, config={"max_concurrency": 7})
    await verifier.averify_many(items, config={"max_concurrency": 7})
    assert set(judge.limits) == {7}  # the caller's config wins


async def test_both_paths_judge_the_same_pairs_in_the_same_phases() -> None:
    sync_judge, async_judge = ConfigJudge(), ConfigJudge()
    items = sentences(ANSWER)
    sync = CitationVerifier(sync_judge).verify_many(items)
    async_ = await CitationVerifier(async_judge).averify_many(items)
    assert sync == async_
    # First phase: each document alone and their concatenation; second phase: leave-one-out
    # needs two documents or more besides the one left out, so there is none here.
    assert len(sync_judge.limits) == len(async_judge.limits) == 1


class ShortJudge(ConfigJudge):
    """Returns one output too few from ``batch`` and ``abatch``."""

    def batch(self, inputs: Any, config: Any = None, **kwargs: Any) -> list[Judgement]:
        return super().batch(inputs, config, **kwargs)[:-1]

    async def abatch(self, inputs: Any, config: Any = None, **kwargs: Any) -> list[Judgement]:
        return (await super().abatch(inputs, config, **kwargs))[:-1]


async def test_a_judge_that_returns_the_wrong_number_of_outputs_is_an_error() -> None:
    verifier = CitationVerifier(ShortJudge())
    with pytest.raises(ValueError, match="got 2 judgements for 3 pairs"):
        verifier.verify_many(sentences(ANSWER)[:1])
    with pytest.raises(ValueError, match="got 2 judgements for 3 pairs"):
        await verifier.averify_many(sentences(ANSWER)[:1])


def test_verifier_rejects_a_bad_limit() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be an integer >= 1"):
        CitationVerifier(ConfigJudge(), max_concurrency=True)


# -------------------------------------------------------------------------- evaluation


async def test_evaluation_drivers_give_the_same_report() -> None:
    records: list[dict[str, Any]] = [
        {"answer": ANSWER, "documents": [{"page_content": DOCS[1]}, {"page_content": DOCS[2]}]},
        {"answer": 1},
    ]
    sync = evaluate_answers(records, ConfigJudge(), max_concurrency=2)
    async_ = await aevaluate_answers(records, ConfigJudge(), max_concurrency=2)
    assert sync.to_dict() == async_.to_dict()
    assert len(sync.errors) == 1
    (answer,) = sync.answers
    assert (answer.n_worthy, answer.n_supported, answer.n_citations, answer.n_precise) == (
        2,
        1,
        3,
        1,
    )
    assert (sync.n_worthy, sync.n_citations, sync.failed_judgements) == (2, 3, 0)


def test_report_keys_keep_their_order() -> None:
    records = [{"answer": ANSWER, "documents": [{"page_content": DOCS[1]}]}]
    data = evaluate_answers(records, ConfigJudge()).to_dict()
    assert list(data)[:11] == [
        "citation_recall",
        "citation_precision",
        "macro_recall",
        "macro_precision",
        "num_answers",
        "num_verification_worthy",
        "num_supported",
        "num_citations",
        "num_precise_citations",
        "failed_judgements",
        "judge",
    ]
    assert list(data["answers"][0])[:12] == [
        "index",
        "question",
        "location",
        "citation_recall",
        "citation_precision",
        "num_sentences",
        "num_verification_worthy",
        "num_supported",
        "num_citations",
        "num_precise_citations",
        "failed_judgements",
        "judge",
    ]


def test_counts_follow_the_sentences_of_a_report() -> None:
    verdicts = CitationVerifier(ConfigJudge()).verify_many(sentences(ANSWER))
    report = AnswerReport(0, None, None, tuple(verdicts))
    assert report.n_worthy == 2
    emptied = dataclasses.replace(report, sentences=())
    assert (emptied.n_worthy, emptied.citation_recall) == (0, None)
    assert emptied == AnswerReport(0, None, None, ())


# --------------------------------------------------------------------------- streaming


class SlowChecker:
    """Verifies sentences on either path, counting the verifications in flight.

    With ``wave``, each verification waits (up to 10 s) until ``wave`` verifications have
    been in flight at once, so the peak reaches the limit whatever the machine's load: a
    driver that runs fewer at once fails on the timeout, one that runs more on the peak.
    """

    def __init__(self, *, fail_on: str | None = None, wave: int = 1) -> None:
        self.active = 0
        self.peak = 0
        self.wave = wave
        self.lock = threading.Condition()
        self.fail_on = fail_on
        self.reached: asyncio.Event | None = None  # the async path's wave (one loop)

    def _enter(self, sentence: CitedSentence) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.lock.notify_all()
        if self.fail_on is not None and self.fail_on in sentence.text:
            with self.lock:
                self.active -= 1
            raise RuntimeError("checker exploded")

    def _leave(self, sentence: CitedSentence) -> SentenceVerdict:
        with self.lock:
            self.active -= 1
        return SentenceVerdict(sentence, True, True)

    def verify(self, sentence: CitedSentence, *args: Any, **kwargs: Any) -> SentenceVerdict:
        self._enter(sentence)
        with self.lock:
            self.lock.wait_for(lambda: self.peak >= self.wave, timeout=10)
        time.sleep(0.002)
        return self._leave(sentence)

    async def averify(self, sentence: CitedSentence, *args: Any, **kwargs: Any) -> SentenceVerdict:
        if self.reached is None:
            self.reached = asyncio.Event()
        self._enter(sentence)
        if self.peak >= self.wave:
            self.reached.set()
        await asyncio.wait_for(self.reached.wait(), timeout=10)
        await asyncio.sleep(0.002)
        return self._leave(sentence)


TEXT = " ".join(f"Sentence number {i} is here [1](id=1)." for i in range(10))


def run_check(checker: SlowChecker, config: RunnableConfig, *, use_async: bool) -> list[str]:
    async def run_async() -> list[SentenceVerdict]:
        check = StreamingCitationCheck(checker, [Document("d")], config, use_async=True)
        check.feed(TEXT)
        return await check.afinish()

    if use_async:
        verdicts = asyncio.run(run_async())
    else:
        check = StreamingCitationCheck(checker, [Document("d")], config, use_async=False)
        check.feed(TEXT)
        verdicts = check.finish()
    return [v.sentence.text for v in verdicts]


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(
    ("config", "limit"), [({"max_concurrency": 2}, 2), ({}, DEFAULT_MAX_CONCURRENCY)]
)
def test_both_paths_verify_at_most_max_concurrency_sentences_at_once(
    use_async: bool, config: RunnableConfig, limit: int
) -> None:
    checker = SlowChecker(wave=limit)
    texts = run_check(checker, config, use_async=use_async)
    assert texts == [f"Sentence number {i} is here." for i in range(10)]  # in order
    assert checker.peak == limit


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_a_bad_config_limit_is_refused(bad: Any) -> None:
    config: Any = {"max_concurrency": bad}
    with pytest.raises(ValueError, match="max_concurrency"):
        StreamingCitationCheck(SlowChecker(), [], config, use_async=False)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_failed_verification_raises_on_both_paths(use_async: bool) -> None:
    with pytest.raises(RuntimeError, match="checker exploded"):
        run_check(SlowChecker(fail_on="number 3 "), {"max_concurrency": 2}, use_async=use_async)
