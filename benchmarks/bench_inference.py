"""Inference: time and error estimate per graph, beside last month's BP, in one run.

Random FactReasoner-shaped instances, seeded (the network is built as FactReasoner's
``_build_markov_network`` does, via :func:`build_fact_graph`):

* ``n_contexts`` distinct passages; each atom retrieves ``top_k = 3`` of them at random;
* every judged context -> atom pair is entailment with probability 0.30, contradiction
  with 0.15, neutral (no factor) otherwise;
* judge probabilities: ``soft`` U(0.5, 1); ``hard`` 1.0 (0.0 for 10 %) with 10 % of
  the labels flipped (entailment <-> contradiction), i.e. confident, partly wrong judges;
* FR1 judges each atom's own 3 contexts; FR2 all atom x context pairs; FR3 adds
  context <-> context relations for 5 % of the context pairs (both directions judged,
  reconciled as FactReasoner does).

Table 1 (time and estimate): per case, last month's loopy BP alone (damped flooding,
damping 0.5, 1,000 sweeps, no estimate; copied below as ``legacy_bp``, run on the same
graph in the same run: the honest baseline for the time) beside ``run_inference`` with its
defaults: the method per component ("gibbs (N sw, plain)": plain chains agreed; "L lv":
the tempered ladder ran), "err" the largest ``|P(a) - P_exact(a)|`` over atoms where
exact inference is affordable (junction tree up to ``2^24`` entries or conditioning up to
``2^26``), "est" the reported estimated error (``0`` when exact), "s" seconds, and
"now/BP" the ratio of the two times. The load average of the machine is printed at the
start and the end: on a shared machine the absolute times move with it.

Table 2 (error estimate), on smaller graphs where exact is affordable. Left: forced
``method="bp"``; per graph, is the actual atom error within the estimate, and how large
is it relative to it; plain-BP error vs clamped error; "no est": graphs where some atom
got no estimate (BP or a clamped run did not converge). Right: ``run_inference`` with
its defaults except the exact budgets (16 entries, so the dispatch runs as it does on
graphs too large for exact inference: BP with clamping, then Gibbs sampling with
parallel tempering where BP left an atom without an estimate); "covered": graphs whose
largest actual atom error is within the reported estimate (or the sampler's 0.01
tolerance); "s": mean seconds per graph.

Table 3 (junction tree cost): time and peak memory (tracemalloc) of exact inference on
dense FR2 graphs by clique width, up to the new budget.

Run: ``.venv/bin/python benchmarks/bench_inference.py`` (about 10 minutes).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import time
import tracemalloc
from collections import Counter

import numpy as np
import numpy.typing as npt

from langchain_references.factuality import Atom, Context, Relation, build_fact_graph
from langchain_references.factuality.inference import (
    InferenceError,
    InferenceResult,
    run_inference,
)
from langchain_references.factuality.inference._junction import (
    plan_junction_tree,
    run_junction_tree,
)
from langchain_references.factuality.inference._network import (
    Directed,
    Network,
    prepare,
)
from langchain_references.factuality.model import (
    FactGraph,
    GraphVersion,
    RelationKind,
    candidate_pairs,
)

SIZES = [(20, 50), (50, 200), (200, 1000)]
VERSIONS: list[GraphVersion] = ["FR1", "FR2", "FR3"]
MODES = ["soft", "hard"]
TOP_K = 3
CC_DENSITY = 0.05
SEED = 20250301
FloatArray = npt.NDArray[np.float64]


# ------------------------------------------------------------------ instances
def judge(rng: np.random.Generator, source: str, target: str, mode: str) -> Relation:
    u = rng.uniform()
    kind: RelationKind = "entailment" if u < 0.30 else "contradiction" if u < 0.45 else "neutral"
    if mode == "soft":
        return Relation(source, target, kind, float(rng.uniform(0.5, 1.0)))
    if kind != "neutral" and rng.uniform() < 0.10:
        kind = "contradiction" if kind == "entailment" else "entailment"
    return Relation(source, target, kind, 0.0 if rng.uniform() < 0.10 else 1.0)


def make_case(
    rng: np.random.Generator, n_atoms: int, n_contexts: int, version: GraphVersion, mode: str
) -> FactGraph:
    contexts = [Context(f"c{j}", text=f"passage {j}") for j in range(n_contexts)]
    atoms = [
        Atom(
            f"a{i}",
            contexts=tuple(f"c{j}" for j in rng.choice(n_contexts, TOP_K, replace=False)),
        )
        for i in range(n_atoms)
    ]
    relations: list[Relation] = []
    if version == "FR3":  # sample the 5 % of context pairs directly (1000^2 pairs)
        n_pairs = n_contexts * (n_contexts - 1) // 2
        for flat in rng.choice(n_pairs, int(CC_DENSITY * n_pairs), replace=False).tolist():
            i = int((1 + math.isqrt(1 + 8 * flat)) // 2)
            j = flat - i * (i - 1) // 2
            relations.append(judge(rng, f"c{i}", f"c{j}", mode))
            relations.append(judge(rng, f"c{j}", f"c{i}", mode))
        pairs = candidate_pairs(atoms, contexts, version="FR2")
    else:
        pairs = candidate_pairs(atoms, contexts, version=version, top_k=TOP_K)
    relations.extend(judge(rng, s, t, mode) for s, t in pairs)
    return build_fact_graph(atoms, contexts, relations, version=version, top_k=TOP_K)


# ------------------------------------------------------------------ the previous engine
def _sigmoid_pair(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    e = np.exp(-np.abs(x))
    big = 1.0 / (1.0 + e)
    small = e * big
    positive = x >= 0
    return np.where(positive, big, small), np.where(positive, small, big)


def legacy_bp(net: Network) -> tuple[FloatArray, int, bool]:
    """The previous loopy BP, verbatim: flooding, damping 0.5, tol 1e-8, 1,000 sweeps."""
    damping, tolerance, max_iterations = 0.5, 1e-8, 1000
    directed = Directed.of(net)
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
    for iterations in range(1, max_iterations + 1):  # noqa: B007
        belief = unary + np.bincount(dst, weights=messages, minlength=n)
        p, q = _sigmoid_pair(belief[src] - messages[reverse])
        with np.errstate(divide="ignore", invalid="ignore"):
            new = np.log((q * f01 + p * f11) / (q * f00 + p * f10))
        new = (1.0 - damping) * new + damping * messages
        residual = float(np.max(np.abs(new - messages))) if new.size else 0.0
        messages = new
        if residual < tolerance:
            break
    log_odds = unary + np.bincount(dst, weights=messages, minlength=n)
    return 1.0 / (1.0 + np.exp(-np.clip(log_odds, -700, 700))), iterations, residual < tolerance


# ------------------------------------------------------------------ helpers
def exact_marginals(graph: FactGraph) -> dict[str, float] | None:
    try:
        return run_inference(
            graph, "exact", exact_budget=2**24, conditioning_budget=2**26
        ).marginals
    except InferenceError:
        return None


def atom_error(graph: FactGraph, got: dict[str, float], ref: dict[str, float] | None) -> str:
    if ref is None:
        return "-"
    return f"{max(abs(got[a] - ref[a]) for a in graph.atom_ids):.3f}"


def method_summary(result: InferenceResult) -> str:
    counts = Counter(c.method for c in result.components if c.method != "isolated")
    text = ",".join(f"{m}x{k}" for m, k in sorted(counts.items())) or "isolated"
    if result.gibbs is not None and counts.get("gibbs"):
        ladder = "plain" if result.gibbs.levels == 1 else f"{result.gibbs.levels} lv"
        text += f" ({result.gibbs.sweeps} sw, {ladder})"
    return text


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


# ------------------------------------------------------------------ tables
def before_after() -> None:
    rng = np.random.default_rng(SEED)
    header = (
        f"{'case':<18} {'vars':>5} {'factors':>7} | {'BP only: conv':>13} {'sweeps':>6} "
        f"{'err':>6} {'s':>6} | {'now: method':<26} {'err':>6} {'est':>6} {'s':>6} "
        f"{'now/BP':>6}"
    )
    print(header)
    print("-" * len(header))
    for n_atoms, n_contexts in SIZES:
        for version in VERSIONS:
            for mode in MODES:
                graph = make_case(rng, n_atoms, n_contexts, version, mode)
                reference = exact_marginals(graph) if n_atoms <= 20 else None
                start = time.perf_counter()
                old, _, old_sweeps, old_conv = legacy_inference_bp(graph)
                old_time = time.perf_counter() - start
                start = time.perf_counter()
                new = run_inference(graph)
                new_time = time.perf_counter() - start
                if reference is None and new.exact:
                    reference = new.marginals
                case = f"{n_atoms}x{n_contexts} {version} {mode}"
                print(
                    f"{case:<18} {len(graph.variables):>5} {graph.num_factors:>7} | "
                    f"{old_conv!s:>13} {old_sweeps:>6} "
                    f"{atom_error(graph, old, reference):>6} {old_time:>6.2f} | "
                    f"{method_summary(new):<26} {atom_error(graph, new.marginals, reference):>6} "
                    f"{fmt(new.estimated_error):>6} {new_time:>6.2f} "
                    f"{new_time / max(old_time, 1e-9):>6.1f}",
                    flush=True,
                )


def estimate_validation() -> None:
    rng = np.random.default_rng(SEED + 1)
    header = (
        f"{'graphs':<18} {'n':>3} | {'BP: no est':>10} {'covered':>8} {'act/est max':>11} "
        f"{'plain err':>9} {'clamped err':>11} {'est max':>7} | {'auto: method':<16} "
        f"{'no est':>6} {'covered':>8} {'err max':>7} {'est max':>7} {'s':>5}"
    )
    print(header)
    print("-" * len(header))
    worst: dict[tuple[str, str], tuple[float, float]] = {}  # (mode, method) -> (actual, est)
    for version in ("FR2", "FR3"):
        for mode in MODES:
            for n_atoms, n_contexts in ((8, 20), (14, 35), (20, 50)):
                count = 8 if n_atoms < 20 else 3
                covered, ratios, plain_errors, clamped_errors, estimates = 0, [], [], [], []
                missing = 0
                auto_missing, auto_covered, auto_errors, auto_estimates = 0, 0, [], []
                auto_methods: Counter[str] = Counter()
                auto_time = 0.0
                n = 0
                for _ in range(count):
                    graph = make_case(rng, n_atoms, n_contexts, version, mode)
                    reference = exact_marginals(graph)
                    if reference is None:
                        continue
                    n += 1
                    # the dispatch as it runs where exact inference is out of reach
                    start = time.perf_counter()
                    auto = run_inference(graph, exact_budget=16, conditioning_budget=16)
                    auto_time += time.perf_counter() - start
                    auto_methods[auto.method] += 1
                    actual = max(abs(auto.marginals[a] - reference[a]) for a in graph.atom_ids)
                    auto_errors.append(actual)
                    if auto.estimated_error is None:
                        auto_missing += 1
                    else:
                        auto_covered += actual <= max(auto.estimated_error, 0.01)
                        auto_estimates.append(auto.estimated_error)
                        old_actual, old_est = worst.get((mode, auto.method), (0.0, 0.0))
                        worst[(mode, auto.method)] = (
                            max(old_actual, actual),
                            max(old_est, auto.estimated_error),
                        )
                    result = run_inference(graph, "bp")
                    old, _, _, _ = legacy_inference_bp(graph)
                    actual = max(abs(result.marginals[a] - reference[a]) for a in graph.atom_ids)
                    estimate = result.estimated_error
                    if estimate is None or result.bp is None:
                        missing += 1
                        continue
                    covered += actual <= estimate
                    ratios.append(actual / estimate if estimate > 0 else 0.0)
                    plain_errors.append(max(abs(old[a] - reference[a]) for a in graph.atom_ids))
                    clamped_errors.append(actual)
                    estimates.append(estimate)
                label = f"{version} {mode} {n_atoms}x{n_contexts}"
                bp_cells = (
                    f"{missing:>10} {covered:>4}/{len(ratios):<3} {max(ratios):>11.2f} "
                    f"{max(plain_errors):>9.3f} {max(clamped_errors):>11.3f} "
                    f"{max(estimates):>7.3f}"
                    if ratios
                    else f"{missing:>10} {'-':>8} {'-':>11} {'-':>9} {'-':>11} {'-':>7}"
                )
                methods = ",".join(f"{m}x{k}" for m, k in sorted(auto_methods.items()))
                print(
                    f"{label:<18} {n:>3} | {bp_cells} | {methods:<16} {auto_missing:>6} "
                    f"{auto_covered:>4}/{n - auto_missing:<3} {max(auto_errors):>7.3f} "
                    f"{fmt(max(auto_estimates, default=None)):>7} {auto_time / n:>5.2f}"
                )
    print("\nthe dispatch, worst actual error / worst estimate by judges and method:")
    for (mode, method), (actual, estimate) in sorted(worst.items()):
        print(f"  {mode:<5} {method:<10} {actual:.3f} / {estimate:.3f}")


def legacy_inference_bp(graph: FactGraph) -> tuple[dict[str, float], str, int, bool]:
    """The previous loopy BP on the whole graph (what ``method="bp"`` used to return)."""
    marginal, sweeps, converged = legacy_bp(prepare(graph))
    ids = [v.id for v in graph.variables]
    return dict(zip(ids, marginal.tolist(), strict=True)), "loopy_bp", sweeps, converged


def junction_tree_cost() -> None:
    header = f"{'atoms x ctx':<12} {'width':>5} {'cost 2^k':>8} {'time s':>7} {'peak MB':>8}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(SEED + 2)
    for n_atoms in (14, 16, 18, 20, 22):
        graph = make_case(rng, n_atoms, 50, "FR2", "soft")
        net = prepare(graph)
        plan = plan_junction_tree(net.n, net.ei, net.ej, 2**26)
        if plan is None:
            continue
        tracemalloc.start()
        start = time.perf_counter()
        run_junction_tree(plan, net.log_unary[None], net.ei, net.ej, net.log_pair)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(
            f"{n_atoms}x50{'':<7} {plan.width:>5} {math.log2(plan.cost):>8.1f} "
            f"{elapsed:>7.2f} {peak:>8.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="1,2,3", help="which tables to print")
    tables = parser.parse_args().tables.split(",")
    logging.getLogger("langchain_references").setLevel(logging.ERROR)
    print(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if "1" in tables:
        print(
            "Table 1: last month's BP alone vs run_inference now, same graphs, same run "
            "(atom error vs exact where affordable)\n"
        )
        before_after()
    if "2" in tables:
        print("\nTable 2: estimated vs actual error (left: method='bp'; right: the dispatch)\n")
        estimate_validation()
    if "3" in tables:
        print("\nTable 3: junction tree time and peak memory by width (dense FR2)\n")
        junction_tree_cost()
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
