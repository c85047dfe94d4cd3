"""Posterior marginals of a :class:`~langchain_references.factuality.model.FactGraph`.

FactReasoner writes its network to a UAI file and runs the external C++ engine Merlin
(weighted mini-buckets, ``--ibound 6``, task ``MAR``; ``run_merlin`` in
``src/fact_reasoner/assessor.py``). Here everything runs in process with numpy, in log
space (no subprocess, no files):

* the graph is split into connected components (parallel factors between the same pair
  of variables are multiplied into one);
* ``tree``: a tree-shaped component gets exact sum-product in two passes (leaves to root,
  root to leaves), vectorised over all the trees of the graph, one depth level at a time
  (FactReasoner graphs are shallow; the cost grows with the depth of the deepest tree);
* ``junction_tree``: a component with cycles whose elimination cliques (min-degree order)
  fit a budget gets exact inference on the junction tree of that elimination;
* ``loopy_bp``: other components get damped loopy belief propagation, vectorised over all
  directed edges (flooding schedule, one log-odds number per message), with a
  convergence tolerance and an iteration cap;
* ``brute``: enumeration of all joint states (components of at most ~20 variables), the
  reference used by the tests.

Method ``"auto"`` picks ``tree`` / ``junction_tree`` / ``loopy_bp`` per component;
``"exact"`` never falls back to loopy BP (it raises if a component is too wide);
``"bp"`` runs loopy BP everywhere (exact on trees once converged); ``"brute"``
enumerates.

Accuracy of loopy BP (damping 0.5), measured against exact inference: at most 0.069 on
200 small random FR2/FR3-shaped graphs (``tests/unit_tests/factuality/test_inference.py``)
but up to 0.15 on an atom of a dense 20-atom x 50-context FR2 graph
(``benchmarks/bench_inference.py``). Exact inference there needs cliques of 20-22
variables (``exact_budget=2**22``, about 3 s); raise ``exact_budget`` when exactness
matters more than time. (Merlin's weighted mini-buckets with ``ibound 6`` are
approximate too.)
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import dataclass
from typing import Literal, TypedDict, Unpack, get_args

import numpy as np
import numpy.typing as npt

from langchain_references.errors import LangchainReferencesError
from langchain_references.factuality.model import FactGraph

logger = logging.getLogger(__name__)

Method = Literal["auto", "exact", "bp", "brute"]
ComponentMethod = Literal["isolated", "tree", "junction_tree", "loopy_bp", "brute"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_METHODS: frozenset[str] = frozenset(get_args(Method))
_BRUTE_HARD_LIMIT = 26


class InferenceError(LangchainReferencesError, ValueError):
    """Raised when the requested inference cannot be carried out."""


@dataclass(frozen=True, slots=True)
class ComponentReport:
    """How one connected component was solved.

    Attributes:
        size: Number of variables.
        num_pairwise: Number of pairwise factors (after merging parallel ones).
        method: ``isolated``, ``tree``, ``junction_tree``, ``loopy_bp`` or ``brute``.
        max_clique: Largest junction-tree clique (``junction_tree`` only).
    """

    size: int
    num_pairwise: int
    method: ComponentMethod
    max_clique: int | None = None


@dataclass(frozen=True, slots=True)
class BPReport:
    """Outcome of the loopy belief-propagation run (one run covers all its components).

    Attributes:
        iterations: Sweeps performed.
        converged: Whether the largest message change fell below the tolerance.
        max_residual: Largest change of a message log-odds in the last sweep (a message
            probability moves at most a quarter of that).
    """

    iterations: int
    converged: bool
    max_residual: float


@dataclass(frozen=True, slots=True)
class InferenceResult:
    """Marginals plus a report of how they were obtained.

    Attributes:
        marginals: ``P(variable = 1)`` for every variable of the graph, in graph order.
        components: One report per connected component.
        bp: Loopy BP outcome, or ``None`` when no component needed it.
    """

    marginals: dict[str, float]
    components: tuple[ComponentReport, ...]
    bp: BPReport | None

    @property
    def exact(self) -> bool:
        """Whether every marginal is exact (no loopy BP was involved)."""
        return self.bp is None


@dataclass(frozen=True, slots=True)
class _Network:
    """Pairwise binary MRF in log space, parallel factors merged, ``ei < ej``."""

    log_unary: FloatArray  # (n, 2)
    ei: IntArray  # (m,)
    ej: IntArray  # (m,)
    log_pair: FloatArray  # (m, 2, 2) indexed [x_ei, x_ej]

    @property
    def n(self) -> int:
        return int(self.log_unary.shape[0])

    def subnetwork(self, nodes: IntArray) -> _Network:
        """The network induced by ``nodes`` (a union of components), re-indexed."""
        local = np.full(self.n, -1, dtype=np.int64)
        local[nodes] = np.arange(nodes.size, dtype=np.int64)
        keep = local[self.ei] >= 0
        return _Network(
            self.log_unary[nodes], local[self.ei[keep]], local[self.ej[keep]], self.log_pair[keep]
        )


def _prepare(graph: FactGraph) -> _Network:
    log_unary = np.log(graph.unary_tables())
    edges = graph.edge_index()
    tables = np.log(graph.pairwise_tables())
    n = log_unary.shape[0]
    if edges.shape[0] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Network(log_unary, empty, empty, np.zeros((0, 2, 2)))
    src, trg = edges[:, 0], edges[:, 1]
    swap = src > trg
    tables[swap] = tables[swap].transpose(0, 2, 1)
    lo, hi = np.minimum(src, trg), np.maximum(src, trg)
    keys, inverse = np.unique(lo * n + hi, return_inverse=True)
    merged = np.zeros((keys.size, 2, 2), dtype=np.float64)
    np.add.at(merged, inverse, tables)
    return _Network(log_unary, keys // n, keys % n, merged)


def _components(net: _Network) -> IntArray:
    """Component label (smallest variable index) of every variable (union-find)."""
    parent = list(range(net.n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in zip(net.ei.tolist(), net.ej.tolist(), strict=True):
        ri, rj = find(i), find(j)
        if ri != rj:  # the smaller index stays the root, so roots are component minima
            parent[max(ri, rj)] = min(ri, rj)
    return np.array([find(x) for x in range(net.n)], dtype=np.int64)


def _normalise(log_p: FloatArray) -> FloatArray:
    """Normalise the last axis (size 2) of log-probabilities."""
    return log_p - np.logaddexp(log_p[..., 0], log_p[..., 1])[..., None]


def _p_true(log_belief: FloatArray) -> FloatArray:
    """``P(x = 1)`` from unnormalised log beliefs of shape ``(n, 2)``."""
    return np.exp(_normalise(log_belief)[:, 1])


# --------------------------------------------------------------- message kernels
@dataclass(frozen=True, slots=True)
class _Directed:
    """Both directions of every edge: ``d = 2e`` is ``ei -> ej``, ``d = 2e + 1`` the reverse."""

    src: IntArray
    dst: IntArray
    table: FloatArray  # (2m, 2, 2) indexed [x_src, x_dst]

    @classmethod
    def of(cls, net: _Network) -> _Directed:
        m = net.ei.size
        src = np.empty(2 * m, dtype=np.int64)
        dst = np.empty(2 * m, dtype=np.int64)
        src[0::2], src[1::2] = net.ei, net.ej
        dst[0::2], dst[1::2] = net.ej, net.ei
        table = np.empty((2 * m, 2, 2), dtype=np.float64)
        table[0::2] = net.log_pair
        table[1::2] = net.log_pair.transpose(0, 2, 1)
        return cls(src, dst, table)


def _send(cavity: FloatArray, table: FloatArray) -> FloatArray:
    """Normalised log messages ``m(y) = log sum_x exp(cavity(x) + table(x, y))``."""
    out = np.logaddexp(cavity[:, 0, None] + table[:, 0, :], cavity[:, 1, None] + table[:, 1, :])
    return _normalise(out)


def _beliefs(log_unary: FloatArray, dst: IntArray, messages: FloatArray) -> FloatArray:
    n = log_unary.shape[0]
    incoming = np.stack(
        [np.bincount(dst, weights=messages[:, k], minlength=n) for k in (0, 1)], axis=1
    )
    return log_unary + incoming


# -------------------------------------------------------------------- exact: trees
def _tree_beliefs(net: _Network, labels: IntArray) -> FloatArray:
    """Exact log beliefs on a forest by a two-pass schedule, one depth level at a time."""
    n = net.n
    directed = _Directed.of(net)
    belief = net.log_unary.copy()
    if net.ei.size == 0:
        return belief
    order = np.argsort(directed.src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(directed.src, minlength=n), out=indptr[1:])

    depth = np.full(n, -1, dtype=np.int64)
    down_edge = np.full(n, -1, dtype=np.int64)  # directed edge parent -> node
    frontier = np.flatnonzero(labels == np.arange(n))  # one root per tree
    depth[frontier] = 0
    levels: list[IntArray] = []
    level = 0
    while frontier.size:
        starts, counts = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        total = int(counts.sum())
        if total == 0:
            break
        offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
        out_edges = order[offsets + np.arange(total)]
        nbr = directed.dst[out_edges]
        fresh = depth[nbr] < 0
        out_edges, nbr = out_edges[fresh], nbr[fresh]
        level += 1
        depth[nbr] = level
        down_edge[nbr] = out_edges
        if nbr.size:
            levels.append(nbr)
        frontier = nbr

    messages = np.zeros((directed.src.size, 2), dtype=np.float64)
    for nodes in reversed(levels):  # upward: children -> parents
        up = down_edge[nodes] ^ 1
        msg = _send(belief[nodes], directed.table[up])  # parent -> node message is still 0
        messages[up] = msg
        np.add.at(belief, directed.dst[up], msg)
    for nodes in levels:  # downward: parents -> children
        down = down_edge[nodes]
        cavity = belief[directed.src[down]] - messages[down ^ 1]
        msg = _send(cavity, directed.table[down])
        messages[down] = msg
        belief[nodes] += msg
    return belief


# ---------------------------------------------------------------- exact: junction tree
def _lse(values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    if not axes:
        return values
    top = np.max(values, axis=axes, keepdims=True)
    out: FloatArray = np.log(np.sum(np.exp(values - top), axis=axes, keepdims=True)) + top
    squeezed: FloatArray = np.squeeze(out, axis=axes)
    return squeezed


def _expand(table: FloatArray, table_vars: list[int], clique_vars: list[int]) -> FloatArray:
    """Reshape a table over sorted ``table_vars`` to broadcast over sorted ``clique_vars``."""
    present = set(table_vars)
    return table.reshape([2 if v in present else 1 for v in clique_vars])


def _elimination(
    size: int, edges: list[tuple[int, int]], budget: int
) -> tuple[list[int], list[list[int]]] | None:
    """Min-degree elimination order and its cliques, or ``None`` if over ``budget``."""
    adjacency: list[set[int]] = [set() for _ in range(size)]
    for i, j in edges:
        adjacency[i].add(j)
        adjacency[j].add(i)
    heap = [(len(adjacency[v]), v) for v in range(size)]
    heapq.heapify(heap)
    eliminated = [False] * size
    order: list[int] = []
    cliques: list[list[int]] = []
    cost = 0
    while heap:
        degree, v = heapq.heappop(heap)
        if eliminated[v] or degree != len(adjacency[v]):
            continue  # stale entry; the current degree was pushed when it changed
        nbrs = adjacency[v]
        cost += 2 ** (len(nbrs) + 1)
        if cost > budget:
            return None
        for u in nbrs:
            before = len(adjacency[u])
            adjacency[u] |= nbrs
            adjacency[u].discard(u)
            adjacency[u].discard(v)
            if len(adjacency[u]) != before:
                heapq.heappush(heap, (len(adjacency[u]), u))
        cliques.append(sorted(nbrs | {v}))
        order.append(v)
        eliminated[v] = True
        adjacency[v] = set()
    return order, cliques


def _junction_tree_beliefs(net: _Network, budget: int) -> tuple[FloatArray, int] | None:
    """Exact log beliefs of one connected component, or ``None`` if too wide."""
    size = net.n
    edge_list = list(zip(net.ei.tolist(), net.ej.tolist(), strict=True))
    plan = _elimination(size, edge_list, budget)
    if plan is None:
        return None
    order, cliques = plan
    pos = [0] * size
    for p, v in enumerate(order):
        pos[v] = p
    parent = [-1] * size
    children: list[list[int]] = [[] for _ in range(size)]
    for p, v in enumerate(order):
        sep = [u for u in cliques[p] if u != v]
        if sep:
            parent[p] = min(pos[u] for u in sep)
            children[parent[p]].append(p)

    incoming: list[FloatArray] = [np.zeros([2] * len(c)) for c in cliques]
    for v in range(size):
        p = pos[v]
        incoming[p] = incoming[p] + _expand(net.log_unary[v], [v], cliques[p])
    for e, (i, j) in enumerate(edge_list):
        p = min(pos[i], pos[j])
        incoming[p] = incoming[p] + _expand(net.log_pair[e], [i, j], cliques[p])

    def separator(p: int) -> list[int]:
        return [u for u in cliques[p] if u != order[p]]

    up: list[FloatArray | None] = [None] * size
    for p in range(size):  # children have smaller positions than their parent
        if parent[p] < 0:
            continue
        msg = _lse(incoming[p], (cliques[p].index(order[p]),))
        up[p] = msg
        q = parent[p]
        incoming[q] = incoming[q] + _expand(msg, separator(p), cliques[q])

    full: list[FloatArray | None] = [None] * size
    down: list[FloatArray | None] = [None] * size
    for p in reversed(range(size)):
        belief = incoming[p]
        msg_down = down[p]
        if msg_down is not None:
            belief = belief + _expand(msg_down, separator(p), cliques[p])
        full[p] = belief
        for c in children[p]:
            msg_up = up[c]
            if msg_up is None:  # pragma: no cover - every child sent a message
                raise InferenceError("junction tree message missing")
            sep = separator(c)
            cavity = belief - _expand(msg_up, sep, cliques[p])
            axes = tuple(k for k, u in enumerate(cliques[p]) if u not in sep)
            down[c] = _lse(cavity, axes)

    beliefs = np.empty((size, 2), dtype=np.float64)
    for v in range(size):
        p = pos[v]
        table = full[p]
        if table is None:  # pragma: no cover - filled for every clique above
            raise InferenceError("junction tree belief missing")
        axes = tuple(k for k, u in enumerate(cliques[p]) if u != v)
        beliefs[v] = _lse(table, axes)
    return beliefs, max(len(c) for c in cliques)


# ------------------------------------------------------------------------- brute force
def _brute_beliefs(net: _Network) -> FloatArray:
    """Exact log beliefs by enumerating every joint state."""
    k = net.n
    states = np.arange(2**k, dtype=np.int64)
    bits = [(states >> v) & 1 for v in range(k)]
    score = np.zeros(states.size, dtype=np.float64)
    for v in range(k):
        score += net.log_unary[v][bits[v]]
    for e in range(net.ei.size):
        score += net.log_pair[e][bits[int(net.ei[e])], bits[int(net.ej[e])]]
    top = float(score.max())
    weights = np.exp(score - top)
    beliefs = np.empty((k, 2), dtype=np.float64)
    with np.errstate(divide="ignore"):
        for v in range(k):
            on = bits[v] == 1
            beliefs[v] = np.log([weights[~on].sum(), weights[on].sum()])
    return beliefs


# ------------------------------------------------------------------------- loopy BP
def _sigmoid_pair(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(sigmoid(x), sigmoid(-x))`` without overflow or cancellation."""
    e = np.exp(-np.abs(x))
    big = 1.0 / (1.0 + e)
    small = e * big
    positive = x >= 0
    return np.where(positive, big, small), np.where(positive, small, big)


def _loopy_bp(
    net: _Network, *, damping: float, tolerance: float, max_iterations: int
) -> tuple[FloatArray, BPReport]:
    """Damped flooding BP with one log-odds number ``log m(1) - log m(0)`` per message.

    A sweep over all ``2m`` directed edges: cavity log-odds
    ``c = u[src] + sum(incoming) - msg[reverse]``, cavity probabilities
    ``(q, p) = (1 - sigmoid(c), sigmoid(c))`` and
    ``msg = log((q F01 + p F11) / (q F00 + p F10))`` with ``F`` the (strictly positive,
    max-scaled) factor table. Damping mixes old and new log-odds (geometric damping;
    the fixed points are those of plain BP).
    """
    directed = _Directed.of(net)
    n = net.n
    src, dst = directed.src, directed.dst
    reverse = np.arange(src.size, dtype=np.int64) ^ 1
    table = directed.table - directed.table.max(axis=(1, 2), keepdims=True)
    f00, f01 = np.exp(table[:, 0, 0]), np.exp(table[:, 0, 1])
    f10, f11 = np.exp(table[:, 1, 0]), np.exp(table[:, 1, 1])
    unary = net.log_unary[:, 1] - net.log_unary[:, 0]
    messages = np.zeros(src.size, dtype=np.float64)
    residual = math.inf
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 - reported below
        belief = unary + np.bincount(dst, weights=messages, minlength=n)
        p, q = _sigmoid_pair(belief[src] - messages[reverse])
        new = np.log((q * f01 + p * f11) / (q * f00 + p * f10))
        if damping > 0:
            new = (1.0 - damping) * new + damping * messages
        residual = float(np.max(np.abs(new - messages))) if new.size else 0.0
        messages = new
        if residual < tolerance:
            break
    converged = residual < tolerance
    if not converged:
        logger.warning(
            "loopy BP did not converge in %d iterations (max log-odds change %.3g)",
            iterations,
            residual,
        )
    log_odds = unary + np.bincount(dst, weights=messages, minlength=n)
    beliefs = np.stack([np.zeros(n), log_odds], axis=1)
    return beliefs, BPReport(iterations=iterations, converged=converged, max_residual=residual)


# ----------------------------------------------------------------------------- API
def _check_options(
    method: str,
    damping: float,
    tolerance: float,
    max_iterations: int,
    exact_budget: int,
    brute_max_vars: int,
) -> None:
    if method not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping!r}")
    if not tolerance > 0.0:
        raise ValueError(f"tolerance must be positive, got {tolerance!r}")
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations!r}")
    if exact_budget < 4:
        raise ValueError(f"exact_budget must be >= 4, got {exact_budget!r}")
    if not 1 <= brute_max_vars <= _BRUTE_HARD_LIMIT:
        raise ValueError(f"brute_max_vars must be in [1, {_BRUTE_HARD_LIMIT}]")


class InferenceOptions(TypedDict, total=False):
    """The keyword options of :func:`run_inference`, which :func:`infer_marginals` passes on.

    Attributes:
        damping: Loopy BP damping.
        tolerance: Loopy BP convergence tolerance.
        max_iterations: Loopy BP sweep cap.
        exact_budget: Largest summed clique-table size for the junction tree.
        brute_max_vars: Largest component ``"brute"`` will enumerate.
    """

    damping: float
    tolerance: float
    max_iterations: int
    exact_budget: int
    brute_max_vars: int


def run_inference(
    graph: FactGraph,
    method: Method = "auto",
    *,
    damping: float = 0.5,
    tolerance: float = 1e-8,
    max_iterations: int = 1000,
    exact_budget: int = 2**20,
    brute_max_vars: int = 20,
) -> InferenceResult:
    """Compute ``P(v = 1)`` for every variable and report how.

    Args:
        graph: The network.
        method: ``"auto"``, ``"exact"``, ``"bp"`` or ``"brute"`` (see module docstring).
        damping: Loopy BP damping ``a``: ``m <- (1 - a) * m_new + a * m_old``.
        tolerance: Loopy BP stops when no message log-odds moves more than this.
        max_iterations: Loopy BP sweep cap (non-convergence is logged and reported).
        exact_budget: Junction tree is used on a loopy component only if the summed size
            of its clique tables (``sum 2^|C|``) stays within this many entries.
        brute_max_vars: Largest component ``"brute"`` will enumerate.

    Returns:
        The marginals and the per-component report.

    Raises:
        ValueError: On bad options.
        InferenceError: If ``"exact"`` meets a component wider than ``exact_budget`` or
            ``"brute"`` one larger than ``brute_max_vars``.
    """
    _check_options(method, damping, tolerance, max_iterations, exact_budget, brute_max_vars)
    net = _prepare(graph)
    labels = _components(net)
    n = net.n
    sizes = np.bincount(labels, minlength=n)
    edge_counts = np.bincount(labels[net.ei], minlength=n).astype(np.int64)
    roots = np.flatnonzero(labels == np.arange(n))

    beliefs = net.log_unary.copy()
    reports: list[ComponentReport] = []
    tree_roots: list[int] = []
    bp_roots: list[int] = []
    for root in roots.tolist():
        size, m = int(sizes[root]), int(edge_counts[root])
        if size == 1:
            reports.append(ComponentReport(1, 0, "isolated"))
            continue
        if method == "brute":
            if size > brute_max_vars:
                raise InferenceError(
                    f"a component has {size} variables; brute force is limited to {brute_max_vars}"
                )
            nodes = np.flatnonzero(labels == root)
            beliefs[nodes] = _brute_beliefs(net.subnetwork(nodes))
            reports.append(ComponentReport(size, m, "brute"))
        elif method == "bp":
            bp_roots.append(root)
        elif m == size - 1:
            tree_roots.append(root)
        else:
            nodes = np.flatnonzero(labels == root)
            solved = _junction_tree_beliefs(net.subnetwork(nodes), exact_budget)
            if solved is not None:
                beliefs[nodes] = solved[0]
                reports.append(ComponentReport(size, m, "junction_tree", solved[1]))
            elif method == "exact":
                raise InferenceError(
                    f"a loopy component ({size} variables, {m} factors) exceeds "
                    f"exact_budget={exact_budget}; use method='auto' or 'bp'"
                )
            else:
                bp_roots.append(root)

    if tree_roots:
        nodes = np.flatnonzero(np.isin(labels, tree_roots))
        sub = net.subnetwork(nodes)
        beliefs[nodes] = _tree_beliefs(sub, _components(sub))
        reports.extend(
            ComponentReport(int(sizes[r]), int(edge_counts[r]), "tree") for r in tree_roots
        )
    bp_report: BPReport | None = None
    if bp_roots:
        nodes = np.flatnonzero(np.isin(labels, bp_roots))
        beliefs[nodes], bp_report = _loopy_bp(
            net.subnetwork(nodes),
            damping=damping,
            tolerance=tolerance,
            max_iterations=max_iterations,
        )
        reports.extend(
            ComponentReport(int(sizes[r]), int(edge_counts[r]), "loopy_bp") for r in bp_roots
        )

    p_true = _p_true(beliefs)
    marginals = {v.id: float(p) for v, p in zip(graph.variables, p_true, strict=True)}
    return InferenceResult(marginals=marginals, components=tuple(reports), bp=bp_report)


def infer_marginals(
    graph: FactGraph, method: Method = "auto", **options: Unpack[InferenceOptions]
) -> dict[str, float]:
    """``P(v = 1)`` for every atom and context of ``graph``.

    Same arguments as :func:`run_inference`, which also reports the method used per
    component and loopy-BP convergence.

    Returns:
        Variable id -> posterior probability of being true, in graph order.
    """
    return run_inference(graph, method, **options).marginals
