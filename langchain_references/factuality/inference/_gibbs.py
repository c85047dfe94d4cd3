"""Chromatic Gibbs sampling with a measured error per marginal (internal).

The fallback where loopy BP gives no error estimate (BP or a clamped run did not
converge, or the clamping budget ran out). The network is rewritten as
``log p(x) = sum_v h_v x_v + sum_(u,v) w_uv x_u x_v + const`` and its variables are
coloured greedily so that no two neighbours share a colour (FR2 graphs are bipartite:
atoms and contexts, two colours); a sweep resamples one colour at a time, all of its
variables at once, in ``chains`` independent chains started from uniform random states.

Each marginal is the Rao-Blackwellised average of ``P(x_v = 1 | neighbours)`` over the
second half of the sweeps (the first half is burn-in) and over the chains. Its
*estimated error* is the larger of ``z`` standard errors computed from the spread of
the chains' own averages (independent chains: autocorrelation needs no model) and the
drift between the first and second quarter of the kept sweeps (a chain still moving).
Sweeps go on in rounds until every estimated error is below ``tolerance`` (checked from
the eighth round on) or the sweep budget is spent. With parallel tempering, the run also
reports the lowest acceptance rate of exchanges between neighbouring temperatures and how
often the hottest replicas change their variables: below :data:`MIN_RATE` the cold chains
are on their own (on large networks the energy gaps between temperatures grow with the
size; near-hard factors can freeze even the hot end), and the run stops and says it did
not mix. Chains stuck in different modes disagree, so a hard, frustrated network gets a
large estimate rather than a confident wrong answer; chains all stuck in the same wrong
mode are not detected, which is why the estimate is validated on graphs
where exact inference is affordable (``benchmarks/bench_inference.py``), not proven.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from langchain_references.factuality.inference._network import FloatArray, IntArray, Network

_Z = 4.0  # standard errors in the estimated error
_ROUND = 50  # sweeps between convergence checks
_MIN_ROUNDS = 8  # rounds before the first convergence check
MIN_RATE = 0.05  # of replica exchanges, and of variables the hottest replicas change


@dataclass(frozen=True, slots=True)
class GibbsRun:
    """Marginals and estimated errors from Gibbs sampling.

    Attributes:
        marginals: ``P(x_v = 1)`` of every variable.
        errors: Estimated absolute error of every marginal.
        sweeps: Sweeps run (each resamples every variable of every chain once).
        chains: Independent chains.
        converged: Whether every estimated error fell below the tolerance.
        swap_rate: Lowest acceptance rate of replica exchanges between two neighbouring
            levels (``1.0`` without tempering, which has no ladder to check).
        hot_rate: Share of their variables the hottest replicas changed per sweep
            (``1.0`` without tempering).
        mixed: Whether the ladder of replicas works: ``swap_rate`` of at least
            :data:`MIN_RATE` and the hottest replicas changing at least that share of
            their variables per sweep. Otherwise the cold chains
            explore alone, a network of near-hard factors can freeze them all, and their
            agreement says nothing: the errors are then not to be trusted.
    """

    marginals: FloatArray
    errors: FloatArray
    sweeps: int
    chains: int
    converged: bool
    swap_rate: float = 1.0
    hot_rate: float = 1.0
    mixed: bool = True


def ising(net: Network) -> tuple[FloatArray, FloatArray]:
    """Fields ``h`` and the dense symmetric coupling matrix ``w`` of ``net``.

    ``log p(x) = sum_v h_v x_v + sum_(u<v) w_uv x_u x_v + const`` for binary ``x``.
    """
    t = net.log_pair
    h = net.log_unary[:, 1] - net.log_unary[:, 0]
    coupling = t[:, 1, 1] - t[:, 0, 1] - t[:, 1, 0] + t[:, 0, 0]
    h = h + np.bincount(net.ei, weights=t[:, 1, 0] - t[:, 0, 0], minlength=net.n)
    h = h + np.bincount(net.ej, weights=t[:, 0, 1] - t[:, 0, 0], minlength=net.n)
    w = np.zeros((net.n, net.n))
    np.add.at(w, (net.ei, net.ej), coupling)
    np.add.at(w, (net.ej, net.ei), coupling)
    return h, w


def colour_classes(net: Network) -> list[IntArray]:
    """A proper colouring, greedy in decreasing degree order, as index arrays."""
    neighbours: list[list[int]] = [[] for _ in range(net.n)]
    for i, j in zip(net.ei.tolist(), net.ej.tolist(), strict=True):
        neighbours[i].append(j)
        neighbours[j].append(i)
    colour = [-1] * net.n
    for v in np.argsort(-net.degrees(), kind="stable").tolist():
        used = {colour[u] for u in neighbours[v]}
        c = 0
        while c in used:
            c += 1
        colour[v] = c
    labels = np.array(colour, dtype=np.int64)
    return [np.flatnonzero(labels == c) for c in range(int(labels.max(initial=-1)) + 1)]


def _sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


def _temperatures(levels: int, hottest: float) -> FloatArray:
    """Inverse temperatures from ``1`` down to ``hottest``, geometric."""
    if levels == 1:
        return np.ones(1)
    out: FloatArray = np.geomspace(1.0, hottest, levels)
    return out


def run_gibbs(
    net: Network,
    *,
    chains: int,
    max_sweeps: int,
    tolerance: float,
    seed: int,
    levels: int = 1,
    hottest: float = 0.02,
) -> GibbsRun:
    """Sample ``net`` until every estimated error is below ``tolerance`` or the budget ends.

    With ``levels > 1``, every chain is a ladder of replicas at inverse temperatures from
    ``1`` down to ``hottest`` (parallel tempering): after each sweep, neighbouring
    replicas swap states with the Metropolis probability, so a chain stuck behind the
    barriers of near-hard factors can move through the hot replicas. Only the ``beta =
    1`` replicas are averaged.

    Args:
        net: The network (one or more components).
        chains: Independent chains (at least 2).
        max_sweeps: Sweep cap (rounded up to a multiple of the check interval).
        tolerance: Target estimated error of every marginal.
        seed: Seed of the random generator (results are reproducible).
        levels: Replicas per chain (``1``: plain Gibbs).
        hottest: Inverse temperature of the hottest replica.

    Returns:
        The marginals, their estimated errors and the sampling statistics.
    """
    rng = np.random.default_rng(seed)
    h, w = ising(net)
    blocks = colour_classes(net)
    rows = [w[block] for block in blocks]
    beta = np.repeat(_temperatures(levels, hottest), chains)  # column c: level c // chains
    columns = beta.size
    state = (rng.random((net.n, columns)) < 0.5).astype(np.float64)
    # per round: the sum over its sweeps of P(x_v = 1 | rest), for every beta = 1 chain
    sums: list[FloatArray] = []
    sweeps = 0
    accepted = np.zeros(levels - 1)  # exchanges accepted between each level and the next
    hot = slice(columns - chains, columns)
    hot_moves = 0  # variables the hottest replicas changed, summed over sweeps and chains
    while True:
        total = np.zeros((net.n, chains))
        for _ in range(_ROUND):
            before = state[:, hot].copy() if levels > 1 else None
            for block, row in zip(blocks, rows, strict=True):
                p = _sigmoid(beta * (h[block, None] + row @ state))
                total[block] += p[:, :chains]
                state[block] = rng.random(p.shape) < p
            if before is not None:
                accepted += _swap(state, h, w, chains, levels, beta, rng)
                hot_moves += int(np.count_nonzero(state[:, hot] != before))
        sums.append(total)
        sweeps += _ROUND
        if len(sums) < _MIN_ROUNDS and sweeps < max_sweeps:
            continue
        marginals, errors = _estimate(sums)
        swap_rate, hot_rate = 1.0, 1.0  # without tempering there is no ladder to break
        if levels > 1:
            swap_rate = float(accepted.min()) / (sweeps * chains)
            hot_rate = hot_moves / (sweeps * chains * max(net.n, 1))
        mixed = min(swap_rate, hot_rate) >= MIN_RATE
        below = float(errors.max(initial=0.0)) < tolerance
        if not mixed or below or sweeps >= max_sweeps:  # a broken ladder: more sweeps won't help
            return GibbsRun(
                marginals, errors, sweeps, chains, mixed and below, swap_rate, hot_rate, mixed
            )


def _swap(
    state: FloatArray,
    h: FloatArray,
    w: FloatArray,
    chains: int,
    levels: int,
    beta: FloatArray,
    rng: np.random.Generator,
) -> FloatArray:
    """Replica exchange between neighbouring levels (even pairs, then odd), in place.

    Returns:
        The number of exchanges accepted between each level and the next.
    """
    counts = np.zeros(levels - 1)
    log_p = h @ state + 0.5 * np.einsum("vc,vc->c", state, w @ state)
    for parity in (0, 1):
        lower = np.arange(parity, levels - 1, 2)
        if lower.size == 0:
            continue
        a = (lower[:, None] * chains + np.arange(chains)).ravel()  # disjoint pairs (a, b)
        b = a + chains
        accept = np.log(rng.random(a.size)) < (beta[a] - beta[b]) * (log_p[b] - log_p[a])
        sa, sb = a[accept], b[accept]
        state[:, sa], state[:, sb] = state[:, sb], state[:, sa].copy()
        log_p[sa], log_p[sb] = log_p[sb], log_p[sa].copy()
        counts[lower] = accept.reshape(lower.size, chains).sum(axis=1)
    return counts


def _estimate(sums: list[FloatArray]) -> tuple[FloatArray, FloatArray]:
    """Marginals and estimated errors from the second half of the rounds."""
    kept = sums[len(sums) // 2 :]
    per_chain = np.sum(kept, axis=0) / (len(kept) * _ROUND)  # (n, chains)
    marginals: FloatArray = per_chain.mean(axis=1)
    chains = per_chain.shape[1]
    stderr = per_chain.std(axis=1, ddof=1) / np.sqrt(chains)
    half = max(len(kept) // 2, 1)
    first = np.sum(kept[:half], axis=0).mean(axis=1) / (half * _ROUND)
    second = np.sum(kept[half:], axis=0).mean(axis=1) / (max(len(kept) - half, 1) * _ROUND)
    drift = np.abs(first - second) if len(kept) > 1 else np.zeros_like(marginals)
    errors: FloatArray = np.maximum(_Z * stderr, drift)
    return marginals, errors
