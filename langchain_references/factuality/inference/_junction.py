"""Exact inference on a junction tree, batched over evidence settings (internal).

The tree comes from a min-degree elimination order; cliques contained in a neighbour
are merged into it, so each table is built once. Messages are computed in log space
with one max-shifted exponentiation per clique (Hugin-style downward messages:
separator marginal of the parent minus the child's upward message). A leading batch
axis runs the same tree for many unary settings at once (cutset conditioning).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from langchain_references.factuality.inference._errors import InferenceError
from langchain_references.factuality.inference._network import FloatArray, IntArray


@dataclass(frozen=True, slots=True)
class JunctionPlan:
    """A junction tree of maximal cliques, children before parents.

    Attributes:
        cliques: Sorted variables of every node.
        parent: Parent node of every node (``-1`` for a root).
        var_node: Node holding each variable's unary (and giving its marginal).
        edge_node: Node holding each pairwise factor.
        cost: Summed size of the elimination cliques' tables (``sum 2^|C|``).
        width: Largest clique.
    """

    cliques: tuple[tuple[int, ...], ...]
    parent: tuple[int, ...]
    var_node: tuple[int, ...]
    edge_node: tuple[int, ...]
    cost: int
    width: int


def _eliminate(
    size: int, ei: IntArray, ej: IntArray, budget: int
) -> tuple[list[int], list[list[int]], int] | None:
    adjacency: list[set[int]] = [set() for _ in range(size)]
    for i, j in zip(ei.tolist(), ej.tolist(), strict=True):
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
    return order, cliques, cost


def plan_junction_tree(size: int, ei: IntArray, ej: IntArray, budget: int) -> JunctionPlan | None:
    """Plan exact inference for a network with ``size`` variables and edges ``ei``-``ej``.

    Args:
        size: Number of variables (need not be connected).
        ei: First endpoints of the pairwise factors.
        ej: Second endpoints.
        budget: Largest ``sum 2^|C|`` accepted.

    Returns:
        The plan, or ``None`` if the elimination cliques exceed ``budget``.
    """
    eliminated = _eliminate(size, ei, ej, budget)
    if eliminated is None:
        return None
    order, cliques, cost = eliminated
    pos = [0] * size
    for p, v in enumerate(order):
        pos[v] = p
    up = [min((pos[u] for u in c if u != order[p]), default=-1) for p, c in enumerate(cliques)]

    rep = list(range(size))  # node p was merged into rep[p]

    def find(x: int) -> int:
        while rep[x] != x:
            rep[x] = rep[rep[x]]
            x = rep[x]
        return x

    rank = list(range(size))
    link = up[:]  # parent pointer of a representative (resolve with find)
    for p in range(size):
        mine = set(cliques[p])
        while link[p] >= 0:
            q = find(link[p])
            if not set(cliques[q]) <= mine:
                break
            rep[q] = p  # the parent's clique is inside ours: absorb it
            rank[p] = max(rank[p], rank[q])
            link[p] = link[q]
    nodes = sorted((p for p in range(size) if find(p) == p), key=lambda p: rank[p])
    index = {p: k for k, p in enumerate(nodes)}
    parent = tuple(index[find(link[p])] if link[p] >= 0 else -1 for p in nodes)
    for k, par in enumerate(parent):
        if 0 <= par <= k:  # pragma: no cover - guaranteed by the elimination order
            raise InferenceError("junction tree is not ordered children-first")
    var_node = tuple(index[find(pos[v])] for v in range(size))
    edge_node = tuple(
        index[find(min(pos[i], pos[j]))] for i, j in zip(ei.tolist(), ej.tolist(), strict=True)
    )
    return JunctionPlan(
        cliques=tuple(tuple(cliques[p]) for p in nodes),
        parent=parent,
        var_node=var_node,
        edge_node=edge_node,
        cost=cost,
        width=max((len(c) for c in cliques), default=0),
    )


def _shape(table_vars: tuple[int, ...], clique: tuple[int, ...], batch: int) -> list[int]:
    present = set(table_vars)
    return [batch] + [2 if v in present else 1 for v in clique]


def _grouped(values: FloatArray, keep: list[bool]) -> tuple[FloatArray, tuple[int, ...], int]:
    """Merge runs of neighbouring axes with the same ``keep`` flag (fast reductions).

    Returns the reshaped view, the axes to reduce and the number of kept variables.
    """
    shape = [values.shape[0]]
    axes: list[int] = []
    previous: bool | None = None
    for flag in keep:
        if flag is previous:
            shape[-1] *= 2
        else:
            shape.append(2)
            if not flag:
                axes.append(len(shape) - 1)
            previous = flag
    return values.reshape(shape), tuple(axes), sum(keep)


def _sum_out(values: FloatArray, keep: list[bool]) -> FloatArray:
    """Log-sum-exp over the variables not kept (batch axis 0 is never summed)."""
    grouped, axes, kept = _grouped(values, keep)
    if not axes:
        return values
    top = np.max(grouped, axis=axes, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(grouped - top), axis=axes)) + np.squeeze(top, axis=axes)
    result: FloatArray = out.reshape([values.shape[0]] + [2] * kept)
    return result


def _sum_linear(weights: FloatArray, keep: list[bool]) -> FloatArray:
    """Sum of a linear-domain table over the variables not kept."""
    grouped, axes, kept = _grouped(weights, keep)
    result: FloatArray = grouped.sum(axis=axes).reshape([weights.shape[0]] + [2] * kept)
    return result


def _kept(clique: Sequence[int], keep: Collection[int]) -> list[bool]:
    """Which variables of a clique are kept (the others are summed out)."""
    return [v in keep for v in clique]


def _potentials(
    plan: JunctionPlan,
    log_unary: FloatArray,
    ei: IntArray,
    ej: IntArray,
    log_pair: FloatArray,
) -> list[FloatArray]:
    """Each clique's log table: the unary and pairwise factors assigned to it, added up."""
    batch = log_unary.shape[0]
    cliques = plan.cliques
    tables: list[FloatArray] = [np.zeros([batch] + [2] * len(c)) for c in cliques]
    for v, k in enumerate(plan.var_node):
        np.add(tables[k], log_unary[:, v].reshape(_shape((v,), cliques[k], batch)), out=tables[k])
    for e, k in enumerate(plan.edge_node):
        i, j = int(ei[e]), int(ej[e])
        table = log_pair[e] if i < j else log_pair[e].T
        shape = _shape((min(i, j), max(i, j)), cliques[k], 1)
        np.add(tables[k], table.reshape(shape), out=tables[k])
    return tables


def _collect(
    plan: JunctionPlan,
    tables: list[FloatArray],
    separators: Sequence[tuple[int, ...]],
    batch: int,
) -> tuple[list[FloatArray | None], FloatArray]:
    """The upward pass (children before parents): each clique's message to its parent.

    Each message is added to the parent's table; a root's sum is its tree's ``log Z``.

    Returns:
        The message each clique sent (None for roots), and ``log Z`` of each batch row.
    """
    cliques = plan.cliques
    upward: list[FloatArray | None] = [None] * len(cliques)
    log_z = np.zeros(batch)
    for k, par in enumerate(plan.parent):
        if par < 0:
            log_z += _sum_out(tables[k], _kept(cliques[k], ())).reshape(batch)
            continue
        msg = _sum_out(tables[k], _kept(cliques[k], set(separators[k])))
        upward[k] = msg
        np.add(
            tables[par], msg.reshape(_shape(separators[k], cliques[par], batch)), out=tables[par]
        )
    return upward, log_z


def _distribute(
    plan: JunctionPlan,
    tables: list[FloatArray],
    separators: Sequence[tuple[int, ...]],
    upward: Sequence[FloatArray | None],
    batch: int,
) -> FloatArray:
    """The downward pass (parents before children), reading each variable's log belief.

    Each table is freed once read (the list keeps its length).

    Returns:
        The ``(B, n, 2)`` log beliefs.
    """
    cliques = plan.cliques
    children: list[list[int]] = [[] for _ in cliques]
    for k, par in enumerate(plan.parent):
        if par >= 0:
            children[par].append(k)
    readers: list[list[int]] = [[] for _ in cliques]
    for v, k in enumerate(plan.var_node):
        readers[k].append(v)
    beliefs = np.empty((batch, len(plan.var_node), 2))
    downward: list[FloatArray | None] = [None] * len(cliques)
    for k in reversed(range(len(cliques))):
        full = tables[k]
        down = downward[k]
        if down is not None:
            np.add(full, down.reshape(_shape(separators[k], cliques[k], batch)), out=full)
        flat = full.reshape(batch, -1)
        top = np.max(flat, axis=1)
        top = np.where(np.isfinite(top), top, 0.0)
        weights = np.exp(full - top.reshape([batch] + [1] * len(cliques[k])))
        with np.errstate(divide="ignore", invalid="ignore"):
            for c in children[k]:
                sent = upward[c]
                if sent is None:  # pragma: no cover - every child sent a message
                    raise InferenceError("junction tree message missing")
                sep = separators[c]
                marginal = np.log(_sum_linear(weights, _kept(cliques[k], set(sep))))
                marginal = marginal + top.reshape([batch] + [1] * len(sep))
                message = marginal - sent
                downward[c] = np.where(np.isnan(message), -np.inf, message)
            for v in readers[k]:
                belief = np.log(_sum_linear(weights, _kept(cliques[k], {v})))
                beliefs[:, v] = belief + top.reshape(batch, 1)
        tables[k] = np.zeros(0)  # free the table; the list keeps its length
    return beliefs


def run_junction_tree(
    plan: JunctionPlan,
    log_unary: FloatArray,
    ei: IntArray,
    ej: IntArray,
    log_pair: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Exact log beliefs and log partition functions for a batch of unary settings.

    Args:
        plan: From :func:`plan_junction_tree` for this structure.
        log_unary: ``(B, n, 2)`` unary log tables (one network per batch row).
        ei: First endpoints of the pairwise factors.
        ej: Second endpoints.
        log_pair: ``(m, 2, 2)`` pairwise log tables, shared by the batch.

    Returns:
        ``(B, n, 2)`` log beliefs (``log P(x_v = s) + log Z``) and ``(B,)`` ``log Z``.
    """
    batch = log_unary.shape[0]
    tables = _potentials(plan, log_unary, ei, ej, log_pair)
    separators = [
        tuple(v for v in plan.cliques[k] if v in set(plan.cliques[par])) if par >= 0 else ()
        for k, par in enumerate(plan.parent)
    ]
    upward, log_z = _collect(plan, tables, separators, batch)
    beliefs = _distribute(plan, tables, separators, upward, batch)
    return beliefs, log_z
