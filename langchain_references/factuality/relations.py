"""Judge the atom <-> context (and context <-> context) pairs of a FactReasoner graph.

:func:`~langchain_references.factuality.model.candidate_pairs` says which pairs a graph
version needs: FR1 each atom with its own contexts, FR2 every atom with every de-duplicated
context, FR3 the same plus both directions of every context pair. Each pair is judged by any
:class:`~langchain_references.judges.Judge` (the context is the premise, the atom,
or the second context, the hypothesis), all pairs in one ``batch`` / ``abatch`` call limited by
``max_concurrency``.

A :class:`~langchain_references.judges.Judgement` becomes a
:class:`~langchain_references.factuality.model.Relation` (:func:`judgement_to_relation`):
``entails`` -> ``entailment``, ``contradicts`` -> ``contradiction``, ``unknown`` -> ``neutral``,
with probability ``judgement.probabilities[label]`` when the judge gives per-label
probabilities (e.g. an NLI model's softmax) and ``judgement.confidence`` otherwise.

A judgement that gives its own label no better than even odds (probability at most
:data:`MIN_EVIDENCE`, 0.5) becomes ``neutral``: it says little, and FactReasoner's tables
would read it as evidence *against* its label (an entailment at 0.2 is the factor
``P(atom | context true) = [0.8, 0.2]``, 4:1 that the atom is false; a contradiction at 0.3
is 7:3 that it is true). With 50 such contexts per atom in FR2 an uninformative judge (the
offline heuristic, whose calibrated confidence is mostly 0.1-0.4) made every atom certainly
false. At the default atom prior 0.5 the tables of an entailment or contradiction at 0.5 are
uniform, so the cut is continuous there. Neutral relations carry no factor; they are kept
in the result because FactReasoner's FR3 reconciliation of the two directions of a context
pair compares them with the other direction. A failed judgement (``error`` set) gives no
relation and is counted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from langchain_core.runnables import Runnable, RunnableConfig

from langchain_references.citations.verifier import runnable_judge
from langchain_references.factuality.model import (
    Atom,
    Context,
    GraphVersion,
    Relation,
    RelationKind,
    candidate_pairs,
)
from langchain_references.judges.base import JudgeInputLike, Judgement, Label, paired_outputs
from langchain_references.services._concurrency import check_concurrency, with_default_concurrency

__all__ = [
    "MIN_EVIDENCE",
    "JudgedPair",
    "RelationJudge",
    "RelationResult",
    "judgement_to_relation",
    "normalize_version",
]

logger = logging.getLogger(__name__)

MIN_EVIDENCE: Final = 0.5
"""A judgement whose probability of its own label is at most this becomes ``neutral``."""

_KIND: Final[dict[Label, RelationKind]] = {
    Label.ENTAILS: "entailment",
    Label.CONTRADICTS: "contradiction",
    Label.UNKNOWN: "neutral",
}


def normalize_version(version: int | str) -> GraphVersion:
    """Accept ``1``/``2``/``3``, ``"1"``... or ``"FR1"``/``"fr2"``... as a graph version.

    Args:
        version: The version.

    Returns:
        ``"FR1"``, ``"FR2"`` or ``"FR3"``.

    Raises:
        ValueError: On anything else.
    """
    text = str(version).strip().upper() if not isinstance(version, bool) else ""
    text = text.removeprefix("FR")
    if text == "1":
        return "FR1"
    if text == "2":
        return "FR2"
    if text == "3":
        return "FR3"
    raise ValueError(f"version must be 1, 2 or 3 (or 'FR1'...'FR3'), got {version!r}")


def judgement_to_relation(source: str, target: str, judgement: Judgement) -> Relation | None:
    """Turn a judgement of ``source`` (premise) -> ``target`` (hypothesis) into a relation.

    Args:
        source: Premise id (a context).
        target: Hypothesis id (an atom or a context).
        judgement: The judge's answer.

    Returns:
        The relation (``neutral`` for ``unknown`` and for a label given at most
        :data:`MIN_EVIDENCE`, with the judge's probability), or ``None`` if the judgement
        failed.
    """
    if not judgement.ok:
        return None
    probabilities = judgement.probabilities or {}
    probability = probabilities.get(judgement.label, judgement.confidence)
    kind = _KIND[judgement.label] if probability > MIN_EVIDENCE else "neutral"
    return Relation(source, target, kind, probability)


@dataclass(frozen=True, slots=True)
class JudgedPair:
    """One judged pair.

    Attributes:
        source: Premise id.
        target: Hypothesis id.
        judgement: The judgement.
    """

    source: str
    target: str
    judgement: Judgement


@dataclass(frozen=True)
class RelationResult:
    """Relations judged for a graph.

    Attributes:
        relations: One relation per successful judgement (neutral ones included).
        pairs: Every judged pair with its judgement, in :func:`candidate_pairs` order.
        failures: The judged pairs whose judgement failed.
        skipped: Pairs not sent to the judge because a text is blank.
    """

    relations: tuple[Relation, ...]
    pairs: tuple[JudgedPair, ...] = ()
    failures: tuple[JudgedPair, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()


@dataclass
class _Plan:
    """The judge requests for a graph, and how their outputs become a :class:`RelationResult`.

    :meth:`RelationJudge.judge_pairs` and :meth:`RelationJudge.ajudge_pairs` share it and
    differ only in ``batch`` / ``abatch`` (no pairs: an empty batch, no judge call).

    Attributes:
        config: The config of the batch (with the judge's default ``max_concurrency``).
        judged: The ``(premise_id, hypothesis_id)`` pairs sent to the judge.
        inputs: Their judge inputs, in the same order.
        skipped: Pairs not sent because a text is blank.
    """

    config: RunnableConfig
    judged: list[tuple[str, str]] = field(default_factory=list)
    inputs: list[JudgeInputLike] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def result(self, outputs: Sequence[object]) -> RelationResult:
        """Turn the judge outputs (one per input, exceptions included) into the result.

        An interrupt among them (Ctrl-C, cancellation) is raised, never recorded as a failure.
        """
        pairs: list[JudgedPair] = []
        relations: list[Relation] = []
        failures: list[JudgedPair] = []
        for (source, target), output in paired_outputs(self.judged, outputs):
            if isinstance(output, Judgement):
                judgement = output
            elif isinstance(output, Exception):
                judgement = Judgement.failed(f"{type(output).__name__}: {output}")
            else:
                judgement = Judgement.failed(f"judge returned {type(output).__name__}")
            pair = JudgedPair(source, target, judgement)
            pairs.append(pair)
            relation = judgement_to_relation(source, target, judgement)
            if relation is None:
                failures.append(pair)
            else:
                relations.append(relation)
        if failures:
            logger.warning("%d of %d judgement(s) failed", len(failures), len(pairs))
        return RelationResult(tuple(relations), tuple(pairs), tuple(failures), tuple(self.skipped))


class RelationJudge:
    """Judge the pairs a FactReasoner graph version needs (see module docstring).

    Args:
        judge: Any judge runnable (``{"statement", "passage"} -> Judgement``).
        version: Graph version: 1, 2, 3 or ``"FR1"``... (FactReasoner's default is 2).
        top_k: FR1 only: how many of each atom's contexts to judge.
        max_concurrency: Parallel judge calls (unless the config sets ``max_concurrency``).
        include_title: Put the context's title on the first line of the premise (when the
            text does not already start with it).

    Raises:
        TypeError: If ``judge`` is not a Runnable.
        ValueError: On a bad version, ``top_k`` or ``max_concurrency``.
    """

    def __init__(
        self,
        judge: Runnable[JudgeInputLike, Judgement],
        *,
        version: int | str = 2,
        top_k: int | None = None,
        max_concurrency: int | None = None,
        include_title: bool = True,
    ) -> None:
        self.judge = runnable_judge(judge)
        self.version = normalize_version(version)
        candidate_pairs([], [], version=self.version, top_k=top_k)  # validates top_k
        self.top_k = top_k
        self.max_concurrency = check_concurrency(max_concurrency)
        self.include_title = include_title

    def pairs(self, atoms: Sequence[Atom], contexts: Sequence[Context]) -> list[tuple[str, str]]:
        """The ``(premise_id, hypothesis_id)`` pairs to judge.

        Args:
            atoms: The atoms.
            contexts: The contexts.

        Returns:
            The pairs of :func:`candidate_pairs` for this version.
        """
        return candidate_pairs(atoms, contexts, version=self.version, top_k=self.top_k)

    def _text(self, item: Atom | Context) -> str:
        if isinstance(item, Atom):
            return item.text
        title, text = item.title.strip(), item.text
        if self.include_title and title and not text.lstrip().lower().startswith(title.lower()):
            return f"{title}\n{text}"
        return text

    def _plan(
        self, atoms: Sequence[Atom], contexts: Sequence[Context], config: RunnableConfig | None
    ) -> _Plan:
        items: dict[str, Atom | Context] = {a.id: a for a in atoms}
        items.update((c.id, c) for c in contexts)
        plan = _Plan(with_default_concurrency(config, self.max_concurrency))
        for source, target in self.pairs(atoms, contexts):
            premise, hypothesis = self._text(items[source]), self._text(items[target])
            if not premise.strip() or not hypothesis.strip():
                plan.skipped.append((source, target))
                continue
            plan.judged.append((source, target))
            plan.inputs.append({"statement": hypothesis, "passage": premise})
        if plan.skipped:
            logger.info("%d pair(s) with a blank text were not judged", len(plan.skipped))
        return plan

    def judge_pairs(
        self,
        atoms: Sequence[Atom],
        contexts: Sequence[Context],
        *,
        config: RunnableConfig | None = None,
    ) -> RelationResult:
        """Judge every pair the graph version needs, in one batch.

        Args:
            atoms: The atoms (with their context ids for FR1).
            contexts: The contexts.
            config: Runnable config of the judge calls.

        Returns:
            Relations, judged pairs and failures.

        Raises:
            ValueError: If the atoms and contexts are inconsistent (unknown ids...).
        """
        plan = self._plan(atoms, contexts, config)
        return plan.result(self.judge.batch(plan.inputs, plan.config, return_exceptions=True))

    async def ajudge_pairs(
        self,
        atoms: Sequence[Atom],
        contexts: Sequence[Context],
        *,
        config: RunnableConfig | None = None,
    ) -> RelationResult:
        """Async :meth:`judge_pairs` (the judge's ``abatch``): same arguments, result and errors."""
        plan = self._plan(atoms, contexts, config)
        outputs = await self.judge.abatch(plan.inputs, plan.config, return_exceptions=True)
        return plan.result(outputs)
