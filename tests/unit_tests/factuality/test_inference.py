"""Inference against exhaustive enumeration (more in ``test_inference_exact.py`` and
``test_inference_bp.py``).

Loopy BP accuracy (``test_loopy_bp_error_on_factreasoner_shaped_graphs``; measured
before clamping was added, which only makes the atoms more accurate): on 200 seeded
random FR2/FR3-shaped loopy graphs (2-5 atoms, 2-7 contexts, atom prior
0.5, context prior 0.9, 30 % entailment / 15 % contradiction / rest neutral, judge
probability U(0.5, 1), FR3 with 30 % context pairs related), the largest
|P_BP(v) - P_exact(v)| over all variables was 0.069 (0.053 over atoms), no atom changed
side of 0.5, every run converged (damping 0.5, at most 66 sweeps). On 200 unconstrained
random graphs (any priors and probabilities, equivalences, frustrated loops) it reaches
0.24. The tests assert 0.10 and 0.35 respectively.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.errors import LangchainReferencesError
from langchain_references.factuality import (
    Atom,
    Context,
    Relation,
    build_fact_graph,
    infer_marginals,
)
from langchain_references.factuality.inference import InferenceError, Method, run_inference
from langchain_references.factuality.inference._junction import (
    plan_junction_tree,
    run_junction_tree,
)
from langchain_references.factuality.inference._network import p_true, prepare
from langchain_references.factuality.model import FactGraph, RelationKind, Variable

from .conftest import KINDS, fact_graphs, reference_marginals

FR_BP_BOUND = 0.10
GENERIC_BP_BOUND = 0.35


def _max_error(a: dict[str, float], b: dict[str, float]) -> float:
    assert a.keys() == b.keys()
    return max((abs(a[k] - b[k]) for k in a), default=0.0)


@settings(max_examples=150, deadline=None)
@given(fact_graphs(max_atoms=5, max_contexts=6, tree=True))
def test_trees_are_exact(graph: FactGraph) -> None:
    result = run_inference(graph, "auto")
    assert _max_error(result.marginals, reference_marginals(graph)) < 1e-9
    assert result.exact
    assert {c.method for c in result.components} <= {"tree", "isolated"}


@settings(max_examples=150, deadline=None)
@given(fact_graphs(max_atoms=4, max_contexts=5))
def test_exact_and_brute_match_enumeration_on_loopy_graphs(graph: FactGraph) -> None:
    reference = reference_marginals(graph)
    assert _max_error(infer_marginals(graph, "exact"), reference) < 1e-9
    assert _max_error(infer_marginals(graph, "brute"), reference) < 1e-9
    auto = run_inference(graph)
    assert auto.exact  # small components always fit the junction-tree budget
    assert _max_error(auto.marginals, reference) < 1e-9


@settings(max_examples=100, deadline=None)
@given(fact_graphs(max_atoms=5, max_contexts=6, tree=True))
def test_loopy_bp_is_exact_on_trees_once_converged(graph: FactGraph) -> None:
    result = run_inference(graph, "bp", tolerance=1e-10)
    assert result.bp is None or result.bp.converged
    assert _max_error(result.marginals, reference_marginals(graph)) < 1e-6


def _fr_shaped(rng: np.random.Generator, version: str) -> FactGraph:
    n_atoms, n_contexts = int(rng.integers(2, 6)), int(rng.integers(2, 8))
    atoms = [Atom(f"a{i}") for i in range(n_atoms)]
    contexts = [Context(f"c{j}", text=f"passage {j}") for j in range(n_contexts)]
    relations = []
    for a in atoms:
        for c in contexts:
            u = rng.uniform()
            if u < 0.45:
                kind: RelationKind = "entailment" if u < 0.30 else "contradiction"
                relations.append(Relation(c.id, a.id, kind, float(rng.uniform(0.5, 1))))
    if version == "FR3":
        for i in range(n_contexts):
            for j in range(i + 1, n_contexts):
                if rng.uniform() < 0.3:
                    kind = cast("RelationKind", str(rng.choice(KINDS)))
                    relations.append(Relation(f"c{i}", f"c{j}", kind, float(rng.uniform(0.5, 1))))
    return build_fact_graph(atoms, contexts, relations, version=version)  # type: ignore[arg-type]


def test_loopy_bp_error_on_factreasoner_shaped_graphs() -> None:
    rng = np.random.default_rng(1)
    worst, measured, flips = 0.0, 0, 0
    while measured < 200:
        graph = _fr_shaped(rng, "FR2" if measured % 2 == 0 else "FR3")
        result = run_inference(graph, "bp")
        if result.bp is None:
            continue
        assert result.bp.converged
        measured += 1
        exact = infer_marginals(graph, "exact")
        worst = max(worst, _max_error(result.marginals, exact))
        flips += sum((result.marginals[a] > 0.5) != (exact[a] > 0.5) for a in graph.atom_ids)
    assert worst < FR_BP_BOUND
    assert flips <= 2
    assert worst > 1e-4  # the graphs do have loops that BP gets (slightly) wrong


def test_loopy_bp_error_on_generic_random_graphs() -> None:
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(200):
        n_atoms, n_contexts = int(rng.integers(1, 6)), int(rng.integers(1, 8))
        variables = [
            Variable(f"a{i}", "atom", float(rng.uniform(0.05, 0.95))) for i in range(n_atoms)
        ]
        variables += [
            Variable(f"c{i}", "context", float(rng.uniform(0.05, 0.99))) for i in range(n_contexts)
        ]
        relations: dict[tuple[str, str], Relation] = {}
        for _ in range(int(rng.integers(1, 20))):
            i, j = rng.choice(len(variables), 2, replace=False)
            s, t = variables[i], variables[j]
            if s.kind == "atom" and t.kind == "context":
                s, t = t, s
            relations.setdefault(
                (s.id, t.id),
                Relation(s.id, t.id, cast("RelationKind", str(rng.choice(KINDS))), rng.uniform()),
            )
        graph = FactGraph(
            tuple(variables), tuple(relations.values()), use_priors=bool(rng.integers(2))
        )
        result = run_inference(graph, "bp")
        assert result.bp is None or result.bp.converged
        worst = max(worst, _max_error(result.marginals, infer_marginals(graph, "brute")))
    assert worst < GENERIC_BP_BOUND


def test_factreasoner_fact_graph_example(shared_data: Path) -> None:
    graph = FactGraph.from_json(
        json.loads((shared_data / "factreasoner_fact_graph.json").read_text())
    )
    # By hand: a1 ~ [.5, .5], c11, c12 ~ [.01, .99]; c11->a1 ent .9, c12->a1 ent .6,
    # c12->c11 contradiction .8 (context link: first row [.1, .9]).
    prior = {0: 0.01, 1: 0.99}
    weights: dict[tuple[int, int, int], float] = {}
    for a in (0, 1):
        for c11 in (0, 1):
            for c12 in (0, 1):
                f1 = [[0.5, 0.5], [0.1, 0.9]][c11][a]
                f2 = [[0.5, 0.5], [0.4, 0.6]][c12][a]
                f3 = [[0.1, 0.9], [0.8, 0.2]][c12][c11]
                weights[(a, c11, c12)] = 0.5 * prior[c11] * prior[c12] * f1 * f2 * f3
    p_a1 = sum(w for k, w in weights.items() if k[0] == 1) / sum(weights.values())
    methods: tuple[Method, ...] = ("auto", "exact", "brute")
    for method in methods:
        assert infer_marginals(graph, method)["a1"] == pytest.approx(p_a1, abs=1e-5)
    assert infer_marginals(graph, "bp")["a1"] == pytest.approx(p_a1, abs=1e-3)
    assert p_a1 > 0.9  # two supporting contexts outweigh their mutual contradiction


def test_no_relations_gives_the_priors() -> None:
    graph = build_fact_graph([Atom("a0"), Atom("a1")], [Context("c0", "t")], [], priors={"a1": 0.2})
    result = run_inference(graph)
    assert result.marginals == pytest.approx({"a0": 0.5, "a1": 0.2, "c0": 0.9})
    assert {c.method for c in result.components} == {"isolated"}
    assert run_inference(FactGraph(())).marginals == {}


def test_isolated_atom_next_to_evidence() -> None:
    graph = build_fact_graph(
        [Atom("a0"), Atom("a1")],
        [Context("c0", "t")],
        [Relation("c0", "a0", "entailment", 0.95)],
    )
    marginals = infer_marginals(graph)
    assert marginals["a1"] == pytest.approx(0.5)
    assert marginals["a0"] > 0.8


@pytest.mark.parametrize("kind", ["entailment", "contradiction"])
def test_certain_edges_are_near_hard_constraints(kind: str) -> None:
    atoms, contexts = [Atom("a0")], [Context("c0", "t")]
    relations = [Relation("c0", "a0", kind, 1.0)]  # type: ignore[arg-type]
    soft = build_fact_graph(atoms, contexts, relations, priors={"c0": 1.0})
    hard = build_fact_graph(atoms, contexts, relations, priors={"c0": 1.0}, epsilon=1e-12)
    expected = 1.0 if kind == "entailment" else 0.0
    assert infer_marginals(soft)["a0"] == pytest.approx(expected, abs=1e-5)
    assert infer_marginals(hard)["a0"] == pytest.approx(expected, abs=1e-11)
    zero = build_fact_graph(atoms, contexts, [Relation("c0", "a0", kind, 0.0)])  # type: ignore[arg-type]
    assert _max_error(infer_marginals(zero), reference_marginals(zero)) < 1e-9


def test_parallel_relations_are_multiplied() -> None:
    graph = FactGraph(
        (Variable("c0", "context", 0.9), Variable("c1", "context", 0.6)),
        (Relation("c0", "c1", "entailment", 0.8), Relation("c1", "c0", "contradiction", 0.7)),
    )
    result = run_inference(graph)
    assert result.components[0].num_pairwise == 1
    assert _max_error(result.marginals, reference_marginals(graph)) < 1e-12


def test_long_chain_tree_pass_matches_junction_tree() -> None:
    rng = np.random.default_rng(7)
    n = 400
    variables = tuple(Variable(f"c{i}", "context", float(rng.uniform(0.1, 0.9))) for i in range(n))
    relations = tuple(
        Relation(f"c{i}", f"c{i + 1}", "equivalence", float(rng.uniform(0.6, 1.0)))
        for i in range(n - 1)
    )
    chain = FactGraph(variables, relations)
    tree = run_inference(chain)
    assert tree.components[0].method == "tree"
    net = prepare(chain)
    plan = plan_junction_tree(net.n, net.ei, net.ej, 2**22)
    assert plan is not None
    assert plan.width == 2
    beliefs, _ = run_junction_tree(plan, net.log_unary[None], net.ei, net.ej, net.log_pair)
    jt = dict(zip([v.id for v in variables], p_true(beliefs[0]).tolist(), strict=True))
    assert _max_error(tree.marginals, jt) < 1e-9
    # a p = 0.5 equivalence closing the ring couples nothing: it adds no edge, no loop
    ring = FactGraph(variables, (*relations, Relation(f"c{n - 1}", "c0", "equivalence", 0.5)))
    closed = run_inference(ring)
    assert [c.method for c in closed.components] == ["tree"]
    assert closed.components[0].num_pairwise == n - 1
    assert _max_error(tree.marginals, closed.marginals) < 1e-12


def test_wide_components_fall_back_to_bp_and_exact_refuses() -> None:
    atoms = [Atom(f"a{i}") for i in range(12)]
    contexts = [Context(f"c{j}", text=str(j)) for j in range(12)]
    relations = [Relation(c.id, a.id, "entailment", 0.8) for a in atoms for c in contexts]
    graph = build_fact_graph(atoms, contexts, relations)
    result = run_inference(graph, exact_budget=2**10, conditioning_budget=2**10)
    assert [c.method for c in result.components] == ["loopy_bp"]
    assert result.bp is not None
    assert result.bp.converged
    assert not result.exact
    with pytest.raises(InferenceError, match="exact_budget"):
        run_inference(graph, "exact", exact_budget=2**10, conditioning_budget=2**10)
    with pytest.raises(InferenceError, match="brute force"):
        run_inference(graph, "brute")
    exact = run_inference(graph, "exact")  # width 12 fits the default budget
    assert exact.components[0].method == "junction_tree"
    assert _max_error(result.marginals, exact.marginals) < FR_BP_BOUND


def test_bp_non_convergence_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    atoms = [Atom(f"a{i}") for i in range(6)]
    contexts = [Context(f"c{j}", text=str(j)) for j in range(6)]
    relations = [Relation(c.id, a.id, "entailment", 0.99) for a in atoms for c in contexts]
    graph = build_fact_graph(atoms, contexts, relations)
    result = run_inference(graph, "bp", max_iterations=2)
    assert result.bp is not None
    assert result.bp.iterations == 2 * 4  # the run and its three restarts
    assert not result.bp.converged
    assert result.bp.clamped == 0
    assert result.estimated_error is None
    assert "did not converge" in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "mcmc"}, "method"),
        ({"damping": 1.0}, "damping"),
        ({"tolerance": 0.0}, "tolerance"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"brute_max_vars": 40}, "brute_max_vars"),
        ({"exact_budget": 2}, "exact_budget"),
        ({"conditioning_budget": 3}, "conditioning_budget"),
        ({"clamp_budget": -1}, "clamp_budget"),
        ({"sampling_budget": -1}, "sampling_budget"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    graph = FactGraph((Variable("a", "atom", 0.5),))
    with pytest.raises(ValueError, match=message):
        run_inference(graph, **kwargs)  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(fact_graphs(max_atoms=4, max_contexts=4), st.sampled_from(["auto", "bp", "brute"]))
def test_marginals_are_probabilities_in_graph_order(graph: FactGraph, method: str) -> None:
    marginals = infer_marginals(graph, method)  # type: ignore[arg-type]
    assert list(marginals) == [v.id for v in graph.variables]
    assert all(0.0 <= p <= 1.0 for p in marginals.values())


def test_infer_marginals_passes_every_option_on() -> None:
    atoms = [Atom(f"a{i}") for i in range(6)]
    contexts = [Context(f"c{j}", text=str(j)) for j in range(6)]
    relations = [Relation(c.id, a.id, "entailment", 0.99) for a in atoms for c in contexts]
    graph = build_fact_graph(atoms, contexts, relations)
    options: dict[str, Any] = {"damping": 0.2, "tolerance": 1e-6, "max_iterations": 3}
    expected = run_inference(graph, "bp", **options).marginals
    assert infer_marginals(graph, "bp", **options) == expected
    with pytest.raises(InferenceError, match="exact_budget=16"):
        infer_marginals(graph, "exact", exact_budget=16, conditioning_budget=16)
    with pytest.raises(InferenceError, match="limited to 2"):
        infer_marginals(graph, "brute", brute_max_vars=2)


def test_inference_error_is_a_package_error() -> None:
    assert issubclass(InferenceError, LangchainReferencesError)
    assert issubclass(InferenceError, ValueError)
