"""Per-component dispatch: which solver runs where, within which budgets (internal)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, get_args

import numpy as np

from langchain_references.factuality.inference._bp import BPRun, Kernel, run_bp
from langchain_references.factuality.inference._brute import brute_beliefs
from langchain_references.factuality.inference._clamp import clamp_estimate
from langchain_references.factuality.inference._cutset import plan_cutset, run_cutset
from langchain_references.factuality.inference._errors import InferenceError
from langchain_references.factuality.inference._gibbs import (
    MIN_RATE,
    Couplings,
    GibbsRun,
    run_gibbs,
)
from langchain_references.factuality.inference._junction import (
    plan_junction_tree,
    run_junction_tree,
)
from langchain_references.factuality.inference._network import (
    FloatArray,
    IntArray,
    Network,
    component_labels,
    p_true,
    prepare,
)
from langchain_references.factuality.inference._result import (
    BPReport,
    ComponentMethod,
    ComponentReport,
    GibbsReport,
    InferenceResult,
)
from langchain_references.factuality.inference._tree import tree_beliefs
from langchain_references.factuality.model import FactGraph

logger = logging.getLogger("langchain_references.factuality.inference")

Method = Literal["auto", "exact", "bp", "gibbs", "brute"]
_METHODS: frozenset[str] = frozenset(get_args(Method))
_BRUTE_HARD_LIMIT = 26
# restarts when BP does not converge: (damping, Anderson memory); 0 = plain damped BP
_RETRIES = ((None, 0), (0.8, 5), (0.95, 0))
# Gibbs sampling fallback: chains, replicas per chain (parallel tempering: at least 12,
# 1.5 sqrt(n) for larger networks, since the energy gaps between temperatures grow as
# sqrt(n)), the hottest replica's inverse temperature, the target estimated error, and the
# largest network (its dense coupling matrix: 8 n^2 bytes)
_CHAINS, _LEVELS, _LEVELS_PER_ROOT_N, _HOTTEST, _SAMPLING_TOLERANCE = 16, 12, 1.5, 0.02, 0.01
_GIBBS_MAX_VARS = 3000
_GIBBS_MIN_SWEEPS, _GIBBS_MAX_SWEEPS = 200, 1000
# fewest sweeps of a clamped BP run (warm-started at the fixed point) in the cost forecast
_MIN_CLAMP_SWEEPS = 4
# auto: BP that has not converged in this many sweeps hands the component to the sampler
# (the runs that converged on the benchmark's FR graphs took 37-138 sweeps)
_AUTO_BP_SWEEPS = 300
# multiply-adds charged per variable, replica and sweep besides the couplings (random
# numbers, sigmoid, bookkeeping)
_PER_VARIABLE = 16


class InferenceOptions(TypedDict, total=False):
    """The keyword options of :func:`run_inference`, which :func:`infer_marginals` passes on.

    Attributes:
        damping: Loopy BP damping.
        tolerance: Loopy BP convergence tolerance.
        max_iterations: Loopy BP sweep cap (per run).
        exact_budget: Largest clique-table sum of one junction tree.
        conditioning_budget: Largest total clique-table sum of cutset conditioning.
        clamp_budget: Largest number of message updates spent on clamped BP runs (with
            ``"auto"``: on BP's run and its clamped runs together, all atoms or none).
        sampling_budget: Largest number of multiply-adds Gibbs sampling may spend.
        seed: Seed of Gibbs sampling (results are reproducible).
        brute_max_vars: Largest component ``"brute"`` will enumerate.
    """

    damping: float
    tolerance: float
    max_iterations: int
    exact_budget: int
    conditioning_budget: int
    clamp_budget: int
    sampling_budget: int
    seed: int
    brute_max_vars: int


def _check_options(method: str, options: InferenceOptions) -> None:
    if method not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    damping = options["damping"]
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping!r}")
    if not options["tolerance"] > 0.0:
        raise ValueError(f"tolerance must be positive, got {options['tolerance']!r}")
    if options["max_iterations"] < 1:
        raise ValueError(f"max_iterations must be >= 1, got {options['max_iterations']!r}")
    for name, value in (
        ("exact_budget", options["exact_budget"]),
        ("conditioning_budget", options["conditioning_budget"]),
    ):
        if value < 4:
            raise ValueError(f"{name} must be >= 4, got {value!r}")
    for name, value in (
        ("clamp_budget", options["clamp_budget"]),
        ("sampling_budget", options["sampling_budget"]),
        ("seed", options["seed"]),
    ):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    if not 1 <= options["brute_max_vars"] <= _BRUTE_HARD_LIMIT:
        raise ValueError(f"brute_max_vars must be in [1, {_BRUTE_HARD_LIMIT}]")


def solve(graph: FactGraph, method: Method, options: InferenceOptions) -> InferenceResult:
    """Run the dispatch described in the package docstring (options complete)."""
    _check_options(method, options)
    dispatch = _Dispatch.of(graph, method, options)
    for root in dispatch.roots():
        dispatch.route(root)
    dispatch.solve_trees()
    return dispatch.approximate()


@dataclass(slots=True)
class _Dispatch:
    """One run of :func:`solve`: the components of a network, and the solver of each.

    :meth:`route` solves each component exactly where it can (isolated, brute force, junction
    tree, cutset conditioning) and queues the others (trees, loopy BP, Gibbs sampling);
    :meth:`solve_trees` solves the trees together, and :meth:`approximate` runs BP and the
    sampler on the rest and makes the result.

    Attributes:
        graph: The graph.
        method: The method asked for.
        options: The options (complete, checked).
        net: The graph's network.
        labels: Each variable's component (the component's smallest variable: its root).
        sizes: The number of variables of each root's component.
        edge_counts: The number of factors of each root's component.
        beliefs: Log-odds beliefs, exact for the components solved so far.
        reports: The reports of the components solved so far, in the order they were.
        tree_roots: The components queued for the tree solver.
        bp_roots: The components queued for loopy BP.
        gibbs_roots: The components queued for Gibbs sampling.
    """

    graph: FactGraph
    method: Method
    options: InferenceOptions
    net: Network
    labels: IntArray
    sizes: IntArray
    edge_counts: IntArray
    beliefs: FloatArray
    reports: list[ComponentReport] = field(default_factory=list)
    tree_roots: list[int] = field(default_factory=list)
    bp_roots: list[int] = field(default_factory=list)
    gibbs_roots: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, graph: FactGraph, method: Method, options: InferenceOptions) -> _Dispatch:
        """The dispatch of a graph: its network and components, nothing solved yet."""
        net = prepare(graph)
        labels = component_labels(net)
        return cls(
            graph=graph,
            method=method,
            options=options,
            net=net,
            labels=labels,
            sizes=np.bincount(labels, minlength=net.n),
            edge_counts=np.bincount(labels[net.ei], minlength=net.n).astype(np.int64),
            beliefs=net.log_unary.copy(),
        )

    def roots(self) -> list[int]:
        """The components' roots, in increasing order."""
        roots: list[int] = np.flatnonzero(self.labels == np.arange(self.net.n)).tolist()
        return roots

    def members(self, root: int) -> IntArray:
        """The variables of a root's component."""
        return np.flatnonzero(self.labels == root)

    def route(self, root: int) -> None:
        """Solve a component now (isolated, brute force, exact), or queue it for a solver."""
        size, m = int(self.sizes[root]), int(self.edge_counts[root])
        if size == 1:
            self.reports.append(ComponentReport(1, 0, "isolated"))
        elif self.method == "brute":
            self._brute(root, size, m)
        elif self.method == "bp":
            self.bp_roots.append(root)
        elif self.method == "gibbs":
            self.gibbs_roots.append(root)
        elif m == size - 1:
            self.tree_roots.append(root)
        else:
            self._exact(root, size, m)

    def _brute(self, root: int, size: int, m: int) -> None:
        if size > self.options["brute_max_vars"]:
            raise InferenceError(
                f"a component has {size} variables; brute force is limited to "
                f"{self.options['brute_max_vars']}"
            )
        nodes = self.members(root)
        self.beliefs[nodes] = brute_beliefs(self.net.subnetwork(nodes))
        self.reports.append(ComponentReport(size, m, "brute"))

    def _exact(self, root: int, size: int, m: int) -> None:
        """A loopy component: junction tree, else cutset conditioning, else BP (or an error)."""
        exact_budget = self.options["exact_budget"]
        nodes = self.members(root)
        sub = self.net.subnetwork(nodes)
        plan = plan_junction_tree(sub.n, sub.ei, sub.ej, exact_budget)
        if plan is not None:
            solved, _ = run_junction_tree(plan, sub.log_unary[None], sub.ei, sub.ej, sub.log_pair)
            self.beliefs[nodes] = solved[0]
            self.reports.append(ComponentReport(size, m, "junction_tree", plan.width))
            return
        cutset = plan_cutset(sub, exact_budget, self.options["conditioning_budget"])
        if cutset is not None:
            self.beliefs[nodes] = run_cutset(sub, cutset, exact_budget)
            self.reports.append(
                ComponentReport(size, m, "conditioned", cutset.plan.width, len(cutset.hubs))
            )
        elif self.method == "exact":
            raise InferenceError(
                f"a loopy component ({size} variables, {m} factors) exceeds "
                f"exact_budget={exact_budget} even after conditioning within "
                f"conditioning_budget={self.options['conditioning_budget']}; use "
                "method='auto' or 'bp'"
            )
        else:
            self.bp_roots.append(root)

    def solve_trees(self) -> None:
        """Solve the queued trees, all in one run of the tree solver."""
        if not self.tree_roots:
            return
        nodes = np.flatnonzero(np.isin(self.labels, self.tree_roots))
        sub = self.net.subnetwork(nodes)
        self.beliefs[nodes] = tree_beliefs(sub, component_labels(sub))
        self.reports.extend(
            ComponentReport(int(self.sizes[r]), int(self.edge_counts[r]), "tree")
            for r in self.tree_roots
        )

    def approximate(self) -> InferenceResult:
        """Run BP and the sampler on the components queued for them, and make the result."""
        run = _Approximation(self, p_true(self.beliefs), [0.0] * self.net.n)
        run.run()
        ids = [v.id for v in self.graph.variables]
        return InferenceResult(
            marginals={vid: float(p) for vid, p in zip(ids, run.marginal, strict=True)},
            components=tuple(self.reports),
            bp=run.bp_report,
            errors=dict(zip(ids, run.errors, strict=True)),
            atom_ids=self.graph.atom_ids,
            gibbs=run.gibbs_report,
        )


@dataclass(slots=True)
class _Approximation:
    """Loopy BP and Gibbs sampling over the components a :class:`_Dispatch` queued for them.

    With ``method="auto"`` the components whose clamped estimates would cost more than
    ``clamp_budget`` are sampled directly (:attr:`direct`), BP runs on the others within the
    budget, the components it leaves without an estimate for every atom are sampled too, and
    BP's answer stands (without an estimate) where sampling does not mix or does not run.

    Attributes:
        dispatch: The dispatch (its queues are updated: the reports tell what ran where).
        marginal: Each variable's probability of being true.
        errors: Each variable's estimated error (None: no estimate).
        bp_report: BP's report, if it ran.
        gibbs_report: The sampler's report, if it ran.
        direct: ``auto``: the components sampled without running BP first.
    """

    dispatch: _Dispatch
    marginal: FloatArray
    errors: list[float | None]
    bp_report: BPReport | None = None
    gibbs_report: GibbsReport | None = None
    direct: list[int] = field(default_factory=list)

    @property
    def _auto(self) -> bool:
        return self.dispatch.method == "auto"

    def run(self) -> None:
        """BP, then sampling, then the reports of the components they solved."""
        d = self.dispatch
        if self._auto:
            self.direct = [
                r
                for r in d.bp_roots
                if _clamping_unaffordable(d.graph, d.labels, d.edge_counts, r, d.options)
            ]
            d.bp_roots = [r for r in d.bp_roots if r not in self.direct]
        if d.bp_roots:
            self._loopy_bp()
        d.gibbs_roots.extend(self.direct)
        if d.gibbs_roots:
            self._sample()
        for r in d.bp_roots:
            d.reports.append(self._report(r, "loopy_bp"))
        for r in d.gibbs_roots:
            d.reports.append(self._report(r, "gibbs"))

    def _report(self, root: int, method: ComponentMethod) -> ComponentReport:
        d = self.dispatch
        return _approximate(d.graph, d.labels, d.sizes, d.edge_counts, root, self.errors, method)

    def _bp_over(self, roots: list[int], *, budgeted: bool, clamp: bool = True) -> BPReport:
        """Run BP over the components ``roots`` (into ``marginal`` and ``errors``)."""
        d = self.dispatch
        nodes = np.flatnonzero(np.isin(d.labels, roots))
        sub = d.net.subnetwork(nodes)
        return _run_bp(
            d.graph,
            sub,
            nodes,
            d.labels,
            self.marginal,
            self.errors,
            d.options,
            budgeted=budgeted,
            clamp=clamp,
        )

    def _loopy_bp(self) -> None:
        """BP over the queued components; ``auto``: those it leaves unsure go to sampling."""
        d = self.dispatch
        self.bp_report = self._bp_over(d.bp_roots, budgeted=self._auto)
        if self._auto:  # BP left an atom without an estimate: sample the component
            unsure = [
                r for r in d.bp_roots if _worst(d.graph, d.labels, r, self.errors, None) is None
            ]
            d.gibbs_roots.extend(unsure)
            d.bp_roots = [r for r in d.bp_roots if r not in unsure]

    def _sample(self) -> None:
        """Gibbs sampling of the queued components; ``auto``: BP's answer where it fails."""
        d = self.dispatch
        nodes = np.flatnonzero(np.isin(d.labels, d.gibbs_roots))
        if d.method == "gibbs":
            for v in nodes.tolist():
                self.errors[v] = None
        local = np.full(d.net.n, -1, dtype=np.int64)
        local[nodes] = np.arange(nodes.size)
        targets = local[np.concatenate([_targets(d.graph, d.members(r)) for r in d.gibbs_roots])]
        self.gibbs_report = report = _run_gibbs(
            d.net.subnetwork(nodes),
            nodes,
            targets,
            self.marginal,
            self.errors,
            d.options,
            forced=d.method == "gibbs",
        )
        if report is None and d.method == "gibbs":
            raise InferenceError(
                f"Gibbs sampling of {nodes.size} variables does not fit "
                f"sampling_budget={d.options['sampling_budget']} (or the "
                f"{_GIBBS_MAX_VARS}-variable limit)"
            )
        if self._auto and (report is None or not report.mixed):
            if self.direct:  # sampling failed where BP has not run: BP's answer, unestimated
                self.bp_report = self._bp_over(self.direct, budgeted=False, clamp=False)
            d.bp_roots, d.gibbs_roots = d.bp_roots + d.gibbs_roots, []  # BP's answer stands


def _clamping_unaffordable(
    graph: FactGraph,
    labels: IntArray,
    edge_counts: IntArray,
    root: int,
    options: InferenceOptions,
) -> bool:
    """Whether clamping every target of a component costs more than ``clamp_budget``.

    Each target takes two clamped runs of at least :data:`_MIN_CLAMP_SWEEPS` sweeps over
    every directed edge; a component beyond that is sampled directly (in ``auto``, BP's
    answer without an estimate for every atom would be replaced by sampling anyway).
    """
    members = np.flatnonzero(labels == root)
    directed = 2 * int(edge_counts[root])
    cost = 2 * _targets(graph, members).size * _MIN_CLAMP_SWEEPS * directed
    return cost > options["clamp_budget"]


def _worst(
    graph: FactGraph,
    labels: IntArray,
    root: int,
    errors: list[float | None],
    default: float | None,
) -> float | None:
    """Largest estimated error of a component's targets; None if one has none."""
    estimates = [errors[int(v)] for v in _targets(graph, np.flatnonzero(labels == root))]
    if any(e is None for e in estimates):
        return None
    return max((e for e in estimates if e is not None), default=default)


def _approximate(
    graph: FactGraph,
    labels: IntArray,
    sizes: IntArray,
    edge_counts: IntArray,
    root: int,
    errors: list[float | None],
    method: ComponentMethod,
) -> ComponentReport:
    """The report of a component solved by loopy BP or sampling."""
    worst = _worst(graph, labels, root, errors, 0.0)
    return ComponentReport(int(sizes[root]), int(edge_counts[root]), method, None, 0, worst)


def _targets(graph: FactGraph, members: IntArray) -> IntArray:
    """The variables of a component whose error is estimated: its atoms, else all."""
    atoms = np.array([graph.variables[int(v)].kind == "atom" for v in members], dtype=bool)
    return members[atoms] if atoms.any() else members


def _run_bp(
    graph: FactGraph,
    sub: Network,
    nodes: IntArray,
    labels: IntArray,
    marginal: FloatArray,
    errors: list[float | None],
    options: InferenceOptions,
    *,
    budgeted: bool,
    clamp: bool = True,
) -> BPReport:
    """Loopy BP on the union of the BP components, then clamped corrections.

    ``budgeted`` (``method="auto"``, where sampling takes over): no restarts, at most
    ``_AUTO_BP_SWEEPS`` sweeps, the run and the clamped runs together spend at most
    ``clamp_budget`` message updates, and
    clamping is all or nothing (:func:`clamp_estimate` with ``complete``): an estimate
    for only some atoms would be replaced by sampling anyway.
    """
    kernel = Kernel.of(sub)
    damping = options["damping"]
    per_sweep = max(kernel.src.size, 1)
    budget = options["clamp_budget"]

    def bp(**kwargs: Any) -> BPRun:
        cap = options["max_iterations"]
        if budgeted:
            cap = min(cap, _AUTO_BP_SWEEPS, max((budget - spent * per_sweep) // per_sweep, 1))
        return run_bp(
            kernel, kernel.unary, tolerance=options["tolerance"], max_sweeps=cap, **kwargs
        )

    spent = 0
    base = bp(damping=damping)
    spent = base.sweeps
    for retry, memory in _RETRIES:  # restarts from the last messages
        if base.converged or budgeted:  # auto: sampling takes over where BP fails
            break
        damping = damping if retry is None else max(damping, retry)
        base = bp(damping=damping, init=base.messages, memory=memory)
        spent += base.sweeps
    if not base.converged:
        logger.warning(
            "loopy BP did not converge in %d iterations (max log-odds change %.3g)",
            spent,
            base.residual,
        )
    log_odds = kernel.log_odds(base.messages, kernel.unary)
    marginal[nodes] = 1.0 / (1.0 + np.exp(-np.clip(log_odds, -700.0, 700.0)))
    for v in nodes.tolist():
        errors[v] = None
    if not clamp:
        return BPReport(iterations=spent, converged=base.converged, max_residual=base.residual)
    local = np.full(labels.size, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    targets = np.concatenate(
        [_targets(graph, np.flatnonzero(labels == r)) for r in np.unique(labels[nodes]).tolist()]
    )
    estimate = clamp_estimate(
        kernel,
        base,
        local[targets],
        damping=damping,
        tolerance=options["tolerance"],
        max_sweeps=options["max_iterations"],
        budget=max(budget - spent * per_sweep, 0) if budgeted else budget,
        complete=budgeted,
    )
    chosen = nodes[estimate.targets]
    marginal[chosen] = estimate.marginals
    for v, err in zip(chosen.tolist(), estimate.errors.tolist(), strict=True):
        errors[v] = float(err)
    if not estimate.converged:
        logger.warning("some clamped BP runs did not converge; their estimates are rougher")
    return BPReport(
        iterations=spent,
        converged=base.converged,
        max_residual=base.residual,
        clamped=int(chosen.size),
        clamp_sweeps=estimate.sweeps,
    )


def _run_gibbs(
    sub: Network,
    nodes: IntArray,
    targets: IntArray,
    marginal: FloatArray,
    errors: list[float | None],
    options: InferenceOptions,
    *,
    forced: bool,
) -> GibbsReport | None:
    """Gibbs sampling of ``sub``: its marginals and estimates replace BP's.

    BP's own estimates are dropped too: sampling runs only where BP already failed on the
    component, and on such (hard, frustrated) components clamping's small estimates were
    measured to be wrong (``benchmarks/bench_inference.py``, table 2). Plain chains run
    first (one replica each, ``_GIBBS_MIN_SWEEPS`` sweeps): where they already agree to
    within the tolerance (networks whose every variable is decided by its evidence), that
    is the answer; otherwise the tempered ladder runs. Nothing runs (the estimates stay as
    they are, a warning is logged) when the network is too large or the budget does not
    cover the minimum sweeps of the ladder. A run that did not mix changes nothing unless
    sampling was ``forced`` (``method="gibbs"``), when its marginals are kept without an
    estimate.
    """
    levels = max(_LEVELS, round(_LEVELS_PER_ROOT_N * math.sqrt(sub.n)))
    columns = _CHAINS * levels
    budget = options["sampling_budget"]
    if sub.n > _GIBBS_MAX_VARS:
        per_replica = 2 * sub.n * sub.n  # never built: an upper bound for the warning
    else:
        couplings = Couplings.of(sub)
        per_replica = couplings.work + _PER_VARIABLE * sub.n
    plain_sweeps = budget // max(per_replica * _CHAINS, 1)
    run: GibbsRun | None = None
    spent = 0
    if sub.n <= _GIBBS_MAX_VARS and plain_sweeps >= _GIBBS_MIN_SWEEPS:
        run = run_gibbs(
            couplings,
            chains=_CHAINS,
            max_sweeps=_GIBBS_MIN_SWEEPS,
            tolerance=_SAMPLING_TOLERANCE,
            seed=options["seed"],
            targets=targets,
        )
        spent = run.report.sweeps * per_replica * _CHAINS
        if not run.report.converged:
            run = None
    if run is None:
        max_sweeps = min((budget - spent) // max(per_replica * columns, 1), _GIBBS_MAX_SWEEPS)
        if sub.n > _GIBBS_MAX_VARS or max_sweeps < _GIBBS_MIN_SWEEPS:
            logger.warning(
                "Gibbs sampling skipped: %d variables (limit %d), %d replicas, budget for %d "
                "sweeps (minimum %d); raise sampling_budget",
                sub.n,
                _GIBBS_MAX_VARS,
                columns,
                max_sweeps,
                _GIBBS_MIN_SWEEPS,
            )
            return None
        run = run_gibbs(
            couplings,
            chains=_CHAINS,
            max_sweeps=int(max_sweeps),
            tolerance=_SAMPLING_TOLERANCE,
            seed=options["seed"],
            levels=levels,
            hottest=_HOTTEST,
            targets=targets,
        )
    report = run.report
    if not report.mixed:
        logger.warning(
            "Gibbs sampling did not mix (lowest replica-exchange rate %.3g, hottest "
            "replicas changing %.3g of their variables per sweep; both need %.2g): its "
            "marginals get no error estimate",
            report.swap_rate,
            report.hot_rate,
            MIN_RATE,
        )
        if not forced:
            return report  # BP's answer stands, without an estimate
    for local, v in enumerate(nodes.tolist()):
        marginal[v] = run.marginals[local]
        errors[v] = float(run.errors[local]) if report.mixed else None
    if report.mixed and not report.converged:
        logger.warning(
            "Gibbs sampling reached its budget (%d sweeps) with an estimated error of %.3g",
            report.sweeps,
            float(run.errors.max(initial=0.0)),
        )
    return report
