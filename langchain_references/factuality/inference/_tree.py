"""Exact sum-product on forests, vectorised one depth level at a time (internal)."""

from __future__ import annotations

import numpy as np

from langchain_references.factuality.inference._network import (
    Directed,
    FloatArray,
    IntArray,
    Network,
    normalize,
)


def send(cavity: FloatArray, table: FloatArray) -> FloatArray:
    """Normalised log messages ``m(y) = log sum_x exp(cavity(x) + table(x, y))``."""
    out = np.logaddexp(cavity[:, 0, None] + table[:, 0, :], cavity[:, 1, None] + table[:, 1, :])
    return normalize(out)


def tree_beliefs(net: Network, labels: IntArray) -> FloatArray:
    """Exact log beliefs on a forest: leaves to roots, then roots to leaves.

    Args:
        net: A forest.
        labels: Component label of every variable; the variable equal to its label is
            the root of its tree.

    Returns:
        Unnormalized log beliefs ``(n, 2)``.
    """
    n = net.n
    directed = Directed.of(net)
    belief = net.log_unary.copy()
    if net.m == 0:
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
        msg = send(belief[nodes], directed.table[up])  # parent -> node message is still 0
        messages[up] = msg
        np.add.at(belief, directed.dst[up], msg)
    for nodes in levels:  # downward: parents -> children
        down = down_edge[nodes]
        cavity = belief[directed.src[down]] - messages[down ^ 1]
        msg = send(cavity, directed.table[down])
        messages[down] = msg
        belief[nodes] += msg
    return belief
