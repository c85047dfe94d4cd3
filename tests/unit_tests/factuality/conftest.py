"""Shared helpers for the factuality tests: data location and an independent reference."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from langchain_references.factuality import Relation
from langchain_references.factuality.model import FactGraph, Variable


def fr_table(kind: str, p: float, link_prior: float, use_priors: bool) -> list[list[float]]:
    """FactReasoner's pairwise table [x_source][x_target], written out from factors.py."""
    if kind == "equivalence":
        return [[p, 1 - p], [1 - p, p]]
    rows = [[1 - p, p]] if kind == "entailment" else [[p, 1 - p]]
    first = [1 - link_prior, link_prior] if use_priors else [p, p]
    return [first, *rows]


def reference_marginals(graph: FactGraph) -> dict[str, float]:
    """P(v = 1) by summing the joint over every state, independently of the library."""
    eps = graph.epsilon

    def clamp(x: float) -> float:
        return min(max(x, eps), 1 - eps)

    ids = [v.id for v in graph.variables]
    pos = {vid: i for i, vid in enumerate(ids)}
    kind = {v.id: v.kind for v in graph.variables}
    tables = []
    for r in graph.relations:
        both_contexts = kind[r.source] == "context" and kind[r.target] == "context"
        link_prior = clamp(graph.context_prior if both_contexts else graph.atom_prior)
        tables.append(
            (
                pos[r.source],
                pos[r.target],
                fr_table(r.kind, clamp(r.probability), link_prior, graph.use_priors),
            )
        )
    priors = [clamp(v.prior) for v in graph.variables]
    total = 0.0
    on = [0.0] * len(ids)
    for state in itertools.product((0, 1), repeat=len(ids)):
        w = 1.0
        for i, x in enumerate(state):
            w *= priors[i] if x else 1 - priors[i]
        for s, t, table in tables:
            w *= table[state[s]][state[t]]
        total += w
        for i, x in enumerate(state):
            if x:
                on[i] += w
    return {vid: on[i] / total for i, vid in enumerate(ids)}


KINDS = ("entailment", "contradiction", "equivalence")


@st.composite
def fact_graphs(
    draw: st.DrawFn, *, max_atoms: int = 4, max_contexts: int = 5, tree: bool = False
) -> FactGraph:
    """Random small graphs: arbitrary priors, relation kinds and probabilities."""
    n_atoms = draw(st.integers(1, max_atoms))
    n_contexts = draw(st.integers(0 if not tree else 1, max_contexts))
    prob = st.floats(0.0, 1.0)
    variables = [Variable(f"a{i}", "atom", draw(prob)) for i in range(n_atoms)]
    variables += [Variable(f"c{i}", "context", draw(prob)) for i in range(n_contexts)]
    n = len(variables)
    if tree:
        order = draw(st.permutations(range(n)))
        pairs = [(order[i], order[draw(st.integers(0, i - 1))]) for i in range(1, n)]
    else:
        index = st.integers(0, n - 1)
        pairs = draw(st.lists(st.tuples(index, index), max_size=3 * n))
    relations: dict[tuple[str, str], Relation] = {}
    for i, j in pairs:
        if i == j:
            continue
        a, b = variables[i], variables[j]
        if a.kind == "atom" and b.kind == "context":
            a, b = b, a
        if (a.id, b.id) in relations:
            continue
        relations[(a.id, b.id)] = Relation(a.id, b.id, draw(st.sampled_from(KINDS)), draw(prob))
    return FactGraph(tuple(variables), tuple(relations.values()), use_priors=draw(st.booleans()))
