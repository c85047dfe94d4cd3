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
probabilities (e.g. an NLI model's softmax) and ``judgement.confidence`` otherwise. Neutral
relations carry no factor; they are kept in the result because FactReasoner's FR3
reconciliation of the two directions of a context pair compares them with the other
direction. A failed judgement (``error`` set) gives no relation and is counted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from langchain_core.runnables import Runnable, RunnableConfig

from langchain_references.factuality.model import (
    Atom,
    Context,
    GraphVersion,
    Relation,
    RelationKind,
    candidate_pairs,
)
from langchain_references.judges.base import JudgeInputLike, Judgement, Label

__all__ = [
    "JudgedPair",
    "RelationJudge",
    "RelationResult",
    "judgement_to_relation",
    "normalize_version",
]

logger = logging.getLogger(__name__)

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
        The relation (``neutral`` for ``unknown``), or ``None`` if the judgement failed.
    """
    if not judgement.ok:
        return None
    probabilities = judgement.probabilities or {}
    probability = probabilities.get(judgement.label, judgement.confidence)
    return Relation(source, target, _KIND[judgement.label], probability)


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

    @property
    def n_failed(self) -> int:
        """Number of failed judgements."""
        return len(self.failures)


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
        if not isinstance(judge, Runnable):
            raise TypeError(f"judge must be a Runnable judge, not {type(judge).__name__}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.judge = judge
        self.version = normalize_version(version)
        candidate_pairs([], [], version=self.version, top_k=top_k)  # validates top_k
        self.top_k = top_k
        self.max_concurrency = max_concurrency
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
        self, atoms: Sequence[Atom], contexts: Sequence[Context]
    ) -> tuple[list[tuple[str, str]], list[JudgeInputLike], list[tuple[str, str]]]:
        items: dict[str, Atom | Context] = {a.id: a for a in atoms}
        items.update((c.id, c) for c in contexts)
        judged: list[tuple[str, str]] = []
        inputs: list[JudgeInputLike] = []
        skipped: list[tuple[str, str]] = []
        for source, target in self.pairs(atoms, contexts):
            premise, hypothesis = self._text(items[source]), self._text(items[target])
            if not premise.strip() or not hypothesis.strip():
                skipped.append((source, target))
                continue
            judged.append((source, target))
            inputs.append({"statement": hypothesis, "passage": premise})
        if skipped:
            logger.info("%d pair(s) with a blank text were not judged", len(skipped))
        return judged, inputs, skipped

    def _config(self, config: RunnableConfig | None) -> RunnableConfig:
        merged: RunnableConfig = {**(config or {})}
        if self.max_concurrency is not None and "max_concurrency" not in merged:
            merged["max_concurrency"] = self.max_concurrency
        return merged

    @staticmethod
    def _result(
        judged: Sequence[tuple[str, str]],
        outputs: Sequence[object],
        skipped: Sequence[tuple[str, str]],
    ) -> RelationResult:
        pairs: list[JudgedPair] = []
        relations: list[Relation] = []
        failures: list[JudgedPair] = []
        for (source, target), output in zip(judged, outputs, strict=True):
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
        return RelationResult(tuple(relations), tuple(pairs), tuple(failures), tuple(skipped))

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
        judged, inputs, skipped = self._plan(atoms, contexts)
        outputs: list[object] = (
            list(self.judge.batch(inputs, self._config(config), return_exceptions=True))
            if inputs
            else []
        )
        return self._result(judged, outputs, skipped)

    async def ajudge_pairs(
        self,
        atoms: Sequence[Atom],
        contexts: Sequence[Context],
        *,
        config: RunnableConfig | None = None,
    ) -> RelationResult:
        """Async :meth:`judge_pairs` (the judge's ``abatch``).

        Args:
            atoms: The atoms.
            contexts: The contexts.
            config: Runnable config of the judge calls.

        Returns:
            Relations, judged pairs and failures.
        """
        judged, inputs, skipped = self._plan(atoms, contexts)
        outputs: list[object] = (
            list(await self.judge.abatch(inputs, self._config(config), return_exceptions=True))
            if inputs
            else []
        )
        return self._result(judged, outputs, skipped)
