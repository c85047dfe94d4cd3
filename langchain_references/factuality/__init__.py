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

Around it, the LLM-facing evaluator:

* :mod:`.atomizer` / :mod:`.reviser`: split a response into atoms and decontextualise them
  (chat model, structured output);
* :mod:`.retrieval`: where contexts come from (the input, a vector store, the web);
* :mod:`.relations`: judge the pairs a graph version needs with any judge;
* :mod:`.pipeline`: :func:`create_factuality_evaluator`, the Runnable that composes it all.

Citation recall / precision (Liu et al., 2023) is in :mod:`langchain_references.citations`;
the ``factuality`` command is in :mod:`langchain_references.cli.factuality`.

Examples:
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

from langchain_references.factuality.atomizer import Atomizer
from langchain_references.factuality.inference import infer_marginals
from langchain_references.factuality.io import FactualityInput, load_inputs
from langchain_references.factuality.metrics import FactualityScores, score_marginals
from langchain_references.factuality.model import Atom, Context, Relation, build_fact_graph
from langchain_references.factuality.pipeline import (
    FactualityPipeline,
    FactualityResult,
    create_factuality_evaluator,
)
from langchain_references.factuality.retrieval import (
    InputContexts,
    VectorStoreContexts,
    WebContexts,
)
from langchain_references.factuality.reviser import Reviser

__all__ = [
    "Atom",
    "Atomizer",
    "Context",
    "FactualityInput",
    "FactualityPipeline",
    "FactualityResult",
    "FactualityScores",
    "InputContexts",
    "Relation",
    "Reviser",
    "VectorStoreContexts",
    "WebContexts",
    "build_fact_graph",
    "create_factuality_evaluator",
    "infer_marginals",
    "load_inputs",
    "score_marginals",
]
