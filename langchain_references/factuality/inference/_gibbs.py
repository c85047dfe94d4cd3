"""Chromatic Gibbs sampling with a measured error per marginal (internal).

The fallback where loopy BP gives no error estimate (BP or a clamped run did not
converge, or the clamping budget ran out). The network is rewritten as
``log p(x) = sum_v h_v x_v + sum_(u,v) w_uv x_u x_v + const`` and its variables are
coloured greedily so that no two neighbours share a colour (FR2 graphs are bipartite:
atoms and contexts, two colours); a sweep resamples one colour at a time, all of its
variables at once, in ``chains`` independent chains started from uniform random states
(:class:`Couplings`: each class multiplies only its couplings to the other classes).

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

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from langchain_references.factuality.inference._network import FloatArray, IntArray, Network
from langchain_references.factuality.inference._result import GibbsReport

Float32Array = npt.NDArray[np.float32]

_Z = 4.0  # standard errors in the estimated error
_ROUND = 25  # sweeps between convergence checks
_MIN_ROUNDS = 8  # rounds before the first convergence check
MIN_RATE = 0.05  # of replica exchanges, and of variables the hottest replicas change
_SERIAL_WORK = 2**18  # multiply-adds of one BLAS call (OpenBLAS threads larger ones)


@dataclass(frozen=True, slots=True)
class GibbsRun:
    """Marginals and estimated errors from Gibbs sampling.

    Attributes:
        marginals: ``P(x_v = 1)`` of every variable.
        errors: Estimated absolute error of every marginal.
        report: The sampling statistics: sweeps run (each resamples every variable of every
            chain once), chains, replicas per chain, whether every estimated error fell
            below the tolerance, and whether the ladder of replicas works (``swap_rate``
            and ``hot_rate``, both ``1.0`` without tempering, which has no ladder to check,
            of at least :data:`MIN_RATE`). When it does not, the cold chains explore alone,
            a network of near-hard factors can freeze them all, and their agreement says
            nothing: the errors are then not to be trusted.
    """

    marginals: FloatArray
    errors: FloatArray
    report: GibbsReport


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


def color_classes(net: Network) -> list[IntArray]:
    """A proper colouring, greedy in decreasing degree order, as index arrays."""
    neighbors: list[list[int]] = [[] for _ in range(net.n)]
    for i, j in zip(net.ei.tolist(), net.ej.tolist(), strict=True):
        neighbors[i].append(j)
        neighbors[j].append(i)
    color = [-1] * net.n
    for v in np.argsort(-net.degrees(), kind="stable").tolist():
        used = {color[u] for u in neighbors[v]}
        c = 0
        while c in used:
            c += 1
        color[v] = c
    labels = np.array(color, dtype=np.int64)
    return [np.flatnonzero(labels == c) for c in range(int(labels.max(initial=-1)) + 1)]


@dataclass(frozen=True, slots=True)
class Couplings:
    """The Ising form of a network in colour order, split for block updates.

    Variables are renumbered so that every colour class is a contiguous range
    ``bounds[k]:bounds[k + 1]``. A class is an independent set, so its variables couple
    only to other classes: ``lower[k]`` holds its couplings to the classes before it
    (``(size_k, bounds[k])``), ``upper[k]`` to those after it. Nothing couples a class to
    itself, so those zero blocks are never multiplied; what is multiplied is dense, in
    float32 (BLAS; a numpy CSR gather was 10-80 times slower per non-zero at the
    densities of FR2/FR3 graphs, 5-15 %).

    Attributes:
        order: ``order[p]`` is the variable at position ``p``.
        bounds: Start of every colour class, then ``n``.
        h: Fields in colour order.
        lower: Couplings of each class to the earlier classes.
        upper: Couplings of each class to the later classes.
    """

    order: IntArray
    bounds: tuple[int, ...]
    h: Float32Array
    lower: tuple[Float32Array, ...]
    upper: tuple[Float32Array, ...]

    @classmethod
    def of(cls, net: Network) -> Couplings:
        """The couplings of ``net`` (one or more components)."""
        h, w = ising(net)
        blocks = color_classes(net)
        order = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
        bounds = (0, *np.cumsum([b.size for b in blocks]).tolist())
        w32: Float32Array = w[np.ix_(order, order)].astype(np.float32)
        lower = tuple(w32[a:b, :a].copy() for a, b in itertools.pairwise(bounds))
        upper = tuple(w32[a:b, b:].copy() for a, b in itertools.pairwise(bounds))
        return cls(order.astype(np.int64), bounds, h[order].astype(np.float32), lower, upper)

    @property
    def n(self) -> int:
        """Number of variables."""
        return int(self.order.size)

    @property
    def work(self) -> int:
        """Multiply-adds of one sweep of one replica: ``sum_k size_k (n - size_k)``."""
        return sum(int(lo.size + up.size) for lo, up in zip(self.lower, self.upper, strict=True))

    def sweep(
        self,
        state: Float32Array,
        beta: Float32Array,
        rng: np.random.Generator,
        total: FloatArray,
        cold: IntArray,
    ) -> FloatArray:
        """Resample every class in turn, in place; add ``P(x = 1 | rest)`` to ``total``.

        Args:
            state: ``(n, columns)`` 0/1 states in colour order.
            beta: Inverse temperature of every column.
            rng: The random generator.
            total: ``(n, k)``: the conditional probabilities of the columns ``cold``
                (the ``beta = 1`` replica of every chain) are added to it
                (Rao-Blackwellisation).
            cold: The ``k`` columns at ``beta = 1``, in chain order.

        Returns:
            The log-probability (up to a constant) of every column's new state at
            ``beta = 1``, from the fields already computed: every factor is counted once,
            in the later of its two classes, whose field to the earlier classes was taken
            after they were resampled.
        """
        pairwise = np.zeros(state.shape[1])
        for k, (a, b) in enumerate(itertools.pairwise(self.bounds)):
            below = _product(self.lower[k], state[:a])
            field = below + _product(self.upper[k], state[b:])
            field += self.h[a:b, None]
            p = _sigmoid(beta * field)
            total[a:b] += p[:, cold]
            state[a:b] = rng.random(p.shape, dtype=np.float32) < p
            pairwise += np.einsum("vc,vc->c", state[a:b], below, dtype=np.float64)
        out: FloatArray = self.h.astype(np.float64) @ state + pairwise
        return out


def _product(a: Float32Array, b: Float32Array) -> Float32Array:
    """``a @ b`` in row chunks of at most :data:`_SERIAL_WORK` multiply-adds per BLAS call.

    OpenBLAS runs a GEMM above 2^18 multiply-adds on all cores; on the 2-core machine
    shared with other work, those threads waited on each other and a sweep took 5-10
    times longer than in one thread. Below the threshold every call stays in the calling
    thread (and several inferences can run side by side).
    """
    inner, columns = b.shape
    if a.size * columns <= _SERIAL_WORK:
        out: Float32Array = a @ b
        return out
    out = np.empty((a.shape[0], columns), dtype=np.float32)
    width = _SERIAL_WORK // max(a.size, 1)
    if width >= 8:  # chunks of columns: well-shaped products
        for start in range(0, columns, width):
            np.matmul(a, b[:, start : start + width], out=out[:, start : start + width])
        return out
    rows = max(1, _SERIAL_WORK // max(inner * columns, 1))
    full = a.shape[0] - a.shape[0] % rows
    stacked = out[:full].reshape(-1, rows, columns)
    np.matmul(a[:full].reshape(-1, rows, inner), b, out=stacked)  # one BLAS call per chunk
    if full < a.shape[0]:
        np.matmul(a[full:], b, out=out[full:])
    return out


def _sigmoid(x: Float32Array) -> Float32Array:
    """Logistic function in float32 (``exp`` has a vectorised float32 loop; ``tanh`` not)."""
    with np.errstate(over="ignore"):  # exp(88+) = inf: the probability is then 0
        out: Float32Array = np.exp(np.negative(x, out=x), out=x)
    out += np.float32(1.0)
    return np.reciprocal(out, out=out)


def _temperatures(levels: int, hottest: float) -> FloatArray:
    """Inverse temperatures from ``1`` down to ``hottest``, geometric."""
    if levels == 1:
        return np.ones(1)
    out: FloatArray = np.geomspace(1.0, hottest, levels)
    return out


def run_gibbs(
    net: Network | Couplings,
    *,
    chains: int,
    max_sweeps: int,
    tolerance: float,
    seed: int,
    levels: int = 1,
    hottest: float = 0.02,
    targets: IntArray | None = None,
) -> GibbsRun:
    """Sample ``net`` until every estimated error is below ``tolerance`` or the budget ends.

    With ``levels > 1``, every chain is a ladder of replicas at inverse temperatures from
    ``1`` down to ``hottest`` (parallel tempering): after each sweep, neighbouring
    replicas swap states with the Metropolis probability, so a chain stuck behind the
    barriers of near-hard factors can move through the hot replicas. Only the ``beta =
    1`` replicas are averaged.

    Args:
        net: The network (one or more components), or its :class:`Couplings`.
        chains: Independent chains (at least 2).
        max_sweeps: Sweep cap (rounded up to a multiple of the check interval).
        tolerance: Target estimated error of every marginal.
        seed: Seed of the random generator (results are reproducible).
        levels: Replicas per chain (``1``: plain Gibbs).
        hottest: Inverse temperature of the hottest replica.
        targets: The variables whose estimated errors must fall below ``tolerance``
            (default: all).

    Returns:
        The marginals, their estimated errors and the sampling statistics (in the
        variable order of ``net``).
    """
    rng = np.random.default_rng(seed)
    couplings = net if isinstance(net, Couplings) else Couplings.of(net)
    n = couplings.n
    temperatures = _temperatures(levels, hottest)
    # replicas keep their states; exchanges move the temperatures: column_at[l, j] is the
    # column of chain j at level l, beta64[c] the inverse temperature of column c
    column_at = np.arange(levels * chains, dtype=np.int64).reshape(levels, chains)
    beta64 = np.repeat(temperatures, chains)
    beta = beta64.astype(np.float32)
    columns = beta.size
    state = (rng.random((n, columns)) < 0.5).astype(np.float32)
    checked = np.ones(n, dtype=bool)  # in colour order
    if targets is not None:
        position = np.empty(n, dtype=np.int64)
        position[couplings.order] = np.arange(n)
        checked[:] = False
        checked[position[targets]] = True
    # per round: the sum over its sweeps of P(x_v = 1 | rest), for every beta = 1 chain
    sums: list[FloatArray] = []
    sweeps = 0
    accepted = np.zeros(levels - 1)  # exchanges accepted between each level and the next
    hot_moves = 0  # variables the hottest replicas changed, summed over sweeps and chains
    while True:
        total = np.zeros((n, chains))
        for _ in range(_ROUND):
            hot = column_at[-1].copy()
            before = state[:, hot] if levels > 1 else None
            log_p = couplings.sweep(state, beta, rng, total, column_at[0].copy())
            if before is not None:
                hot_moves += int(np.count_nonzero(state[:, hot] != before))
                accepted += _swap(column_at, log_p, temperatures, rng)
                beta64[column_at] = temperatures[:, None]
                beta[:] = beta64
        sums.append(total)
        sweeps += _ROUND
        if len(sums) < _MIN_ROUNDS and sweeps < max_sweeps:
            continue
        marginals, errors = _estimate(sums)
        swap_rate, hot_rate = 1.0, 1.0  # without tempering there is no ladder to break
        if levels > 1:
            swap_rate = float(accepted.min()) / (sweeps * chains)
            hot_rate = hot_moves / (sweeps * chains * max(n, 1))
        mixed = min(swap_rate, hot_rate) >= MIN_RATE
        below = float(errors[checked].max(initial=0.0)) < tolerance
        if not mixed or below or sweeps >= max_sweeps:  # a broken ladder: more sweeps won't help
            out_marginals = np.empty(n)
            out_errors = np.empty(n)
            out_marginals[couplings.order] = marginals
            out_errors[couplings.order] = errors
            report = GibbsReport(
                sweeps, chains, levels, mixed and below, swap_rate, hot_rate, mixed
            )
            return GibbsRun(out_marginals, out_errors, report)


def _swap(
    column_at: IntArray,
    log_p: FloatArray,
    temperatures: FloatArray,
    rng: np.random.Generator,
) -> FloatArray:
    """Replica exchange between neighbouring levels (even pairs, then odd), in place.

    The states stay in their columns; an accepted exchange swaps which column sits at
    which level of its chain.

    Args:
        column_at: ``(levels, chains)``: the column at each level of each chain.
        log_p: Log-probability (``beta = 1``, up to a constant) of every column's state.
        temperatures: Inverse temperature of every level.
        rng: The random generator.

    Returns:
        The number of exchanges accepted between each level and the next.
    """
    levels = column_at.shape[0]
    counts = np.zeros(levels - 1)
    for parity in (0, 1):
        lower = np.arange(parity, levels - 1, 2)
        if lower.size == 0:
            continue
        a, b = column_at[lower], column_at[lower + 1]  # disjoint pairs, (pairs, chains)
        gap = (temperatures[lower] - temperatures[lower + 1])[:, None]
        accept = np.log(rng.random(a.shape)) < gap * (log_p[b] - log_p[a])
        column_at[lower] = np.where(accept, b, a)
        column_at[lower + 1] = np.where(accept, a, b)
        counts[lower] = accept.sum(axis=1)
    return counts


def _estimate(sums: list[FloatArray]) -> tuple[FloatArray, FloatArray]:
    """Marginals and estimated errors from the second half of the rounds."""
    kept = sums[len(sums) // 2 :]
    per_chain = np.sum(kept, axis=0) / (len(kept) * _ROUND)  # (n, chains)
    marginals: FloatArray = per_chain.mean(axis=1)
    chains = per_chain.shape[1]
    stderr = per_chain.std(axis=1, ddof=1) / np.sqrt(chains)
    drift = np.zeros_like(marginals)
    if len(kept) > 1:
        half = len(kept) // 2
        first = np.sum(kept[:half], axis=0).mean(axis=1) / (half * _ROUND)
        second = np.sum(kept[half:], axis=0).mean(axis=1) / ((len(kept) - half) * _ROUND)
        drift = np.abs(first - second)
    errors: FloatArray = np.maximum(_Z * stderr, drift)
    return marginals, errors
