from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from langchain_references.factuality import build_fact_graph, infer_marginals
from langchain_references.factuality.model import Atom, Context, Relation, candidate_pairs
from langchain_references.factuality.relations import (
    MIN_EVIDENCE,
    RelationJudge,
    RelationResult,
    judgement_to_relation,
    normalize_version,
)
from langchain_references.judges import Judge, Judgement, Label

Decide = Callable[[str, str], Judgement]


class ScriptedJudge(Judge):
    """Decides with a function of (statement, passage); records calls and concurrency."""

    def __init__(self, decide: Decide, delay: float = 0.0) -> None:
        self.decide = decide
        self.delay = delay
        self.calls: list[tuple[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self._lock:
            self.calls.append((statement, passage))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            return self.decide(statement, passage)
        finally:
            with self._lock:
                self.in_flight -= 1


def by_keyword(statement: str, passage: str) -> Judgement:
    if "BOOM" in passage:
        raise RuntimeError("judge exploded")
    if "NOT" in passage:
        return Judgement(label=Label.CONTRADICTS, confidence=0.7)
    if statement.split()[0].lower() in passage.lower():
        return Judgement(
            label=Label.ENTAILS,
            confidence=0.6,
            probabilities={Label.ENTAILS: 0.95, Label.UNKNOWN: 0.05},
        )
    return Judgement(label=Label.UNKNOWN, confidence=0.8)


ATOMS = (
    Atom("a0", "Paris is in France.", contexts=("c0",)),
    Atom("a1", "Rome is in Italy.", contexts=("c1", "c2")),
)
CONTEXTS = (
    Context("c0", "Paris is the capital of France.", title="Paris"),
    Context("c1", "rome is the capital of italy.", title="Rome"),
    Context("c2", "Rome is NOT in Spain.", title="Spain"),
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, "FR1"), (2, "FR2"), (3, "FR3"), ("3", "FR3"), ("FR1", "FR1"), ("fr2", "FR2")],
)
def test_normalize_version(value: Any, expected: str) -> None:
    assert normalize_version(value) == expected


@pytest.mark.parametrize("value", [0, 4, "FR4", "two", True, None])
def test_normalize_version_rejects(value: Any) -> None:
    with pytest.raises(ValueError, match="version"):
        normalize_version(value)


def test_judgement_to_relation() -> None:
    ent = judgement_to_relation("c", "a", Judgement(label=Label.ENTAILS, confidence=0.6))
    assert ent == Relation("c", "a", "entailment", 0.6)
    with_probs = Judgement(
        label=Label.CONTRADICTS, confidence=0.6, probabilities={Label.CONTRADICTS: 0.83}
    )
    assert judgement_to_relation("c", "a", with_probs) == Relation("c", "a", "contradiction", 0.83)
    partial = Judgement(label=Label.ENTAILS, confidence=0.6, probabilities={Label.UNKNOWN: 0.4})
    assert judgement_to_relation("c", "a", partial) == Relation("c", "a", "entailment", 0.6)
    unknown = judgement_to_relation("c", "a", Judgement(label=Label.UNKNOWN, confidence=0.9))
    assert unknown == Relation("c", "a", "neutral", 0.9)
    assert judgement_to_relation("c", "a", Judgement.failed("timeout")) is None


@pytest.mark.parametrize(
    ("judgement", "expected"),
    [
        (Judgement(label=Label.ENTAILS, confidence=0.2), Relation("c", "a", "neutral", 0.2)),
        (Judgement(label=Label.ENTAILS, confidence=0.5), Relation("c", "a", "neutral", 0.5)),
        (Judgement(label=Label.ENTAILS, confidence=0.51), Relation("c", "a", "entailment", 0.51)),
        (
            Judgement(label=Label.CONTRADICTS, confidence=0.3),
            Relation("c", "a", "neutral", 0.3),
        ),
        (
            Judgement(
                label=Label.ENTAILS,
                confidence=0.9,
                probabilities={Label.ENTAILS: 0.45, Label.UNKNOWN: 0.35},
            ),
            Relation("c", "a", "neutral", 0.45),
        ),
        (
            Judgement(
                label=Label.CONTRADICTS, confidence=0.3, probabilities={Label.CONTRADICTS: 0.7}
            ),
            Relation("c", "a", "contradiction", 0.7),
        ),
    ],
)
def test_a_judgement_at_even_odds_or_below_is_no_evidence(
    judgement: Judgement, expected: Relation
) -> None:
    # FactReasoner's tables would read an entailment at 0.2 as 4:1 evidence against the atom
    assert MIN_EVIDENCE == 0.5
    assert judgement_to_relation("c", "a", judgement) == expected


@pytest.mark.parametrize("version", [1, 2, 3])
def test_judges_exactly_the_candidate_pairs(version: int) -> None:
    judge = ScriptedJudge(by_keyword)
    result = RelationJudge(judge, version=version).judge_pairs(ATOMS, CONTEXTS)
    expected = candidate_pairs(ATOMS, CONTEXTS, version=normalize_version(version))
    assert [(p.source, p.target) for p in result.pairs] == expected
    assert len(judge.calls) == len(expected)
    assert result.failures == ()


def test_premise_is_the_context_with_its_title_hypothesis_the_atom() -> None:
    judge = ScriptedJudge(by_keyword)
    result = RelationJudge(judge, version=1).judge_pairs(ATOMS, CONTEXTS)
    assert ("Paris is in France.", "Paris is the capital of France.") in judge.calls
    assert ("Rome is in Italy.", "Spain\nRome is NOT in Spain.") in judge.calls
    kinds = {(r.source, r.target): (r.kind, r.probability) for r in result.relations}
    assert kinds == {
        ("c0", "a0"): ("entailment", 0.95),
        ("c1", "a1"): ("entailment", 0.95),
        ("c2", "a1"): ("contradiction", 0.7),
    }
    no_title = ScriptedJudge(by_keyword)
    RelationJudge(no_title, version=1, include_title=False).judge_pairs(ATOMS, CONTEXTS)
    assert ("Rome is in Italy.", "Rome is NOT in Spain.") in no_title.calls


def test_fr3_judges_both_directions_and_reconciles() -> None:
    judge = ScriptedJudge(by_keyword)
    result = RelationJudge(judge, version=3).judge_pairs(ATOMS, CONTEXTS)
    ctx_pairs = {(p.source, p.target) for p in result.pairs if p.target.startswith("c")}
    assert ctx_pairs == {(a, b) for a in ("c0", "c1", "c2") for b in ("c0", "c1", "c2") if a != b}

    atoms = (Atom("a0", "Paris is in France."),)
    contexts = (
        Context("c0", "Paris is the capital of France."),
        Context("c1", "Paris is a big city."),
        Context("c2", "Lyon is NOT the capital."),
    )
    result = RelationJudge(ScriptedJudge(by_keyword), version=3).judge_pairs(atoms, contexts)
    graph = build_fact_graph(atoms, contexts, result.relations, version="FR3")
    kinds = {frozenset((r.source, r.target)): r.kind for r in graph.relations}
    # c0 and c1 entail each other (same first word): one equivalence factor.
    assert kinds[frozenset(("c0", "c1"))] == "equivalence"
    # c2 -> c0 is a contradiction (0.7) but c0 -> c2 is neutral (0.8): the more probable
    # judgement wins, so no factor (FactReasoner's build_relations).
    assert frozenset(("c2", "c0")) not in kinds
    assert {(r.source, r.target, r.kind) for r in result.relations} >= {
        ("c2", "c0", "contradiction"),
        ("c0", "c2", "neutral"),
    }
    assert infer_marginals(graph)["a0"] > 0.5


def test_failures_and_blank_texts() -> None:
    contexts = (*CONTEXTS, Context("c3", "BOOM"), Context("c4", "   "))
    atoms = (ATOMS[0], Atom("a1", "Rome is in Italy.", contexts=("c1", "c3", "c4")))
    result = RelationJudge(ScriptedJudge(by_keyword), version=1).judge_pairs(atoms, contexts)
    assert [(p.source, p.target) for p in result.failures] == [("c3", "a1")]
    assert "judge exploded" in (result.failures[0].judgement.error or "")
    assert result.skipped == (("c4", "a1"),)
    assert all(r.source != "c3" for r in result.relations)


def test_max_concurrency_is_respected() -> None:
    judge = ScriptedJudge(by_keyword, delay=0.01)
    RelationJudge(judge, version=2, max_concurrency=1).judge_pairs(ATOMS, CONTEXTS)
    assert judge.max_in_flight == 1
    judge = ScriptedJudge(by_keyword, delay=0.01)
    RelationJudge(judge, version=2, max_concurrency=3).judge_pairs(ATOMS, CONTEXTS)
    assert 1 < judge.max_in_flight <= 3


async def test_async_matches_sync() -> None:
    sync = RelationJudge(ScriptedJudge(by_keyword), version=3).judge_pairs(ATOMS, CONTEXTS)
    judge = RelationJudge(ScriptedJudge(by_keyword), version=3, max_concurrency=2)
    async_ = await judge.ajudge_pairs(ATOMS, CONTEXTS)
    assert async_.relations == sync.relations
    assert [(p.source, p.target) for p in async_.pairs] == [
        (p.source, p.target) for p in sync.pairs
    ]


def test_no_pairs_no_calls() -> None:
    judge = ScriptedJudge(by_keyword)
    atoms = (Atom("a0", "Paris is in France."),)
    result = RelationJudge(judge, version=2).judge_pairs(atoms, ())
    assert result.relations == ()
    assert judge.calls == []


def test_constructor_checks() -> None:
    judge = ScriptedJudge(by_keyword)
    with pytest.raises(ValueError, match="top_k"):
        RelationJudge(judge, version=1, top_k=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        RelationJudge(judge, max_concurrency=0)
    with pytest.raises(TypeError, match="judge must be a Runnable judge, not function"):
        RelationJudge(by_keyword)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown context"):
        RelationJudge(judge).judge_pairs([Atom("a0", "x", contexts=("zz",))], CONTEXTS)


def test_config_max_concurrency_wins_over_the_judges_default() -> None:
    judge = ScriptedJudge(by_keyword, delay=0.01)
    relation_judge = RelationJudge(judge, version=2, max_concurrency=1)
    relation_judge.judge_pairs(ATOMS, CONTEXTS, config={"max_concurrency": 3})
    assert 1 < judge.max_in_flight <= 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_max_concurrency_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        RelationJudge(ScriptedJudge(by_keyword), max_concurrency=bad)


async def test_async_failures_and_skips_match_sync() -> None:
    contexts = (*CONTEXTS, Context("c3", "BOOM"), Context("c4", "   "))
    atoms = (ATOMS[0], Atom("a1", "Rome is in Italy.", contexts=("c1", "c3", "c4")))
    judge = RelationJudge(ScriptedJudge(by_keyword), version=1)
    sync, async_ = judge.judge_pairs(atoms, contexts), await judge.ajudge_pairs(atoms, contexts)
    assert async_ == sync
    assert [(p.source, p.target) for p in async_.failures] == [("c3", "a1")]
    assert async_.skipped == (("c4", "a1"),)
    no_pairs = ScriptedJudge(by_keyword)
    empty = await RelationJudge(no_pairs).ajudge_pairs((Atom("a0", "Paris is in France."),), ())
    assert empty == RelationResult(())
    assert no_pairs.calls == []


def test_the_offline_judges_relations_carry_its_calibrated_confidence() -> None:
    """Issue 34, point 3: the relation probability is the judge's calibration, no constant."""
    from langchain_references.judges.heuristic import CONFIDENCE_CAP, HeuristicJudge

    judge = HeuristicJudge()
    atom = "The Moon orbits the Earth."
    passages = [
        "The Moon is Earth's only natural satellite. It orbits at an average distance of about "
        "384,400 kilometers.",
        "The Moon is tidally locked: it turns once on its axis in the same time it takes to "
        "orbit Earth.",
    ]
    judgements = [judge.judge(atom, p) for p in passages]
    relations = [judgement_to_relation("c", "a", j) for j in judgements]
    assert [j.label for j in judgements] == [Label.ENTAILS, Label.ENTAILS]
    probabilities = [r.probability for r in relations if r is not None]
    assert probabilities == [j.confidence for j in judgements]
    assert len(set(probabilities)) == 2  # from the features, not one constant
    assert all(p <= CONFIDENCE_CAP for p in probabilities)  # weak evidence stays weak
