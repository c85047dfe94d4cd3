"""Exact inference: junction tree and cutset conditioning against enumeration."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.factuality.inference import run_inference
from langchain_references.factuality.inference._cutset import CutsetPlan, plan_cutset, run_cutset
from langchain_references.factuality.inference._junction import (
    plan_junction_tree,
    run_junction_tree,
)
from langchain_references.factuality.inference._network import Network, p_true, prepare
from langchain_references.factuality.model import FactGraph, Relation

from .conftest import fact_graphs, reference_marginals


def _log_z(net: Network) -> float:
    """log Z by enumeration, written independently of the library's solvers."""
    scores = []
    for state in itertools.product((0, 1), repeat=net.n):
        score = sum(net.log_unary[v, x] for v, x in enumerate(state))
        for e in range(net.m):
            score += net.log_pair[e, state[int(net.ei[e])], state[int(net.ej[e])]]
        scores.append(score)
    return float(np.logaddexp.reduce(scores))


def _max_error(result: dict[str, float], reference: dict[str, float]) -> float:
    return max((abs(result[k] - reference[k]) for k in reference), default=0.0)


@settings(max_examples=120, deadline=None)
@given(fact_graphs(max_atoms=4, max_contexts=5))
def test_junction_tree_marginals_and_log_z_match_enumeration(graph: FactGraph) -> None:
    net = prepare(graph)
    plan = plan_junction_tree(net.n, net.ei, net.ej, 2**20)
    assert plan is not None
    beliefs, log_z = run_junction_tree(plan, net.log_unary[None], net.ei, net.ej, net.log_pair)
    reference = reference_marginals(graph)
    ids = [v.id for v in graph.variables]
    assert _max_error(dict(zip(ids, p_true(beliefs[0]).tolist(), strict=True)), reference) < 1e-9
    assert abs(float(log_z[0]) - _log_z(net)) < 1e-9


@settings(max_examples=60, deadline=None)
@given(fact_graphs(max_atoms=4, max_contexts=5), st.integers(1, 3))
def test_conditioning_on_any_hubs_equals_plain_exact(graph: FactGraph, k: int) -> None:
    net = prepare(graph)
    k = min(k, net.n)
    degrees = net.degrees()
    hubs = tuple(int(v) for v in np.argsort(-degrees, kind="stable")[:k])
    rest = np.setdiff1d(np.arange(net.n), hubs)
    sub = net.subnetwork(rest)
    plan = plan_junction_tree(sub.n, sub.ei, sub.ej, 2**20)
    assert plan is not None
    beliefs = run_cutset(net, CutsetPlan(hubs, rest, plan), chunk_entries=8)
    ids = [v.id for v in graph.variables]
    marginals = dict(zip(ids, p_true(beliefs).tolist(), strict=True))
    assert _max_error(marginals, reference_marginals(graph)) < 1e-9


def _dense(n_atoms: int, n_contexts: int, seed: int) -> FactGraph:
    from langchain_references.factuality import Atom, Context, Relation, build_fact_graph

    rng = np.random.default_rng(seed)
    atoms = [Atom(f"a{i}") for i in range(n_atoms)]
    contexts = [Context(f"c{j}", text=str(j)) for j in range(n_contexts)]
    relations = [
        Relation(c.id, a.id, "entailment" if rng.uniform() < 0.6 else "contradiction", p)
        for a in atoms
        for c in contexts
        if (p := float(rng.uniform(0.5, 1.0))) and rng.uniform() < 0.7
    ]
    return build_fact_graph(atoms, contexts, relations)


def test_auto_conditions_when_the_junction_tree_is_over_budget() -> None:
    graph = _dense(9, 10, seed=3)
    plain = run_inference(graph, "exact")
    assert [c.method for c in plain.components] == ["junction_tree"]
    budget = 2 ** ((plain.components[0].max_clique or 0) - 1)
    conditioned = run_inference(graph, exact_budget=budget, conditioning_budget=2**16)
    (report,) = conditioned.components
    assert report.method == "conditioned"
    assert report.hubs >= 1
    assert report.max_clique is not None
    assert report.max_clique < (plain.components[0].max_clique or 0)
    assert conditioned.exact
    assert conditioned.method == "conditioned"
    assert conditioned.estimated_error == 0.0
    assert _max_error(conditioned.marginals, plain.marginals) < 1e-9


def test_cutset_plan_respects_both_budgets() -> None:
    net = prepare(_dense(9, 10, seed=4))
    cutset = plan_cutset(net, 2**10, 2**16)
    assert cutset is not None
    assert cutset.plan.cost <= 2**10
    assert cutset.work <= 2**16
    assert plan_cutset(net, 2**10, 2**5) is None


@st.composite
def graphs_with_uncoupled_factors(draw: st.DrawFn) -> tuple[FactGraph, int]:
    """Random graphs where some relations sit at the probability that couples nothing.

    With FactReasoner's "with priors" tables and link prior 0.5, an entailment or a
    contradiction at 0.5 has two equal rows and an equivalence at 0.5 is uniform.
    """
    graph = draw(fact_graphs(max_atoms=4, max_contexts=5))
    relations = []
    uncoupled = 0
    for relation in graph.relations:
        link = graph.link_of(relation)
        if link != "context_context" and draw(st.booleans()):
            relation = Relation(relation.source, relation.target, relation.kind, 0.5)
            uncoupled += 1
        relations.append(relation)
    variables = graph.variables
    return FactGraph(variables, tuple(relations), use_priors=True, atom_prior=0.5), uncoupled


@settings(max_examples=100, deadline=None)
@given(graphs_with_uncoupled_factors())
def test_uncoupled_factors_fold_into_unaries_exactly(case: tuple[FactGraph, int]) -> None:
    graph, uncoupled = case
    net = prepare(graph)
    assert net.m <= len(graph.relations) - uncoupled  # parallel factors merge too
    result = run_inference(graph)
    assert _max_error(result.marginals, reference_marginals(graph)) < 1e-9
    assert sum(c.num_pairwise for c in result.components) == net.m
