"""Exact inference by conditioning on hub variables (cutset conditioning; internal).

Fixing ``k`` variables splits the joint into ``2^k`` networks whose unary tables absorb
the factors to the fixed variables. Each is solved exactly on one junction tree
(batched), and the results are combined with weights ``exp(c_s + log Z_s)`` in log
space, ``c_s`` the log weight of the fixed variables' own factors in assignment ``s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from langchain_references.factuality.inference._junction import (
    JunctionPlan,
    plan_junction_tree,
    run_junction_tree,
)
from langchain_references.factuality.inference._network import (
    FloatArray,
    IntArray,
    Network,
    normalize,
)


@dataclass(frozen=True, slots=True)
class CutsetPlan:
    """Which variables to fix and the junction tree of the rest.

    Attributes:
        hubs: Variables fixed, largest degree first.
        rest: The other variables, sorted.
        plan: Junction tree of the network induced by ``rest``.
    """

    hubs: tuple[int, ...]
    rest: IntArray
    plan: JunctionPlan

    @property
    def work(self) -> int:
        """Summed clique-table size over all ``2^k`` conditioned networks."""
        return int(2 ** len(self.hubs) * self.plan.cost)


def plan_cutset(net: Network, exact_budget: int, work_budget: int) -> CutsetPlan | None:
    """Fix the largest hubs one at a time until the rest fits both budgets.

    Args:
        net: One connected component.
        exact_budget: Largest clique-table sum of one conditioned junction tree.
        work_budget: Largest ``2^k`` times that sum.

    Returns:
        The plan, or ``None`` when no number of hubs fits.
    """
    degrees = net.degrees().astype(np.float64)
    removed = np.zeros(net.n, dtype=bool)
    hubs: list[int] = []
    while 2 ** (len(hubs) + 1) * 2 * (net.n - len(hubs) - 1) <= work_budget:
        live = np.where(removed, -1.0, degrees)
        hub = int(np.argmax(live))
        hubs.append(hub)
        removed[hub] = True
        degrees -= np.bincount(net.ej[net.ei == hub], minlength=net.n)
        degrees -= np.bincount(net.ei[net.ej == hub], minlength=net.n)
        rest = np.flatnonzero(~removed)
        sub = net.subnetwork(rest)
        budget = min(exact_budget, work_budget // 2 ** len(hubs))
        plan = plan_junction_tree(sub.n, sub.ei, sub.ej, budget)
        if plan is not None:
            return CutsetPlan(tuple(hubs), rest, plan)
    return None


def run_cutset(net: Network, cutset: CutsetPlan, chunk_entries: int) -> FloatArray:
    """Exact log beliefs ``(n, 2)`` (normalized) of ``net`` by conditioning.

    Args:
        net: The component the plan was made for.
        cutset: From :func:`plan_cutset`.
        chunk_entries: Largest batch size times clique-table sum solved at once.

    Returns:
        Normalised log marginals of every variable.
    """
    hubs = np.array(cutset.hubs, dtype=np.int64)
    k = hubs.size
    states = (np.arange(2**k, dtype=np.int64)[:, None] >> np.arange(k)) & 1  # (S, k)
    is_hub = np.zeros(net.n, dtype=bool)
    is_hub[hubs] = True
    hub_slot = np.full(net.n, -1, dtype=np.int64)
    hub_slot[hubs] = np.arange(k)
    rest_slot = np.full(net.n, -1, dtype=np.int64)
    rest_slot[cutset.rest] = np.arange(cutset.rest.size)

    # constant: the hubs' unaries and hub-hub factors; absorbed: hub-rest factors
    const = net.log_unary[hubs[None, :], states].sum(axis=1)
    unary = np.broadcast_to(net.log_unary[cutset.rest], (2**k, cutset.rest.size, 2)).copy()
    for e in range(net.m):
        i, j = int(net.ei[e]), int(net.ej[e])
        table = net.log_pair[e]
        if is_hub[i] and is_hub[j]:
            const += table[states[:, hub_slot[i]], states[:, hub_slot[j]]]
        elif is_hub[i]:
            unary[:, rest_slot[j]] += table[states[:, hub_slot[i]], :]
        elif is_hub[j]:
            unary[:, rest_slot[i]] += table[:, states[:, hub_slot[j]]].T

    sub = net.subnetwork(cutset.rest)
    chunk = max(1, chunk_entries // max(cutset.plan.cost, 1))
    rest_beliefs = np.empty((2**k, cutset.rest.size, 2))
    log_z = np.empty(2**k)
    for start in range(0, 2**k, chunk):
        stop = min(start + chunk, 2**k)
        beliefs, lz = run_junction_tree(
            cutset.plan, unary[start:stop], sub.ei, sub.ej, sub.log_pair
        )
        rest_beliefs[start:stop] = normalize(beliefs)  # log P(v | assignment)
        log_z[start:stop] = lz
    weight = const + log_z  # log weight of each assignment
    weight -= np.logaddexp.reduce(weight)
    out = np.empty((net.n, 2))
    out[cutset.rest] = np.logaddexp.reduce(weight[:, None, None] + rest_beliefs, axis=0)
    with np.errstate(divide="ignore"):
        for slot, hub in enumerate(hubs.tolist()):
            for value in (0, 1):
                chosen = weight[states[:, slot] == value]
                out[hub, value] = np.logaddexp.reduce(chosen) if chosen.size else -np.inf
    return out
