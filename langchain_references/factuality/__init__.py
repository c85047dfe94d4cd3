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

Around it, the LLM-facing evaluator and citation verification:

* :mod:`.atomizer` / :mod:`.reviser`: split a response into atoms and decontextualise them
  (chat model, structured output);
* :mod:`.retrieval`: where contexts come from (the input, a vector store, the web);
* :mod:`.relations`: judge the pairs a graph version needs with any judge;
* :mod:`.pipeline`: :func:`create_factuality_evaluator`, the Runnable that composes it all;
* :mod:`.sentences` / :mod:`.citations`: incremental cited-sentence splitting and citation
  recall / precision (Liu et al., 2023);
* :mod:`.cli`: the ``factuality`` and ``citations`` commands.

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

from langchain_references.factuality.atomizer import AtomicClaims, Atomizer, AtomizerError
from langchain_references.factuality.citations import (
    AnswerRecord,
    AnswerReport,
    CitationRecordError,
    CitationReport,
    CitationVerdict,
    CitationVerifier,
    SentenceVerdict,
    aevaluate_answers,
    evaluate_answers,
    load_answer_records,
    parse_answer_record,
)
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
from langchain_references.factuality.pipeline import (
    FactualityPipeline,
    FactualityResult,
    StageFailure,
    coerce_factuality_input,
    create_factuality_evaluator,
    offline_judge,
)
from langchain_references.factuality.relations import (
    JudgedPair,
    RelationJudge,
    RelationResult,
    judgement_to_relation,
    normalize_version,
)
from langchain_references.factuality.retrieval import (
    ContextRetriever,
    InputContexts,
    RetrievalFailure,
    RetrievedContexts,
    VectorStoreContexts,
    WebContexts,
)
from langchain_references.factuality.reviser import RevisedAtoms, Reviser, RevisionResult
from langchain_references.factuality.sentences import (
    CitedSentence,
    SentenceCitationTracker,
    is_verification_worthy,
    split_cited_sentences,
)

__all__ = [
    "PRIOR_PROB_ATOM",
    "PRIOR_PROB_CONTEXT",
    "AnswerRecord",
    "AnswerReport",
    "Atom",
    "AtomicClaims",
    "Atomizer",
    "AtomizerError",
    "BPReport",
    "CitationRecordError",
    "CitationReport",
    "CitationVerdict",
    "CitationVerifier",
    "CitedSentence",
    "ComponentReport",
    "Context",
    "ContextRetriever",
    "FactGraph",
    "FactualityFormatError",
    "FactualityInput",
    "FactualityPipeline",
    "FactualityResult",
    "FactualityScores",
    "GoldComparison",
    "InferenceError",
    "InferenceResult",
    "InputContexts",
    "JudgedPair",
    "LoadResult",
    "Relation",
    "RelationJudge",
    "RelationResult",
    "RetrievalFailure",
    "RetrievedContexts",
    "RevisedAtoms",
    "Reviser",
    "RevisionResult",
    "SentenceCitationTracker",
    "SentenceVerdict",
    "StageFailure",
    "Variable",
    "VectorStoreContexts",
    "WebContexts",
    "aevaluate_answers",
    "atom_label",
    "build_fact_graph",
    "candidate_pairs",
    "coerce_factuality_input",
    "create_factuality_evaluator",
    "dedupe_contexts",
    "entropy_score",
    "evaluate_answers",
    "f1_at_k",
    "infer_marginals",
    "input_to_dict",
    "is_verification_worthy",
    "judgement_to_relation",
    "load_answer_records",
    "load_inputs",
    "median_k",
    "normalize_version",
    "offline_judge",
    "parse_answer_record",
    "parse_input",
    "parse_result",
    "reconcile_context_pair",
    "result_to_dict",
    "run_inference",
    "score_marginals",
    "split_cited_sentences",
    "write_jsonl",
]
