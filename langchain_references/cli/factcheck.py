"""Command line of the fact-check chain: ``langchain-references factcheck "statement"``.

Checks one or more statements (arguments, or ``--file`` with one statement per line, checked
concurrently up to ``--concurrency`` at a time) and writes a report per statement to stdout
(``--style markdown|text|html``) or one JSON object per line (``--json``). Progress goes to
stderr: one line per finished stage, or a live line on a terminal. It comes from the chain's
custom callback events (:data:`~langchain_references.factcheck.result.PROGRESS_EVENT`),
received by a callback handler's ``on_custom_event`` for each statement.

Search (``--search``):

* ``demo`` — fully offline: the demo corpus is served from a local HTTP server on 127.0.0.1,
  searched with BM25, fetched over HTTP, extracted with trafilatura, embedded with MiniLM;
* ``local:FOLDER`` — the ``.html``/``.txt`` files of a folder, served the same way (BM25);
* ``recorded:FILE`` — replay recorded results (JSON or VeriScore-style JSONL);
* ``ddgs``, ``tavily``, ``bing``, ``searx[:URL]`` — web search APIs (optional packages; Tavily
  and Bing need API keys in the environment).

Judge: ``--judge SPEC``, the same option as the ``factuality`` and ``citations`` commands
(:func:`~langchain_references.cli._models.build_judge`): ``heuristic`` (the default: the
offline :class:`~langchain_references.judges.HeuristicJudge` with MiniLM embeddings, which is
weak, not an NLI model, and said so on stderr), ``heuristic-lexical``,
``llm:PROVIDER:MODEL`` (an :class:`~langchain_references.judges.LLMJudge` through
``langchain.chat_models.init_chat_model``) or ``nli:MODEL`` (a
:class:`~langchain_references.judges.CrossEncoderNLIJudge`: a local ONNX model folder or
``.onnx`` file, or a Hugging Face Hub id; its verdicts are named after the model).
``--model PROVIDER:MODEL`` is a deprecated alias of ``--judge llm:PROVIDER:MODEL`` that prints
a warning.

A statement that could not be checked (the search failed or found nothing, no page could be
fetched, no passage was judged, or the chain raised) gets the verdict ``error`` ("Could not
check") with the reason, in the report and in the ``--json`` line alike, and the command exits
with status 1. Ctrl-C stops at once: the reports already written stay, and
:func:`langchain_references.cli.main` says how many in one line (exit status 130).

Resuming: each statement checked (with no failed judgement) is recorded in the run cache
(``--cache FILE``, by default under the user cache directory; ``--no-cache`` records
nothing), with its searches, pages and judgements; ``--resume`` reports the statements an
earlier run with the same settings and judge finished without checking them again (a
statement that was under way reuses the searches, pages and judgements it finds), and says
how many were reused. A search is known in the cache by what it searches (the digest of the
demo corpus, of a folder's files or of a recording), never by the port of the local server of
``demo`` and ``local:FOLDER``, so a resumed run reuses the work of every search kind.

Rate limits (``--rate search=RPS/N``, ``fetch=...`` per host) hold for the web search
back-ends and fetches from the web, for every statement checked at once; a 429 or 503 is
retried after its ``Retry-After``.

Engines: ``--engine ray`` checks the statements on Ray actors (``--workers N``, each building
the chain once), the finished ones taken from the run cache first; on either engine the
statements go through the batch runner (:func:`~langchain_references.cli._runner.run_batch`)
with the same :class:`StatementJob`, and the results are emitted in input order.

Run ``langchain-references factcheck --help`` (or ``python -m langchain_references.cli
factcheck --help``): the single entry point, :func:`langchain_references.cli.main`, registers
the command with :func:`add_parser` and runs it with :func:`run`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO, cast
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler

from langchain_references.cli import _models
from langchain_references.cli._engines import ray_options, worker_stack
from langchain_references.cli._errors import CLIError
from langchain_references.cli._models import build_judge
from langchain_references.cli._progress import ItemProgress, ProgressLines
from langchain_references.cli._runner import BatchJob, BatchRun, RayRun, run_batch
from langchain_references.cli._runs import build_limiter, open_run_cache, reuse_note
from langchain_references.cli.parsers.factcheck import (
    DESCRIPTION,
    HELP,
    configure_parser,
)
from langchain_references.errors import RecordError
from langchain_references.factcheck.report import (
    REPORT_SEPARATORS,
    ReportFormat,
    render_report,
)
from langchain_references.factcheck.result import (
    PROGRESS_EVENT,
    FactCheckProgress,
    FactCheckResult,
)
from langchain_references.factcheck.served import ServedCorpus
from langchain_references.factcheck.verdict import verdict_note
from langchain_references.judges.base import judge_info
from langchain_references.judges.spec import llm_of_spec
from langchain_references.services.loading import read_text

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.runnables import Runnable

    from langchain_references.factcheck.chain import FactCheckChain
    from langchain_references.factcheck.search import SearchProvider
    from langchain_references.judges import JudgeInfo, JudgeInputLike, Judgement
    from langchain_references.services.runcache import RunCache

__all__ = [
    "DESCRIPTION",
    "HELP",
    "CLIError",
    "ProgressDisplay",
    "ProgressHandler",
    "StatementJob",
    "cached_check",
    "configure_parser",
    "run",
]

logger = logging.getLogger(__name__)

#: What the default judge (``--judge heuristic``) says on stderr.
HEURISTIC_NOTICE: Final = _models.HEURISTIC_NOTICE.format(emb=" + MiniLM similarity")
#: What ``--model`` says on stderr (``{model}``: its value).
MODEL_DEPRECATED: Final = (
    "warning: --model is deprecated; use --judge llm:{model} (the judge option of every command)"
)


# --------------------------------------------------------------------------- statements


def read_statements(statements: Sequence[str], file: Path | None) -> list[str]:
    """Collect the statements: the arguments, then the lines of ``file``.

    Args:
        statements: Statements given as arguments.
        file: A file with one statement per line (``-`` for stdin), or ``None``.

    Returns:
        The non-blank statements, whitespace collapsed.

    Raises:
        CLIError: If the file cannot be read or no statement is given.
    """
    collected = [" ".join(s.split()) for s in statements]
    if file is not None:
        try:
            text = sys.stdin.read() if str(file) == "-" else read_text(file)
        except (OSError, UnicodeDecodeError, RecordError) as exc:
            raise CLIError(f"cannot read {file}: {exc}") from exc
        collected.extend(
            " ".join(line.split())
            for line in text.splitlines()
            if not line.lstrip().startswith("#")
        )
    result = [s for s in collected if s]
    if not result:
        raise CLIError("no statement to check: pass STATEMENT or --file")
    return result


# ------------------------------------------------------------------------------ set-up


@dataclass
class _Setup:
    search: SearchProvider
    description: str
    identity: str  # the search in cache keys: a corpus's or a recording's digest, a spec
    corpus: ServedCorpus | None = None  # the pages a local server serves for the search
    web: bool = False  # a web search API: rate-limited


def _optional(build: Any, what: str) -> Any:
    try:
        return build()
    except ImportError as exc:
        raise CLIError(f"--search {what}: {exc}") from exc


def build_search(spec: str, stack: contextlib.ExitStack) -> _Setup:
    """Build the search provider of ``--search``; local servers are stopped by ``stack``.

    Args:
        spec: The ``--search`` value.
        stack: Exit stack owning the servers started here.

    Returns:
        The provider, a description, its identity in cache keys (the digest of a served
        corpus or a recording, never a local server's address), and the corpus it serves.

    Raises:
        CLIError: If the spec is unknown, a path is wrong or an optional package is missing.
    """
    from langchain_references.demo import site as demo_site
    from langchain_references.demo.corpus import render_pages
    from langchain_references.factcheck.search import LocalCorpusSearch, RecordedSearch
    from langchain_references.factcheck.search.spec import search_from_spec

    kind, _, value = spec.partition(":")
    if kind == "demo" and not value:
        rendered = render_pages()
        base_url = stack.enter_context(demo_site.serve_pages(rendered))  # = serve_demo_site()
        corpus = ServedCorpus.of_pages(base_url, rendered)
        return _Setup(
            demo_site.DemoSiteSearch(base_url),
            f"demo corpus served at {base_url}",
            f"demo {corpus.identity}",
            corpus,
        )
    if kind == "local" and value:
        try:
            pages = demo_site.pages_from_folder(value)
        except ValueError as exc:
            raise CLIError(f"--search {spec}: {exc}") from exc
        base_url = stack.enter_context(demo_site.serve_pages(pages))
        corpus = ServedCorpus.of_pages(base_url, pages)
        provider = _optional(lambda: LocalCorpusSearch(value, base_url=base_url), spec)
        description = f"{len(pages)} file(s) of {value} served at {base_url}"
        return _Setup(provider, description, f"local {corpus.identity}", corpus)
    try:
        found = _optional(lambda: search_from_spec(spec), spec)
    except (OSError, ValueError) as exc:
        if kind != "recorded":  # only a recording's file is the user's input to report
            raise
        raise CLIError(f"--search {spec}: {exc}") from exc
    if isinstance(found, RecordedSearch):
        path = Path(value)
        description = f"recorded results from {path} ({len(found.queries)} queries)"
        return _Setup(found, description, f"recorded {found.digest}")
    if found is None:
        raise CLIError(
            f"unknown --search {spec!r}: use demo, local:FOLDER, recorded:FILE, ddgs, tavily, "
            "bing or searx[:URL]"
        )
    return _Setup(found, _WEB_SEARCH_NAMES[kind], spec, web=True)


#: How the report names each web search back-end of :func:`search_from_spec`.
_WEB_SEARCH_NAMES: Final = {
    "ddgs": "DuckDuckGo (ddgs)",
    "tavily": "Tavily",
    "bing": "Bing",
    "searx": "SearxNG",
}


@functools.cache
def _embeddings() -> Embeddings:
    """The offline MiniLM embeddings, loaded once per process."""
    from langchain_references.services.embeddings import EmbeddingModelError, shared_minilm

    try:
        embeddings = shared_minilm()
        embeddings.embed_query("warm-up")  # load and verify the model now, not mid-run
    except EmbeddingModelError as exc:
        raise CLIError(str(exc)) from exc
    return embeddings


def judge_spec(args: argparse.Namespace, err: TextIO) -> str:
    """The ``--judge`` spec, with the deprecated ``--model`` mapped onto it (and warned about).

    Args:
        args: Parsed arguments.
        err: Where the deprecation warning goes.

    Returns:
        The spec for :func:`~langchain_references.cli._models.build_judge`.

    Raises:
        CLIError: If ``--model`` and a non-default ``--judge`` are both given.
    """
    if not args.model:
        return str(args.judge)
    err.write(MODEL_DEPRECATED.format(model=args.model) + "\n")
    if args.judge != "heuristic":
        raise CLIError(
            f"give --judge or the deprecated --model, not both (got --judge {args.judge})"
        )
    return f"llm:{args.model}"


def build_chain(
    args: argparse.Namespace, stack: contextlib.ExitStack, err: TextIO
) -> FactCheckChain:
    """Build the chain for the parsed arguments.

    The chain's run cache (``chain.cache``: finished checks, searches, pages, judgements) is
    closed by ``stack``; its rate limits (``--rate``) hold for the web search, web fetches and
    an LLM judge.

    Args:
        args: Parsed arguments.
        stack: Exit stack owning the local servers and the run cache.
        err: Where to say which search and judge are used.

    Returns:
        The chain.

    Raises:
        CLIError: If a component cannot be built.
    """
    from langchain_references.demo.site import LocalOriginGuard
    from langchain_references.factcheck.cache import PageCache
    from langchain_references.factcheck.chain import create_fact_check_chain
    from langchain_references.factcheck.fetch import PageFetcher
    from langchain_references.judges import HeuristicJudge

    spec = judge_spec(args, err)
    cache = open_run_cache(args)
    if cache is not None:
        stack.callback(cache.close)
    limiter = build_limiter(args)
    judge: Runnable[JudgeInputLike, Judgement] | None = None
    if spec != "heuristic":  # first: a missing package or API key stops before any work
        judge, _model = build_judge(spec, limiter=limiter)
        info = judge_info(judge)
        if info.kind == "llm":
            judge_notice = f"judge: LLMJudge with {llm_of_spec(spec)}"
        elif info.kind == "nli":
            judge_notice = f"judge: {info}"
        else:
            judge_notice = _models.HEURISTIC_NOTICE.format(emb="")
    setup = build_search(args.search, stack)
    embeddings = _embeddings()
    if judge is None:  # the MiniLM embeddings of the chain, loaded once
        judge = HeuristicJudge(embeddings)
        judge_notice = HEURISTIC_NOTICE
    pages = PageCache(store=cache, corpus=setup.corpus) if cache is not None else None
    fetch_limiter = None if setup.corpus else limiter  # our own local server: no limit
    if args.allow_private:
        fetcher = PageFetcher(
            allow_private=True, timeout_s=args.timeout, cache=pages, limiter=fetch_limiter
        )
    elif setup.corpus is not None:
        fetcher = PageFetcher(
            guard=LocalOriginGuard([setup.corpus.base_url]), timeout_s=args.timeout, cache=pages
        )
    else:
        fetcher = PageFetcher(timeout_s=args.timeout, cache=pages, limiter=fetch_limiter)
    if not args.quiet:
        err.write(f"search: {setup.description}\n{judge_notice}\n")
        err.flush()
    return create_fact_check_chain(
        search=setup.search,
        judge=judge,
        embeddings=embeddings,
        fetcher=fetcher,
        k=args.k,
        max_results=args.max_results,
        max_concurrency=args.max_concurrency,
        cache=cache,
        limiter=limiter if setup.web else None,
        # the work, not where it is served: a local server's port changes with every run
        search_identity=setup.identity,
        corpus=setup.corpus,
        retrieval=args.retrieval,
    )


# ------------------------------------------------------------------------------ running


def _outcome(result: FactCheckResult) -> str:
    """A result's verdict on a progress line, or the reason it could not be checked.

    ``supported (confidence 75%, score +0.75 ≥ 0.30)``, ``not_enough_evidence (score +0.00 <
    0.30)`` (no confidence: :func:`~langchain_references.factcheck.verdict.verdict_note`),
    ``error: could not check (REASON)``.
    """
    if not result.checked:
        return f"error: could not check ({result.error})"
    note = verdict_note(result.verdict, result.confidence, result.score, result.verdict_details)
    return f"{result.verdict.value} ({note})"


class ProgressDisplay(ProgressLines):
    r"""Progress on stderr: a live, rewritten line on a terminal, else one line per stage.

    Args:
        stream: The stream (stderr).
        total: Number of statements.
        live: Rewrite one line (``\r``) instead of printing a line per event; defaults to
            whether ``stream`` is a terminal.
        enabled: Show nothing when false.
    """

    def progress(self, index: int, event: FactCheckProgress) -> None:
        """Show a progress event of statement ``index``.

        Args:
            index: 0-based statement index.
            event: The event.
        """
        elapsed_s = event.elapsed_s if event.done else None
        self.step(index, f"{event.stage}: {event.detail}", elapsed_s=elapsed_s)

    def finished(self, index: int, result: FactCheckResult) -> None:
        """Show the verdict of statement ``index``.

        Args:
            index: 0-based statement index.
            result: Its result.
        """
        self.done(index, f"{_outcome(result)} in {result.total_s:.2f}s: {result.statement}")

    def reused(self, index: int, result: FactCheckResult) -> None:
        """Show the verdict of statement ``index``, taken from the run cache.

        Args:
            index: 0-based statement index.
            result: Its result, as an earlier run finished it.
        """
        self.done(index, f"{_outcome(result)}, reused from the run cache: {result.statement}")

    def failed(self, index: int, statement: str, exc: BaseException) -> None:
        """Report that statement ``index`` could not be checked.

        Args:
            index: 0-based statement index.
            statement: The statement.
            exc: The error.
        """
        if self.live:
            self.stream.write("\r\x1b[K")
        self.stream.write(
            f"{self._tag(index)} error: {type(exc).__name__}: {exc} (statement: {statement})\n"
        )
        self.stream.flush()


class ProgressHandler(ItemProgress[ProgressDisplay], AsyncCallbackHandler):
    """Shows the progress events of one statement's run on a :class:`ProgressDisplay`.

    Built as ``ProgressHandler(display, index)`` (:class:`ItemProgress`; ``index``: 0-based
    index of the statement).
    """

    async def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Show a :data:`PROGRESS_EVENT`; ignore other custom events.

        Args:
            name: The event name.
            data: The event data (a :class:`FactCheckProgress` for a progress event).
            run_id: The run that dispatched it.
            tags: The run's tags.
            metadata: The run's metadata.
            **kwargs: Ignored.
        """
        if name == PROGRESS_EVENT and isinstance(data, FactCheckProgress):
            self.display.progress(self.index, data)


def cached_check(chain: Any, statement: str) -> FactCheckResult | None:
    """The finished check of a statement in the chain's run cache (both engines ask it).

    Args:
        chain: The fact-check chain (any Runnable may stand in: without ``cached_result``,
            nothing is reused).
        statement: The statement.

    Returns:
        The stored result, or ``None`` (not resuming, or not finished).
    """
    cached_result = getattr(chain, "cached_result", None)
    cached = cached_result(statement) if cached_result is not None else None
    return cast("FactCheckResult | None", cached)


class StatementJob(BatchJob[str, FactCheckResult]):
    """What :func:`~langchain_references.cli._runner.run_batch` does with each statement.

    Both engines: a statement the chain's run cache has a finished check of
    (:func:`cached_check`) is reused; a check that raised gives a result with verdict
    ``error`` and the exception as its reason (:meth:`FactCheckResult.could_not_check`),
    naming ``judge``: one statement failing does not stop the others.

    Args:
        chain: The fact-check chain (any Runnable may stand in).
        display: Progress display.
        emit: ``emit(index, result)``, called in input order.
        judge: The chain's judge, named by the result of a check that raised.

    Attributes:
        failed: How many statements could not be checked (the check raised, or the verdict
            is ``error``).
    """

    def __init__(
        self,
        chain: Any,
        display: ProgressDisplay,
        emit: Callable[[int, FactCheckResult], None],
        judge: JudgeInfo | None = None,
    ) -> None:
        self.chain = chain
        self.display = display
        self.emit = emit
        self.judge = judge
        self.failed = 0

    def cached(self, index: int, item: str) -> FactCheckResult | None:
        """The statement's finished check in the chain's run cache (:func:`cached_check`)."""
        return cached_check(self.chain, item)

    async def aprocess(self, index: int, item: str) -> FactCheckResult:
        """Check a statement, its progress events shown on the display."""
        handler = ProgressHandler(self.display, index)
        result: FactCheckResult = await self.chain.ainvoke(item, {"callbacks": [handler]})
        return result

    def done(
        self, index: int, item: str, outcome: FactCheckResult | Exception, *, reused: bool
    ) -> None:
        """Show the statement's verdict (or the error its check raised) as it comes."""
        if isinstance(outcome, Exception):
            logger.debug("Checking statement %d failed", index, exc_info=outcome)
            self.display.failed(index, item, outcome)
        elif reused:
            self.display.reused(index, outcome)
        else:
            self.display.finished(index, outcome)

    def report(self, index: int, item: str, result: FactCheckResult, *, reused: bool) -> None:
        """Emit the statement's result (in input order) and count it if it failed."""
        self.failed += not result.checked
        self.emit(index, result)

    def fail(self, index: int, item: str, error: Exception) -> None:
        """Emit a ``could not check`` result naming the error (in input order)."""
        reason = f"{type(error).__name__}: {error}"
        self.report(
            index,
            item,
            FactCheckResult.could_not_check(item, reason, judge=self.judge),
            reused=False,
        )

    def interrupted(self, run: BatchRun) -> str:
        """Say how many statements were reported (their reports stay written)."""
        return f"{run.reported} of {run.total} statement(s) reported"


def _worker_chain(args: argparse.Namespace) -> FactCheckChain:
    """The chain of a Ray actor (built once per actor; its notices go nowhere)."""
    return build_chain(args, worker_stack(), io.StringIO())


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``factcheck`` command.

    Args:
        args: Parsed arguments (see :func:`configure_parser`).
        out: Where reports go (stdout by default).
        err: Where progress and errors go (stderr by default).

    Returns:
        0 if every statement was checked, 1 if some could not be (verdict ``error``: each still
        has its report or JSON line, with the reason), 2 if the command could not start (bad
        option value, missing package or API key).

    Raises:
        KeyboardInterrupt: On Ctrl-C, with a note saying how many statements were reported.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        statements = read_statements(args.statements, args.file)
    except CLIError as exc:
        err.write(f"error: {exc}\n")
        return 2
    try:
        options = ray_options(args, max_concurrency=args.concurrency)
    except CLIError as exc:
        err.write(f"error: {exc}\n")
        return 2
    fmt: ReportFormat = args.style
    written = 0

    def emit(index: int, result: FactCheckResult) -> None:
        nonlocal written
        if args.json:
            out.write(result.to_json() + "\n")
        else:
            if written:
                out.write(REPORT_SEPARATORS[fmt])
            out.write(render_report(result, fmt=fmt) + "\n")
        out.flush()
        written += 1

    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        try:
            chain = build_chain(args, stack, err)
        except CLIError as exc:
            err.write(f"error: {exc}\n")
            return 2
        cache: RunCache | None = getattr(chain, "cache", None)
        job = StatementJob(
            chain,
            ProgressDisplay(err, len(statements), enabled=not args.quiet),
            emit,
            getattr(chain, "judge_info", None),  # any Runnable may stand in
        )
        ray = None if options is None else RayRun(_worker_chain, args, options)
        batch = run_batch(statements, job, concurrency=args.concurrency, ray=ray)
    failed = job.failed
    if not args.quiet:
        err.write(
            f"checked {len(statements) - failed} of {len(statements)} statement(s) "
            f"in {time.perf_counter() - started:.2f}s\n"
        )
        if note := reuse_note(batch.reused, len(statements), "statement(s)", cache):
            err.write(note + "\n")
    if failed:
        err.write(f"error: {failed} of {len(statements)} statement(s) could not be checked\n")
    return 1 if failed else 0
