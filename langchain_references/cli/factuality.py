"""``langchain-references factuality``: FactReasoner-style long-form factuality.

``factuality --input FILE`` scores FactReasoner records (JSON object, JSON list or JSONL; see
:mod:`~langchain_references.factuality.io`) with the FR1/FR2/FR3 graph (``--version``) and
prints the judge (``Judge: KIND (MODEL) — ...``) and one summary line per record: atoms, true /
false / undecided atoms, factual precision (FactReasoner's ``factuality_score``), average
entropy and, when the atoms are labelled, the gold precision and TP/TN/FP/FN.
``--output OUT.jsonl`` writes FactReasoner's result fields
(:mod:`~langchain_references.factuality.io`: its names, types and string formats, with
``model_name`` the judge and ``elapsed_time`` the seconds per record), then this project's:
``judge`` (kind, model, description), atoms, relations, failures, timings and ``inference``
(how the marginals were computed).
Records without atoms (``{"response": ...}``) are atomized and revised by ``--llm`` (default:
the judge's model).

Judges (``--judge``): ``heuristic`` (default; offline HeuristicJudge with MiniLM embeddings,
weak: not an NLI model), ``heuristic-lexical`` (no embeddings), ``llm:PROVIDER:MODEL``
(an LLMJudge through ``langchain.chat_models.init_chat_model``, e.g.
``llm:openai:gpt-4o-mini``; needs the ``langchain`` package and the provider's) or
``nli:MODEL`` (an ONNX cross-encoder: a local folder or ``.onnx`` file, or a Hugging Face Hub
id; the ``nli`` extra; ``model_name`` is then the model's name); see
:func:`~langchain_references.cli._models.build_judge`.

Progress goes to stderr (off with ``--quiet``): one line per finished stage of each record
(``[i/n] judge (8.93s)``; a live line on a terminal) and one with its outcome. A record whose
judgements all failed (no key, no network) is not scored: it says ``k of n judgements failed``
instead of scores and is not written to ``--output``; when only some failed, a warning line
says how many. Ctrl-C stops at once: the records already scored are printed and written to
``--output``, the record under way is not, and
:func:`langchain_references.cli.main` says so in one line (exit status 130).

Resuming: each record scored with no failed judgement is recorded in the run cache
(``--cache FILE``, by default under the user cache directory; ``--no-cache`` records nothing),
keyed by the record, the options and the judge, with every judgement; ``--resume`` takes the
records an earlier run finished from it (their table row and ``--output`` line, as they were)
and says how many; the others are scored again, reusing the judgements they find. ``--rate
judge=RPS/N`` limits an LLM judge's requests (LangChain's ``rate_limiter``).

Engines: ``--engine ray`` scores the records the run cache has not finished on Ray actors
(``--workers N``, each building the evaluator once); every record, on either engine, goes
through the batch runner (:func:`~langchain_references.cli._runner.run_batch`) and the same
reporting (``_Scoring``), in input order.

A record whose evaluation raised (any exception, on either engine) is reported for that
record, ``error: FILE:LINE: ... (record not scored)`` (the message of a ``ValueError``, such
as a record without atoms and no ``--llm``; ``Type: message`` otherwise), has no table row and
no ``--output`` line, and the other records go on.

Exit status: 0 when every record was scored, 1 when some records failed (the others are
still reported; when none could be scored, ``--output`` is not written), 2 when the command
cannot run (unreadable input, unavailable judge or API key), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeAlias
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import Runnable, RunnableLambda

from langchain_references.cli._commands import streams
from langchain_references.cli._engines import ray_options, worker_stack
from langchain_references.cli._errors import CLIError
from langchain_references.cli._files import atomic_write, check_output, read_records, writing
from langchain_references.cli._models import build_judge, load_chat_model
from langchain_references.cli._progress import ItemProgress, ProgressLines
from langchain_references.cli._runner import BatchJob, BatchRun, RayRun, failure_text, run_batch
from langchain_references.cli._runs import build_limiter, open_run_cache, reuse_note
from langchain_references.cli._tables import format_number, format_table
from langchain_references.cli.parsers.factuality import DESCRIPTION, HELP, configure_parser
from langchain_references.factuality.io import (
    FactualityFormatError,
    FactualityInput,
    dump_jsonl,
    input_to_dict,
)
from langchain_references.factuality.pipeline import (
    FactualityResult,
    coerce_factuality_input,
    create_factuality_evaluator,
)
from langchain_references.factuality.retrieval import InputContexts
from langchain_references.judges import judge_info
from langchain_references.judges.cached import CachedJudge, judge_fingerprint
from langchain_references.judges.spec import LLM_PREFIX, NLI_PREFIX
from langchain_references.services.loading import LoadResult, load_records
from langchain_references.services.runcache import RunCache, content_key

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langchain_references.judges.base import JudgeInfo

__all__ = [
    "DESCRIPTION",
    "HELP",
    "ITEM_NAMESPACE",
    "STAGES",
    "StageProgress",
    "build_evaluator",
    "configure_parser",
    "inference_report",
    "judge_failures",
    "judge_model_name",
    "output_record",
    "run",
    "summary_row",
]

logger = logging.getLogger(__name__)

#: Namespace of the finished records in a run cache.
ITEM_NAMESPACE: Final = "factuality"


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


def judge_model_name(spec: str, info: JudgeInfo | None = None) -> str:
    """FactReasoner's ``model_name`` for a ``--judge`` spec: the model, or the judge's name.

    Args:
        spec: ``heuristic``, ``heuristic-lexical``, ``llm:PROVIDER:MODEL`` or ``nli:MODEL``.
        info: The judge built from the spec: an NLI judge is named after its model.

    Returns:
        ``PROVIDER:MODEL`` for an LLM judge, the model's name for an NLI judge (with
        ``info``), the spec itself otherwise.
    """
    if spec.startswith(NLI_PREFIX) and info is not None and info.model is not None:
        return info.model
    return spec.removeprefix(LLM_PREFIX)


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


def judge_failures(result: FactualityResult) -> tuple[int, int]:
    """How many of a record's judgements failed.

    Args:
        result: A result of the factuality evaluator.

    Returns:
        ``(failed, judged)``: the failed judgements and the pairs sent to the judge.
    """
    failed = sum(1 for failure in result.failures if failure.stage == "judge")
    return failed, result.num_judged_pairs


#: The evaluator's stages, as its runs are named (``FactualityPipeline.as_runnable``).
STAGES: Final = frozenset({"atomize", "retrieve", "judge", "infer"})


class StageProgress(ItemProgress[ProgressLines], BaseCallbackHandler):
    """Shows the stages of one record's evaluation on a :class:`ProgressLines`.

    Pass it in the evaluator's ``callbacks``: the runs of :data:`STAGES` directly under the
    evaluator's run are shown when they start (live line) and end (with their duration).
    Built as ``StageProgress(display, index)`` (:class:`ItemProgress`; ``index``: 0-based
    index of the record).
    """

    def __init__(self, display: ProgressLines, index: int) -> None:
        super().__init__(display, index)
        self._root: UUID | None = None
        self._started: dict[UUID, tuple[str, float]] = {}

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Note the evaluator's run, and show a stage that starts.

        Args:
            serialized: Unused.
            inputs: Unused.
            run_id: The run.
            parent_run_id: Its parent run (``None`` for the evaluator's).
            **kwargs: ``name`` is the run's name.
        """
        if parent_run_id is None:
            self._root = run_id
            return
        name = kwargs.get("name")
        if parent_run_id == self._root and isinstance(name, str) and name in STAGES:
            self._started[run_id] = (name, time.perf_counter())
            self.display.step(self.index, name)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Show a stage that ended, with its duration.

        Args:
            outputs: Unused.
            run_id: The run.
            **kwargs: Unused.
        """
        started = self._started.pop(run_id, None)
        if started is not None:
            name, start = started
            self.display.step(self.index, name, elapsed_s=time.perf_counter() - start)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget a stage that raised (the record's error is shown by the command).

        Args:
            error: Unused.
            run_id: The run.
            **kwargs: Unused.
        """
        self._started.pop(run_id, None)


def _outcome(result: FactualityResult) -> str:
    """The progress line's outcome of a scored record."""
    s = result.scores
    if s is None:
        return f"not scored ({len(result.failures)} failure(s))"
    return f"{s.num_atoms} atom(s), precision {format_number(s.factuality_score)}"


def _write_results(path: Path, results: list[dict[str, Any]]) -> int:
    with writing(path), atomic_write(path) as handle:
        return dump_jsonl(handle, results)


class _Records:
    """The finished records of a run in its cache: what the table and ``--output`` need."""

    def __init__(self, cache: RunCache | None, settings: dict[str, Any]) -> None:
        self.cache = cache
        self.settings = settings
        self.reused = 0

    def _key(self, record: FactualityInput) -> str:
        return content_key(ITEM_NAMESPACE, input_to_dict(record), self.settings)

    def get(self, record: FactualityInput) -> dict[str, Any] | None:
        """The stored ``{"row", "output", "outcome"}`` of ``record``, if reusing and finished."""
        if self.cache is None:
            return None
        value = self.cache.get(ITEM_NAMESPACE, self._key(record))
        ok = isinstance(value, dict) and {"row", "output", "outcome"} <= set(value)
        if ok:
            self.reused += 1
        return value if ok else None

    def put(self, record: FactualityInput, row: list[str], output: Any, outcome: str) -> None:
        """Record a finished record (one transaction)."""
        if self.cache is not None:
            value = {"row": row, "output": output, "outcome": outcome}
            self.cache.put(ITEM_NAMESPACE, self._key(record), value)


#: A record of the input: its ``FILE:LINE`` and the record.
Entry: TypeAlias = tuple[str, FactualityInput]
#: What a record gives: its result and the seconds it took (on either engine), or what the
#: run cache holds of it (``{"row", "output", "outcome"}``: an earlier run finished it).
Scored: TypeAlias = tuple[FactualityResult, float] | dict[str, Any]


class _Scoring(BatchJob[Entry, Scored]):
    """What :func:`~langchain_references.cli._runner.run_batch` does with each record.

    :meth:`cached` takes a finished record from the run cache; :meth:`process` scores one;
    :meth:`report` turns a record's result into its table row, ``--output`` line, progress line
    and warning, and stores it in the run cache when it finished; :meth:`fail` reports a record
    whose evaluation raised.

    Args:
        finished: The finished records in the run cache.
        display: Progress display.
        err: Where errors and warnings go.
        model_name: FactReasoner's ``model_name`` of every result.
        evaluator: The factuality evaluator (this process's).
        keep: On Ctrl-C, keeps what finished and says what was kept.
    """

    def __init__(
        self,
        finished: _Records,
        display: ProgressLines,
        err: TextIO,
        model_name: str,
        evaluator: Any,
        keep: Callable[[], str],
    ) -> None:
        self.finished = finished
        self.display = display
        self.err = err
        self.model_name = model_name
        self.evaluator = evaluator
        self.keep = keep
        self.rows: list[list[str]] = []
        self.results: list[dict[str, Any]] = []
        self.failed = 0

    def cached(self, index: int, item: Entry) -> Scored | None:
        """Record ``index``'s row and output line, if an earlier run finished it."""
        return self.finished.get(item[1])

    def process(self, index: int, item: Entry) -> Scored:
        """Score a record in this process, its stages shown on the display."""
        start = time.perf_counter()
        callbacks = [StageProgress(self.display, index)]
        result: FactualityResult = self.evaluator.invoke(item[1], {"callbacks": callbacks})
        return result, time.perf_counter() - start

    def done(self, index: int, item: Entry, outcome: Scored | Exception, *, reused: bool) -> None:
        """Show a record found in the run cache as soon as it is found."""
        if reused and isinstance(outcome, dict):
            name = _record_name(*item)
            self.display.done(index, f"{name}: {outcome['outcome']}, reused from the run cache")

    def report(self, index: int, item: Entry, result: Scored, *, reused: bool) -> None:
        """Report record ``index``'s result (in input order).

        Args:
            index: 0-based record index.
            item: The record's ``FILE:LINE`` and the record.
            result: The evaluator's result and the seconds it took, or the stored record.
            reused: It came from the run cache.
        """
        if isinstance(result, dict):  # an earlier run's: its row and output line, as they were
            self.rows.append([str(cell) for cell in result["row"]])
            self.results.append(result["output"])
            return
        (location, record), (scored, elapsed) = item, result
        err, display = self.err, self.display
        name = _record_name(location, record)
        for failure in scored.failures:
            logger.info(
                "%s: %s failure: %s (%s)", location, failure.stage, failure.reason, failure.item
            )
        k, n = judge_failures(scored)
        if n and k == n:  # nothing was measured: no scores, nothing written
            self.failed += 1
            reason = next(f.reason for f in scored.failures if f.stage == "judge")
            display.done(index, f"{name}: not scored in {elapsed:.2f}s")
            err.write(f"error: {location}: {k} of {n} judgements failed ({reason}); not scored\n")
            self.rows.append(summary_row(name, dataclasses.replace(scored, scores=None)))
            return
        if k:
            err.write(
                f"warning: {location}: {k} of {n} judgements failed; "
                f"the scores use the other {n - k}\n"
            )
        if scored.scores is None:
            self.failed += 1
        row = summary_row(name, scored)
        self.rows.append(row)
        output = output_record(scored, model_name=self.model_name, elapsed_time=elapsed)
        self.results.append(output)
        if not k and scored.scores is not None:  # finished: a resumed run reuses it
            self.finished.put(record, row, output, _outcome(scored))
        display.done(index, f"{name}: {_outcome(scored)} in {elapsed:.2f}s")

    def fail(self, index: int, item: Entry, error: Exception) -> None:
        """Report a record whose evaluation raised (in input order): not scored, not written.

        One ``error: FILE:LINE: ... (record not scored)`` line; the run goes on.
        """
        location, record = item
        logger.debug("Scoring %s failed", location, exc_info=error)
        self.failed += 1
        self.display.done(index, f"{_record_name(location, record)}: error")
        self.err.write(f"error: {location}: {failure_text(error)} (record not scored)\n")

    def interrupted(self, run: BatchRun) -> str:
        """Print the table and write ``--output`` of the records scored so far."""
        return self.keep()


def build_evaluator(
    args: argparse.Namespace,
    judge: Runnable[Any, Any],
    judge_model: BaseChatModel | None,
    cache: RunCache | None,
) -> Any:
    """The factuality evaluator of the parsed arguments (in this process and in each actor).

    Args:
        args: Parsed arguments.
        judge: The judge of ``--judge``.
        judge_model: Its chat model (atomizes records without atoms unless ``--llm``).
        cache: The run cache: judgements are reused from it and stored in it.

    Returns:
        The evaluator (a Runnable over :class:`FactualityInput`).

    Raises:
        CLIError: If ``--llm`` is unavailable (missing package or API key).
    """
    llm = load_chat_model(args.llm, option="--llm", temperature=0) if args.llm else judge_model
    judging = CachedJudge(judge, cache) if cache is not None else judge
    return create_factuality_evaluator(
        llm,
        judge=judging,
        retriever=InputContexts(args.top_k),
        version=args.graph_version,
        top_k=args.top_k,
        inference_method=args.method,
        max_concurrency=args.max_concurrency,
    )


def _timed(evaluator: Any, item: Entry) -> tuple[FactualityResult, float]:
    """A Ray actor's score of one record of the input, and the seconds it took."""
    start = time.perf_counter()
    result: FactualityResult = evaluator.invoke(item[1])
    return result, time.perf_counter() - start


def _worker_evaluator(args: argparse.Namespace) -> Runnable[Any, Any]:
    """A Ray actor's evaluator, built once per actor: ``(location, record) -> (result, s)``."""
    stack = worker_stack()
    cache = open_run_cache(args)
    if cache is not None:
        stack.callback(cache.close)
    judge, judge_model = build_judge(args.judge, limiter=build_limiter(args))
    evaluator = build_evaluator(args, judge, judge_model, cache)
    return RunnableLambda(functools.partial(_timed, evaluator))


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``factuality`` command.

    Args:
        args: Arguments parsed by :func:`configure_parser`'s options.
        out: Where the summary table goes (stdout by default).
        err: Where skipped records, the judge notice and per-record errors go (stderr by
            default).

    Returns:
        0 when every record was scored, 1 when some failed (each is reported on ``err``, the
        others as usual; none scored: nothing is written to ``--output``).

    Raises:
        CLIError: If the input cannot be read, the judge or ``--llm`` is unavailable (missing
            package or API key), a Ray option is given without ``--engine ray``, or the output
            cannot be written.
        KeyboardInterrupt: On Ctrl-C, once the records already scored are printed and
            written, with a note saying what was kept.
    """
    out, err = streams(out, err)
    options = ray_options(args)
    if args.output is not None:
        check_output(args.output, args.input)
    records, bad = read_records(args.input, _load, err)
    cache = open_run_cache(args)
    judge, judge_model = build_judge(args.judge, err=err, limiter=build_limiter(args))
    evaluator = build_evaluator(args, judge, judge_model, cache)
    finished = _Records(
        cache,
        {
            "version": args.graph_version,
            "top_k": args.top_k,
            "method": args.method,
            "llm": args.llm,
            "judge": judge_fingerprint(judge),
        },
    )
    info = judge_info(judge)  # what every result names (FactualityResult.judge)
    started = time.perf_counter()

    def table() -> None:
        out.write(f"FactReasoner FR{args.graph_version}, {len(records)} record(s)\n")
        out.write(f"Judge: {info}\n")
        if scoring.rows:
            out.write(format_table([list(_HEADER), *scoring.rows]) + "\n")

    def keep() -> str:  # Ctrl-C: keep what finished; main says "interrupted"
        table()
        results = scoring.results
        kept = f"{len(results)} of {len(records)} record(s) scored"
        if args.output is not None and results:
            try:
                _write_results(args.output, results)
                kept += f" and written to {args.output}"
            except CLIError as write_error:
                kept += f"; {write_error}"
        elif args.output is not None:
            kept += f"; nothing written to {args.output}"
        return kept

    display = ProgressLines(err, len(records), enabled=not args.quiet)
    model_name = judge_model_name(args.judge, info)
    scoring = _Scoring(finished, display, err, model_name, evaluator, keep)
    scoring.failed = len(bad)
    ray = None if options is None else RayRun(_worker_evaluator, args, options)
    run_batch(records, scoring, ray=ray)
    results = scoring.results
    if not args.quiet:
        err.write(
            f"scored {len(results)} of {len(records)} record(s) "
            f"in {time.perf_counter() - started:.2f}s\n"
        )
        if note := reuse_note(finished.reused, len(records), "record(s)", cache):
            err.write(note + "\n")
    table()
    if args.output is not None:
        if not results:  # every record failed, each one reported
            err.write(f"error: no record could be scored; nothing written to {args.output}\n")
            return 1
        count = _write_results(args.output, results)
        out.write(f"wrote {count} result(s) to {args.output}\n")
    return 1 if scoring.failed else 0
