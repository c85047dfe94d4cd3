"""Inference cost of FactReasoner-style graphs (in-process numpy engine).

Random instances, seeded:

* contexts: ``n_contexts`` distinct passages; each atom retrieves ``top_k = 3`` of them
  (uniformly at random, so FR1 atoms may share contexts);
* every judged context -> atom pair is entailment with probability 0.30, contradiction
  with 0.15, neutral (no factor) otherwise; the judge's probability is U(0.5, 1);
* FR1 judges each atom's own 3 contexts; FR2 all atom x context pairs; FR3 adds
  context <-> context relations for 5 % of the context pairs (both directions judged,
  reconciled as FactReasoner does).

Method ``auto`` (exact on trees / narrow components, damped loopy BP otherwise). For each
case the table shows the median wall time of ``REPEATS`` runs of ``run_inference`` on the
case's graph ("infer s"), the median time of ``build_fact_graph`` from the judged
relations ("build s"), the methods used, BP
sweeps / convergence, and, where exact inference fits ``2^22`` table entries, the largest
``|P_BP(a) - P_exact(a)|`` over atoms of a forced ``"bp"`` run ("BP err"). FactReasoner
reports < 0.05 s per case with its C++ engine (Merlin).

Run: ``.venv/bin/python benchmarks/bench_inference.py``.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter

import numpy as np

from langchain_references.factuality import Atom, Context, Relation, build_fact_graph
from langchain_references.factuality.inference import InferenceError, run_inference
from langchain_references.factuality.model import (
    FactGraph,
    GraphVersion,
    RelationKind,
    candidate_pairs,
)

SIZES = [(10, 20), (20, 50), (30, 100), (50, 200)]
VERSIONS: list[GraphVersion] = ["FR1", "FR2", "FR3"]
TOP_K = 3
CC_DENSITY = 0.05
REPEATS = 5
SEED = 20250301


def judge(rng: np.random.Generator, source: str, target: str) -> Relation:
    u = rng.uniform()
    kind: RelationKind = "entailment" if u < 0.30 else "contradiction" if u < 0.45 else "neutral"
    return Relation(source, target, kind, float(rng.uniform(0.5, 1.0)))


def make_case(
    rng: np.random.Generator, n_atoms: int, n_contexts: int, version: GraphVersion
) -> tuple[list[Atom], list[Context], list[Relation]]:
    contexts = [Context(f"c{j}", text=f"passage {j}") for j in range(n_contexts)]
    atoms = [
        Atom(
            f"a{i}",
            text=f"claim {i}",
            contexts=tuple(f"c{j}" for j in rng.choice(n_contexts, TOP_K, replace=False)),
        )
        for i in range(n_atoms)
    ]
    relations: list[Relation] = []
    context_pairs: set[frozenset[str]] = set()
    for source, target in candidate_pairs(atoms, contexts, version=version, top_k=TOP_K):
        if source.startswith("c") and target.startswith("c"):
            pair = frozenset((source, target))
            if pair not in context_pairs:
                context_pairs.add(pair)
                if rng.uniform() >= CC_DENSITY:
                    continue
                relations.append(judge(rng, source, target))
                relations.append(judge(rng, target, source))
            continue
        relations.append(judge(rng, source, target))
    return atoms, contexts, relations


def bp_error(graph: FactGraph) -> str:
    """Largest |P_BP(a) - P_exact(a)| over atoms, when exact inference fits 2^22 entries."""
    try:
        exact = run_inference(graph, "exact", exact_budget=2**22).marginals
    except InferenceError:
        return "-"
    bp = run_inference(graph, "bp").marginals
    return f"{max(abs(bp[a] - exact[a]) for a in graph.atom_ids):.4f}"


def main() -> None:
    rng = np.random.default_rng(SEED)
    header = (
        f"{'atoms':>5} {'ctx':>4} {'ver':>4} {'vars':>5} {'factors':>7} "
        f"{'methods (auto)':<24} {'infer s':>8} {'build s':>8} {'BP iters':>8} {'conv':>5} "
        f"{'BP err':>7}"
    )
    print(header)
    print("-" * len(header))
    for n_atoms, n_contexts in SIZES:
        for version in VERSIONS:
            atoms, contexts, relations = make_case(rng, n_atoms, n_contexts, version)
            build_times, infer_times = [], []
            for _ in range(REPEATS):
                start = time.perf_counter()
                graph = build_fact_graph(atoms, contexts, relations, version=version, top_k=TOP_K)
                build_times.append(time.perf_counter() - start)
            result = run_inference(graph)
            for _ in range(REPEATS):
                start = time.perf_counter()
                result = run_inference(graph)
                infer_times.append(time.perf_counter() - start)
            methods = Counter(c.method for c in result.components if c.method != "isolated")
            summary = ",".join(f"{m}x{k}" for m, k in sorted(methods.items())) or "-"
            iters = str(result.bp.iterations) if result.bp else "-"
            conv = str(result.bp.converged) if result.bp else "-"
            print(
                f"{n_atoms:>5} {n_contexts:>4} {version:>4} {len(graph.variables):>5} "
                f"{graph.num_factors:>7} {summary:<24} {statistics.median(infer_times):>8.4f} "
                f"{statistics.median(build_times):>8.4f} {iters:>8} {conv:>5} "
                f"{bp_error(graph):>7}"
            )


if __name__ == "__main__":
    main()
