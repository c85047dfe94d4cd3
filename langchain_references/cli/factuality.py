"""``langchain-references factuality``: FactReasoner-style long-form factuality.

``factuality --input FILE`` scores FactReasoner records (JSON object, JSON list or JSONL; see
:mod:`~langchain_references.factuality.io`) with the FR1/FR2/FR3 graph (``--version``) and
prints one summary line per record: atoms, true / false / undecided atoms, factual precision
(FactReasoner's ``factuality_score``), average entropy and, when the atoms are labelled, the
gold precision and TP/TN/FP/FN. ``--output OUT.jsonl`` writes FactReasoner's result fields
(:mod:`~langchain_references.factuality.io`: its names, types and string formats, with
``model_name`` the judge and ``elapsed_time`` the seconds per record), then this project's:
atoms, relations, failures, timings and ``inference`` (how the marginals were computed).
Records without atoms (``{"response": ...}``) are atomized and revised by ``--llm`` (default:
the judge's model).

Judges (``--judge``): ``heuristic`` (default; offline HeuristicJudge with MiniLM embeddings,
weak: not an NLI model), ``heuristic-lexical`` (no embeddings), or ``llm:PROVIDER:MODEL``
(an LLMJudge through ``langchain.chat_models.init_chat_model``, e.g.
``llm:openai:gpt-4o-mini``; needs the ``langchain`` package and the provider's); see
:func:`~langchain_references.cli._common.build_judge`.

Exit status: 0 when every record was scored, 1 when some records failed (the others are
still reported), 2 when the command cannot run (unreadable input, unavailable judge).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any, Final, TextIO

from langchain_references.cli._common import (
    CLIError,
    add_judge_options,
    add_subcommand,
    atomic_write,
    build_judge,
    check_output,
    format_number,
    format_table,
    load_chat_model,
    positive_int,
    read_records,
    streams,
    writing,
)
from langchain_references.factuality.io import FactualityFormatError, FactualityInput, dump_jsonl
from langchain_references.factuality.pipeline import (
    FactualityResult,
    coerce_factuality_input,
    create_factuality_evaluator,
)
from langchain_references.factuality.retrieval import InputContexts
from langchain_references.loading import LoadResult, load_records

__all__ = [
    "add_parser",
    "configure_parser",
    "inference_report",
    "judge_model_name",
    "output_record",
    "run",
    "summary_row",
]

logger = logging.getLogger(__name__)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add ``--input``, ``--version``, the judge options and the pipeline's to ``parser``.

    Args:
        parser: The ``factuality`` subcommand's parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="FactReasoner .json/.jsonl")
    parser.add_argument(
        "--version", type=int, choices=(1, 2, 3), default=2, help="FR graph version (default: 2)"
    )
    add_judge_options(parser)
    parser.add_argument(
        "--llm",
        metavar="PROVIDER:MODEL",
        help="chat model that atomizes records without atoms (default: the judge's model)",
    )
    parser.add_argument("--output", type=Path, help="write FactReasoner results (JSONL) here")
    parser.add_argument("--top-k", type=positive_int, help="contexts per atom (default: all given)")
    parser.add_argument(
        "--method",
        choices=("auto", "exact", "bp", "gibbs"),
        default="auto",
        help="inference method (default: auto)",
    )


HELP: Final = "FactReasoner-style long-form factuality of responses"
DESCRIPTION: Final = "Score the atoms of responses against their contexts (FR1/FR2/FR3)."


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``factuality`` (:func:`configure_parser`, :func:`run`) in ``subparsers``."""
    return add_subcommand(subparsers, "factuality", HELP, DESCRIPTION, configure_parser, run)


def _parse_record(value: Any, *, location: str | None = None) -> tuple[str, FactualityInput]:
    """``(location, record)``: a FactReasoner record, or a ``{"response": ...}`` to atomize."""
    try:
        return location or "", coerce_factuality_input(value)
    except FactualityFormatError as exc:
        raise FactualityFormatError(exc.message, location, field=exc.field) from exc
    except TypeError as exc:
        raise FactualityFormatError("record is not a JSON object", location) from exc


def _load(path: Path) -> LoadResult[tuple[str, FactualityInput]]:
    return load_records(path, _parse_record, strict=False, error=FactualityFormatError)


_HEADER: Final = (
    "record",
    "atoms",
    "true",
    "false",
    "undecided",
    "precision",
    "entropy",
    "gold",
    "TP",
    "TN",
    "FP",
    "FN",
    "failures",
)


def summary_row(name: str, result: FactualityResult) -> list[str]:
    """One line of the ``factuality`` table.

    ``false`` counts the atoms decided false (``P < 0.5``); FactReasoner's
    ``num_false_atoms`` also includes the ``undecided`` ones (``P = 0.5``).

    Args:
        name: The record's name.
        result: Its result.

    Returns:
        The cells.
    """
    s = result.scores
    if s is None:
        return [name, str(len(result.atoms)), *["-"] * 10, str(len(result.failures))]
    g = s.gold
    return [
        name,
        str(s.num_atoms),
        str(s.num_true_atoms),
        str(s.num_false_atoms - s.num_uniform_atoms),
        str(s.num_uniform_atoms),
        format_number(s.factuality_score),
        format_number(s.avg_entropy),
        format_number(None if g is None else g.gold_factuality_score),
        *(
            ["-"] * 4
            if g is None
            else [
                str(g.true_positive),
                str(g.true_negative),
                str(g.false_positive),
                str(g.false_negative),
            ]
        ),
        str(len(result.failures)),
    ]


def judge_model_name(spec: str) -> str:
    """FactReasoner's ``model_name`` for a ``--judge`` spec: the model, or the judge's name.

    Args:
        spec: ``heuristic``, ``heuristic-lexical`` or ``llm:PROVIDER:MODEL``.

    Returns:
        ``PROVIDER:MODEL`` for an LLM judge, the spec itself otherwise.
    """
    return spec.removeprefix("llm:")


def inference_report(result: FactualityResult) -> dict[str, Any] | None:
    """How the marginals of ``result`` were computed (JSON), or ``None`` without inference.

    Args:
        result: A result of the factuality evaluator.

    Returns:
        ``{"exact", "components": {method: count}, "bp": {...} | None}``.
    """
    inference = result.inference
    if inference is None:
        return None
    methods: dict[str, int] = {}
    for component in inference.components:
        methods[component.method] = methods.get(component.method, 0) + 1
    bp = inference.bp
    return {
        "exact": inference.exact,
        "components": methods,
        "bp": None
        if bp is None
        else {
            "iterations": bp.iterations,
            "converged": bp.converged,
            "max_residual": bp.max_residual,
        },
    }


def output_record(
    result: FactualityResult, *, model_name: str, elapsed_time: float
) -> dict[str, Any]:
    """One line of ``--output``: FactReasoner's fields, then this project's.

    Args:
        result: The result.
        model_name: FactReasoner's ``model_name`` (:func:`judge_model_name`).
        elapsed_time: Seconds the record took.

    Returns:
        :meth:`FactualityResult.to_dict` with ``model_name``, ``elapsed_time`` and
        ``inference`` filled in.
    """
    data = result.to_dict()
    data["elapsed_time"] = elapsed_time
    data["model_name"] = model_name
    data["inference"] = inference_report(result)
    return data


def _record_name(location: str, record: FactualityInput) -> str:
    name = record.topic or location
    return name if len(name) <= 40 else name[:39] + "…"


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``factuality`` command.

    Args:
        args: Arguments parsed by :func:`configure_parser`'s options.
        out: Where the summary table goes (stdout by default).
        err: Where skipped records, the judge notice and per-record errors go (stderr by
            default).

    Returns:
        0 when every record was scored, 1 when some failed (the others are still reported).

    Raises:
        CLIError: If the input cannot be read, the judge or ``--llm`` is unavailable, or the
            output cannot be written.
    """
    out, err = streams(out, err)
    if args.output is not None:
        check_output(args.output, args.input)
    records, bad = read_records(args.input, _load, err)
    judge, judge_model = build_judge(args.judge, err=err)
    llm = load_chat_model(args.llm, option="--llm", temperature=0) if args.llm else judge_model
    evaluator = create_factuality_evaluator(
        llm,
        judge=judge,
        retriever=InputContexts(args.top_k),
        version=args.version,
        top_k=args.top_k,
        inference_method=args.method,
        max_concurrency=args.max_concurrency,
    )
    rows: list[list[str]] = [list(_HEADER)]
    results: list[dict[str, Any]] = []
    failed = len(bad)
    model_name = judge_model_name(args.judge)
    for location, record in records:
        start = time.perf_counter()
        try:
            result = evaluator.invoke(record)
        except (ValueError, TypeError) as exc:
            failed += 1
            err.write(f"error: {location}: {exc}\n")
            continue
        if result.scores is None:
            failed += 1
        for failure in result.failures:
            logger.info(
                "%s: %s failure: %s (%s)", location, failure.stage, failure.reason, failure.item
            )
        rows.append(summary_row(_record_name(location, record), result))
        elapsed = time.perf_counter() - start
        results.append(output_record(result, model_name=model_name, elapsed_time=elapsed))
    out.write(f"FactReasoner FR{args.version}, {len(records)} record(s)\n")
    if len(rows) > 1:
        out.write(format_table(rows) + "\n")
    if args.output is not None:
        if not results:
            raise CLIError(f"no record could be scored; nothing written to {args.output}")
        with writing(args.output), atomic_write(args.output) as handle:
            count = dump_jsonl(handle, results)
        out.write(f"wrote {count} result(s) to {args.output}\n")
    return 1 if failed else 0
