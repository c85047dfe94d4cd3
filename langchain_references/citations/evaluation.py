"""Score whole cited answers: citation recall and precision over a set of answers.

Input records (one JSON object per line, for :func:`load_answer_records` and the CLI)::

    {"answer": "Seattle is in Washington [1](id=2).",
     "documents": [{"page_content": "...", "metadata": {"source": "https://...",
                                                        "title": "..."}}, ...],
     "question": "Where is Seattle?"}

``text`` is accepted for ``page_content``; ``metadata`` and ``question`` are optional. The id
``k`` of ``[n](id=k)`` is the 1-based position of the document in ``documents``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_references.citations.sentences import (
    CitedSentence,
    is_verification_worthy,
    split_cited_sentences,
)
from langchain_references.citations.verifier import (
    CitationVerdict,
    CitationVerifier,
    PassageLike,
    SentenceVerdict,
    WorthyPredicate,
)
from langchain_references.errors import RecordError
from langchain_references.judges.base import JudgeInputLike, Judgement
from langchain_references.loading import LoadResult, load_records

__all__ = [
    "AnswerRecord",
    "AnswerReport",
    "CitationRecordError",
    "CitationReport",
    "aevaluate_answers",
    "evaluate_answers",
    "load_answer_records",
    "parse_answer_record",
]

logger = logging.getLogger(__name__)


class CitationRecordError(RecordError):
    """An answer record is malformed (``location``: e.g. ``"answers.jsonl:3"``, if known)."""


@dataclass(frozen=True)
class AnswerRecord:
    """A cited answer and the documents its ``[n](id=k)`` markers point to.

    Attributes:
        answer: The answer text with citation markers.
        documents: The documents, in prompt order (``id=k`` is ``documents[k - 1]``).
        question: The question, if given.
        location: Where the record came from, if read from a file.
    """

    answer: str
    documents: tuple[Document, ...]
    question: str | None = None
    location: str | None = None

    @property
    def passages_by_id(self) -> dict[int, Document]:
        """The documents keyed by their 1-based id."""
        return {i: doc for i, doc in enumerate(self.documents, start=1)}


def parse_answer_record(obj: Any, *, location: str | None = None) -> AnswerRecord:
    """Validate one answer record (format in the module docstring).

    Args:
        obj: The decoded JSON object.
        location: Where it came from, for error messages.

    Returns:
        The record.

    Raises:
        CitationRecordError: On a missing or mistyped field.
    """

    def fail(message: str) -> CitationRecordError:
        return CitationRecordError(message, location)

    if not isinstance(obj, Mapping):
        raise fail("record is not a JSON object")
    answer = obj.get("answer")
    if not isinstance(answer, str):
        raise fail("'answer' must be a string")
    question = obj.get("question")
    if question is not None and not isinstance(question, str):
        raise fail("'question' must be a string")
    raw_docs = obj.get("documents", [])
    if not isinstance(raw_docs, list):
        raise fail("'documents' must be a list")
    documents: list[Document] = []
    for i, doc in enumerate(raw_docs, start=1):
        if not isinstance(doc, Mapping):
            raise fail(f"document id={i} is not an object")
        text = doc.get("page_content", doc.get("text"))
        if not isinstance(text, str):
            raise fail(f"document id={i}: 'page_content' (or 'text') must be a string")
        metadata = doc.get("metadata", {})
        if not isinstance(metadata, Mapping):
            raise fail(f"document id={i}: 'metadata' must be an object")
        documents.append(Document(page_content=text, metadata=dict(metadata)))
    return AnswerRecord(answer, tuple(documents), question, location)


def load_answer_records(
    path: str | os.PathLike[str], *, strict: bool = False
) -> LoadResult[AnswerRecord]:
    """Read answer records from a JSONL file (a JSON list or single object also works).

    Args:
        path: The file.
        strict: Raise on the first bad record instead of collecting it.

    Returns:
        The records and the errors of the records that could not be read
        (``result.records``, ``result.errors``).

    Raises:
        CitationRecordError: In strict mode, on a bad record; always if the whole file is
            not JSON.
    """
    return load_records(
        path, parse_answer_record, strict=strict, error=CitationRecordError, what="answer record"
    )


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


@dataclass(frozen=True)
class AnswerReport:
    """Citation recall and precision of one answer.

    Attributes:
        index: Position of the answer among the evaluated records.
        question: Its question, if given.
        location: Where the record came from, if known.
        sentences: One verdict per sentence, in order.
    """

    index: int
    question: str | None
    location: str | None
    sentences: tuple[SentenceVerdict, ...]

    @property
    def worthy(self) -> tuple[SentenceVerdict, ...]:
        """The verification-worthy sentences."""
        return tuple(s for s in self.sentences if s.verification_worthy)

    @property
    def n_worthy(self) -> int:
        """Number of verification-worthy sentences."""
        return len(self.worthy)

    @property
    def n_supported(self) -> int:
        """Number of verification-worthy sentences fully supported by their citations."""
        return sum(1 for s in self.worthy if s.supported)

    @property
    def n_citations(self) -> int:
        """Number of citations of verification-worthy sentences (distinct per sentence)."""
        return sum(len(s.citations) for s in self.worthy)

    @property
    def n_precise(self) -> int:
        """Number of those citations that support their sentence."""
        return sum(s.n_precise for s in self.worthy)

    @property
    def citation_recall(self) -> float | None:
        """Supported / worthy sentences (``None`` without worthy sentences)."""
        return _ratio(self.n_supported, self.n_worthy)

    @property
    def citation_precision(self) -> float | None:
        """Precise / all citations of worthy sentences (``None`` without citations)."""
        return _ratio(self.n_precise, self.n_citations)

    @property
    def unsupported_sentences(self) -> tuple[SentenceVerdict, ...]:
        """Worthy sentences not fully supported by their citations."""
        return tuple(s for s in self.worthy if not s.supported)

    @property
    def unsupported_citations(self) -> tuple[tuple[SentenceVerdict, CitationVerdict], ...]:
        """``(sentence, citation)`` pairs of imprecise citations."""
        return tuple((s, c) for s in self.worthy for c in s.citations if not c.precise)

    @property
    def failed_judgements(self) -> int:
        """Judgements that failed (counted as no support)."""
        return sum(s.failed_judgements for s in self.sentences)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable report of the answer."""
        return {
            "index": self.index,
            "question": self.question,
            "location": self.location,
            "citation_recall": self.citation_recall,
            "citation_precision": self.citation_precision,
            "num_sentences": len(self.sentences),
            "num_verification_worthy": self.n_worthy,
            "num_supported": self.n_supported,
            "num_citations": self.n_citations,
            "num_precise_citations": self.n_precise,
            "failed_judgements": self.failed_judgements,
            "unsupported_sentences": [
                {"index": s.sentence.index, "text": s.sentence.text}
                for s in self.unsupported_sentences
            ],
            "unsupported_citations": [
                {"sentence": s.sentence.index, "doc_id": c.doc_id, "reason": c.reason}
                for s, c in self.unsupported_citations
            ],
            "sentences": [s.to_dict() for s in self.sentences],
        }


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


@dataclass(frozen=True)
class CitationReport:
    """Citation recall and precision over answers.

    The overall ``citation_recall`` / ``citation_precision`` pool every sentence / citation
    (micro average); ``macro_recall`` / ``macro_precision`` average the per-answer values
    over the answers where they are defined.

    Attributes:
        answers: One report per evaluated answer.
        errors: Records that could not be read (they are not scored).
    """

    answers: tuple[AnswerReport, ...]
    errors: tuple[RecordError, ...] = ()

    @property
    def n_worthy(self) -> int:
        """Verification-worthy sentences over all answers."""
        return sum(a.n_worthy for a in self.answers)

    @property
    def n_supported(self) -> int:
        """Supported verification-worthy sentences over all answers."""
        return sum(a.n_supported for a in self.answers)

    @property
    def n_citations(self) -> int:
        """Citations of verification-worthy sentences over all answers."""
        return sum(a.n_citations for a in self.answers)

    @property
    def n_precise(self) -> int:
        """Precise citations over all answers."""
        return sum(a.n_precise for a in self.answers)

    @property
    def citation_recall(self) -> float | None:
        """Pooled citation recall."""
        return _ratio(self.n_supported, self.n_worthy)

    @property
    def citation_precision(self) -> float | None:
        """Pooled citation precision."""
        return _ratio(self.n_precise, self.n_citations)

    @property
    def macro_recall(self) -> float | None:
        """Mean per-answer citation recall."""
        return _mean(a.citation_recall for a in self.answers)

    @property
    def macro_precision(self) -> float | None:
        """Mean per-answer citation precision."""
        return _mean(a.citation_precision for a in self.answers)

    @property
    def failed_judgements(self) -> int:
        """Failed judgements over all answers."""
        return sum(a.failed_judgements for a in self.answers)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable report."""
        return {
            "citation_recall": self.citation_recall,
            "citation_precision": self.citation_precision,
            "macro_recall": self.macro_recall,
            "macro_precision": self.macro_precision,
            "num_answers": len(self.answers),
            "num_verification_worthy": self.n_worthy,
            "num_supported": self.n_supported,
            "num_citations": self.n_citations,
            "num_precise_citations": self.n_precise,
            "failed_judgements": self.failed_judgements,
            "errors": [str(e) for e in self.errors],
            "answers": [a.to_dict() for a in self.answers],
        }


def _prepare(
    records: Iterable[AnswerRecord | Mapping[str, Any]],
) -> tuple[list[AnswerRecord], list[RecordError]]:
    parsed: list[AnswerRecord] = []
    errors: list[RecordError] = []
    for i, record in enumerate(records):
        if isinstance(record, AnswerRecord):
            parsed.append(record)
            continue
        try:
            parsed.append(parse_answer_record(record, location=f"record #{i}"))
        except CitationRecordError as exc:
            logger.warning("skipping answer record: %s", exc)
            errors.append(exc)
    return parsed, errors


def _items(
    records: Sequence[AnswerRecord],
) -> tuple[list[list[CitedSentence]], list[tuple[CitedSentence, Mapping[int, PassageLike]]]]:
    sentences = [split_cited_sentences(r.answer) for r in records]
    items: list[tuple[CitedSentence, Mapping[int, PassageLike]]] = []
    for record, answer_sentences in zip(records, sentences, strict=True):
        passages = record.passages_by_id
        items.extend((s, passages) for s in answer_sentences)
    return sentences, items


def _report(
    records: Sequence[AnswerRecord],
    sentences: Sequence[Sequence[CitedSentence]],
    verdicts: Sequence[SentenceVerdict],
    errors: Sequence[RecordError],
) -> CitationReport:
    answers: list[AnswerReport] = []
    position = 0
    for i, (record, answer_sentences) in enumerate(zip(records, sentences, strict=True)):
        n = len(answer_sentences)
        answers.append(
            AnswerReport(
                i, record.question, record.location, tuple(verdicts[position : position + n])
            )
        )
        position += n
    return CitationReport(tuple(answers), tuple(errors))


def evaluate_answers(
    records: Iterable[AnswerRecord | Mapping[str, Any]],
    judge: Runnable[JudgeInputLike, Judgement] | CitationVerifier,
    *,
    is_worthy: WorthyPredicate = is_verification_worthy,
    max_concurrency: int | None = None,
    config: RunnableConfig | None = None,
) -> CitationReport:
    """Citation recall and precision of cited answers.

    Args:
        records: :class:`AnswerRecord` objects or dicts in the documented format; a malformed
            dict is recorded in :attr:`CitationReport.errors` and skipped.
        judge: A judge, or a configured :class:`CitationVerifier`.
        is_worthy: Which sentences to check (ignored when a verifier is given).
        max_concurrency: Limit of parallel judge calls (ignored when a verifier is given).
        config: Runnable config for the judge calls.

    Returns:
        The report.
    """
    verifier = (
        judge
        if isinstance(judge, CitationVerifier)
        else CitationVerifier(judge, is_worthy=is_worthy, max_concurrency=max_concurrency)
    )
    parsed, errors = _prepare(records)
    sentences, items = _items(parsed)
    verdicts = verifier.verify_many(items, config=config)
    return _report(parsed, sentences, verdicts, errors)


async def aevaluate_answers(
    records: Iterable[AnswerRecord | Mapping[str, Any]],
    judge: Runnable[JudgeInputLike, Judgement] | CitationVerifier,
    *,
    is_worthy: WorthyPredicate = is_verification_worthy,
    max_concurrency: int | None = None,
    config: RunnableConfig | None = None,
) -> CitationReport:
    """Async :func:`evaluate_answers`.

    Args:
        records: Answer records.
        judge: A judge, or a configured :class:`CitationVerifier`.
        is_worthy: Which sentences to check (ignored when a verifier is given).
        max_concurrency: Limit of parallel judge calls (ignored when a verifier is given).
        config: Runnable config for the judge calls.

    Returns:
        The report.
    """
    verifier = (
        judge
        if isinstance(judge, CitationVerifier)
        else CitationVerifier(judge, is_worthy=is_worthy, max_concurrency=max_concurrency)
    )
    parsed, errors = _prepare(records)
    sentences, items = _items(parsed)
    verdicts = await verifier.averify_many(items, config=config)
    return _report(parsed, sentences, verdicts, errors)
