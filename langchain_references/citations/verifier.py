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

Here a :class:`~langchain_references.judges.Judge` replaces the annotators
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
   :func:`~langchain_references.citations.sentences.is_verification_worthy`), for recall
   and precision alike, as in the paper; a citation repeated within a sentence counts once;
7. a failed judgement (``error`` set) counts as "does not support" and is counted in
   ``failed_judgements``.

:class:`CitationVerifier` checks one sentence (``verify`` / native async ``averify``) or many
at once, batching all judge calls;
:func:`~langchain_references.citations.evaluation.evaluate_answers` scores whole answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_references.citations.sentences import (
    CitedSentence,
    is_verification_worthy,
)
from langchain_references.judges import JudgeInfo, judge_info
from langchain_references.judges.base import JudgeInputLike, Judgement, Label, raise_interrupts
from langchain_references.services._concurrency import check_concurrency, with_default_concurrency

__all__ = ["CitationVerdict", "CitationVerifier", "SentenceVerdict"]

logger = logging.getLogger(__name__)

#: Separator between documents in the concatenated premise.
DEFAULT_SEPARATOR: Final = "\n\n"

_Key = tuple[int, ...]
_Pair = tuple[str, str]
WorthyPredicate = Callable[[CitedSentence], bool]
PassageLike = str | Document


def runnable_judge(judge: object) -> Runnable[JudgeInputLike, Judgement]:
    """Check that the judge given to a checker is a runnable (the citation and atom checkers).

    Args:
        judge: The judge (any ``Runnable[{"statement", "passage"}, Judgement]``).

    Returns:
        ``judge``, typed as a judge runnable.

    Raises:
        TypeError: If ``judge`` is not a ``Runnable``.
    """
    if not isinstance(judge, Runnable):
        raise TypeError(f"judge must be a Runnable judge, not {type(judge).__name__}")
    return judge


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
        judge: Which judge the verifier ran (kind, model, description).
    """

    sentence: CitedSentence
    verification_worthy: bool
    supported: bool | None
    joint: Judgement | None = None
    citations: tuple[CitationVerdict, ...] = ()
    missing_doc_ids: tuple[int, ...] = ()
    judge: JudgeInfo | None = None

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
            "judge": None if self.judge is None else self.judge.to_dict(),
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
    judge: JudgeInfo | None = None
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
            return SentenceVerdict(
                self.sentence, False, None, missing_doc_ids=missing, judge=self.judge
            )
        available = self.available
        joint = self.results.get(available) if len(available) >= 2 else None
        singles = {d: self.results[(d,)] for d in available}
        supported = _entails(joint) or any(_entails(j) for j in singles.values())
        verdicts = [self._citation(d, singles.get(d), joint) for d in self.sentence.doc_ids]
        return SentenceVerdict(
            self.sentence, True, supported, joint, tuple(verdicts), missing, self.judge
        )

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


@dataclass
class _Batch:
    """One batch of judge calls requested by :func:`_protocol`; its driver sets ``outputs``.

    Attributes:
        pairs: The distinct ``(statement, passage)`` pairs to judge.
        outputs: What the judge's ``batch`` / ``abatch`` returned for :attr:`inputs` (with
            ``return_exceptions=True``), set by the driver before resuming the protocol.
    """

    pairs: list[_Pair]
    outputs: Sequence[object] | None = None

    @property
    def inputs(self) -> list[JudgeInputLike]:
        """The judge inputs, one per pair."""
        return [{"statement": s, "passage": p} for s, p in self.pairs]

    def judgements(self) -> list[Judgement]:
        """The outputs as judgements: an exception or a non-judgement becomes a failed one."""
        if self.outputs is None:
            raise RuntimeError("the protocol was resumed before its batch was judged")
        if len(self.outputs) != len(self.pairs):
            raise ValueError(f"got {len(self.outputs)} judgements for {len(self.pairs)} pairs")
        raise_interrupts(self.outputs)  # Ctrl-C or a cancellation stops: not a failure
        return [_judgement(value) for value in self.outputs]


def _judgement(value: object) -> Judgement:
    if isinstance(value, Judgement):
        return value
    if isinstance(value, Exception):
        logger.warning("judge raised %s: %s", type(value).__name__, value)
        return Judgement.failed(f"{type(value).__name__}: {value}")
    return Judgement.failed(f"judge returned {type(value).__name__}")


def _protocol(plans: Sequence[_Plan]) -> Iterator[_Batch]:
    """The judge calls of a check, phase by phase (sans-IO).

    Yields one :class:`_Batch` per phase that needs judge calls; the driver judges it (sets
    its ``outputs``) before asking for the next one, and the results are stored in the plans.
    """
    for phase in ("first", "second"):
        wanted: list[tuple[_Plan, _Key, _Pair]] = []
        for plan in plans:
            keys = plan.first_requests() if phase == "first" else plan.second_requests()
            wanted.extend((plan, key, plan.pair(key)) for key in keys)
        if not wanted:
            continue
        batch = _Batch(list(dict.fromkeys(pair for _, _, pair in wanted)))
        yield batch
        lookup = dict(zip(batch.pairs, batch.judgements(), strict=True))
        for plan, key, pair in wanted:
            plan.results[key] = lookup[pair]


class CitationVerifier:
    """Check that the citations of sentences support them, with any judge.

    Args:
        judge: A judge runnable (``{"statement", "passage"} -> Judgement``), e.g.
            :class:`~langchain_references.judges.LLMJudge`.
        is_worthy: Which sentences to check (default:
            :func:`~langchain_references.citations.sentences.is_verification_worthy`).
        max_concurrency: Limit of parallel judge calls (unless the config sets one).
        separator: Text between documents in the concatenated premise.

    Attributes:
        info: Which judge it runs (:func:`~langchain_references.judges.base.judge_info`),
            named by every :class:`SentenceVerdict`.

    Examples:
        >>> from langchain_references.citations.sentences import split_cited_sentences
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
        self.judge = runnable_judge(judge)
        self.info = judge_info(judge)
        self.is_worthy = is_worthy
        self.max_concurrency = check_concurrency(max_concurrency)
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
                :class:`~langchain_references.citations.sentences.SentenceCitationTracker`).
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
        """Async :meth:`verify` (the judge's ``abatch``); same arguments and result."""
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
            config: Runnable config for the judge calls; its ``max_concurrency`` wins over
                the verifier's.

        Returns:
            One verdict per item, in order.
        """
        plans = self._plans(items)
        merged = with_default_concurrency(config, self.max_concurrency)
        for batch in _protocol(plans):
            batch.outputs = self.judge.batch(batch.inputs, merged, return_exceptions=True)
        return [plan.verdict() for plan in plans]

    async def averify_many(
        self,
        items: Sequence[tuple[CitedSentence, Mapping[int, PassageLike]]],
        *,
        config: RunnableConfig | None = None,
    ) -> list[SentenceVerdict]:
        """Async :meth:`verify_many` (the judge's ``abatch``); same arguments and result."""
        plans = self._plans(items)
        merged = with_default_concurrency(config, self.max_concurrency)
        for batch in _protocol(plans):
            batch.outputs = await self.judge.abatch(batch.inputs, merged, return_exceptions=True)
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
            plans.append(_Plan(sentence, worthy, texts, self.separator, self.info))
        return plans
