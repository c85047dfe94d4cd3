"""Loopy BP with clamping: convergence, Bethe free energy, estimated vs actual error."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from langchain_references.factuality import Atom, Context, Relation, build_fact_graph
from langchain_references.factuality.inference import run_inference
from langchain_references.factuality.inference._bp import Kernel, run_bp
from langchain_references.factuality.inference._network import prepare
from langchain_references.factuality.model import FactGraph, RelationKind

from .conftest import fact_graphs
from .test_inference_exact import _log_z


@settings(max_examples=80, deadline=None)
@given(fact_graphs(max_atoms=4, max_contexts=5, tree=True))
def test_bethe_log_z_is_exact_on_trees(graph: FactGraph) -> None:
    net = prepare(graph)
    kernel = Kernel.of(net)
    run = run_bp(kernel, kernel.unary, damping=0.5, tolerance=1e-12, max_sweeps=2000)
    assert run.converged
    offset = float(net.log_unary[:, 0].sum())  # Kernel works with unary tables [0, u]
    assert kernel.bethe_log_z(run.messages, kernel.unary) + offset == pytest.approx(
        _log_z(net), abs=1e-8
    )


def _fr_graph(seed: int, n_atoms: int, n_contexts: int, version: str) -> FactGraph:
    """FR2/FR3-shaped: every atom-context pair judged, 30 % entail / 15 % contradict."""
    rng = np.random.default_rng(seed)
    atoms = [Atom(f"a{i}") for i in range(n_atoms)]
    contexts = [Context(f"c{j}", text=str(j)) for j in range(n_contexts)]
    relations: list[Relation] = []
    for a in atoms:
        for c in contexts:
            u = rng.uniform()
            if u < 0.45:
                kind: RelationKind = "entailment" if u < 0.30 else "contradiction"
                relations.append(Relation(c.id, a.id, kind, float(rng.uniform(0.5, 1.0))))
    if version == "FR3":
        for i in range(n_contexts):
            for j in range(i + 1, n_contexts):
                if rng.uniform() < 0.05:
                    kind = "entailment" if rng.uniform() < 0.6 else "contradiction"
                    relations.append(Relation(f"c{i}", f"c{j}", kind, float(rng.uniform(0.5, 1))))
    return build_fact_graph(atoms, contexts, relations, version=version)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("version", ["FR2", "FR3"])
def test_estimated_error_covers_the_actual_error(seed: int, version: str) -> None:
    graph = _fr_graph(seed, 12, 30, version)
    exact = run_inference(graph, "exact")
    assert exact.exact
    result = run_inference(graph, "bp")
    assert result.bp is not None
    assert result.bp.converged
    assert result.bp.clamped == len(graph.atom_ids)  # the default budget covers them all
    actual = max(abs(result.marginals[a] - exact.marginals[a]) for a in graph.atom_ids)
    estimated = result.estimated_error
    assert estimated is not None
    assert actual <= estimated
    assert result.method == "loopy_bp"
    assert result.components[0].estimated_error == estimated


def test_clamping_corrects_plain_bp() -> None:
    """The clamped marginals are closer to exact than plain BP's (dense 12 x 30 FR2)."""
    graph = _fr_graph(1, 12, 30, "FR2")
    exact = run_inference(graph, "exact").marginals
    clamped = run_inference(graph, "bp")
    plain_error = clamped_error = 0.0
    for a in graph.atom_ids:
        error = clamped.errors[a]
        assert error is not None
        error /= 2
        assert error is not None
        # errors[a] = 2 |P_clamp - P_BP|, so P_BP is one of these two values
        candidates = (clamped.marginals[a] - error, clamped.marginals[a] + error)
        plain = min(candidates, key=lambda p: abs(p - exact[a]) if 0 <= p <= 1 else math.inf)
        plain_error = max(plain_error, abs(plain - exact[a]))
        clamped_error = max(clamped_error, abs(clamped.marginals[a] - exact[a]))
    assert clamped_error < plain_error


def test_errors_and_summary_report_the_method() -> None:
    graph = _fr_graph(2, 6, 8, "FR2")
    exact = run_inference(graph)
    assert exact.exact
    assert set(exact.errors.values()) == {0.0}
    summary = exact.summary()
    assert summary.exact
    assert summary.method == exact.method
    assert summary.estimated_error == 0.0
    assert summary.converged is None
    bp = run_inference(graph, "bp")
    assert all(bp.errors[c] is None for c in graph.context_ids)  # contexts: not estimated
    assert all(isinstance(bp.errors[a], float) for a in graph.atom_ids)
    record = bp.summary().to_dict()
    assert record["inference_method"] == "loopy_bp"
    assert record["inference_exact"] is False
    assert record["inference_converged"] is True
    assert record["inference_estimated_error"] == bp.estimated_error
    assert set(record["atom_errors"]) == set(graph.atom_ids)


def test_clamp_budget_leaves_atoms_unestimated() -> None:
    graph = _fr_graph(3, 12, 30, "FR2")
    result = run_inference(graph, "bp", clamp_budget=0)
    assert result.bp is not None
    assert result.bp.clamped == 1  # the most uncertain atom is always clamped
    assert result.estimated_error is None
    assert sum(result.errors[a] is None for a in graph.atom_ids) == len(graph.atom_ids) - 1


def test_anderson_converges_where_plain_damping_needs_more_sweeps() -> None:
    graph = _fr_graph(0, 20, 60, "FR3")
    kernel = Kernel.of(prepare(graph))
    accelerated = run_bp(kernel, kernel.unary, damping=0.5, tolerance=1e-10, max_sweeps=5000)
    assert accelerated.converged
    messages = np.zeros(kernel.src.size)
    sweeps = 0
    while sweeps < accelerated.sweeps:  # the same number of plain damped sweeps
        messages = 0.5 * kernel.update(messages, kernel.unary) + 0.5 * messages
        sweeps += 1
    plain_residual = np.max(np.abs(kernel.update(messages, kernel.unary) - messages)) * 0.5
    assert accelerated.residual < plain_residual
