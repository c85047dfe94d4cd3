"""Citation verification: does each sentence of an answer say what its citations say?

After Liu et al. (2023): **citation recall** is the share of verification-worthy sentences
fully supported by their citations, **citation precision** the share of citations that
support their sentence. A judge (:mod:`langchain_references.judges`) decides "supports".

* :mod:`.sentences`: cut a cited answer into sentences with the documents each cites, also
  while it streams (:class:`SentenceCitationTracker`);
* :mod:`.verifier`: :class:`CitationVerifier` checks one sentence or many;
* :mod:`.streaming`: the check that runs while ``manage_references(..., verifier=...)``
  streams (:class:`CitationChecker` is what it needs);
* :mod:`.evaluation`: :func:`evaluate_answers` scores whole answers read with
  :func:`load_answer_records`.
"""

from langchain_references.citations.evaluation import (
    AnswerRecord,
    AnswerReport,
    CitationRecordError,
    CitationReport,
    aevaluate_answers,
    evaluate_answers,
    load_answer_records,
)
from langchain_references.citations.sentences import (
    CitedSentence,
    SentenceCitationTracker,
    is_verification_worthy,
    split_cited_sentences,
)
from langchain_references.citations.streaming import CitationChecker
from langchain_references.citations.verifier import (
    CitationVerdict,
    CitationVerifier,
    SentenceVerdict,
)

__all__ = [
    "AnswerRecord",
    "AnswerReport",
    "CitationChecker",
    "CitationRecordError",
    "CitationReport",
    "CitationVerdict",
    "CitationVerifier",
    "CitedSentence",
    "SentenceCitationTracker",
    "SentenceVerdict",
    "aevaluate_answers",
    "evaluate_answers",
    "is_verification_worthy",
    "load_answer_records",
    "split_cited_sentences",
]
