"""Read and write FactReasoner's input and result files.

Input (README "Input Format", ``from_dict_with_contexts`` in IBM FactReasoner's
``src/fact_reasoner/assessor.py``)::

    {"input": str, "output": str, "topic": str,
     "atoms": [{"id", "text", "original", "label": "S"|"NS", "contexts": [context ids]}],
     "contexts": [{"id", "title", "text", "snippet", "link"}]}

Other top-level keys (e.g. ``"cat"`` in the Flaherty example) are kept in
:attr:`FactualityInput.extra` and written back. A file may hold one JSON object, a JSON
list of objects, or JSON Lines.

Results (``FactReasoner.score``): ``factuality_score``, ``factuality_score_per_atom``,
``recall_k``, ``f1_k``, ``num_atoms``, ``num_contexts``, ``num_true_atoms``,
``num_false_atoms``, ``num_uniform_atoms``, ``entropy``, ``norm_entropy``,
``avg_entropy``, ``avg_norm_entropy``, ``avg_prob``, ``avg_logprob``, ``avg_explogprob``,
``marginals: [{"variable": atom_id, "probabilities": [P(false), P(true)]}]`` (atoms only),
``predictions: {atom_id: "S"|"NS"}`` and, with gold labels, ``gold_factuality_score``,
``gold_true_atoms``, ``true_positive``, ``true_negative``, ``false_positive``,
``false_negative``, ``references: {atom_id: label}``, ``avg_brier``; plus ``topic``,
``query``, ``response`` when the input record is given, and ``k`` (the K of F1@K). Older
FactReasoner versions wrote ``predictions``/``references`` as a string
``" a0: S a1: NS"``; :func:`parse_result` reads both shapes.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_references.errors import RecordError
from langchain_references.factuality.metrics import (
    FactualityScores,
    GoldComparison,
    PredictedLabel,
    f1_at_k,
)
from langchain_references.factuality.model import Atom, Context, _check_inputs
from langchain_references.loading import LoadResult, load_records

logger = logging.getLogger(__name__)

_INPUT_KEYS = frozenset({"input", "output", "topic", "atoms", "contexts"})
_LABEL_PAIR = re.compile(r"(\S+):\s*(NS|S)\b")


class FactualityFormatError(RecordError):
    """A record does not follow the FactReasoner format (``location``: e.g. ``"data.jsonl:3"``)."""


@dataclass(frozen=True)
class FactualityInput:
    """One response to assess, with its atoms and retrieved contexts.

    Attributes:
        input: The user query.
        output: The LLM response.
        topic: The topic, if given.
        atoms: The atoms, in file order.
        contexts: The contexts, in file order.
        extra: Any other top-level keys, kept verbatim.
    """

    input: str
    output: str
    topic: str | None
    atoms: tuple[Atom, ...]
    contexts: tuple[Context, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str | None]:
        """Gold label (``"S"``, ``"NS"`` or ``None``) per atom id."""
        return {a.id: a.label for a in self.atoms}


def _string(obj: Mapping[str, Any], key: str, where: str, *, default: str | None = None) -> str:
    value = obj.get(key, default)
    if value is None:
        raise FactualityFormatError(f"{where}: missing {key!r}")
    if not isinstance(value, str):
        raise FactualityFormatError(f"{where}: {key!r} must be a string")
    return value


def _parse_atom(obj: Any, i: int) -> Atom:
    where = f"atom #{i}"
    if not isinstance(obj, Mapping):
        raise FactualityFormatError(f"{where} is not an object")
    text = _string(obj, "text", where)
    contexts = obj.get("contexts", [])
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise FactualityFormatError(f"{where}: 'contexts' must be a list of context ids")
    label = obj.get("label")
    if label not in (None, "S", "NS"):
        raise FactualityFormatError(f"{where}: label must be 'S', 'NS' or absent, got {label!r}")
    return Atom(
        id=_string(obj, "id", where),
        text=text,
        original=_string(obj, "original", where, default=text),
        label=label,
        contexts=tuple(contexts),
    )


def _parse_context(obj: Any, i: int) -> Context:
    where = f"context #{i}"
    if not isinstance(obj, Mapping):
        raise FactualityFormatError(f"{where} is not an object")
    return Context(
        id=_string(obj, "id", where),
        text=_string(obj, "text", where),
        title=_string(obj, "title", where, default=""),
        snippet=_string(obj, "snippet", where, default=""),
        link=_string(obj, "link", where, default=""),
    )


def parse_input(obj: Any, *, location: str | None = None) -> FactualityInput:
    """Validate one FactReasoner input object.

    Args:
        obj: The decoded JSON object.
        location: Where it came from, for error messages.

    Returns:
        The record.

    Raises:
        FactualityFormatError: On missing or mistyped fields, duplicate ids or an atom
            referring to an unknown context.
    """
    try:
        if not isinstance(obj, Mapping):
            raise FactualityFormatError("record is not a JSON object")
        atoms_raw = obj.get("atoms")
        contexts_raw = obj.get("contexts", [])
        if not isinstance(atoms_raw, list):
            raise FactualityFormatError("'atoms' must be a list")
        if not isinstance(contexts_raw, list):
            raise FactualityFormatError("'contexts' must be a list")
        topic = obj.get("topic")
        if topic is not None and not isinstance(topic, str):
            raise FactualityFormatError("'topic' must be a string")
        atoms = tuple(_parse_atom(a, i) for i, a in enumerate(atoms_raw))
        contexts = tuple(_parse_context(c, i) for i, c in enumerate(contexts_raw))
        _check_inputs(atoms, contexts)
        return FactualityInput(
            input=_string(obj, "input", "record"),
            output=_string(obj, "output", "record"),
            topic=topic,
            atoms=atoms,
            contexts=contexts,
            extra={k: v for k, v in obj.items() if k not in _INPUT_KEYS},
        )
    except FactualityFormatError as exc:
        if location is None:
            raise
        raise FactualityFormatError(str(exc), location) from exc
    except (ValueError, TypeError) as exc:
        raise FactualityFormatError(str(exc), location) from exc


def input_to_dict(record: FactualityInput) -> dict[str, Any]:
    """Serialise a record to the FactReasoner input structure."""
    atoms: list[dict[str, Any]] = []
    for a in record.atoms:
        item: dict[str, Any] = {"id": a.id, "text": a.text, "original": a.original or a.text}
        if a.label is not None:
            item["label"] = a.label
        item["contexts"] = list(a.contexts)
        atoms.append(item)
    out: dict[str, Any] = {"input": record.input, "output": record.output}
    if record.topic is not None:
        out["topic"] = record.topic
    out.update(record.extra)
    out["atoms"] = atoms
    out["contexts"] = [
        {"id": c.id, "title": c.title, "text": c.text, "snippet": c.snippet, "link": c.link}
        for c in record.contexts
    ]
    return out


def load_inputs(
    path: str | os.PathLike[str], *, strict: bool = True
) -> LoadResult[FactualityInput]:
    """Read FactReasoner input records from a JSON / JSON list / JSONL file.

    Args:
        path: The file.
        strict: Raise on the first bad record; otherwise collect it in
            :attr:`~langchain_references.loading.LoadResult.errors` (and log it) and keep
            reading.

    Returns:
        The records and the errors.

    Raises:
        FactualityFormatError: In strict mode, on the first bad record.
    """
    return load_records(path, parse_input, strict=strict, error=FactualityFormatError)


def write_jsonl(
    path: str | os.PathLike[str], objects: Iterable[Mapping[str, Any]], *, append: bool = False
) -> int:
    """Write one JSON object per line (UTF-8).

    Args:
        path: Destination file.
        objects: Objects to write (e.g. :func:`result_to_dict` outputs).
        append: Append instead of truncating (for resumable runs).

    Returns:
        Number of lines written.
    """
    count = 0
    with Path(path).open("a" if append else "w", encoding="utf-8") as handle:
        for obj in objects:
            handle.write(json.dumps(obj, ensure_ascii=False, allow_nan=False))
            handle.write("\n")
            count += 1
    return count


def result_to_dict(
    scores: FactualityScores, record: FactualityInput | None = None
) -> dict[str, Any]:
    """Serialise scores to FactReasoner's results dictionary.

    Args:
        scores: Scores from :func:`~langchain_references.factuality.metrics.score_marginals`.
        record: The assessed input, to add ``topic``/``query``/``response``.

    Returns:
        A JSON-serialisable dict.
    """
    out: dict[str, Any] = {
        "factuality_score_per_atom": [
            {aid: {"score": p, "support": scores.predictions[aid]}}
            for aid, p in scores.probabilities.items()
        ],
        "factuality_score": scores.factuality_score,
        "recall_k": scores.recall_k,
        "f1_k": scores.f1_k,
        "k": scores.k,
        "num_atoms": scores.num_atoms,
        "num_contexts": scores.num_contexts,
        "num_true_atoms": scores.num_true_atoms,
        "num_false_atoms": scores.num_false_atoms,
        "num_uniform_atoms": scores.num_uniform_atoms,
        "entropy": scores.entropy,
        "norm_entropy": scores.norm_entropy,
        "avg_entropy": scores.avg_entropy,
        "avg_norm_entropy": scores.avg_norm_entropy,
        "avg_prob": scores.avg_prob,
        "avg_logprob": scores.avg_logprob,
        "avg_explogprob": scores.avg_explogprob,
        "marginals": [
            {"variable": aid, "probabilities": [1.0 - p, p]}
            for aid, p in scores.probabilities.items()
        ],
        "predictions": dict(scores.predictions),
    }
    gold = scores.gold
    if gold is not None:
        out.update(
            gold_factuality_score=gold.gold_factuality_score,
            gold_true_atoms=gold.gold_true_atoms,
            true_positive=gold.true_positive,
            true_negative=gold.true_negative,
            false_positive=gold.false_positive,
            false_negative=gold.false_negative,
            references=dict(gold.references),
            avg_brier=gold.avg_brier,
        )
    if record is not None:
        out.update(topic=record.topic, query=record.input, response=record.output)
    return out


def _labels(value: Any, key: str) -> dict[str, PredictedLabel]:
    if isinstance(value, str):  # FactReasoner < 2025: " a0: S a1: NS"
        return {aid: ("S" if lab == "S" else "NS") for aid, lab in _LABEL_PAIR.findall(value)}
    if isinstance(value, Mapping):
        out: dict[str, PredictedLabel] = {}
        for aid, lab in value.items():
            if lab not in ("S", "NS"):
                raise FactualityFormatError(f"{key}[{aid!r}] must be 'S' or 'NS'")
            out[str(aid)] = "S" if lab == "S" else "NS"
        return out
    raise FactualityFormatError(f"{key!r} must be a mapping or a string")


def _number(obj: Mapping[str, Any], key: str, default: float | None = None) -> float:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FactualityFormatError(f"{key!r} must be a number")
    return float(value)


def _count(obj: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FactualityFormatError(f"{key!r} must be an integer")
    return value


def parse_result(obj: Any, *, location: str | None = None) -> FactualityScores:
    """Read a FactReasoner results dictionary back into :class:`FactualityScores`.

    ``marginals`` give the probabilities; missing ``recall_k``/``f1_k``/``k`` (older
    outputs) are recomputed with FactReasoner's ``K = n // 2``.

    Args:
        obj: The decoded JSON object.
        location: Where it came from, for error messages.

    Returns:
        The scores.

    Raises:
        FactualityFormatError: On missing or mistyped fields.
    """
    try:
        if not isinstance(obj, Mapping):
            raise FactualityFormatError("result is not a JSON object")
        marginals = obj.get("marginals")
        if not isinstance(marginals, list):
            raise FactualityFormatError("'marginals' must be a list")
        probabilities: dict[str, float] = {}
        for i, item in enumerate(marginals):
            probs = item.get("probabilities") if isinstance(item, Mapping) else None
            var = item.get("variable") if isinstance(item, Mapping) else None
            if (
                not isinstance(var, str)
                or not isinstance(probs, list)
                or len(probs) != 2
                or not all(isinstance(p, int | float) and math.isfinite(p) for p in probs)
            ):
                raise FactualityFormatError(
                    f"marginals[{i}] must be {{'variable': str, 'probabilities': [p0, p1]}}"
                )
            probabilities[var] = float(probs[1])
        n = _count(obj, "num_atoms", len(probabilities))
        num_true = _count(obj, "num_true_atoms")
        k = _count(obj, "k", max(1, n // 2))
        _, recall, f1 = f1_at_k(num_true, n, k)
        gold: GoldComparison | None = None
        if "gold_factuality_score" in obj:
            gold = GoldComparison(
                gold_factuality_score=_number(obj, "gold_factuality_score"),
                gold_true_atoms=_count(obj, "gold_true_atoms"),
                true_positive=_count(obj, "true_positive"),
                true_negative=_count(obj, "true_negative"),
                false_positive=_count(obj, "false_positive"),
                false_negative=_count(obj, "false_negative"),
                avg_brier=_number(obj, "avg_brier", math.nan),
                references=_labels(obj.get("references", {}), "references"),
            )
        num_contexts = obj.get("num_contexts")
        return FactualityScores(
            factuality_score=_number(obj, "factuality_score"),
            recall_k=_number(obj, "recall_k", recall),
            f1_k=_number(obj, "f1_k", f1),
            k=k,
            num_atoms=n,
            num_contexts=num_contexts if isinstance(num_contexts, int) else None,
            num_true_atoms=num_true,
            num_false_atoms=_count(obj, "num_false_atoms", n - num_true),
            num_uniform_atoms=_count(obj, "num_uniform_atoms", 0),
            entropy=_number(obj, "entropy", math.nan),
            avg_entropy=_number(obj, "avg_entropy", math.nan),
            norm_entropy=_number(obj, "norm_entropy", math.nan),
            avg_norm_entropy=_number(obj, "avg_norm_entropy", math.nan),
            avg_prob=_number(obj, "avg_prob", math.nan),
            avg_logprob=_number(obj, "avg_logprob", math.nan),
            avg_explogprob=_number(obj, "avg_explogprob", math.nan),
            probabilities=probabilities,
            predictions=_labels(obj.get("predictions", {}), "predictions"),
            gold=gold,
        )
    except FactualityFormatError as exc:
        if location is None or exc.location is not None:
            raise
        raise FactualityFormatError(str(exc), location) from exc
    except ValueError as exc:
        raise FactualityFormatError(str(exc), location) from exc
