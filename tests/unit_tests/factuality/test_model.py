from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from langchain_references.factuality import Atom, Context, Relation, build_fact_graph
from langchain_references.factuality.io import load_inputs
from langchain_references.factuality.model import (
    PRIOR_PROB_ATOM,
    PRIOR_PROB_CONTEXT,
    FactGraph,
    Variable,
    candidate_pairs,
    dedupe_contexts,
    reconcile_context_pair,
)

from .conftest import fr_table


def _graph(*relations: Relation, use_priors: bool = True, epsilon: float = 1e-6) -> FactGraph:
    return FactGraph(
        (
            Variable("a", "atom", 0.5),
            Variable("b", "atom", 0.5),
            Variable("c", "context", 0.9),
            Variable("d", "context", 0.9),
        ),
        relations,
        use_priors=use_priors,
        epsilon=epsilon,
    )


@pytest.mark.parametrize("use_priors", [True, False])
@pytest.mark.parametrize("kind", ["entailment", "contradiction", "equivalence"])
@pytest.mark.parametrize(
    ("source", "target", "link_prior"),
    [("c", "a", PRIOR_PROB_ATOM), ("c", "d", PRIOR_PROB_CONTEXT), ("a", "b", PRIOR_PROB_ATOM)],
)
def test_pairwise_tables_follow_factreasoner(
    kind: str, use_priors: bool, source: str, target: str, link_prior: float
) -> None:
    graph = _graph(Relation(source, target, kind, 0.8), use_priors=use_priors)  # type: ignore[arg-type]
    expected = np.array(fr_table(kind, 0.8, link_prior, use_priors))
    np.testing.assert_allclose(graph.pairwise_tables()[0], expected)
    ids = [v.id for v in graph.variables]
    assert graph.edge_index().tolist() == [[ids.index(source), ids.index(target)]]


def test_entailment_favors_true_target_and_contradiction_false_target() -> None:
    ent, con = _graph(
        Relation("c", "a", "entailment", 0.9), Relation("d", "a", "contradiction", 0.9)
    ).pairwise_tables()
    assert ent[1, 1] > ent[1, 0]
    assert con[1, 0] > con[1, 1]


def test_probabilities_are_clamped_like_factreasoner() -> None:
    graph = FactGraph(
        (Variable("a", "atom", 0.0), Variable("c", "context", 1.0)),
        (Relation("c", "a", "entailment", 1.0),),
    )
    unary = graph.unary_tables()
    np.testing.assert_allclose(unary, [[1 - 1e-6, 1e-6], [1e-6, 1 - 1e-6]])
    assert graph.pairwise_tables()[0, 1].tolist() == pytest.approx([1e-6, 1 - 1e-6])


@pytest.mark.parametrize(
    ("relations", "message"),
    [
        ((Relation("a", "c", "entailment", 0.5),), "atom to a context"),
        ((Relation("c", "x", "entailment", 0.5),), "unknown id"),
        ((Relation("c", "a", "neutral", 0.5),), "neutral"),
        (
            (Relation("c", "a", "entailment", 0.5), Relation("c", "a", "contradiction", 0.2)),
            "duplicate",
        ),
    ],
)
def test_fact_graph_rejects_bad_structure(relations: tuple[Relation, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _graph(*relations)


def test_invalid_values_are_rejected() -> None:
    with pytest.raises(ValueError, match="probability"):
        Relation("c", "a", "entailment", 1.5)
    with pytest.raises(ValueError, match="probability"):
        Relation("c", "a", "entailment", float("nan"))
    with pytest.raises(ValueError, match="kind"):
        Relation("c", "a", "supports", 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="itself"):
        Relation("c", "c", "entailment", 0.5)
    with pytest.raises(ValueError, match="epsilon"):
        _graph(epsilon=0.0)
    with pytest.raises(ValueError, match="duplicate variable"):
        FactGraph((Variable("a", "atom", 0.5), Variable("a", "context", 0.5)))
    with pytest.raises(TypeError):
        Variable("a", "atom", "0.5")  # type: ignore[arg-type]


def test_from_json_reads_the_factreasoner_example(shared_data: Path) -> None:
    data = json.loads((shared_data / "factreasoner_fact_graph.json").read_text())
    graph = FactGraph.from_json(data)
    assert graph.atom_ids == ("a1",)
    assert graph.context_ids == ("c11", "c12")
    assert [v.prior for v in graph.variables] == [0.5, 0.99, 0.99]
    assert [(r.source, r.target, r.kind, r.probability) for r in graph.relations] == [
        ("c11", "a1", "entailment", 0.9),
        ("c12", "a1", "entailment", 0.6),
        ("c12", "c11", "contradiction", 0.8),
    ]
    assert graph.num_factors == 6
    again = FactGraph.from_json(graph.to_json())
    assert again == graph
    assert graph.to_json()["edges"] == data["edges"]


def test_from_json_validates() -> None:
    with pytest.raises(ValueError, match="nodes"):
        FactGraph.from_json({"edges": []})
    bad_link: dict[str, Any] = {
        "nodes": [{"id": "a", "type": "atom"}, {"id": "c", "type": "context"}],
        "edges": [
            {
                "from": "c",
                "to": "a",
                "relation": "entailment",
                "probability": 0.7,
                "link": "context_context",
            }
        ],
    }
    with pytest.raises(ValueError, match="link"):
        FactGraph.from_json(bad_link)
    ok = dict(bad_link, edges=[dict(bad_link["edges"][0], link="context_atom")])
    graph = FactGraph.from_json(ok)
    assert [v.prior for v in graph.variables] == [PRIOR_PROB_ATOM, PRIOR_PROB_CONTEXT]
    with pytest.raises(ValueError, match="type"):
        FactGraph.from_json({"nodes": [{"id": "x", "type": "claim"}], "edges": []})


# ----------------------------------------------------------------------- builders
ATOMS = [
    Atom("a0", "x", contexts=("c0", "c1", "c2")),
    Atom("a1", "y", contexts=("c2", "c3")),
]
CONTEXTS = [
    Context("c0", "alpha"),
    Context("c1", "beta"),
    Context("c2", "alpha"),  # duplicate of c0
    Context("c3", "gamma"),
]


def test_dedupe_contexts_keeps_first_of_same_snippet_and_text() -> None:
    kept, alias = dedupe_contexts([*CONTEXTS, Context("c4", "alpha", snippet="s")])
    assert [c.id for c in kept] == ["c0", "c1", "c3", "c4"]
    assert alias["c2"] == "c0"
    assert alias["c4"] == "c4"


def test_candidate_pairs_per_version() -> None:
    assert candidate_pairs(ATOMS, CONTEXTS, version="FR1") == [
        ("c0", "a0"),
        ("c1", "a0"),
        ("c2", "a0"),
        ("c2", "a1"),
        ("c3", "a1"),
    ]
    assert candidate_pairs(ATOMS, CONTEXTS, version="FR1", top_k=1) == [("c0", "a0"), ("c2", "a1")]
    fr2 = candidate_pairs(ATOMS, CONTEXTS, version="FR2")
    assert fr2 == [(c, a) for a in ("a0", "a1") for c in ("c0", "c1", "c3")]
    fr3 = candidate_pairs(ATOMS, CONTEXTS, version="FR3")
    assert fr3[: len(fr2)] == fr2
    assert sorted(fr3[len(fr2) :]) == sorted(
        [("c0", "c1"), ("c1", "c0"), ("c0", "c3"), ("c3", "c0"), ("c1", "c3"), ("c3", "c1")]
    )


def test_fr1_keeps_only_each_atoms_own_contexts(caplog: pytest.LogCaptureFixture) -> None:
    relations = [
        Relation("c0", "a0", "entailment", 0.9),
        Relation("c3", "a0", "entailment", 0.9),  # not retrieved for a0
        Relation("c2", "a1", "contradiction", 0.7),
        Relation("c1", "a1", "neutral", 0.6),
        Relation("c0", "c1", "entailment", 0.8),  # context-context: FR3 only
    ]
    with caplog.at_level(logging.WARNING):
        graph = build_fact_graph(ATOMS, CONTEXTS, relations, version="FR1")
    assert [(r.source, r.target) for r in graph.relations] == [("c0", "a0"), ("c2", "a1")]
    assert graph.context_ids == ("c0", "c1", "c2", "c3")
    assert "2 relation(s)" in caplog.text
    top1 = build_fact_graph(ATOMS, CONTEXTS, relations[:3], version="FR1", top_k=1)
    assert [(r.source, r.target) for r in top1.relations] == [("c0", "a0"), ("c2", "a1")]


def test_fr2_merges_duplicates_and_relates_every_atom_to_every_context() -> None:
    relations = [
        Relation("c3", "a0", "entailment", 0.9),
        Relation("c2", "a1", "entailment", 0.9),  # c2 was merged into c0
        Relation("c0", "a1", "contradiction", 0.6),
    ]
    graph = build_fact_graph(ATOMS, CONTEXTS, relations, version="FR2")
    assert graph.context_ids == ("c0", "c1", "c3")
    assert [(r.source, r.target) for r in graph.relations] == [("c3", "a0"), ("c0", "a1")]


def test_fr3_reconciles_both_directions_like_factreasoner() -> None:
    relations = [
        Relation("c0", "c1", "entailment", 0.7),
        Relation("c1", "c0", "entailment", 0.9),  # both entail -> equivalence, p of winner
        Relation("c0", "c3", "contradiction", 0.6),
        Relation("c3", "c0", "neutral", 0.8),  # neutral wins -> no factor
        Relation("c1", "c3", "contradiction", 0.65),  # single direction kept
    ]
    graph = build_fact_graph(ATOMS, CONTEXTS, relations, version="FR3")
    assert {(r.source, r.target, r.kind, r.probability) for r in graph.relations} == {
        ("c1", "c0", "equivalence", 0.9),
        ("c1", "c3", "contradiction", 0.65),
    }
    fr2 = build_fact_graph(ATOMS, CONTEXTS, relations, version="FR2")
    assert fr2.relations == ()


def test_reconcile_context_pair_rules() -> None:
    fwd = Relation("x", "y", "contradiction", 0.6)
    back = Relation("y", "x", "entailment", 0.6)
    assert reconcile_context_pair(fwd, back) == back  # tie -> backward, as in FactReasoner
    stronger = reconcile_context_pair(Relation("x", "y", "contradiction", 0.7), back)
    assert stronger is not None
    assert stronger.kind == "contradiction"
    with pytest.raises(ValueError, match="two directions"):
        reconcile_context_pair(fwd, fwd)


def test_builder_priors_and_errors() -> None:
    graph = build_fact_graph(
        ATOMS, CONTEXTS, [], version="FR2", atom_prior=0.4, context_prior=0.8, priors={"c1": 0.3}
    )
    assert {v.id: v.prior for v in graph.variables} == {
        "a0": 0.4,
        "a1": 0.4,
        "c0": 0.8,
        "c1": 0.3,
        "c3": 0.8,
    }
    with pytest.raises(ValueError, match="unknown id"):
        build_fact_graph(ATOMS, CONTEXTS, [Relation("zz", "a0", "entailment", 0.5)])
    with pytest.raises(ValueError, match="duplicate relation"):
        build_fact_graph(ATOMS, CONTEXTS, [Relation("c0", "a0", "entailment", 0.5)] * 2)
    with pytest.raises(ValueError, match="unknown context"):
        build_fact_graph([Atom("a", contexts=("nope",))], CONTEXTS, [])
    with pytest.raises(ValueError, match="version"):
        build_fact_graph(ATOMS, CONTEXTS, [], version="FR4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_k"):
        candidate_pairs(ATOMS, CONTEXTS, version="FR1", top_k=0)
    with pytest.raises(ValueError, match="merged"):
        build_fact_graph(ATOMS, CONTEXTS, [], priors={"c2": 0.5})
    with pytest.raises(ValueError, match="atom to a context"):
        build_fact_graph(ATOMS, CONTEXTS, [Relation("a0", "c0", "entailment", 0.5)])


def test_flaherty_candidate_pair_counts(shared_data: Path) -> None:
    record = load_inputs(shared_data / "factreasoner_flaherty_wikipedia.json").records[0]
    own = sum(len(a.contexts) for a in record.atoms)
    unique = len({(c.snippet, c.text) for c in record.contexts})
    assert len(candidate_pairs(record.atoms, record.contexts, version="FR1")) == own
    assert len(candidate_pairs(record.atoms, record.contexts, version="FR2")) == 26 * unique
    assert len(candidate_pairs(record.atoms, record.contexts, version="FR3")) == (
        26 * unique + unique * (unique - 1)
    )
    assert unique < 53  # the example retrieves the same Wikipedia passages repeatedly
