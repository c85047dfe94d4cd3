"""Exact marginals by enumerating every joint state (the tests' reference; internal)."""

from __future__ import annotations

import numpy as np

from langchain_references.factuality.inference._network import FloatArray, Network


def brute_beliefs(net: Network) -> FloatArray:
    """Exact unnormalized log beliefs ``(n, 2)`` by summing over all ``2^n`` states."""
    k = net.n
    states = np.arange(2**k, dtype=np.int64)
    bits = [(states >> v) & 1 for v in range(k)]
    score = np.zeros(states.size, dtype=np.float64)
    for v in range(k):
        score += net.log_unary[v][bits[v]]
    for e in range(net.m):
        score += net.log_pair[e][bits[int(net.ei[e])], bits[int(net.ej[e])]]
    top = float(score.max())
    weights = np.exp(score - top)
    beliefs = np.empty((k, 2), dtype=np.float64)
    with np.errstate(divide="ignore"):
        for v in range(k):
            on = bits[v] == 1
            beliefs[v] = np.log([weights[~on].sum(), weights[on].sum()])
    return beliefs
