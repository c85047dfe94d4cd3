"""Posterior marginals of a :class:`~langchain_references.factuality.model.FactGraph`.

FactReasoner writes its network to a UAI file and runs the external C++ engine Merlin
(weighted mini-buckets, ``--ibound 6``, task ``MAR``; ``run_merlin`` in
``src/fact_reasoner/assessor.py``). Here everything runs in process with numpy, in log
space. The graph is split into connected components (parallel factors between the same
pair of variables are multiplied into one; a factor that couples nothing, such as an
entailment at the link prior, is folded into the unaries of its endpoints) and each gets
the cheapest exact method that fits the budgets, else an approximation with an error
estimate:

* ``isolated`` / ``tree``: the prior, or exact two-pass sum-product vectorised over all
  trees of the graph;
* ``junction_tree``: exact inference on the junction tree of a min-degree elimination
  whose clique tables sum to at most ``exact_budget`` entries (default ``2**22``: about
  1 s and 100 MB for the dense 20 x 50 FR2 graphs, cliques of 20-22 variables);
* ``conditioned``: exact cutset conditioning: the largest hubs are fixed one at a time
  until the rest has a junction tree within ``exact_budget``, and the ``2^k`` conditioned
  networks (batched on one tree) fit ``conditioning_budget`` (default ``2**24``
  entries in total); results are combined with their partition functions in log space;
* ``loopy_bp``: damped (0.5) flooding BP in log-odds, Anderson-accelerated (the slow
  linear convergence on dense FR3 graphs takes a few hundred sweeps instead of
  thousands); with ``method="bp"``, if it has not converged, it is restarted from its
  last messages without acceleration, then at damping 0.8 (accelerated) and 0.95 (not);
  still unconverged: no error estimate. Then **clamping**: each atom in turn (most
  uncertain first, while ``clamp_budget`` message updates last) is fixed to 0 and to 1,
  BP is rerun from the fixed point, and the two Bethe free energies give
  ``P_clamp(atom)``. The reported marginal is ``P_clamp`` and the *estimated error* is
  ``2 |P_clamp - P_BP|``; contexts keep their BP marginals, with no estimate. With
  ``"auto"`` this path is taken only where it can give every atom of the component an
  estimate: a component whose clamping is forecast to cost more than ``clamp_budget``
  (two runs of at least 4 sweeps over every edge per atom) is sampled without running
  BP; otherwise BP runs once (no restarts, at most 300 sweeps) and the run and the
  clamped runs together stay within ``clamp_budget``, all or nothing: a non-converged
  run, or clamping that would overrun the budget, hands the component to the sampler;
* ``gibbs``: where BP left an atom of a component without an estimate, or was not worth
  running, the component is sampled: chromatic Gibbs sampling, each colour class
  resampled at once from its couplings to the other classes (float32 BLAS products;
  the replica energies come from the same products). First 16 plain chains for 200
  sweeps: where they agree on every atom to within 0.01 (networks whose atoms are
  decided by their evidence) that is the answer. Otherwise parallel tempering (16 chains
  of ``max(12, 1.5 sqrt(n))`` replicas, inverse temperatures 1 to 0.02),
  Rao-Blackwellised, until every estimated error is below 0.01, ``sampling_budget``
  multiply-adds are spent or 1,000 sweeps have run; the estimated error of a sampled
  marginal is the larger of 4 standard errors between the chains and the drift between
  the two quarters of the kept sweeps. The sampled marginals and estimates replace BP's
  for the whole component (where BP failed somewhere, its small clamped estimates were
  measured to be wrong elsewhere in the same component). A run whose replicas do not
  exchange (below 5 % between two neighbouring temperatures) or whose hottest replicas
  barely move (below 5 % of their variables per sweep) did not mix: it changes nothing,
  and BP's answer stands without an estimate (BP is run then if it had not been);
* ``brute``: enumeration of all joint states (the tests' reference).

How far the estimate can be trusted is measured, not proven: on the FR-shaped graphs of
``benchmarks/bench_inference.py`` where exact inference is affordable, the clamped
marginal's actual error stayed below the estimate (see the benchmark's tables and
``docs/benchmarks.md``), and so did the sampled marginal's. It is an estimate, not a bound: BP and
clamping can both be wrong in the same way on strongly frustrated graphs, and sampling
chains can all miss the same mode.

Method ``"auto"`` picks per component as above; ``"exact"`` never falls back to loopy BP
(it raises if a component fits neither budget); ``"bp"`` runs loopy BP (with clamping)
everywhere, with no sampling fallback; ``"gibbs"`` samples every component with factors;
``"brute"`` enumerates. :class:`InferenceResult` reports the method of each
component, BP convergence (sweeps, residual) and the estimated error of each marginal;
:meth:`InferenceResult.summary` is the per-graph record for result writers.
"""

from __future__ import annotations

from typing import Unpack

from langchain_references.factuality.inference._errors import InferenceError
from langchain_references.factuality.inference._result import (
    BPReport,
    ComponentMethod,
    ComponentReport,
    GibbsReport,
    InferenceResult,
)
from langchain_references.factuality.inference._run import (
    InferenceOptions,
    Method,
    solve,
)
from langchain_references.factuality.model import FactGraph

__all__ = [
    "BPReport",
    "ComponentMethod",
    "ComponentReport",
    "GibbsReport",
    "InferenceError",
    "InferenceOptions",
    "InferenceResult",
    "Method",
    "infer_marginals",
    "run_inference",
]


def run_inference(
    graph: FactGraph,
    method: Method = "auto",
    *,
    damping: float = 0.5,
    tolerance: float = 1e-8,
    max_iterations: int = 1000,
    exact_budget: int = 2**22,
    conditioning_budget: int = 2**24,
    clamp_budget: int = 2**25,
    sampling_budget: int = 2**32,
    seed: int = 0,
    brute_max_vars: int = 20,
) -> InferenceResult:
    """Compute ``P(v = 1)`` for every variable and report how.

    Args:
        graph: The network.
        method: ``"auto"``, ``"exact"``, ``"bp"``, ``"gibbs"`` or ``"brute"`` (see module
            docstring).
        damping: Loopy BP damping ``a``: ``m <- (1 - a) * m_new + a * m_old``.
        tolerance: Loopy BP stops when no message log-odds moves more than this.
        max_iterations: Sweep cap of each BP run (non-convergence is logged and
            reported).
        exact_budget: A loopy component gets a junction tree only if the summed size of
            its elimination cliques' tables (``sum 2^|C|``) stays within this.
        conditioning_budget: Largest ``2^k`` times that sum for cutset conditioning on
            ``k`` hubs.
        clamp_budget: Message updates (sweeps x directed edges) that clamped BP may
            spend on error estimates (``"bp"``: ``0`` clamps only the most uncertain
            atom); with ``"auto"`` also BP's own run, and a component whose clamping
            does not fit is sampled instead (default ``2^25``: every atom of a 50 x 200
            FR2 graph with soft judgements, not of a 200 x 1,000 one).
        sampling_budget: Multiply-adds Gibbs sampling may spend (per replica and sweep:
            the couplings between colour classes plus ``16 n``); the default ``2^32``
            pays for 200-475 tempered sweeps of a 50 x 200 FR2/FR3 graph. The 200 plain
            sweeps come first; a budget that cannot then pay for 200 tempered sweeps
            skips the ladder, with a warning, and BP's answer stands without an
            estimate; ``0`` turns the sampling fallback off.
        seed: Seed of Gibbs sampling: the same graph and options give the same result.
        brute_max_vars: Largest component ``"brute"`` will enumerate.

    Returns:
        The marginals, the per-component report and the estimated errors.

    Raises:
        ValueError: On bad options.
        InferenceError: If ``"exact"`` meets a component beyond both budgets,
            ``"brute"`` one larger than ``brute_max_vars`` or ``"gibbs"`` a network
            beyond ``sampling_budget``.
    """
    options: InferenceOptions = {
        "damping": damping,
        "tolerance": tolerance,
        "max_iterations": max_iterations,
        "exact_budget": exact_budget,
        "conditioning_budget": conditioning_budget,
        "clamp_budget": clamp_budget,
        "sampling_budget": sampling_budget,
        "seed": seed,
        "brute_max_vars": brute_max_vars,
    }
    return solve(graph, method, options)


def infer_marginals(
    graph: FactGraph, method: Method = "auto", **options: Unpack[InferenceOptions]
) -> dict[str, float]:
    """``P(v = 1)`` for every atom and context of ``graph``.

    Same arguments as :func:`run_inference`, which also reports the method used per
    component, loopy-BP convergence and the estimated errors.

    Returns:
        Variable id -> posterior probability of being true, in graph order.
    """
    return run_inference(graph, method, **options).marginals
