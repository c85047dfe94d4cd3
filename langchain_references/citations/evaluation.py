"""Score whole cited answers: citation recall and precision over a set of answers.

Input records (one JSON object per line, for :func:`load_answer_records` and the CLI)::

    {"answer": "Seattle is in Washington [1](id=2).",
     "documents": [{"page_content": "...", "metadata": {"source": "https://...",
                                                        "title": "..."}}, ...],
     "question": "Where is Seattle?"}

``answer`` and ``documents`` are required (``documents`` may be empty) and no other key is
accepted, so that a misspelt key is reported instead of read as "no documents". ``text`` is
accepted for ``page_content``; ``metadata``, ``question`` and a document's ``id`` and ``type``
(as LangChain serialises a ``Document``) are optional. The id ``k`` of ``[n](id=k)`` is the
1-based position of the document in ``documents``. A bad record is a
:class:`CitationRecordError` with its ``file:line`` and the JSON path of the offending
``field`` (e.g. ``documents[2].page_content``: the third document).
"""

from __future__ import annotations

import logging
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass, field
from typing import Any, Final, Literal, TypedDict, Unpack

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ConfigDict, Field

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
from langchain_references.judges.base import JudgeInfo, JudgeInputLike, Judgement
from langchain_references.services.loading import LoadResult, load_records, validate_record

__all__ = [
    "AnswerRecord",
    "AnswerReport",
    "CitationRecordError",
    "CitationReport",
    "EvaluationOptions",
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


class _DocumentModel(BaseModel):
    """The schema of one document of an answer record (``page_content`` or ``text``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    page_content: str | None = None
    text: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    type: Literal["Document"] | None = None


class _AnswerModel(BaseModel):
    """The schema of an answer record: ``answer`` and ``documents`` required, no other keys."""

    model_config = ConfigDict(extra="forbid", strict=True)

    answer: str
    documents: list[_DocumentModel]
    question: str | None = None


def _document(doc: _DocumentModel, index: int, location: str | None) -> Document:
    if doc.page_content is not None and doc.text is not None:
        raise CitationRecordError(
            f"documents[{index}]: give 'page_content' or 'text', not both",
            location,
            field=f"documents[{index}].text",
        )
    text = doc.page_content if doc.page_content is not None else doc.text
    if text is None:
        field_name = f"documents[{index}].page_content"
        raise CitationRecordError(
            f"{field_name}: required field is missing (or give 'text')", location, field=field_name
        )
    return Document(page_content=text, metadata=doc.metadata, id=doc.id)


def parse_answer_record(obj: Any, *, location: str | None = None) -> AnswerRecord:
    """Validate one answer record (format in the module docstring).

    ``answer`` and ``documents`` are required and other keys are rejected, so that a misspelt
    key is an error rather than an answer without documents.

    Args:
        obj: The decoded JSON object.
        location: Where it came from, for error messages.

    Returns:
        The answer record.

    Raises:
        CitationRecordError: On a missing, unknown or mistyped field (its ``field`` is the
            JSON path, e.g. ``"documents[2].page_content"``).
    """
    model = validate_record(
        obj, _AnswerModel, location, error=CitationRecordError, models=(_DocumentModel,)
    )
    documents = tuple(_document(doc, i, location) for i, doc in enumerate(model.documents))
    return AnswerRecord(model.answer, documents, model.question, location)


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


#: The count attributes of a report, in the order of :class:`_Tally`'s fields.
_COUNTS: Final = ("n_worthy", "n_supported", "n_citations", "n_precise", "failed_judgements")


@dataclass(frozen=True, slots=True)
class _Tally:
    """The counts behind citation recall and precision (they add up over sentences, answers)."""

    worthy: int = 0
    supported: int = 0
    citations: int = 0
    precise: int = 0
    failed: int = 0

    @classmethod
    def of(cls, part: SentenceVerdict | AnswerReport) -> _Tally:
        """The counts of one sentence verdict, or the counts of one answer's report."""
        if isinstance(part, AnswerReport):
            return cls(*(getattr(part, name) for name in _COUNTS))
        verdict = part
        if not verdict.verification_worthy:
            return cls(failed=verdict.failed_judgements)
        supported = 1 if verdict.supported else 0
        return cls(
            1, supported, len(verdict.citations), verdict.n_precise, verdict.failed_judgements
        )

    def __add__(self, other: _Tally) -> _Tally:
        return _Tally(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class _CitationScores(ABC):
    """Counts, citation recall and precision: of one answer, or pooled over answers.

    The counts are computed once, from :meth:`_tally`, when the report is made.

    Attributes:
        n_worthy: Number of verification-worthy sentences.
        n_supported: Number of verification-worthy sentences fully supported by their
            citations.
        n_citations: Number of citations of verification-worthy sentences (distinct per
            sentence).
        n_precise: Number of those citations that support their sentence.
        failed_judgements: Judgements that failed (counted as no support).
    """

    n_worthy: int = field(init=False, repr=False, compare=False)
    n_supported: int = field(init=False, repr=False, compare=False)
    n_citations: int = field(init=False, repr=False, compare=False)
    n_precise: int = field(init=False, repr=False, compare=False)
    failed_judgements: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tally = self._tally()
        for name, value in zip(_COUNTS, astuple(tally), strict=True):
            object.__setattr__(self, name, value)

    @abstractmethod
    def _parts(self) -> tuple[SentenceVerdict | AnswerReport, ...]:
        """What the report is made of: sentence verdicts, or answer reports."""

    def _tally(self) -> _Tally:
        """The counts of the report: the sum of its parts'."""
        return sum(map(_Tally.of, self._parts()), _Tally())

    @property
    def judge(self) -> JudgeInfo | None:
        """Which judge made the verdicts: the first one its parts name (``None`` if none)."""
        return next((part.judge for part in self._parts() if part.judge is not None), None)

    @property
    def citation_recall(self) -> float | None:
        """Supported / worthy sentences (``None`` without worthy sentences)."""
        return _ratio(self.n_supported, self.n_worthy)

    @property
    def citation_precision(self) -> float | None:
        """Precise / all citations of worthy sentences (``None`` without citations)."""
        return _ratio(self.n_precise, self.n_citations)

    def _scores(self, **extra: Any) -> dict[str, Any]:
        """Recall, precision, ``extra`` and the counts, in the key order of ``to_dict``."""
        return {
            "citation_recall": self.citation_recall,
            "citation_precision": self.citation_precision,
            **extra,
            "num_verification_worthy": self.n_worthy,
            "num_supported": self.n_supported,
            "num_citations": self.n_citations,
            "num_precise_citations": self.n_precise,
            "failed_judgements": self.failed_judgements,
        }


@dataclass(frozen=True)
class AnswerReport(_CitationScores):
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

    def _parts(self) -> tuple[SentenceVerdict, ...]:
        return self.sentences

    @property
    def worthy(self) -> tuple[SentenceVerdict, ...]:
        """The verification-worthy sentences."""
        return tuple(s for s in self.sentences if s.verification_worthy)

    @property
    def unsupported_sentences(self) -> tuple[SentenceVerdict, ...]:
        """Worthy sentences not fully supported by their citations."""
        return tuple(s for s in self.worthy if not s.supported)

    @property
    def unsupported_citations(self) -> tuple[tuple[SentenceVerdict, CitationVerdict], ...]:
        """``(sentence, citation)`` pairs of imprecise citations."""
        return tuple((s, c) for s in self.worthy for c in s.citations if not c.precise)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable report of the answer."""
        return {
            "index": self.index,
            "question": self.question,
            "location": self.location,
            **self._scores(num_sentences=len(self.sentences)),
            "judge": None if self.judge is None else self.judge.to_dict(),
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
class CitationReport(_CitationScores):
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

    def _parts(self) -> tuple[AnswerReport, ...]:
        return self.answers

    @property
    def macro_recall(self) -> float | None:
        """Mean per-answer citation recall."""
        return _mean(a.citation_recall for a in self.answers)

    @property
    def macro_precision(self) -> float | None:
        """Mean per-answer citation precision."""
        return _mean(a.citation_precision for a in self.answers)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable report."""
        scores = self._scores(
            macro_recall=self.macro_recall,
            macro_precision=self.macro_precision,
            num_answers=len(self.answers),
        )
        return {
            **scores,
            "judge": None if self.judge is None else self.judge.to_dict(),
            "errors": [str(e) for e in self.errors],
            "answers": [a.to_dict() for a in self.answers],
        }


class EvaluationOptions(TypedDict, total=False):
    """The keyword options of :func:`evaluate_answers` and :func:`aevaluate_answers`.

    Attributes:
        is_worthy: Which sentences to check (default:
            :func:`~langchain_references.citations.sentences.is_verification_worthy`; ignored
            when a verifier is given).
        max_concurrency: Limit of parallel judge calls (ignored when a verifier is given; the
            config's ``max_concurrency`` wins).
        config: Runnable config for the judge calls.
    """

    is_worthy: WorthyPredicate
    max_concurrency: int | None
    config: RunnableConfig | None


@dataclass(frozen=True)
class _Evaluation:
    """What an evaluation judges and how its verdicts become the report (sans-IO).

    Attributes:
        verifier: The verifier that checks :attr:`items`.
        config: The runnable config of the judge calls.
        records: The records that could be read.
        errors: The records that could not.
        sentences: The sentences of each record, in order.
        items: Every sentence with the documents of its record, answer by answer.
    """

    verifier: CitationVerifier
    config: RunnableConfig | None
    records: tuple[AnswerRecord, ...]
    errors: tuple[RecordError, ...]
    sentences: tuple[tuple[CitedSentence, ...], ...]
    items: tuple[tuple[CitedSentence, Mapping[int, PassageLike]], ...]

    @classmethod
    def of(
        cls,
        records: Iterable[AnswerRecord | Mapping[str, Any]],
        judge: Runnable[JudgeInputLike, Judgement] | CitationVerifier,
        *,
        is_worthy: WorthyPredicate = is_verification_worthy,
        max_concurrency: int | None = None,
        config: RunnableConfig | None = None,
    ) -> _Evaluation:
        verifier = (
            judge
            if isinstance(judge, CitationVerifier)
            else CitationVerifier(judge, is_worthy=is_worthy, max_concurrency=max_concurrency)
        )
        parsed, errors = _parse(records)
        sentences = tuple(tuple(split_cited_sentences(r.answer)) for r in parsed)
        items = tuple(
            (sentence, record.passages_by_id)
            for record, answer_sentences in zip(parsed, sentences, strict=True)
            for sentence in answer_sentences
        )
        return cls(verifier, config, tuple(parsed), tuple(errors), sentences, items)

    def report(self, verdicts: Sequence[SentenceVerdict]) -> CitationReport:
        """Group the verdicts of :attr:`items` (in order) by answer."""
        answers: list[AnswerReport] = []
        position = 0
        for i, (record, answer_sentences) in enumerate(
            zip(self.records, self.sentences, strict=True)
        ):
            n = len(answer_sentences)
            chunk = tuple(verdicts[position : position + n])
            answers.append(AnswerReport(i, record.question, record.location, chunk))
            position += n
        return CitationReport(tuple(answers), self.errors)


def _parse(
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


def evaluate_answers(
    records: Iterable[AnswerRecord | Mapping[str, Any]],
    judge: Runnable[JudgeInputLike, Judgement] | CitationVerifier,
    **options: Unpack[EvaluationOptions],
) -> CitationReport:
    """Citation recall and precision of cited answers.

    Args:
        records: :class:`AnswerRecord` objects or dicts in the documented format; a malformed
            dict is recorded in :attr:`CitationReport.errors` and skipped.
        judge: A judge, or a configured :class:`CitationVerifier`.
        **options: ``is_worthy``, ``max_concurrency`` and ``config``
            (see :class:`EvaluationOptions`).

    Returns:
        The report.
    """
    evaluation = _Evaluation.of(records, judge, **options)
    verdicts = evaluation.verifier.verify_many(evaluation.items, config=evaluation.config)
    return evaluation.report(verdicts)


async def aevaluate_answers(
    records: Iterable[AnswerRecord | Mapping[str, Any]],
    judge: Runnable[JudgeInputLike, Judgement] | CitationVerifier,
    **options: Unpack[EvaluationOptions],
) -> CitationReport:
    """Async :func:`evaluate_answers` (the judge's ``abatch``); same arguments and result."""
    evaluation = _Evaluation.of(records, judge, **options)
    verdicts = await evaluation.verifier.averify_many(evaluation.items, config=evaluation.config)
    return evaluation.report(verdicts)
