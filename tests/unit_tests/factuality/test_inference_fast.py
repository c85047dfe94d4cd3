"""The fast paths of inference: colour-block sampling, plain chains first, direct sampling.

The sampler's block products and its replica energies are checked against the dense Ising
form (hypothesis); the dispatch's answers against exact inference on small graphs, with the
exact budgets turned off so that they take the paths of large graphs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.factuality.inference import _gibbs, run_inference
from langchain_references.factuality.inference._gibbs import Couplings, _product, ising
from langchain_references.factuality.inference._network import prepare
from langchain_references.factuality.model import FactGraph

from .conftest import fact_graphs
from .test_inference_gibbs import _dense_graph, _hard_graph

_APPROXIMATE = {"exact_budget": 2**4, "conditioning_budget": 2**4}


@settings(max_examples=60, deadline=None)
@given(fact_graphs(max_atoms=5, max_contexts=6), st.integers(1, 6), st.integers(0, 2**16))
def test_block_sweep_energy_is_the_ising_energy_of_the_new_state(
    graph: FactGraph, columns: int, seed: int
) -> None:
    net = prepare(graph)
    couplings = Couplings.of(net)
    h, w = ising(net)
    order = couplings.order
    assert sorted(order.tolist()) == list(range(net.n))
    # the blocks hold every coupling once per direction and nothing inside a class
    rebuilt = np.zeros((net.n, net.n))
    for k, (a, b) in enumerate(zip(couplings.bounds[:-1], couplings.bounds[1:], strict=True)):
        rebuilt[a:b, :a] = couplings.lower[k]
        rebuilt[a:b, b:] = couplings.upper[k]
    assert np.allclose(rebuilt, w[np.ix_(order, order)], atol=1e-5)
    rng = np.random.default_rng(seed)
    state = (rng.random((net.n, columns)) < 0.5).astype(np.float32)
    beta = rng.uniform(0.02, 1.0, columns).astype(np.float32)
    cold = np.array([columns - 1])
    total = np.zeros((net.n, 1))
    log_p = couplings.sweep(state, beta, rng, total, cold)
    x = np.empty_like(state, dtype=np.float64)
    x[order] = state  # back to the variable order
    direct = h @ x + 0.5 * np.einsum("vc,vc->c", x, w @ x)
    assert np.allclose(log_p, direct, rtol=1e-5, atol=1e-3)
    assert np.all((total >= 0.0) & (total <= 1.0))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(0, 40),
    st.integers(1, 50),
    st.integers(0, 2**16),
    st.sampled_from([2**6, 2**9, 2**18]),
)
def test_chunked_products_equal_the_plain_product(
    rows: int, inner: int, columns: int, seed: int, serial: int
) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, inner)).astype(np.float32)
    b = (rng.random((inner, columns)) < 0.5).astype(np.float32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_gibbs, "_SERIAL_WORK", serial)  # every chunking path
        got = _product(a, b)
    assert got.shape == (rows, columns)
    assert np.allclose(got, a @ b, atol=1e-4)


def _within_estimate(graph: FactGraph, **options: int) -> tuple[float, float, str, int]:
    exact = run_inference(graph, "exact").marginals
    result = run_inference(graph, **_APPROXIMATE, **options)  # type: ignore[arg-type]
    estimate = result.estimated_error
    assert estimate is not None
    actual = max(abs(result.marginals[a] - exact[a]) for a in graph.atom_ids)
    levels = 0 if result.gibbs is None else result.gibbs.levels
    return actual, estimate, result.method, levels


@pytest.mark.parametrize(("seed", "version"), [(s, v) for s in range(3) for v in ("FR2", "FR3")])
def test_direct_sampling_agrees_with_exact_within_its_estimate(seed: int, version: str) -> None:
    """No clamping budget: the component goes straight to the sampler (no BP run)."""
    graph = _hard_graph(seed, 6, 12, version)
    result = run_inference(graph, **_APPROXIMATE, clamp_budget=0)  # type: ignore[arg-type]
    assert result.bp is None
    actual, estimate, method, levels = _within_estimate(graph, clamp_budget=0)
    assert method == "gibbs"
    assert levels == 12  # hard graph: the plain chains disagree, the ladder runs
    assert actual <= max(estimate, 0.01)
    assert actual < 0.06


def test_plain_chains_answer_a_decided_graph() -> None:
    graph = _dense_graph()  # every atom entailed by six contexts at 0.99
    actual, estimate, method, levels = _within_estimate(graph, clamp_budget=0)
    assert (method, levels) == ("gibbs", 1)
    assert estimate < 0.01
    assert actual <= 0.01
    forced = run_inference(graph, "gibbs")
    assert forced.gibbs is not None
    assert forced.gibbs.levels == 1
    assert forced.gibbs.sweeps == 200


@pytest.mark.parametrize("seed", range(3))
def test_bp_with_clamping_agrees_with_exact_within_its_estimate(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = _hard_graph(seed, 5, 10, "FR2")
    soft = FactGraph(
        graph.variables,
        tuple(
            type(r)(r.source, r.target, r.kind, float(rng.uniform(0.55, 0.8)))
            for r in graph.relations
        ),
    )
    result = run_inference(soft, **_APPROXIMATE)  # type: ignore[arg-type]
    assert [c.method for c in result.components if c.method != "isolated"] == ["loopy_bp"]
    assert result.bp is not None
    assert result.bp.clamped == 5  # all or nothing: every atom
    actual, estimate, method, _ = _within_estimate(soft)
    assert method == "loopy_bp"
    assert actual <= estimate


def test_failed_direct_sampling_leaves_bp_unestimated() -> None:
    graph = _hard_graph(0, 6, 12, "FR2")
    result = run_inference(graph, **_APPROXIMATE, clamp_budget=0, sampling_budget=0)  # type: ignore[arg-type]
    assert result.gibbs is None
    assert result.bp is not None
    assert result.bp.clamped == 0
    assert [c.method for c in result.components if c.method != "isolated"] == ["loopy_bp"]
    assert result.estimated_error is None
    assert all(result.errors[a] is None for a in graph.atom_ids)
    assert any(abs(result.marginals[a] - 0.5) > 0.1 for a in graph.atom_ids)  # BP ran
