"""``langchain-references citations``: citation recall and precision of cited answers.

``citations --input answers.jsonl`` computes citation recall and precision (Liu et al., 2023)
of cited answers (format in :mod:`~langchain_references.citations.evaluation`) and prints the
per-answer table, the unsupported sentences and citations, or the whole report (``--json``).

Judges (``--judge``): ``heuristic`` (default; offline, MiniLM embeddings, weak),
``heuristic-lexical`` (no embeddings), ``llm:PROVIDER:MODEL`` or ``nli:MODEL`` (an ONNX
cross-encoder: a local folder or ``.onnx`` file, or a Hugging Face Hub id); see
:func:`~langchain_references.cli._models.build_judge`.

The report names the judge behind its verdicts (a ``Judge: KIND (MODEL) — ...`` line; a
``judge`` object in ``--json``). Each record must have ``answer`` and ``documents`` and no
other key; a bad record is reported once, as ``error: FILE:LINE: FIELD: problem (record
skipped)``.

When judgements fail (no API key, no network), the report says ``k of n judgements failed``;
an answer, or a run, whose judgements all failed shows ``-`` instead of recall and precision
(``null`` in ``--json``): nothing was measured. Progress goes to stderr, one line per answer
(off with ``--quiet``). Ctrl-C stops at once: the report of the answers already checked is
printed, and :func:`langchain_references.cli.main` says so in one line (exit status 130).

Resuming: every successful judgement is recorded in the run cache (``--cache FILE``, by
default under the user cache directory; ``--no-cache`` records nothing), keyed by the judge's
identity, the sentence and the documents; ``--resume`` takes the judgements an earlier run made
from it, so the answers it finished are checked without calling the judge again (the report
says how many answers were reused) and the others only judge what is missing. ``--rate
judge=RPS/N`` limits an LLM judge's requests (LangChain's ``rate_limiter``).

Engines: ``--engine ray`` checks the answers on Ray actors (``--workers N``, each building an
:class:`AnswerChecker` once, one answer at a time); on either engine the answers go through
the batch runner (:func:`~langchain_references.cli._runner.run_batch`), reported in input
order.

An answer whose check raised (any exception, on either engine) is reported for that answer,
``error: FILE:LINE: Type: message (answer not checked)``, and left out of the report: no row,
and recall, precision and ``num_answers`` count only the answers checked (a failed answer is
never a 0). The other answers go on.

Exit status: 0 when every record was checked, 1 when some records were skipped or could not be
checked (the others are still reported) or every judgement failed, 2 when the command cannot
run (unreadable input, no valid record, unavailable judge or API key), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from langchain_core.runnables import Runnable, RunnableLambda

from langchain_references.citations import (
    AnswerRecord,
    AnswerReport,
    CitationReport,
    evaluate_answers,
    load_answer_records,
)
from langchain_references.citations.sentences import CitedSentence, is_verification_worthy
from langchain_references.cli._commands import streams
from langchain_references.cli._engines import ray_options, worker_stack
from langchain_references.cli._files import read_records
from langchain_references.cli._models import build_judge
from langchain_references.cli._progress import ProgressLines
from langchain_references.cli._runner import BatchJob, BatchRun, RayRun, failure_text, run_batch
from langchain_references.cli._runs import build_limiter, open_run_cache, reuse_note
from langchain_references.cli._tables import format_number, format_table
from langchain_references.cli.parsers.citations import DESCRIPTION, HELP, configure_parser
from langchain_references.judges.cached import JUDGEMENT_NAMESPACE, CachedJudge

if TYPE_CHECKING:
    from langchain_references.services.runcache import RunCache

__all__ = [
    "DESCRIPTION",
    "HELP",
    "AnswerChecker",
    "CheckedAnswer",
    "build_checker",
    "configure_parser",
    "judgement_counts",
    "render_report",
    "run",
]

logger = logging.getLogger(__name__)


def _shorten(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def judgement_counts(answers: Sequence[AnswerReport]) -> tuple[int, int, str | None]:
    """How many of the answers' judgements failed.

    A sentence's judgements are those of each cited document alone and, with two or more
    documents, of their concatenation (as counted by ``failed_judgements``).

    Args:
        answers: The answer reports.

    Returns:
        ``(failed, total, first_error)``: the failed judgements, all judgements, and the error
        of the first failed one (``None`` if none failed).
    """
    failed, total, first = 0, 0, None
    for answer in answers:
        for sentence in answer.sentences:
            for judgement in [c.alone for c in sentence.citations] + [sentence.joint]:
                if judgement is None:
                    continue
                total += 1
                if not judgement.ok:
                    failed += 1
                    first = first or judgement.error
    return failed, total, first


def _unmeasured(answers: Sequence[AnswerReport]) -> bool:
    """Whether there were judgements and all of them failed: the scores mean nothing."""
    failed, total, _ = judgement_counts(answers)
    return total > 0 and failed == total


def _figures(scores: AnswerReport | CitationReport, measured: bool) -> list[str]:
    def score(value: float | None) -> str:
        return format_number(value if measured else None)

    return [
        str(scores.n_worthy),
        str(scores.n_supported),
        score(scores.citation_recall),
        str(scores.n_citations),
        str(scores.n_precise),
        score(scores.citation_precision),
    ]


def render_report(report: CitationReport) -> str:
    """Plain-text rendering of a citation report.

    Recall and precision are ``-`` where every judgement failed (nothing was measured).

    Args:
        report: The report.

    Returns:
        The per-answer table, the overall figures (or ``k of n judgements failed`` instead of
        them when every judgement failed), the judge (``Judge: KIND (MODEL) — ...``) and the
        unsupported items.
    """
    rows: list[list[str]] = [
        ["answer", "worthy", "supported", "recall", "citations", "precise", "precision"]
    ]
    for a in report.answers:
        rows.append([str(a.index), *_figures(a, not _unmeasured([a]))])
    failed, total, first = judgement_counts(report.answers)
    rows.append(["all", *_figures(report, not _unmeasured(report.answers))])
    if _unmeasured(report.answers):
        figures = f"no scores: {failed} of {total} judgements failed (first: {first})"
    else:
        figures = (
            f"macro recall {format_number(report.macro_recall)}, macro precision "
            f"{format_number(report.macro_precision)}; {failed} of {total} judgements failed"
        )
    parts = [format_table(rows), figures]
    if report.judge is not None:
        parts.append(f"Judge: {report.judge}")
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


@dataclasses.dataclass(frozen=True)
class CheckedAnswer:
    """One answer's report, and how it was made.

    Attributes:
        answer: The answer's report (its ``index`` is set by the command).
        from_cache: Every judgement of the answer came from the run cache (an earlier run
            finished it).
        elapsed_s: Seconds the check took.
    """

    answer: AnswerReport
    from_cache: bool
    elapsed_s: float


class AnswerChecker:
    """Checks one answer's citations at a time (in this process, or in each Ray actor).

    Answers are checked one after the other (each one's judgements concurrently): whether an
    answer was reused is read from the run cache's counts before and after it.

    Args:
        judge: The judge (a :class:`CachedJudge` over ``cache`` when there is one).
        cache: The run cache.
        min_words: ``--min-words``.
        max_concurrency: Judge calls in flight.
    """

    def __init__(
        self, judge: Any, cache: RunCache | None, *, min_words: int, max_concurrency: int
    ) -> None:
        self.judge = judge
        self.cache = cache
        self.min_words = min_words
        self.max_concurrency = max_concurrency

    def _worthy(self, sentence: CitedSentence) -> bool:
        return is_verification_worthy(sentence, min_words=self.min_words)

    def _lookups(self) -> tuple[int, int]:
        if self.cache is None:
            return (0, 0)
        return self.cache.stats().get(JUDGEMENT_NAMESPACE, (0, 0))

    def check(self, record: AnswerRecord) -> CheckedAnswer:
        """Check one answer record.

        Args:
            record: The answer and its documents.

        Returns:
            Its report, whether it came from the run cache, and the time taken.
        """
        start = time.perf_counter()
        before = self._lookups()
        (answer,) = evaluate_answers(
            [record], self.judge, is_worthy=self._worthy, max_concurrency=self.max_concurrency
        ).answers
        after = self._lookups()
        # every judgement of the answer came from the run cache: an answer finished before
        from_cache = after[0] > before[0] and after[1] == before[1]
        return CheckedAnswer(answer, from_cache, time.perf_counter() - start)


def build_checker(args: argparse.Namespace, err: TextIO | None = None) -> AnswerChecker:
    """The answer checker of the parsed arguments (in this process and in each actor).

    Args:
        args: Parsed arguments.
        err: Where the judge notice goes (nowhere if None).

    Returns:
        The checker (its run cache is ``checker.cache``).

    Raises:
        CLIError: If the judge is unavailable (missing package or API key) or the run cache
            cannot be opened.
    """
    cache = open_run_cache(args)
    built, _ = build_judge(args.judge, err=err, limiter=build_limiter(args))
    judge = CachedJudge(built, cache) if cache is not None else built
    return AnswerChecker(
        judge, cache, min_words=args.min_words, max_concurrency=args.max_concurrency
    )


def _worker_checker(args: argparse.Namespace) -> Runnable[AnswerRecord, CheckedAnswer]:
    """A Ray actor's checker, built once per actor."""
    checker = build_checker(args)
    if checker.cache is not None:
        worker_stack().callback(checker.cache.close)
    return RunnableLambda(checker.check)


class _Answers(BatchJob[AnswerRecord, CheckedAnswer]):
    """What :func:`~langchain_references.cli._runner.run_batch` does with each answer.

    Args:
        checker: This process's checker (the local engine's).
        display: Progress display.
        err: Where an answer's failure is reported.
        keep: On Ctrl-C, keeps what finished and says what was kept.

    Attributes:
        answers: The reports of the answers checked so far, in input order.
        reused: How many of them the run cache had finished.
        failed: How many answers could not be checked (their check raised).
    """

    def __init__(
        self,
        checker: AnswerChecker,
        display: ProgressLines,
        err: TextIO,
        keep: Callable[[], str],
    ) -> None:
        self.checker = checker
        self.display = display
        self.err = err
        self.keep = keep
        self.answers: list[AnswerReport] = []
        self.reused = 0
        self.failed = 0

    def process(self, index: int, item: AnswerRecord) -> CheckedAnswer:
        """Check one answer in this process."""
        self.display.step(index, "judging")
        return self.checker.check(item)

    def report(
        self, index: int, item: AnswerRecord, result: CheckedAnswer, *, reused: bool
    ) -> None:
        """Add answer ``index``'s report and show its figures (in input order)."""
        answer = dataclasses.replace(result.answer, index=index)
        self.answers.append(answer)
        failed, total, _ = judgement_counts([answer])
        self.reused += result.from_cache
        figures = (
            f"recall {format_number(answer.citation_recall)}, "
            f"precision {format_number(answer.citation_precision)}"
            if not _unmeasured([answer])
            else "not measured"
        )
        self.display.done(
            index,
            f"answer {index}: {figures} ({failed} of {total} judgements failed) "
            f"in {result.elapsed_s:.2f}s"
            + (", reused from the run cache" if result.from_cache else ""),
        )

    def fail(self, index: int, item: AnswerRecord, error: Exception) -> None:
        """Report an answer whose check raised (in input order); the run goes on.

        One ``error: FILE:LINE: ... (answer not checked)`` line; the answer is not in the
        report, so no figure counts it.
        """
        logger.debug("Checking answer %d failed", index, exc_info=error)
        self.failed += 1
        self.display.done(index, f"answer {index}: error")
        where = item.location or f"answer {index}"
        self.err.write(f"error: {where}: {failure_text(error)} (answer not checked)\n")

    def interrupted(self, run: BatchRun) -> str:
        """Print the report of the answers checked so far."""
        return self.keep()


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``citations`` command.

    Args:
        args: Arguments parsed by :func:`configure_parser`'s options.
        out: Where the report (:func:`render_report`, or JSON with ``--json``) goes (stdout by
            default).
        err: Where skipped records and the judge notice go (stderr by default).

    Returns:
        0 when every record was checked, 1 when some were skipped or could not be checked
        (each reported on ``err``) or every judgement failed.

    Raises:
        CLIError: If the input cannot be read or has no valid record, the judge is
            unavailable (missing package or API key), or a Ray option is given without
            ``--engine ray``.
        KeyboardInterrupt: On Ctrl-C, once the report of the answers already checked is
            printed, with a note saying so.
    """
    out, err = streams(out, err)
    # One answer at a time per actor: its reuse is read from its actor's cache counts.
    options = ray_options(args, max_concurrency=1)
    records, errors = read_records(args.input, load_answer_records, err)
    checker = build_checker(args, err)
    cache = checker.cache

    def write(report: CitationReport) -> None:
        if args.json:
            data = report.to_dict()
            data["num_judgements"] = judgement_counts(report.answers)[1]
            if _unmeasured(report.answers):  # nothing was measured: no scores
                for key in (
                    "citation_recall",
                    "citation_precision",
                    "macro_recall",
                    "macro_precision",
                ):
                    data[key] = None
            out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        else:
            out.write(render_report(report) + "\n")

    def keep() -> str:  # Ctrl-C: keep what finished; main says "interrupted"
        if job.answers:
            write(CitationReport(tuple(job.answers), tuple(errors)))
        reported = " and reported" if job.answers else ""
        return f"{len(job.answers)} of {len(records)} answer(s) checked{reported}"

    job = _Answers(checker, ProgressLines(err, len(records), enabled=not args.quiet), err, keep)
    ray = None if options is None else RayRun(_worker_checker, args, options)
    run_batch(records, job, ray=ray)  # one by one: Ctrl-C keeps the answers checked
    report = CitationReport(tuple(job.answers), tuple(errors))
    write(report)
    if not args.quiet and (note := reuse_note(job.reused, len(records), "answer(s)", cache)):
        err.write(note + "\n")
    return 1 if errors or job.failed or _unmeasured(report.answers) else 0
