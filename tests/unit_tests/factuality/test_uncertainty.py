"""Uncertainty stays uncertain: a judge that abstains or says little leaves atoms at their prior.

The Flaherty biography shipped in ``notebooks/data`` (26 atoms, 53 contexts) runs through
FR1, FR2 and FR3. With a judge that says nothing for or against an atom, every atom must
come out at its prior with the prior's entropy. With the offline heuristic judge, no atom may
move further from its prior than the judgements that take a side can carry: in a pairwise
network, the posterior log-odds of an atom differ from its prior log-odds by at most the sum,
over the factors at the atom, of ``max_x |log f(x, 1) / f(x, 0)|`` (the odds are a ratio of
sums of positive terms, each term's ratio within those bounds); a judgement at probability
``p > 0.5`` gives a factor with ``|logit p|``, one at ``p <= 0.5`` carries nothing against
its own label.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig

from langchain_references.factuality import FactualityInput, load_inputs
from langchain_references.factuality.pipeline import create_factuality_evaluator
from langchain_references.factuality.relations import RelationJudge, normalize_version
from langchain_references.judges import Judge, Judgement, Label, offline_judge

FLAHERTY = Path(__file__).resolve().parents[3] / "notebooks" / "data" / "flaherty_wikipedia.json"


class FixedJudge(Judge):
    """Gives the same judgement to every pair."""

    def __init__(self, judgement: Judgement) -> None:
        self.judgement = judgement

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return self.judgement


SAYS_NOTHING = {
    "unknown": Judgement(label=Label.UNKNOWN, confidence=0.9),
    "entails at 0.2": Judgement(label=Label.ENTAILS, confidence=0.2),
    "entails at even odds": Judgement(label=Label.ENTAILS, confidence=0.5),
    "contradicts at 0.3": Judgement(label=Label.CONTRADICTS, confidence=0.3),
    "NLI softmax without a majority": Judgement(
        label=Label.ENTAILS,
        confidence=0.45,
        probabilities={Label.ENTAILS: 0.45, Label.UNKNOWN: 0.35, Label.CONTRADICTS: 0.2},
    ),
}


@pytest.fixture(scope="module")
def flaherty() -> FactualityInput:
    (record,) = load_inputs(FLAHERTY).records
    assert len(record.atoms) == 26
    return record


def binary_entropy_bits(p: float) -> float:
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("prior", [0.5, 0.3])
@pytest.mark.parametrize("name", list(SAYS_NOTHING))
def test_a_judge_that_says_nothing_leaves_every_atom_at_its_prior(
    flaherty: FactualityInput, version: int, prior: float, name: str
) -> None:
    evaluator = create_factuality_evaluator(
        judge=FixedJudge(SAYS_NOTHING[name]), version=version, atom_prior=prior
    )
    result = evaluator.invoke(flaherty)
    assert result.scores is not None
    assert result.inference is not None
    posteriors = [result.marginals[a.id] for a in flaherty.atoms]
    assert posteriors == pytest.approx([prior] * 26, abs=1e-9)
    assert result.inference.estimated_error == 0.0
    scores = result.scores
    assert scores.avg_norm_entropy == pytest.approx(binary_entropy_bits(prior), abs=1e-9)
    assert scores.avg_entropy == pytest.approx(-prior * math.log(prior), abs=1e-9)
    assert scores.num_true_atoms == 0
    assert scores.num_uniform_atoms == (26 if prior == 0.5 else 0)


def logit(p: float) -> float:
    return math.log(p / (1 - p))


@pytest.mark.parametrize(("embeddings", "version"), [(False, 1), (False, 2), (False, 3), (True, 2)])
def test_the_offline_judge_moves_no_atom_further_than_its_evidence(
    flaherty: FactualityInput, embeddings: bool, version: int
) -> None:
    judge = offline_judge(use_embeddings=embeddings)  # lexical, or with offline MiniLM
    result = create_factuality_evaluator(judge=judge, version=version).invoke(flaherty)
    assert result.scores is not None
    judged = RelationJudge(judge, version=normalize_version(version)).judge_pairs(
        flaherty.atoms, flaherty.contexts
    )
    carried = {a.id: 0.0 for a in flaherty.atoms}  # largest |log-odds shift| per atom
    for pair in judged.pairs:
        label = pair.judgement.label
        p = (pair.judgement.probabilities or {}).get(label, pair.judgement.confidence)
        if pair.target in carried and label is not Label.UNKNOWN and p > 0.5:
            carried[pair.target] += abs(logit(min(p, 1 - 1e-6)))
    shifts = {a.id: abs(logit(result.marginals[a.id]) - logit(0.5)) for a in flaherty.atoms}
    beyond = {a: (round(shifts[a], 3), round(carried[a], 3)) for a in shifts}
    beyond = {a: v for a, v in beyond.items() if shifts[a] > carried[a] + 1e-6}
    assert beyond == {}
    # the heuristic never says more than 0.6, and says it about few pairs per atom
    assert all(0.05 < result.marginals[a.id] < 0.95 for a in flaherty.atoms)
