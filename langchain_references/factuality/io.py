"""Read and write FactReasoner's input and result files.

Input (README "Input Format", ``from_dict_with_contexts`` in IBM FactReasoner's
``src/fact_reasoner/assessor.py``)::

    {"input": str, "output": str, "topic": str,
     "atoms": [{"id", "text", "original", "label": "S"|"NS", "contexts": [context ids]}],
     "contexts": [{"id", "title", "text", "snippet", "link"}]}

Other top-level keys (e.g. ``"cat"`` in the Flaherty example) are kept in
:attr:`FactualityInput.extra` and written back. A file may hold one JSON object, a JSON
list of objects, or JSON Lines.

Results (one JSON object per line, :func:`result_to_dict`) carry every field FactReasoner
writes, under its names and in its order: ``FactReasoner.score`` in IBM FactReasoner's
``src/fact_reasoner/fact_reasoner.py`` (the script that writes the
``eval_results_factreasoner*.jsonl`` files, which adds ``model_name``) and in the newer
``assessor.py`` (``recall_k``, ``f1_k``, ``topic``, ``query``, ``response``,
``elapsed_time``; README "Output Format")::

    factuality_score_per_atom: [{atom_id: {"score": P(true), "support": "S"|"NS"}}],
    factuality_score, recall_k, f1_k, num_atoms, num_contexts, num_true_atoms,
    num_false_atoms, num_uniform_atoms, entropy, norm_entropy, avg_entropy, avg_norm_entropy,
    avg_prob, avg_logprob, avg_explogprob, labels: {atom_id: "S"|"NS"},
    [gold_factuality_score, gold_true_atoms, true_positive, true_negative, false_positive,
     false_negative,] predictions: " a0: S a1: NS ...", [references: " a0: S a1: NS ...",
    avg_brier,] input, marginals: [{"variable": atom_id, "probabilities": [P(false), P(true)]}],
    topic, query, response, elapsed_time, model_name

``predictions`` and ``references`` are strings, as FactReasoner writes them: `` {id}: {label}``
per atom, ids in Python string order (``a0 a1 a10 a2``); the gold fields only when some atom
is labelled. After FactReasoner's fields come this project's: ``k`` (the K of F1@K) and,
from :meth:`~langchain_references.factuality.pipeline.FactualityResult.to_dict`, the version,
atoms, relations, failures and timings. :func:`parse_result` reads these files, FactReasoner's
own, and its ``score()`` dictionaries where ``predictions``/``references`` are mappings.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field

from langchain_references.errors import RecordError
from langchain_references.factuality.metrics import (
    FactualityScores,
    GoldComparison,
    PredictedLabel,
    f1_at_k,
)
from langchain_references.factuality.model import Atom, Context
from langchain_references.services.loading import LoadResult, load_records, validate_record

_INPUT_KEYS = frozenset({"input", "output", "topic", "atoms", "contexts"})
_LABEL_PAIR = re.compile(r"(\S+):\s*(NS|S|None)(?=\s|$)")


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


class _AtomModel(BaseModel):
    """The schema of one atom (FactReasoner's ``atoms`` items); unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str
    text: str
    original: str | None = None
    label: Literal["S", "NS"] | None = None
    contexts: list[str] = Field(default_factory=list)


class _ContextModel(BaseModel):
    """The schema of one context (FactReasoner's ``contexts`` items); unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str
    text: str
    title: str | None = ""
    snippet: str | None = ""
    link: str | None = ""


class _InputModel(BaseModel):
    """The schema of an input record; other top-level keys are kept (``extra``)."""

    model_config = ConfigDict(extra="allow", strict=True)

    input: str
    output: str
    topic: str | None = None
    atoms: list[_AtomModel]
    contexts: list[_ContextModel] = Field(default_factory=list)


def _id_problem(model: _InputModel) -> tuple[str, str] | None:
    """``(field, message)`` for a duplicate id or an atom citing an unknown context."""
    atom_ids: set[str] = set()
    for i, atom in enumerate(model.atoms):
        if atom.id in atom_ids:
            return f"atoms[{i}].id", f"duplicate atom id {atom.id!r}"
        atom_ids.add(atom.id)
    context_ids: set[str] = set()
    for i, ctx in enumerate(model.contexts):
        if ctx.id in context_ids or ctx.id in atom_ids:
            return f"contexts[{i}].id", f"duplicate id {ctx.id!r}"
        context_ids.add(ctx.id)
    for i, atom in enumerate(model.atoms):
        for j, cid in enumerate(atom.contexts):
            if cid not in context_ids:
                return f"atoms[{i}].contexts[{j}]", f"refers to unknown context {cid!r}"
    return None


def parse_input(obj: Any, *, location: str | None = None) -> FactualityInput:
    """Validate one FactReasoner input object.

    Args:
        obj: The decoded JSON object.
        location: Where it came from, for error messages.

    Returns:
        The input.

    Raises:
        FactualityFormatError: On missing, unknown (inside atoms and contexts) or mistyped
            fields, duplicate ids or an atom referring to an unknown context; its ``field`` is
            the JSON path (e.g. ``"atoms[3].label"``).
    """
    model = validate_record(
        obj, _InputModel, location, error=FactualityFormatError, models=(_AtomModel, _ContextModel)
    )
    problem = _id_problem(model)
    if problem is not None:
        field_name, message = problem
        raise FactualityFormatError(f"{field_name}: {message}", location, field=field_name)
    try:
        atoms = tuple(
            Atom(
                id=a.id,
                text=a.text,
                original=a.text if a.original is None else a.original,
                label=a.label,
                contexts=tuple(a.contexts),
            )
            for a in model.atoms
        )
        contexts = tuple(
            Context(
                id=c.id,
                text=c.text,
                title=c.title or "",
                snippet=c.snippet or "",
                link=c.link or "",
            )
            for c in model.contexts
        )
    except ValueError as exc:
        raise FactualityFormatError(str(exc), location) from exc
    return FactualityInput(
        input=model.input,
        output=model.output,
        topic=model.topic,
        atoms=atoms,
        contexts=contexts,
        extra={k: v for k, v in obj.items() if k not in _INPUT_KEYS},
    )


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
            :attr:`~langchain_references.services.loading.LoadResult.errors` (and log it) and keep
            reading.

    Returns:
        The records and the errors.

    Raises:
        FactualityFormatError: In strict mode, on the first bad record.
    """
    return load_records(path, parse_input, strict=strict, error=FactualityFormatError)


def dump_jsonl(handle: TextIO, objects: Iterable[Mapping[str, Any]]) -> int:
    """Write one JSON object per line to an open text file.

    Args:
        handle: The file (e.g. from the CLI's ``atomic_write``).
        objects: Objects to write (e.g. :func:`result_to_dict` outputs).

    Returns:
        Number of lines written.
    """
    count = 0
    for obj in objects:
        handle.write(json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n")
        count += 1
    return count


def label_string(labels: Mapping[str, str]) -> str:
    """FactReasoner's string form of per-atom labels: ``" a0: S a1: NS"``.

    Args:
        labels: ``"S"``/``"NS"`` by atom id.

    Returns:
        `` {id}: {label}`` for every atom, ids sorted as FactReasoner sorts them (as strings).
    """
    return "".join(f" {aid}: {labels[aid]}" for aid in sorted(labels))


def result_to_dict(
    scores: FactualityScores,
    record: FactualityInput | None = None,
    *,
    model_name: str | None = None,
    elapsed_time: float | None = None,
) -> dict[str, Any]:
    """Serialise scores to FactReasoner's results dictionary (see module docstring).

    Args:
        scores: Scores from :func:`~langchain_references.factuality.metrics.score_marginals`.
        record: The assessed input, for ``input``/``topic``/``query``/``response`` (``None``
            when not given).
        model_name: The model that judged the pairs (FactReasoner: ``--model``).
        elapsed_time: Seconds the assessment took.

    Returns:
        A JSON-serialisable dict: FactReasoner's fields, then ``k``.
    """
    out: dict[str, Any] = {
        "factuality_score_per_atom": [
            {aid: {"score": p, "support": scores.predictions[aid]}}
            for aid, p in scores.probabilities.items()
        ],
        "factuality_score": scores.factuality_score,
        "recall_k": scores.recall_k,
        "f1_k": scores.f1_k,
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
        "labels": dict(scores.predictions),
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
        )
    out["predictions"] = label_string(scores.predictions)
    if gold is not None:
        out["references"] = label_string(gold.references)
        out["avg_brier"] = gold.avg_brier
    out["input"] = None if record is None else record.input
    out["marginals"] = [
        {"variable": aid, "probabilities": [1.0 - p, p]} for aid, p in scores.probabilities.items()
    ]
    out["topic"] = None if record is None else record.topic
    out["query"] = None if record is None else record.input
    out["response"] = None if record is None else record.output
    out["elapsed_time"] = elapsed_time
    out["model_name"] = model_name
    out["k"] = scores.k
    return out


def _labels(value: Any, key: str) -> dict[str, PredictedLabel]:
    if isinstance(value, str):  # FactReasoner's files: " a0: S a1: NS"
        pairs = _LABEL_PAIR.findall(value)
        if _LABEL_PAIR.sub("", value).strip():
            raise FactualityFormatError(f"{key!r} must read ' id: S|NS ...', got {value!r}")
        # FactReasoner writes "None" for an unlabelled atom: it has no reference label.
        return {aid: ("S" if lab == "S" else "NS") for aid, lab in pairs if lab != "None"}
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
            predictions=_labels(obj.get("predictions", obj.get("labels", {})), "predictions"),
            gold=gold,
        )
    except FactualityFormatError as exc:
        if location is None or exc.location is not None:
            raise
        raise FactualityFormatError(str(exc), location) from exc
    except ValueError as exc:
        raise FactualityFormatError(str(exc), location) from exc
