"""Long-form factuality, FactReasoner-style: the probabilistic core.

A response is split into atoms, evidence contexts are retrieved, a judge labels
context -> atom (and context -> context) pairs as entailment / contradiction / neutral
with a probability, and a Markov network over binary atom/context variables turns those
judgements into posterior probabilities that each atom is true (Marinescu et al. 2025,
"FactReasoner", arXiv:2502.18573; github.com/IBM/FactReasoner).

This package holds the LLM-free part, in numpy:

* :mod:`.model`: :class:`FactGraph` and the FR1/FR2/FR3 builders
  (:func:`build_fact_graph`, :func:`candidate_pairs`);
* :mod:`.inference`: :func:`infer_marginals` / :func:`run_inference` (exact on trees and
  narrow graphs, damped loopy belief propagation otherwise);
* :mod:`.metrics`: :func:`score_marginals` (factual precision, F1@K, entropy, gold
  comparison);
* :mod:`.io`: FactReasoner's JSON / JSONL input and result formats.

Example:
    >>> from langchain_references.factuality import (
    ...     Atom, Context, Relation, build_fact_graph, infer_marginals, score_marginals)
    >>> graph = build_fact_graph(
    ...     [Atom("a0", "Paris is in France.")],
    ...     [Context("c0", "Paris is the capital of France.")],
    ...     [Relation("c0", "a0", "entailment", 0.95)],
    ... )
    >>> marginals = infer_marginals(graph)
    >>> score_marginals(marginals, graph.atom_ids).predictions
    {'a0': 'S'}
"""

from langchain_references.factuality.inference import (
    BPReport,
    ComponentReport,
    InferenceError,
    InferenceResult,
    infer_marginals,
    run_inference,
)
from langchain_references.factuality.io import (
    FactualityFormatError,
    FactualityInput,
    LoadResult,
    input_to_dict,
    load_inputs,
    parse_input,
    parse_result,
    result_to_dict,
    write_jsonl,
)
from langchain_references.factuality.metrics import (
    FactualityScores,
    GoldComparison,
    atom_label,
    entropy_score,
    f1_at_k,
    median_k,
    score_marginals,
)
from langchain_references.factuality.model import (
    PRIOR_PROB_ATOM,
    PRIOR_PROB_CONTEXT,
    Atom,
    Context,
    FactGraph,
    Relation,
    Variable,
    build_fact_graph,
    candidate_pairs,
    dedupe_contexts,
    reconcile_context_pair,
)

__all__ = [
    "PRIOR_PROB_ATOM",
    "PRIOR_PROB_CONTEXT",
    "Atom",
    "BPReport",
    "ComponentReport",
    "Context",
    "FactGraph",
    "FactualityFormatError",
    "FactualityInput",
    "FactualityScores",
    "GoldComparison",
    "InferenceError",
    "InferenceResult",
    "LoadResult",
    "Relation",
    "Variable",
    "atom_label",
    "build_fact_graph",
    "candidate_pairs",
    "dedupe_contexts",
    "entropy_score",
    "f1_at_k",
    "infer_marginals",
    "input_to_dict",
    "load_inputs",
    "median_k",
    "parse_input",
    "parse_result",
    "reconcile_context_pair",
    "result_to_dict",
    "run_inference",
    "score_marginals",
    "write_jsonl",
]
