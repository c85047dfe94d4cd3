"""``langchain-references citations``: citation recall and precision of cited answers.

``citations --input answers.jsonl`` computes citation recall and precision (Liu et al., 2023)
of cited answers (format in :mod:`~langchain_references.citations.evaluation`) and prints the
per-answer table, the unsupported sentences and citations, or the whole report (``--json``).

Judges (``--judge``): ``heuristic`` (default; offline, MiniLM embeddings, weak),
``heuristic-lexical`` (no embeddings) or ``llm:PROVIDER:MODEL``; see
:func:`~langchain_references.cli._common.build_judge`.

Each record must have ``answer`` and ``documents`` and no other key; a bad record is reported
once, as ``error: FILE:LINE: FIELD: problem (record skipped)``.

Exit status: 0 when every record was checked, 1 when some records were skipped (the others are
still reported), 2 when the command cannot run (unreadable input, no valid record, unavailable
judge).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Final, TextIO

from langchain_references.citations import (
    CitationReport,
    evaluate_answers,
    load_answer_records,
)
from langchain_references.citations.sentences import CitedSentence, is_verification_worthy
from langchain_references.cli._common import (
    add_judge_options,
    add_subcommand,
    build_judge,
    format_number,
    format_table,
    positive_int,
    read_records,
    streams,
)

__all__ = ["add_parser", "configure_parser", "render_report", "run"]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add ``--input``, ``--json``, ``--min-words`` and the judge options to ``parser``.

    Args:
        parser: The ``citations`` subcommand's parser.
    """
    parser.add_argument("--input", required=True, type=Path, help="answers JSONL")
    add_judge_options(parser)
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    parser.add_argument(
        "--min-words",
        type=positive_int,
        default=4,
        help="verification-worthy sentences have at least this many words (default: 4)",
    )


HELP: Final = "citation recall and precision of cited answers"
DESCRIPTION: Final = "Check that the [n](id=k) citations of answers support their sentences."


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``citations`` (:func:`configure_parser`, :func:`run`) in ``subparsers``."""
    return add_subcommand(subparsers, "citations", HELP, DESCRIPTION, configure_parser, run)


def _shorten(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_report(report: CitationReport) -> str:
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
                format_number(a.citation_recall),
                str(a.n_citations),
                str(a.n_precise),
                format_number(a.citation_precision),
            ]
        )
    rows.append(
        [
            "all",
            str(report.n_worthy),
            str(report.n_supported),
            format_number(report.citation_recall),
            str(report.n_citations),
            str(report.n_precise),
            format_number(report.citation_precision),
        ]
    )
    parts = [
        format_table(rows),
        f"macro recall {format_number(report.macro_recall)}, macro precision "
        f"{format_number(report.macro_precision)}, failed judgements {report.failed_judgements}",
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


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``citations`` command.

    Args:
        args: Arguments parsed by :func:`configure_parser`'s options.
        out: Where the report (:func:`render_report`, or JSON with ``--json``) goes (stdout by
            default).
        err: Where skipped records and the judge notice go (stderr by default).

    Returns:
        0 when every record was checked, 1 when some were skipped.

    Raises:
        CLIError: If the input cannot be read or has no valid record, or the judge is
            unavailable.
    """
    out, err = streams(out, err)
    records, errors = read_records(args.input, load_answer_records, err)
    judge, _ = build_judge(args.judge, err=err)
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
        out.write(render_report(report) + "\n")
    return 1 if errors else 0
