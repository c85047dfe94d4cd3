"""Citation recall and precision of cited answers, after Liu et al. (2023).

Liu, Zhang and Liang, "Evaluating Verifiability in Generative Search Engines" (Findings of
EMNLP 2023, arXiv:2304.09848) audit answers whose sentences carry citations:

* **citation recall** is the share of *verification-worthy* sentences that are *fully
  supported* by their citations taken together; a sentence without citations is not
  supported;
* **citation precision** is the share of citations that *support* their sentence. Their
  annotators rated each citation as fully, partially or not supporting; a citation counts
  when it fully supports the sentence, or partially supports it while the sentence is fully
  supported by its citations together.

Here a :class:`~langchain_references.factcheck.judges.Judge` replaces the annotators
(``entails`` = full support), with the leave-one-out test of ALCE (Gao et al., 2023) standing
in for "partial support":

1. each cited document is judged alone (premise = document text, hypothesis = sentence);
2. when a sentence cites two or more documents, their concatenation is judged too;
3. the sentence is **supported** if a document alone or the concatenation entails it;
4. a citation is **precise** if its document alone entails the sentence, or if the
   concatenation entails it and the other citations without this one do not (the citation
   is needed for the full support); a citation the others make redundant, or whose
   sentence is not supported, is imprecise;
5. a citation of a document that was not provided (``id`` out of range) is imprecise, and
   the sentence is judged on the documents that exist;
6. only verification-worthy sentences are scored (by default: at least four words and not
   a question, see
   :func:`~langchain_references.factuality.sentences.is_verification_worthy`), for recall
   and precision alike, as in the paper; a citation repeated within a sentence counts once;
7. a failed judgement (``error`` set) counts as "does not support" and is counted in
   ``failed_judgements``.

:class:`CitationVerifier` checks one sentence (``verify`` / native async ``averify``) or many
at once, batching all judge calls; :func:`evaluate_answers` scores whole answers.

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
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_references.factcheck.judges.base import JudgeInputLike, Judgement, Label
from langchain_references.factuality.io import FactualityFormatError, iter_json_objects
from langchain_references.factuality.sentences import (
    CitedSentence,
    is_verification_worthy,
    split_cited_sentences,
)

__all__ = [
    "AnswerRecord",
    "AnswerReport",
    "CitationRecordError",
    "CitationReport",
    "CitationVerdict",
    "CitationVerifier",
    "SentenceVerdict",
    "aevaluate_answers",
    "evaluate_answers",
    "load_answer_records",
    "parse_answer_record",
]

logger = logging.getLogger(__name__)

#: Separator between documents in the concatenated premise.
DEFAULT_SEPARATOR: Final = "\n\n"

_Key = tuple[int, ...]
_Pair = tuple[str, str]
WorthyPredicate = Callable[[CitedSentence], bool]
PassageLike = str | Document


@dataclass(frozen=True, slots=True)
class CitationVerdict:
    """Whether one citation of a sentence supports it.

    Attributes:
        doc_id: The cited document id.
        precise: Whether the citation counts as supporting (see module docstring).
        alone: The judgement of the document alone, or ``None`` if the document is missing.
        needed: For a citation that does not entail alone while the sentence is supported
            by the concatenation: whether the other citations without it fail to support
            the sentence. ``None`` when not tested.
        reason: A short human-readable reason.
    """

    doc_id: int
    precise: bool
    alone: Judgement | None
    needed: bool | None
    reason: str

    @property
    def contradicts(self) -> bool:
        """Whether the document alone contradicts the sentence."""
        return self.alone is not None and self.alone.ok and self.alone.label is Label.CONTRADICTS

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary."""
        return {
            "doc_id": self.doc_id,
            "precise": self.precise,
            "label": None if self.alone is None else self.alone.label.value,
            "confidence": None if self.alone is None else self.alone.confidence,
            "needed": self.needed,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class SentenceVerdict:
    """The verification of one sentence and its citations.

    Attributes:
        sentence: The sentence.
        verification_worthy: Whether it was checked; unworthy sentences are not judged.
        supported: Whether its citations fully support it (``None`` if not checked).
        joint: Judgement of the concatenated documents (two or more cited documents).
        citations: One verdict per distinct cited document id (empty if not checked).
        missing_doc_ids: Cited ids with no document.
    """

    sentence: CitedSentence
    verification_worthy: bool
    supported: bool | None
    joint: Judgement | None = None
    citations: tuple[CitationVerdict, ...] = ()
    missing_doc_ids: tuple[int, ...] = ()

    @property
    def n_precise(self) -> int:
        """Number of precise citations."""
        return sum(1 for c in self.citations if c.precise)

    @property
    def failed_judgements(self) -> int:
        """Number of judgements of this sentence that failed."""
        judgements = [c.alone for c in self.citations] + [self.joint]
        return sum(1 for j in judgements if j is not None and not j.ok)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary."""
        return {
            "index": self.sentence.index,
            "text": self.sentence.text,
            "doc_ids": list(self.sentence.doc_ids),
            "verification_worthy": self.verification_worthy,
            "supported": self.supported,
            "joint_label": None if self.joint is None else self.joint.label.value,
            "citations": [c.to_dict() for c in self.citations],
            "missing_doc_ids": list(self.missing_doc_ids),
        }


def _entails(judgement: Judgement | None) -> bool:
    return judgement is not None and judgement.ok and judgement.label is Label.ENTAILS


def _passage_text(value: PassageLike) -> str:
    if isinstance(value, Document):
        return value.page_content
    if isinstance(value, str):
        return value
    raise TypeError(f"passages must be str or Document, not {type(value).__name__}")


@dataclass
class _Plan:
    """Judge calls needed for one sentence and their results (internal, mutable)."""

    sentence: CitedSentence
    worthy: bool
    texts: dict[int, str]
    separator: str
    results: dict[_Key, Judgement] = field(default_factory=dict)

    @property
    def available(self) -> _Key:
        return tuple(d for d in self.sentence.doc_ids if d in self.texts)

    def pair(self, key: _Key) -> _Pair:
        return self.sentence.text, self.separator.join(self.texts[d] for d in key)

    def first_requests(self) -> list[_Key]:
        if not self.worthy:
            return []
        keys: list[_Key] = [(d,) for d in self.available]
        if len(self.available) >= 2:
            keys.append(self.available)
        return keys

    def _rest(self, doc_id: int) -> _Key:
        return tuple(d for d in self.available if d != doc_id)

    def second_requests(self) -> list[_Key]:
        if not self.worthy or len(self.available) < 2 or not _entails(self.results[self.available]):
            return []
        return [
            self._rest(d)
            for d in self.available
            if not _entails(self.results[(d,)]) and len(self._rest(d)) >= 2
        ]

    def verdict(self) -> SentenceVerdict:
        missing = tuple(d for d in self.sentence.doc_ids if d not in self.texts)
        if not self.worthy:
            return SentenceVerdict(self.sentence, False, None, missing_doc_ids=missing)
        available = self.available
        joint = self.results.get(available) if len(available) >= 2 else None
        singles = {d: self.results[(d,)] for d in available}
        supported = _entails(joint) or any(_entails(j) for j in singles.values())
        verdicts = [self._citation(d, singles.get(d), joint) for d in self.sentence.doc_ids]
        return SentenceVerdict(self.sentence, True, supported, joint, tuple(verdicts), missing)

    def _citation(
        self, doc_id: int, alone: Judgement | None, joint: Judgement | None
    ) -> CitationVerdict:
        if alone is None:
            return CitationVerdict(doc_id, False, None, None, f"no document with id={doc_id}")
        if _entails(alone):
            return CitationVerdict(doc_id, True, alone, None, "fully supports the sentence")
        if _entails(joint):
            needed = not _entails(self.results[self._rest(doc_id)])
            reason = (
                "partially supports: needed for the full support by the cited documents"
                if needed
                else "redundant: the other citations support the sentence without it"
            )
            return CitationVerdict(doc_id, needed, alone, needed, reason)
        if not alone.ok:
            return CitationVerdict(doc_id, False, alone, None, f"judge failed: {alone.error}")
        if alone.label is Label.CONTRADICTS:
            return CitationVerdict(doc_id, False, alone, None, "contradicts the sentence")
        return CitationVerdict(doc_id, False, alone, None, "does not support the sentence")


def _protocol(plans: Sequence[_Plan]) -> Generator[list[_Pair], list[Judgement], None]:
    """Yield the (statement, passage) pairs to judge, phase by phase; receive judgements."""
    for phase in ("first", "second"):
        wanted: list[tuple[_Plan, _Key, _Pair]] = []
        for plan in plans:
            keys = plan.first_requests() if phase == "first" else plan.second_requests()
            wanted.extend((plan, key, plan.pair(key)) for key in keys)
        if not wanted:
            continue
        unique = list(dict.fromkeys(pair for _, _, pair in wanted))
        judged = yield unique
        if len(judged) != len(unique):
            raise ValueError(f"got {len(judged)} judgements for {len(unique)} pairs")
        lookup = dict(zip(unique, judged, strict=True))
        for plan, key, pair in wanted:
            plan.results[key] = lookup[pair]


class CitationVerifier:
    """Check that the citations of sentences support them, with any judge.

    Args:
        judge: A judge runnable (``{"statement", "passage"} -> Judgement``), e.g.
            :class:`~langchain_references.factcheck.judges.LLMJudge`.
        is_worthy: Which sentences to check (default:
            :func:`~langchain_references.factuality.sentences.is_verification_worthy`).
        max_concurrency: Limit of parallel judge calls (unless the config sets one).
        separator: Text between documents in the concatenated premise.

    Example:
        >>> from langchain_references.factuality.sentences import split_cited_sentences
        >>> verifier = CitationVerifier(judge)  # doctest: +SKIP
        >>> (sentence,) = split_cited_sentences("Seattle is in Washington [1](id=1).")
        >>> verifier.verify(sentence, {1: "Seattle is a city in Washington."})  # doctest: +SKIP
    """

    def __init__(
        self,
        judge: Runnable[JudgeInputLike, Judgement],
        *,
        is_worthy: WorthyPredicate = is_verification_worthy,
        max_concurrency: int | None = None,
        separator: str = DEFAULT_SEPARATOR,
    ) -> None:
        if not isinstance(judge, Runnable):
            raise TypeError(f"judge must be a Runnable judge, not {type(judge).__name__}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.judge = judge
        self.is_worthy = is_worthy
        self.max_concurrency = max_concurrency
        self.separator = separator

    # ------------------------------------------------------------------ public API

    def verify(
        self,
        sentence: CitedSentence,
        passages_by_id: Mapping[int, PassageLike],
        *,
        config: RunnableConfig | None = None,
    ) -> SentenceVerdict:
        """Check one sentence against the documents it cites.

        Args:
            sentence: The sentence (from
                :class:`~langchain_references.factuality.sentences.SentenceCitationTracker`).
            passages_by_id: Document text (or ``Document``) by id.
            config: Runnable config for the judge calls.

        Returns:
            The verdict.
        """
        return self.verify_many([(sentence, passages_by_id)], config=config)[0]

    async def averify(
        self,
        sentence: CitedSentence,
        passages_by_id: Mapping[int, PassageLike],
        *,
        config: RunnableConfig | None = None,
    ) -> SentenceVerdict:
        """Async :meth:`verify` (uses the judge's ``abatch``).

        Args:
            sentence: The sentence.
            passages_by_id: Document text (or ``Document``) by id.
            config: Runnable config for the judge calls.

        Returns:
            The verdict.
        """
        return (await self.averify_many([(sentence, passages_by_id)], config=config))[0]

    def verify_many(
        self,
        items: Sequence[tuple[CitedSentence, Mapping[int, PassageLike]]],
        *,
        config: RunnableConfig | None = None,
    ) -> list[SentenceVerdict]:
        """Check many sentences with one batch of judge calls per phase.

        Args:
            items: ``(sentence, passages_by_id)`` pairs.
            config: Runnable config for the judge calls.

        Returns:
            One verdict per item, in order.
        """
        plans = self._plans(items)
        steps = _protocol(plans)
        try:
            pairs = next(steps)
            while True:
                pairs = steps.send(self._judge(pairs, config))
        except StopIteration:
            pass
        return [plan.verdict() for plan in plans]

    async def averify_many(
        self,
        items: Sequence[tuple[CitedSentence, Mapping[int, PassageLike]]],
        *,
        config: RunnableConfig | None = None,
    ) -> list[SentenceVerdict]:
        """Async :meth:`verify_many`.

        Args:
            items: ``(sentence, passages_by_id)`` pairs.
            config: Runnable config for the judge calls.

        Returns:
            One verdict per item, in order.
        """
        plans = self._plans(items)
        steps = _protocol(plans)
        try:
            pairs = next(steps)
            while True:
                pairs = steps.send(await self._ajudge(pairs, config))
        except StopIteration:
            pass
        return [plan.verdict() for plan in plans]

    # ------------------------------------------------------------------ internals

    def _plans(
        self, items: Sequence[tuple[CitedSentence, Mapping[int, PassageLike]]]
    ) -> list[_Plan]:
        plans: list[_Plan] = []
        for sentence, passages in items:
            if not isinstance(sentence, CitedSentence):
                raise TypeError(f"expected a CitedSentence, not {type(sentence).__name__}")
            texts = {d: _passage_text(passages[d]) for d in sentence.doc_ids if d in passages}
            worthy = bool(sentence.text.strip()) and self.is_worthy(sentence)
            plans.append(_Plan(sentence, worthy, texts, self.separator))
        return plans

    def _config(self, config: RunnableConfig | None) -> RunnableConfig:
        merged: RunnableConfig = {**(config or {})}
        if self.max_concurrency is not None and "max_concurrency" not in merged:
            merged["max_concurrency"] = self.max_concurrency
        return merged

    @staticmethod
    def _inputs(pairs: Sequence[_Pair]) -> list[JudgeInputLike]:
        return [{"statement": s, "passage": p} for s, p in pairs]

    @staticmethod
    def _judgements(outputs: Sequence[object]) -> list[Judgement]:
        out: list[Judgement] = []
        for value in outputs:
            if isinstance(value, Judgement):
                out.append(value)
            elif isinstance(value, Exception):
                logger.warning("judge raised %s: %s", type(value).__name__, value)
                out.append(Judgement.failed(f"{type(value).__name__}: {value}"))
            else:
                out.append(Judgement.failed(f"judge returned {type(value).__name__}"))
        return out

    def _judge(self, pairs: Sequence[_Pair], config: RunnableConfig | None) -> list[Judgement]:
        outputs = self.judge.batch(
            self._inputs(pairs), self._config(config), return_exceptions=True
        )
        return self._judgements(outputs)

    async def _ajudge(
        self, pairs: Sequence[_Pair], config: RunnableConfig | None
    ) -> list[Judgement]:
        outputs = await self.judge.abatch(
            self._inputs(pairs), self._config(config), return_exceptions=True
        )
        return self._judgements(outputs)


# ---------------------------------------------------------------------- answers


class CitationRecordError(FactualityFormatError):
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
) -> tuple[list[AnswerRecord], list[CitationRecordError]]:
    """Read answer records from a JSONL file (a JSON list or single object also works).

    Args:
        path: The file.
        strict: Raise on the first bad record instead of collecting it.

    Returns:
        The records and the errors of the records that could not be read.

    Raises:
        CitationRecordError: In strict mode, on a bad record; always if the whole file is
            not JSON.
    """
    records: list[AnswerRecord] = []
    errors: list[CitationRecordError] = []
    try:
        for location, value in iter_json_objects(path):
            try:
                if isinstance(value, FactualityFormatError):
                    raise CitationRecordError(str(value)) from value
                records.append(parse_answer_record(value, location=location))
            except CitationRecordError as exc:
                if strict:
                    raise
                logger.warning("skipping answer record: %s", exc)
                errors.append(exc)
    except FactualityFormatError as exc:
        raise CitationRecordError(str(exc)) from exc
    return records, errors


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
    errors: tuple[CitationRecordError, ...] = ()

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
) -> tuple[list[AnswerRecord], list[CitationRecordError]]:
    parsed: list[AnswerRecord] = []
    errors: list[CitationRecordError] = []
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
    errors: Sequence[CitationRecordError],
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
