"""The pairwise binary network in log space that every solver works on (internal)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from langchain_references.factuality.model import FactGraph

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Network:
    """Pairwise binary MRF in log space, parallel factors merged, ``ei < ej``.

    Attributes:
        log_unary: ``(n, 2)`` unary log tables.
        ei: ``(m,)`` first endpoint of every pairwise factor.
        ej: ``(m,)`` second endpoint (``ei < ej``).
        log_pair: ``(m, 2, 2)`` log tables indexed ``[x_ei, x_ej]``.
    """

    log_unary: FloatArray
    ei: IntArray
    ej: IntArray
    log_pair: FloatArray

    @property
    def n(self) -> int:
        """Number of variables."""
        return int(self.log_unary.shape[0])

    @property
    def m(self) -> int:
        """Number of pairwise factors."""
        return int(self.ei.size)

    def subnetwork(self, nodes: IntArray) -> Network:
        """The network induced by ``nodes`` (sorted), re-indexed in that order."""
        local = np.full(self.n, -1, dtype=np.int64)
        local[nodes] = np.arange(nodes.size, dtype=np.int64)
        keep = (local[self.ei] >= 0) & (local[self.ej] >= 0)
        return Network(
            self.log_unary[nodes], local[self.ei[keep]], local[self.ej[keep]], self.log_pair[keep]
        )

    def degrees(self) -> IntArray:
        """Number of pairwise factors at every variable."""
        return np.bincount(np.concatenate([self.ei, self.ej]), minlength=self.n).astype(np.int64)


_FLAT = 1e-12  # largest |coupling| (log space) of a factor folded into its unaries


def prepare(graph: FactGraph) -> Network:
    """The log-space network of ``graph``: parallel factors merged, uncoupled ones folded.

    Parallel factors are multiplied together. A pairwise log table whose coupling
    ``t11 - t01 - t10 + t00`` is zero is a product of two unary tables (e.g. FactReasoner's
    entailment at ``p`` equal to the link prior: both rows equal), so it adds no edge: the
    components (and the exact methods that fit them) are those of the factors that couple
    their variables.
    """
    log_unary = np.log(graph.unary_tables())
    edges = graph.edge_index()
    tables = np.log(graph.pairwise_tables())
    n = log_unary.shape[0]
    if edges.shape[0] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Network(log_unary, empty, empty, np.zeros((0, 2, 2)))
    src, trg = edges[:, 0], edges[:, 1]
    swap = src > trg
    tables[swap] = tables[swap].transpose(0, 2, 1)
    lo, hi = np.minimum(src, trg), np.maximum(src, trg)
    keys, inverse = np.unique(lo * n + hi, return_inverse=True)
    merged = np.zeros((keys.size, 2, 2), dtype=np.float64)
    np.add.at(merged, inverse, tables)
    ei, ej = keys // n, keys % n
    coupling = merged[:, 1, 1] - merged[:, 0, 1] - merged[:, 1, 0] + merged[:, 0, 0]
    flat = np.abs(coupling) <= _FLAT
    if flat.any():
        log_unary = log_unary.copy()
        np.add.at(log_unary[:, 1], ei[flat], merged[flat, 1, 0] - merged[flat, 0, 0])
        np.add.at(log_unary[:, 1], ej[flat], merged[flat, 0, 1] - merged[flat, 0, 0])
    keep = ~flat
    return Network(log_unary, ei[keep], ej[keep], merged[keep])


def component_labels(net: Network) -> IntArray:
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


def normalize(log_p: FloatArray) -> FloatArray:
    """Normalise the last axis (size 2) of log-probabilities."""
    return log_p - np.logaddexp(log_p[..., 0], log_p[..., 1])[..., None]


def p_true(log_belief: FloatArray) -> FloatArray:
    """``P(x = 1)`` from unnormalized log beliefs of shape ``(..., 2)``."""
    return np.exp(normalize(log_belief)[..., 1])


@dataclass(frozen=True, slots=True)
class Directed:
    """Both directions of every edge: ``d = 2e`` is ``ei -> ej``, ``d = 2e + 1`` the reverse.

    Attributes:
        src: Source variable of every directed edge.
        dst: Destination variable.
        table: ``(2m, 2, 2)`` log tables indexed ``[x_src, x_dst]``.
    """

    src: IntArray
    dst: IntArray
    table: FloatArray

    @classmethod
    def of(cls, net: Network) -> Directed:
        """Both directions of the factors of ``net``."""
        m = net.m
        src = np.empty(2 * m, dtype=np.int64)
        dst = np.empty(2 * m, dtype=np.int64)
        src[0::2], src[1::2] = net.ei, net.ej
        dst[0::2], dst[1::2] = net.ej, net.ei
        table = np.empty((2 * m, 2, 2), dtype=np.float64)
        table[0::2] = net.log_pair
        table[1::2] = net.log_pair.transpose(0, 2, 1)
        return cls(src, dst, table)
