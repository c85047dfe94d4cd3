"""Command line: ``langchain-references factuality`` and ``langchain-references citations``.

``factuality --input FILE`` scores FactReasoner records (JSON object, JSON list or JSONL; see
:mod:`~langchain_references.factuality.io`) with the FR1/FR2/FR3 graph (``--version``) and
prints one summary line per record: atoms, true / false / undecided atoms, factual precision
(FactReasoner's ``factuality_score``), average entropy and, when the atoms are labelled, the
gold precision and TP/TN/FP/FN. ``--output OUT.jsonl`` writes FactReasoner's result fields
(plus atoms, relations, failures and timings). Records without atoms (``{"response": ...}``)
are atomized and revised by ``--llm`` (default: the judge's model).

``citations --input answers.jsonl`` computes citation recall and precision (Liu et al., 2023)
of cited answers (format in :mod:`~langchain_references.citations.verifier`) and prints the
per-answer table, the unsupported sentences and citations, or the whole report (``--json``).

Judges (``--judge``): ``heuristic`` (default; offline HeuristicJudge with MiniLM embeddings,
weak: not an NLI model), ``heuristic-lexical`` (no embeddings), or ``llm:PROVIDER:MODEL``
(an LLMJudge through ``langchain.chat_models.init_chat_model``, e.g.
``llm:openai:gpt-4o-mini``; needs the ``langchain`` package and the provider's).

Exit status: 0 when every record was scored, 1 when some records failed (the others are
still reported), 2 when the command cannot run (unreadable input, unavailable judge).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from langchain_references.citations import (
    CitationRecordError,
    CitationReport,
    evaluate_answers,
    load_answer_records,
)
from langchain_references.citations.sentences import CitedSentence, is_verification_worthy
from langchain_references.cli._common import CLIError, add_subcommand, load_chat_model, positive_int
from langchain_references.factuality.io import FactualityFormatError, FactualityInput, write_jsonl
from langchain_references.factuality.pipeline import (
    FactualityResult,
    coerce_factuality_input,
    create_factuality_evaluator,
)
from langchain_references.factuality.retrieval import InputContexts
from langchain_references.judges import offline_judge
from langchain_references.judges.llm import LLMJudge
from langchain_references.loading import iter_json_objects

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import Runnable

    from langchain_references.judges.base import JudgeInputLike, Judgement

__all__ = [
    "CLIError",
    "add_citations_parser",
    "add_parser",
    "build_judge",
    "build_parser",
    "main",
    "run",
    "run_citations",
]

logger = logging.getLogger(__name__)

HEURISTIC_NOTICE: Final = (
    "judge: HeuristicJudge (offline word-overlap{emb} heuristic; weak, not an NLI model). "
    "Pass --judge llm:PROVIDER:MODEL for an LLM judge."
)


def build_judge(
    spec: str, *, err: TextIO | None = None
) -> tuple[Runnable[JudgeInputLike, Judgement], BaseChatModel | None]:
    """Build the judge of ``--judge``.

    Args:
        spec: ``heuristic``, ``heuristic-lexical`` or ``llm:PROVIDER:MODEL``.
        err: Where to write the notice about the heuristic judge.

    Returns:
        The judge and, for an LLM judge, its chat model.

    Raises:
        CLIError: On an unknown spec or an unavailable model.
    """
    if spec in ("heuristic", "heuristic-lexical"):
        judge = offline_judge(use_embeddings=spec == "heuristic")
        if err is not None:
            emb = " + MiniLM similarity" if judge.embeddings is not None else ""
            err.write(HEURISTIC_NOTICE.format(emb=emb) + "\n")
        return judge, None
    if spec.startswith("llm:") and len(spec) > len("llm:"):
        model = load_chat_model(spec[len("llm:") :], option="--judge llm:", temperature=0)
        return LLMJudge(model), model
    raise CLIError(
        f"--judge must be 'heuristic', 'heuristic-lexical' or 'llm:PROVIDER:MODEL', got {spec!r}"
    )


# ------------------------------------------------------------------------ factuality


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``factuality`` arguments to a parser.

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="FactReasoner .json/.jsonl")
    parser.add_argument(
        "--version", type=int, choices=(1, 2, 3), default=2, help="FR graph version (default 2)"
    )
    parser.add_argument(
        "--judge",
        default="heuristic",
        metavar="SPEC",
        help="heuristic | heuristic-lexical | llm:PROVIDER:MODEL (default: heuristic)",
    )
    parser.add_argument(
        "--llm",
        metavar="PROVIDER:MODEL",
        help="chat model that atomizes records without atoms (default: the judge's model)",
    )
    parser.add_argument("--output", type=Path, help="write FactReasoner results (JSONL) here")
    parser.add_argument("--top-k", type=positive_int, help="contexts per atom (default: all given)")
    parser.add_argument(
        "--max-concurrency", type=positive_int, default=4, help="parallel judge calls"
    )
    parser.add_argument(
        "--method",
        choices=("auto", "exact", "bp"),
        default="auto",
        help="inference method (default: auto)",
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``factuality`` subcommand; its handler is :func:`run` (``args.func``).

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.

    Returns:
        The subcommand's parser.
    """
    return add_subcommand(
        subparsers,
        "factuality",
        help="FactReasoner-style long-form factuality of responses",
        description="Score the atoms of responses against their contexts (FR1/FR2/FR3).",
        configure=configure_parser,
        run=run,
    )


def _read_records(path: Path, err: TextIO) -> tuple[list[tuple[str, FactualityInput]], list[str]]:
    records: list[tuple[str, FactualityInput]] = []
    errors: list[str] = []
    try:
        for location, value in iter_json_objects(path):
            try:
                if isinstance(value, FactualityFormatError):
                    raise value
                records.append((location, coerce_factuality_input(value)))
            except (FactualityFormatError, TypeError) as exc:
                message = str(exc) if location in str(exc) else f"{location}: {exc}"
                errors.append(message)
                err.write(f"skipped record: {message}\n")
    except (OSError, UnicodeDecodeError, FactualityFormatError) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from exc
    return records, errors


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


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
        _fmt(s.factuality_score),
        _fmt(s.avg_entropy),
        _fmt(None if g is None else g.gold_factuality_score),
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


def _record_name(location: str, record: FactualityInput) -> str:
    name = record.topic or location
    return name if len(name) <= 40 else name[:39] + "…"


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``factuality`` command.

    Args:
        args: Parsed arguments.
        out: Where the table goes (stdout by default).
        err: Where notices and errors go (stderr by default).

    Returns:
        The exit status.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        records, bad = _read_records(args.input, err)
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
    except CLIError as exc:
        err.write(f"error: {exc}\n")
        return 2
    rows: list[list[str]] = [list(_HEADER)]
    results: list[dict[str, Any]] = []
    failed = len(bad)
    for location, record in records:
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
        results.append(result.to_dict())
    out.write(f"FactReasoner FR{args.version}, {len(records)} record(s)\n")
    if len(rows) > 1:
        out.write(_table(rows) + "\n")
    if args.output is not None:
        try:
            write_jsonl(args.output, results)
        except OSError as exc:
            err.write(f"error: cannot write {args.output}: {exc}\n")
            return 2
        out.write(f"wrote {len(results)} result(s) to {args.output}\n")
    return 1 if failed else 0


# ------------------------------------------------------------------------ citations


def configure_citations_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``citations`` arguments to a parser.

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="answers JSONL")
    parser.add_argument(
        "--judge",
        default="heuristic",
        metavar="SPEC",
        help="heuristic | heuristic-lexical | llm:PROVIDER:MODEL (default: heuristic)",
    )
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    parser.add_argument(
        "--min-words",
        type=positive_int,
        default=4,
        help="verification-worthy sentences have at least this many words (default 4)",
    )
    parser.add_argument(
        "--max-concurrency", type=positive_int, default=4, help="parallel judge calls"
    )


def add_citations_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``citations`` subcommand; its handler is :func:`run_citations` (``args.func``).

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.

    Returns:
        The subcommand's parser.
    """
    return add_subcommand(
        subparsers,
        "citations",
        help="citation recall and precision of cited answers",
        description="Check that the [n](id=k) citations of answers support their sentences.",
        configure=configure_citations_parser,
        run=run_citations,
    )


def _shorten(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_citation_report(report: CitationReport) -> str:
    """Plain-text rendering of a citation report.

    Args:
        report: The report.

    Returns:
        The per-answer table, the overall figures and the unsupported items.
    """
    rows: list[list[str]] = [
        ["answer", "worthy", "supported", "recall", "citations", "precise", "precision"]
    ]
    for a in report.answers:
        rows.append(
            [
                str(a.index),
                str(a.n_worthy),
                str(a.n_supported),
                _fmt(a.citation_recall),
                str(a.n_citations),
                str(a.n_precise),
                _fmt(a.citation_precision),
            ]
        )
    rows.append(
        [
            "all",
            str(report.n_worthy),
            str(report.n_supported),
            _fmt(report.citation_recall),
            str(report.n_citations),
            str(report.n_precise),
            _fmt(report.citation_precision),
        ]
    )
    parts = [
        _table(rows),
        f"macro recall {_fmt(report.macro_recall)}, macro precision "
        f"{_fmt(report.macro_precision)}, failed judgements {report.failed_judgements}",
    ]
    for a in report.answers:
        lines = [
            f"  sentence {s.sentence.index}: {_shorten(s.sentence.text)}"
            for s in a.unsupported_sentences
        ]
        lines += [
            f"  sentence {s.sentence.index}, id={c.doc_id}: {c.reason}"
            for s, c in a.unsupported_citations
        ]
        if lines:
            parts.append(f"answer {a.index} — not supported:\n" + "\n".join(lines))
    return "\n".join(parts)


def run_citations(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the ``citations`` command.

    Args:
        args: Parsed arguments.
        out: Where the report goes (stdout by default).
        err: Where notices and errors go (stderr by default).

    Returns:
        The exit status.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        try:
            loaded = load_answer_records(args.input)
            records, errors = loaded.records, loaded.errors
        except (OSError, UnicodeDecodeError, CitationRecordError) as exc:
            raise CLIError(f"cannot read {args.input}: {exc}") from exc
        judge, _ = build_judge(args.judge, err=err)
    except CLIError as exc:
        err.write(f"error: {exc}\n")
        return 2
    for error in errors:
        err.write(f"skipped record: {error}\n")
    min_words: int = args.min_words

    def worthy(sentence: CitedSentence) -> bool:
        return is_verification_worthy(sentence, min_words=min_words)

    report = evaluate_answers(
        records, judge, is_worthy=worthy, max_concurrency=args.max_concurrency
    )
    report = CitationReport(report.answers, tuple(errors))
    if args.json:
        out.write(json.dumps(report.to_dict(), ensure_ascii=False, indent=2) + "\n")
    else:
        out.write(render_citation_report(report) + "\n")
    return 1 if errors else 0


# ------------------------------------------------------------------------------ main


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """Standalone parser with the ``factuality`` and ``citations`` subcommands.

    Args:
        prog: Program name shown in the usage line.

    Returns:
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog=prog or "python -m langchain_references.cli.factuality",
        description="Long-form factuality and citation verification.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_parser(subparsers)
    add_citations_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``factuality ...`` or ``citations ...`` (tests, ``python -m``).

    Args:
        argv: Arguments (``sys.argv[1:]`` by default).

    Returns:
        The exit status.
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    handler: Callable[[argparse.Namespace], int] = args.func
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
