"""Gibbs sampling with parallel tempering: the fallback where loopy BP gives no estimate."""

from __future__ import annotations

import itertools
import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings

from langchain_references.factuality import Atom, Context, Relation, build_fact_graph
from langchain_references.factuality.inference import (
    InferenceError,
    InferenceOptions,
    _run,
    run_inference,
)
from langchain_references.factuality.inference._gibbs import (
    MIN_RATE,
    Couplings,
    color_classes,
    ising,
    run_gibbs,
)
from langchain_references.factuality.inference._network import prepare
from langchain_references.factuality.model import FactGraph, RelationKind

from .conftest import fact_graphs


def _hard_graph(seed: int, n_atoms: int, n_contexts: int, version: str) -> FactGraph:
    """Confident, partly wrong judges: probability 1.0 (0.0 for 10 %), 10 % labels flipped.

    The graphs where loopy BP and its clamped runs fail to converge (see the benchmark).
    """
    rng = np.random.default_rng(seed)
    atoms = [Atom(f"a{i}") for i in range(n_atoms)]
    contexts = [Context(f"c{j}", text=str(j)) for j in range(n_contexts)]
    pairs = [(c.id, a.id) for a in atoms for c in contexts]
    if version == "FR3":
        pairs += [
            (f"c{i}", f"c{j}")
            for i in range(n_contexts)
            for j in range(i + 1, n_contexts)
            if rng.uniform() < 0.05
        ]
    relations: list[Relation] = []
    for source, target in pairs:
        u = rng.uniform()
        if u >= 0.45:
            continue
        kind: RelationKind = "entailment" if u < 0.30 else "contradiction"
        if rng.uniform() < 0.10:
            kind = "contradiction" if kind == "entailment" else "entailment"
        relations.append(Relation(source, target, kind, 0.0 if rng.uniform() < 0.1 else 1.0))
    return build_fact_graph(atoms, contexts, relations, version=version)  # type: ignore[arg-type]


def _dense_graph() -> FactGraph:
    atoms = [Atom(f"a{i}") for i in range(6)]
    contexts = [Context(f"c{j}", text=str(j)) for j in range(6)]
    relations = [Relation(c.id, a.id, "entailment", 0.99) for a in atoms for c in contexts]
    return build_fact_graph(atoms, contexts, relations)


#: Options under which the dispatch gives :func:`_dense_graph` to BP, which does not converge.
_BP_THAT_FAILS: InferenceOptions = {
    "exact_budget": 2**4,
    "conditioning_budget": 2**4,
    "max_iterations": 2,
}


def _without_sampling(options: InferenceOptions) -> InferenceOptions:
    return {**options, "sampling_budget": 0}


@settings(max_examples=60, deadline=None)
@given(fact_graphs(max_atoms=4, max_contexts=5))
def test_ising_form_matches_the_factor_tables(graph: FactGraph) -> None:
    net = prepare(graph)
    h, w = ising(net)
    assert np.allclose(w, w.T)
    assert np.all(np.diag(w) == 0.0)
    states = np.array(list(itertools.product((0, 1), repeat=net.n)), dtype=np.float64)
    tables = net.log_unary[np.arange(net.n), states.astype(int)].sum(axis=1)
    x = states.astype(int)
    tables += net.log_pair[np.arange(net.m), x[:, net.ei], x[:, net.ej]].sum(axis=1)
    quadratic = states @ h + 0.5 * np.einsum("sv,vu,su->s", states, w, states)
    assert np.allclose(tables - quadratic, tables[0] - quadratic[0])  # equal up to a constant


@settings(max_examples=60, deadline=None)
@given(fact_graphs(max_atoms=5, max_contexts=6))
def test_coloring_is_proper_and_complete(graph: FactGraph) -> None:
    net = prepare(graph)
    blocks = color_classes(net)
    color = np.full(net.n, -1)
    for c, block in enumerate(blocks):
        assert block.size > 0
        color[block] = c
    assert np.all(color >= 0)
    assert np.all(color[net.ei] != color[net.ej])


@pytest.mark.parametrize(("seed", "version"), [(s, v) for s in range(3) for v in ("FR2", "FR3")])
def test_sampled_marginals_are_within_their_estimate_on_hard_graphs(
    seed: int, version: str
) -> None:
    graph = _hard_graph(seed, 6, 12, version)
    exact = run_inference(graph, "exact")
    sampled = run_inference(graph, "gibbs")
    assert sampled.gibbs is not None
    assert {c.method for c in sampled.components} <= {"gibbs", "isolated"}
    estimate = sampled.estimated_error
    assert estimate is not None
    actual = max(abs(sampled.marginals[a] - exact.marginals[a]) for a in graph.atom_ids)
    assert actual <= max(estimate, 0.01)  # the tolerance the sampler stops at
    assert actual < 0.06


def test_plain_gibbs_without_tempering_gets_stuck_on_hard_graphs() -> None:
    """Why the sampler tempers: single-temperature chains do not cross near-hard factors."""
    worst = {1: 0.0, 12: 0.0}  # by replicas per chain
    for seed in range(4):
        graph = _hard_graph(seed, 6, 12, "FR2")
        exact = run_inference(graph, "exact").marginals
        ids = [v.id for v in graph.variables]
        net = prepare(graph)
        for levels in worst:
            run = run_gibbs(net, chains=16, max_sweeps=1000, tolerance=0.01, seed=0, levels=levels)
            error = max(abs(run.marginals[ids.index(a)] - exact[a]) for a in graph.atom_ids)
            worst[levels] = max(worst[levels], error)
    assert worst[12] < 0.06
    assert worst[1] > 2 * worst[12]


def test_a_broken_ladder_is_reported_and_leaves_bp_standing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    graph = _hard_graph(0, 6, 12, "FR2")
    net = prepare(graph)
    # two replicas far apart in temperature: exchanges between them are (almost) never accepted
    broken = run_gibbs(
        net, chains=16, max_sweeps=4000, tolerance=0.01, seed=0, levels=2, hottest=1e-4
    )
    assert broken.report.swap_rate < MIN_RATE
    assert not broken.report.mixed
    assert not broken.report.converged
    assert broken.report.levels == 2
    assert broken.report.sweeps == 8 * 25  # stopped at the first check: more sweeps would not help
    # in the dispatch, such a run changes nothing: BP's answer stands, without an estimate
    # (on a hard graph, whose plain chains disagree, so that the ladder runs)
    budgets = _BP_THAT_FAILS
    bp_only = run_inference(graph, **_without_sampling(budgets))
    monkeypatch.setattr(_run, "_HOTTEST", 1e-4)
    monkeypatch.setattr(_run, "_LEVELS", 2)
    monkeypatch.setattr(_run, "_LEVELS_PER_ROOT_N", 0.0)
    with caplog.at_level(logging.WARNING):
        result = run_inference(graph, **budgets)
    assert result.gibbs is not None
    assert not result.gibbs.mixed
    assert [c.method for c in result.components if c.method != "isolated"] == ["loopy_bp"]
    assert result.marginals == bp_only.marginals
    assert result.estimated_error is None
    assert "did not mix" in caplog.text
    forced = run_inference(graph, "gibbs")  # forced: the sampled marginals, unestimated
    assert forced.gibbs is not None
    assert not forced.gibbs.mixed
    assert [c.method for c in forced.components if c.method != "isolated"] == ["gibbs"]
    assert forced.estimated_error is None


def test_auto_samples_where_bp_leaves_no_estimate(caplog: pytest.LogCaptureFixture) -> None:
    graph = _dense_graph()
    budgets = _BP_THAT_FAILS
    with caplog.at_level(logging.WARNING):
        result = run_inference(graph, **budgets)
    assert result.bp is not None
    assert not result.bp.converged
    assert [c.method for c in result.components] == ["gibbs"]  # ... so the graph was sampled
    assert result.gibbs is not None
    assert result.gibbs.converged
    assert result.method == "gibbs"
    assert not result.exact
    estimate = result.estimated_error
    assert estimate is not None
    assert estimate < 0.01
    assert all(result.errors[v.id] is not None for v in graph.variables)  # contexts too
    exact = run_inference(graph, "exact").marginals
    assert max(abs(result.marginals[a] - exact[a]) for a in graph.atom_ids) <= 0.01
    summary = result.summary().to_dict()
    assert summary["inference_method"] == "gibbs"
    assert summary["inference_sampling_sweeps"] == result.gibbs.sweeps
    # sampling off: BP's answer stands, reported without an estimate
    off = run_inference(graph, **_without_sampling(budgets))
    assert [c.method for c in off.components] == ["loopy_bp"]
    assert off.gibbs is None
    assert off.estimated_error is None
    assert "Gibbs sampling skipped" in caplog.text


def test_forced_gibbs_beyond_the_budget_raises() -> None:
    graph = _hard_graph(0, 6, 12, "FR2")
    with pytest.raises(InferenceError, match="sampling_budget=1000"):
        run_inference(graph, "gibbs", sampling_budget=1000)


def test_sampling_is_reproducible_and_thread_safe() -> None:
    graphs = [_hard_graph(seed, 5, 10, "FR3") for seed in range(4)]
    alone = [run_inference(g, "gibbs").marginals for g in graphs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda g: run_inference(g, "gibbs").marginals, graphs * 2))
    assert together == alone * 2
    other = run_inference(graphs[0], "gibbs", seed=1)
    assert other.marginals != alone[0]
    assert max(abs(other.marginals[k] - alone[0][k]) for k in alone[0]) < 0.06


def test_the_ladder_grows_with_the_network() -> None:
    """Energy gaps between temperatures grow as sqrt(n): max(12, 1.5 sqrt(n)) replicas."""
    small = run_inference(_hard_graph(0, 6, 12, "FR2"), "gibbs")
    assert small.gibbs is not None
    assert small.gibbs.levels == 12
    graph = _hard_graph(1, 20, 80, "FR2")  # 100 variables: 15 replicas per chain
    result = run_inference(graph, "gibbs", sampling_budget=2**30)
    assert result.gibbs is not None
    assert result.gibbs.levels == 15
    # the budget pays 200 plain sweeps of 16 chains, then the ladder of 16 x 15 replicas
    per_replica = Couplings.of(prepare(graph)).work + _run._PER_VARIABLE * 100
    ladder = (2**30 - 200 * 16 * per_replica) // (per_replica * 16 * 15)
    assert 200 <= result.gibbs.sweeps <= ladder + 25


def test_sampling_replaces_bp_for_the_whole_component() -> None:
    """BP's clamped estimates are not kept next to the sample (they were wrong on hard graphs).

    In ``auto``, clamping is all or nothing: with a budget that pays for BP and one clamped
    atom but not for all six, the component is sampled and every marginal and estimate is
    the sampler's. Below the forecast cost of clamping every atom, BP does not even run.
    """
    graph = _dense_graph()
    budgets: InferenceOptions = {"exact_budget": 2**4, "conditioning_budget": 2**4}
    partial = run_inference(graph, "bp", clamp_budget=4000)
    assert partial.bp is not None
    assert 0 < partial.bp.clamped < 6  # method="bp" keeps what the budget paid for
    result = run_inference(graph, **budgets, clamp_budget=4000)
    assert result.bp is not None
    assert result.bp.converged
    assert result.bp.clamped == 0
    assert result.bp.clamp_sweeps > 0
    sampled = run_inference(graph, "gibbs")
    assert [c.method for c in result.components] == ["gibbs"]
    assert result.marginals == sampled.marginals
    assert result.errors == sampled.errors
    direct = run_inference(graph, **budgets, clamp_budget=3000)  # forecast: 2 x 6 x 4 x 72
    assert direct.bp is None
    assert direct.marginals == sampled.marginals
    assert direct.errors == sampled.errors
    full = run_inference(graph, **budgets, clamp_budget=8000)
    assert full.bp is not None
    assert full.bp.clamped == 6
    assert [c.method for c in full.components] == ["loopy_bp"]
    assert full.gibbs is None
