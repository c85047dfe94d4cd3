"""Pieces shared by the commands: the error, files, argument types, models, judges and tables.

Every command module exposes ``HELP``, ``DESCRIPTION``, ``configure_parser(parser)`` and
``run(args, *, out=None, err=None)``, the :class:`Command` stored as ``args.func`` that
:func:`langchain_references.cli.main` calls; :func:`add_command` registers it (a module with
subcommands of its own, like ``index``, has an ``add_parser(subparsers)`` that does).

Credentials: :func:`load_chat_model` checks a provider's API key variable
(:data:`API_KEY_VARIABLES`) before loading the model, so that a missing key is one ``error:``
line naming the variable, not a traceback from the first call.

Progress: :class:`ProgressLines` (``[i/n] ...`` lines on stderr, one live line on a terminal),
turned off by ``--quiet`` (:func:`add_quiet_option`).

Resuming and rate limits (:func:`add_run_options`): every run records the items it finishes in
a run cache (``--cache FILE``, default
:func:`~langchain_references.runcache.default_run_cache_path`; ``--no-cache`` turns it off);
``--resume`` reads them back, so only what did not finish is run again
(:func:`open_run_cache`). ``--rate KIND=RPS[/N]`` sets the limits of ``search``, ``fetch``
(per host) and ``judge`` (an LLM judge's requests), shared by every worker of the run
(:func:`build_limiter`, defaults :data:`~langchain_references.ratelimit.DEFAULT_LIMITS`).

Files: :func:`read_records` reads an ``--input`` (each bad record reported once, no record at
all is an error); :func:`check_output` refuses an ``--output`` that is an input or cannot be
written, before any work; ``with writing(path), atomic_write(path) as handle:`` writes it all
or nothing.
Engines (:func:`add_engine_options`): ``--engine local`` (the default) runs a batch in this
process; ``--engine ray`` runs it on Ray Data actor pools (:mod:`langchain_references.engine`),
``--workers N`` actors on a local Ray started on 127.0.0.1, or on the cluster of
``--ray-address``. :func:`ray_options` reads them, and :func:`build_limiter` then shares the
``--rate`` limits between the actors (:class:`~langchain_references.engine.RayLimiterBackend`
in ``args.limiter_backend``, set by the driver before the arguments travel to the actors).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import copy
import functools
import importlib
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TextIO, TypeVar

from langchain_references._optional import MissingDependencyError, require
from langchain_references.engine import (
    DEFAULT_ENGINE,
    ENGINES,
    RayLimiterBackend,
    RayOptions,
    WorkerSetupError,
    map_runnable,
    ray_session,
)
from langchain_references.errors import LangchainReferencesError, RecordError
from langchain_references.ratelimit import DEFAULT_LIMITS, RateLimit, RateLimiter
from langchain_references.retrieval import DEFAULT_RETRIEVAL, RETRIEVAL_MODES
from langchain_references.runcache import RunCache, RunCacheError, default_run_cache_path

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import Runnable

    from langchain_references.judges.base import Judge
    from langchain_references.loading import LoadResult

__all__ = [
    "API_KEY_VARIABLES",
    "HEURISTIC_NOTICE",
    "CLIError",
    "Command",
    "ItemProgress",
    "LazyCommand",
    "ProgressLines",
    "add_engine_options",
    "add_judge_options",
    "add_quiet_option",
    "add_run_options",
    "add_subcommand",
    "atomic_write",
    "build_judge",
    "build_limiter",
    "check_api_key",
    "check_output",
    "format_number",
    "format_table",
    "load_chat_model",
    "non_blank",
    "open_run_cache",
    "positive_float",
    "positive_int",
    "rate_option",
    "ray_options",
    "read_records",
    "reading",
    "reuse_note",
    "run_on_ray",
    "streams",
    "worker_stack",
    "writing",
]

T = TypeVar("T")

#: What ``--judge heuristic`` / ``heuristic-lexical`` says on stderr (``{emb}``: embeddings).
HEURISTIC_NOTICE: Final = (
    "judge: HeuristicJudge (offline word-overlap{emb} heuristic; weak, not an NLI model). "
    "Pass --judge llm:PROVIDER:MODEL for an LLM judge, or --judge nli:MODEL for an NLI model."
)


class CLIError(LangchainReferencesError, RuntimeError):
    """The command cannot run as asked (bad option value, unreadable input, missing package).

    :func:`langchain_references.cli.main` prints it as one ``error: ...`` line on stderr and
    exits with status 2.
    """


class Command(Protocol):
    """A command's handler: ``run(args, *, out=None, err=None) -> exit status``."""

    def __call__(
        self, args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> int:
        """Run the command.

        Args:
            args: The parsed arguments.
            out: Where results go (stdout by default).
            err: Where notices and errors go (stderr by default).

        Returns:
            The exit status.
        """
        ...


class LazyCommand:
    """A :class:`Command` that imports its module when it runs, not when the parser is built.

    ``--help`` and ``--version`` then load only the light modules that define the options
    (:mod:`langchain_references.cli.parsers`); a command's judges, models and engines load
    when it runs. Picklable (the parsed arguments travel to Ray actors).

    Args:
        module: The command's module, e.g. ``"langchain_references.cli.factcheck"``.
        function: Its function run as the command (default ``run``).
    """

    def __init__(self, module: str, function: str = "run") -> None:
        self.module = module
        self.function = function

    def __repr__(self) -> str:
        return f"LazyCommand({self.module!r}, {self.function!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyCommand):
            return NotImplemented
        return (self.module, self.function) == (other.module, other.function)

    def __hash__(self) -> int:
        return hash((self.module, self.function))

    def __call__(
        self, args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> int:
        """Import the command's module and run its function."""
        command: Command = getattr(importlib.import_module(self.module), self.function)
        return command(args, out=out, err=err)


#: The program's name.
PROG: Final = "langchain-references"


def write_version() -> None:
    """Print ``langchain-references VERSION`` on stdout (the version read only then)."""
    from langchain_references import __version__  # importlib.metadata: not for --help

    sys.stdout.write(f"{PROG} {__version__}\n")


class VersionAction(argparse.Action):
    """``--version``: print ``langchain-references VERSION`` and exit."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Print the version and exit with status 0."""
        write_version()
        parser.exit()


class CommandParser(argparse.ArgumentParser):
    """The parser of a command: an option it does not know is its error, with its usage.

    argparse hands a subcommand's unknown arguments back to the top-level parser, which then
    reports them under the program's usage; this parser reports them itself (exit status 2).
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse ``args``; an argument this command does not take is a usage error.

        Raises:
            SystemExit: From :meth:`~argparse.ArgumentParser.error` (status 2), if an
                argument is not the command's.
        """
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class DeprecatedAlias(argparse.Action):
    """An option's old spelling: stores what ``replacement`` stores and says so on stderr.

    Args:
        option_strings: The old spelling.
        dest: Where the new option stores its value.
        replacement: The new option, named in the warning.
        **kwargs: Passed to :class:`argparse.Action` (``type``, ``metavar``...).
    """

    def __init__(
        self, option_strings: Sequence[str], dest: str, *, replacement: str, **kwargs: Any
    ) -> None:
        kwargs.setdefault("help", f"deprecated: same as {replacement}")
        kwargs.setdefault("default", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Store ``values`` under the new option's name; warn on stderr."""
        sys.stderr.write(f"warning: {option_string} is deprecated; use {self.replacement}\n")
        setattr(namespace, self.dest, values)


def add_subcommand(
    subparsers: Any,
    name: str,
    help: str,
    description: str,
    configure: Callable[[argparse.ArgumentParser], None],
    run: Command,
) -> argparse.ArgumentParser:
    """Add a subcommand whose handler is ``args.func``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.
        name: The subcommand.
        help: One line for the command list.
        description: The subcommand's ``--help`` description.
        configure: Adds the subcommand's arguments.
        run: The handler, stored as ``args.func``.

    Returns:
        The subcommand's parser.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=description
    )
    configure(parser)
    parser.set_defaults(func=run)
    return parser


def add_command(subparsers: Any, name: str, command: ModuleType) -> argparse.ArgumentParser:
    """Register the command module ``command`` as ``name``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.
        name: The subcommand.
        command: The command's module: its ``add_parser(subparsers)`` if it has one, else its
            ``HELP``, ``DESCRIPTION``, ``configure_parser`` and ``run``
            (:func:`add_subcommand`).

    Returns:
        The subcommand's parser.
    """
    add_parser = getattr(command, "add_parser", None)
    if add_parser is not None:
        parser: argparse.ArgumentParser = add_parser(subparsers)
        return parser
    return add_subcommand(
        subparsers, name, command.HELP, command.DESCRIPTION, command.configure_parser, command.run
    )


def streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    """A command's output and error streams: the given ones, else stdout and stderr.

    Args:
        out: ``run``'s ``out`` argument.
        err: ``run``'s ``err`` argument.

    Returns:
        ``(out, err)``, resolved when the command runs (so that redirections apply).
    """
    return (sys.stdout if out is None else out), (sys.stderr if err is None else err)


@contextlib.contextmanager
def reading(path: object, *errors: type[Exception]) -> Iterator[None]:
    """Report a failure to read an input file as ``CLIError("cannot read PATH: ...")``.

    Args:
        path: The file, for the message.
        *errors: The format errors of the loader, besides ``OSError`` and
            ``UnicodeDecodeError``.

    Yields:
        Nothing: the ``with`` block reads the file.

    Raises:
        CLIError: If the block raises one of those errors.
    """
    caught: tuple[type[Exception], ...] = (OSError, UnicodeDecodeError, *errors)
    try:
        yield
    except caught as exc:
        raise CLIError(f"cannot read {path}: {exc}") from exc


def read_records(
    path: Path, load: Callable[[Path], LoadResult[T]], err: TextIO
) -> tuple[list[T], list[RecordError]]:
    """Read a command's input records, reporting each bad one once on ``err``.

    Args:
        path: The ``--input`` file.
        load: The lenient loader (e.g. ``load_answer_records``): returns the records and one
            :class:`~langchain_references.errors.RecordError` per bad record.
        err: Where each bad record gets one ``error: FILE:LINE: FIELD: ... (record skipped)``
            line.

    Returns:
        The records (at least one) and the errors.

    Raises:
        CLIError: If the file cannot be read, is not JSON, or holds no valid record.
    """
    with reading(path, RecordError):
        loaded = load(path)
    for error in loaded.errors:
        err.write(f"error: {error} (record skipped)\n")
    if not loaded.records:
        if loaded.errors:
            raise CLIError(f"no valid record in {path} ({len(loaded.errors)} skipped)")
        raise CLIError(f"no records in {path}: the file is empty")
    return loaded.records, loaded.errors


# ------------------------------------------------------------------------ output files


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return a.resolve() == b.resolve()


def check_output(output: Path, *inputs: Path | None, option: str = "--output") -> None:
    """Refuse an output file before anything is computed or written.

    Args:
        output: The output file.
        *inputs: The command's input files (``None`` for an absent one).
        option: The option that named ``output``, for messages.

    Raises:
        CLIError: If ``output`` is one of the inputs (also through a link), is a directory, or
            its directory does not exist or is not writable.
    """
    for path in inputs:
        if path is not None and _same_file(output, path):
            raise CLIError(
                f"{option} {output} is the input file {path}; refusing to overwrite the input"
            )
    if output.is_dir():
        raise CLIError(f"cannot write {output}: it is a directory")
    folder = output.parent
    if not folder.is_dir():
        raise CLIError(f"cannot write {output}: no such directory {folder}")
    if not os.access(folder, os.W_OK):
        raise CLIError(f"cannot write {output}: directory {folder} is not writable")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], *, encoding: str = "utf-8") -> Iterator[TextIO]:
    """Write a file all at once: to a temporary file beside it, renamed over it at the end.

    If the ``with`` block raises (or the process dies), the temporary file is removed and
    ``path`` is left as it was: never a partial file. An existing file keeps its permissions.

    Args:
        path: The file to (re)place.
        encoding: The text encoding.

    Yields:
        The open temporary file.

    Raises:
        OSError: If the temporary file cannot be created, written or renamed (see
            :func:`writing`).
    """
    target = Path(path)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    # Created with mode 0o666 minus the umask, like ``open(path, "w")``.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            shutil.copymode(target, temp)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


@contextlib.contextmanager
def writing(path: object) -> Iterator[None]:
    """Report a failure to write an output file as ``CLIError("cannot write PATH: ...")``.

    Args:
        path: The file, for the message.

    Yields:
        Nothing: the ``with`` block writes the file (with :func:`atomic_write`).

    Raises:
        CLIError: If the block raises ``OSError`` or ``UnicodeError`` (e.g. a lone surrogate).
    """
    try:
        yield
    except (OSError, UnicodeError) as exc:
        raise CLIError(f"cannot write {path}: {exc}") from exc


# ------------------------------------------------------------------------ argument types


def positive_int(value: str) -> int:
    """``argparse`` type: an integer >= 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def positive_float(value: str) -> float:
    """``argparse`` type: a number > 0."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return number


def non_blank(value: str) -> str:
    """``argparse`` type: a string that is not empty or only whitespace."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


# ------------------------------------------------------------------------ models and judges

#: The environment variables that hold each chat-model provider's API key, by
#: ``init_chat_model`` provider name (the first is the one named in messages; any one will do).
API_KEY_VARIABLES: Final[dict[str, tuple[str, ...]]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "cohere": ("COHERE_API_KEY",),
    "perplexity": ("PPLX_API_KEY", "PERPLEXITY_API_KEY"),
    "mistralai": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
}

#: Model name prefixes ``init_chat_model`` reads as a provider when the name has none.
_INFERRED_PROVIDERS: Final = (
    (("gpt-", "o1", "o3", "o4", "chatgpt"), "openai"),
    (("claude",), "anthropic"),
    (("command",), "cohere"),
    (("mistral",), "mistralai"),
    (("deepseek",), "deepseek"),
    (("grok",), "xai"),
    (("sonar",), "perplexity"),
)


def _provider(name: str) -> str | None:
    """The provider of ``provider:model`` (or inferred from a bare model name), if known."""
    prefix, colon, _ = name.partition(":")
    if colon and prefix in API_KEY_VARIABLES:
        return prefix
    for prefixes, provider in _INFERRED_PROVIDERS:
        if name.startswith(prefixes):
            return provider
    return None


def check_api_key(name: str, *, option: str = "--model") -> None:
    """Refuse a chat model whose provider's API key is not in the environment.

    Args:
        name: ``provider:model``, e.g. ``"openai:gpt-4o-mini"``.
        option: The option that named the model, for the message (``"--judge llm:"`` is
            followed by the name without a space).

    Raises:
        CLIError: If the provider is in :data:`API_KEY_VARIABLES` and none of its variables
            is set to a non-blank value; the message names the variable.
    """
    provider = _provider(name)
    if provider is None:
        return
    variables = API_KEY_VARIABLES[provider]
    if any(os.environ.get(variable, "").strip() for variable in variables):
        return
    given = f"{option}{name}" if option.endswith(":") else f"{option} {name}"
    raise CLIError(
        f"{given} needs an API key: set the environment variable {variables[0]} (it is not set)"
    )


def load_chat_model(name: str, *, option: str = "--model", **kwargs: Any) -> BaseChatModel:
    """Load ``provider:model`` with ``langchain.chat_models.init_chat_model``.

    Args:
        name: E.g. ``"openai:gpt-4o-mini"``.
        option: The option that named the model, for error messages.
        **kwargs: Passed to ``init_chat_model`` (e.g. ``temperature=0``).

    Returns:
        The chat model.

    Raises:
        CLIError: If ``langchain`` or the provider package is missing, the provider's API key
            is not set (:func:`check_api_key`) or the name is unknown.
    """
    try:
        # Optional dependency, imported by name: it may be absent (and untyped).
        chat_models = require("langchain.chat_models", "llm", feature=f"{option} {name}")
    except MissingDependencyError as exc:
        raise CLIError(f"{exc} (plus the provider's package, e.g. langchain-openai)") from exc
    check_api_key(name, option=option)
    try:
        model: BaseChatModel = chat_models.init_chat_model(name, **kwargs)
    except (ImportError, ValueError) as exc:
        raise CLIError(f"cannot load {option} {name}: {exc}") from exc
    return model


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--judge SPEC`` (read by :func:`build_judge`) and ``--judge-concurrency N``.

    ``--max-concurrency N``, its old spelling, is accepted with a deprecation warning.

    Args:
        parser: The parser of a command that judges claims against passages.
    """
    parser.add_argument(
        "--judge",
        default="heuristic",
        metavar="SPEC",
        help="heuristic | heuristic-lexical | llm:PROVIDER:MODEL | nli:MODEL (an ONNX "
        "cross-encoder: a local folder or .onnx file, or a Hugging Face Hub id) "
        "(default: heuristic)",
    )
    parser.add_argument(
        "--judge-concurrency",
        dest="max_concurrency",
        type=positive_int,
        default=4,
        metavar="N",
        help="judge calls in flight (default: 4)",
    )
    parser.add_argument(
        "--max-concurrency",
        action=DeprecatedAlias,
        replacement="--judge-concurrency",
        dest="max_concurrency",
        type=positive_int,
        metavar="N",
    )


def build_judge(
    spec: str, *, err: TextIO | None = None, limiter: RateLimiter | None = None
) -> tuple[Judge, BaseChatModel | None]:
    """Build the judge of ``--judge`` (every command that judges, and ``serve``).

    The spec is read by :func:`~langchain_references.judges.spec.judge_from_spec`; the chat
    model of an LLM judge is loaded by :func:`load_chat_model` (its API key checked first).

    Args:
        spec: ``heuristic`` (offline, MiniLM embeddings), ``heuristic-lexical`` (offline, no
            embeddings), ``llm:PROVIDER:MODEL`` or ``nli:MODEL`` (an ONNX cross-encoder: a
            local folder or ``.onnx`` file, or a Hugging Face Hub id; the ``nli`` extra).
        err: Where to write :data:`HEURISTIC_NOTICE` for a heuristic judge (nowhere if None).
        limiter: Rate limits; an LLM judge's model draws on its ``"judge"`` key (LangChain's
            ``rate_limiter``).

    Returns:
        The judge and, for an LLM judge, its chat model.

    Raises:
        CLIError: On an unknown spec or an unavailable model (a missing package or API key,
            a missing NLI model file, no network for a Hub id).
    """
    # Imported here: parsing the command line (and --help) loads no judge.
    from langchain_references.judges.heuristic import HeuristicJudge
    from langchain_references.judges.nli import NLIModelError
    from langchain_references.judges.spec import NLI_PREFIX, JudgeSpecError, judge_from_spec

    extra: dict[str, Any] = {}
    if limiter is not None and limiter.limit_for("judge") is not None:
        extra["rate_limiter"] = limiter.for_langchain("judge")
    try:
        judge, model = judge_from_spec(
            spec,
            load_model=lambda name: load_chat_model(
                name, option="--judge llm:", temperature=0, **extra
            ),
        )
    except JudgeSpecError as exc:
        raise CLIError(f"--judge {exc}") from exc
    except NLIModelError as exc:
        raise CLIError(f"--judge nli:{exc}") from exc
    except MissingDependencyError as exc:
        if not spec.startswith(NLI_PREFIX):
            raise
        raise CLIError(f"--judge {spec}: {exc}") from exc
    if isinstance(judge, HeuristicJudge) and err is not None:
        emb = " + MiniLM similarity" if judge.embeddings is not None else ""
        err.write(HEURISTIC_NOTICE.format(emb=emb) + "\n")
    return judge, model


# ------------------------------------------------------------------------ resuming, rates


def rate_option(value: str) -> tuple[str, RateLimit]:
    """``argparse`` type of ``--rate``: ``KIND=RPS[/CONCURRENT]``.

    Args:
        value: E.g. ``search=0.5/1`` or ``fetch=4/4``.

    Returns:
        ``(kind, limit)``.

    Raises:
        argparse.ArgumentTypeError: If the kind is not one of ``search``, ``fetch``, ``judge``
            or the limit is malformed.
    """
    kind, equals, limit = value.partition("=")
    if not equals or kind.strip() not in DEFAULT_LIMITS:
        raise argparse.ArgumentTypeError(
            f"expected KIND=RPS[/CONCURRENT] with KIND one of {', '.join(DEFAULT_LIMITS)},"
            f" got {value!r}"
        )
    try:
        return kind.strip(), RateLimit.parse(limit)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Add a batch command's options: ``--quiet``, ``--resume``, ``--cache``, ``--rate``...

    ``--quiet``, ``--resume``, ``--cache FILE``, ``--no-cache`` and ``--rate KIND=RPS[/N]``.

    Args:
        parser: The parser of a command that runs a batch.
    """
    add_quiet_option(parser)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="reuse what an earlier run with the same inputs, settings and judge finished",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        metavar="FILE",
        help=f"run cache (SQLite; default: {default_run_cache_path()})",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="record nothing (a later --resume redoes all)"
    )
    defaults = ", ".join(
        f"{kind}={limit.requests_per_second:g}/{limit.max_concurrent}"
        for kind, limit in DEFAULT_LIMITS.items()
    )
    parser.add_argument(
        "--rate",
        type=rate_option,
        action="append",
        default=[],
        metavar="KIND=RPS[/N]",
        help=f"requests per second and in flight of search, fetch (per host) or judge "
        f"(default: {defaults})",
    )


def open_run_cache(args: argparse.Namespace) -> RunCache | None:
    """The run cache of ``--cache``/``--resume``/``--no-cache``.

    Args:
        args: Parsed arguments (:func:`add_run_options`).

    Returns:
        The cache (reusing with ``--resume``), or ``None`` with ``--no-cache``.

    Raises:
        CLIError: If ``--resume`` and ``--no-cache`` are both given, or the file cannot be
            opened.
    """
    resume = bool(getattr(args, "resume", False))
    if getattr(args, "no_cache", False):
        if resume:
            raise CLIError("--resume needs the run cache: drop --no-cache")
        return None
    path = getattr(args, "cache", None) or default_run_cache_path()
    try:
        return RunCache(path, reuse=resume, keep_going=True)
    except RunCacheError as exc:
        raise CLIError(str(exc)) from exc


def build_limiter(args: argparse.Namespace) -> RateLimiter:
    """The rate limiter of ``--rate`` (over :data:`~langchain_references.ratelimit.DEFAULT_LIMITS`).

    Args:
        args: Parsed arguments (:func:`add_run_options`); ``args.limiter_backend``, when the
            driver of a Ray run set it, holds the limits' state shared by all the actors.

    Returns:
        The limiter, shared by every worker of the run.
    """
    limits = dict(DEFAULT_LIMITS)
    for kind, limit in getattr(args, "rate", None) or []:
        limits[kind] = limit
    return RateLimiter(limits, backend=getattr(args, "limiter_backend", None))


def reuse_note(reused: int, total: int, what: str, cache: RunCache | None) -> str:
    """The line that says how many items a run reused, e.g. ``reused 3 of 5 statement(s)...``.

    Args:
        reused: Items taken from the cache.
        total: Items of the run.
        what: The items' name, e.g. ``"statement(s)"``.
        cache: The run cache (``None``: nothing said).

    Returns:
        The line (no newline), or ``""`` when not resuming.
    """
    if cache is None or not cache.reuse:
        return ""
    return f"resumed: reused {reused} of {total} {what} from {cache.path}"


# ------------------------------------------------------------------------ engines

#: Actors of ``--engine ray`` when ``--workers`` is not given.
DEFAULT_WORKERS: Final = 2
#: Items handed to an actor at a time when ``--ray-batch-size`` is not given.
DEFAULT_RAY_BATCH_SIZE: Final = 4


def add_engine_options(parser: argparse.ArgumentParser, *, batch_option: bool = True) -> None:
    """Add ``--engine local|ray``, ``--ray-address``, ``--workers`` and ``--ray-batch-size``.

    Args:
        parser: The parser of a batch command (read back by :func:`ray_options`).
        batch_option: Add ``--ray-batch-size`` (``index build`` batches by ``--batch-size``).
    """
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--engine",
        choices=ENGINES,
        default=DEFAULT_ENGINE,
        help="run the items in this process (local, the default) or on Ray actor pools (ray:"
        " needs the [ray] extra)",
    )
    group.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to join, e.g. auto or ray://HOST:10001 (default: start a local Ray"
        " on 127.0.0.1)",
    )
    group.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help=f"Ray actors, each loading the models once (default: {DEFAULT_WORKERS})",
    )
    if batch_option:
        group.add_argument(
            "--ray-batch-size",
            type=positive_int,
            metavar="N",
            help=f"items handed to an actor at a time (default: {DEFAULT_RAY_BATCH_SIZE})",
        )


def ray_options(
    args: argparse.Namespace, *, max_concurrency: int | None = None
) -> RayOptions | None:
    """The Ray run of ``--engine ray`` (checking that Ray is installed), or ``None`` for local.

    Args:
        args: Parsed arguments (:func:`add_engine_options`).
        max_concurrency: Items an actor works on at once (``None``: LangChain's default).

    Returns:
        The options, or ``None`` with ``--engine local``.

    Raises:
        CLIError: If a Ray option is given without ``--engine ray``.
        MissingDependencyError: If ``--engine ray`` is asked for without the ``[ray]`` extra.
    """
    if getattr(args, "engine", DEFAULT_ENGINE) != "ray":
        given = [
            option
            for option, name in (
                ("--ray-address", "ray_address"),
                ("--workers", "workers"),
                ("--ray-batch-size", "ray_batch_size"),
            )
            if getattr(args, name, None) is not None
        ]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise CLIError(f"{' and '.join(given)} {verb} --engine ray (the default is local)")
        return None
    require("ray", "ray", feature="--engine ray")
    return RayOptions(
        address=args.ray_address,
        workers=args.workers or DEFAULT_WORKERS,
        batch_size=getattr(args, "ray_batch_size", None) or DEFAULT_RAY_BATCH_SIZE,
        max_concurrency=max_concurrency,
    )


@contextlib.contextmanager
def run_on_ray(
    items: Sequence[Any],
    build: Callable[[argparse.Namespace], Runnable[Any, Any]],
    args: argparse.Namespace,
    options: RayOptions,
) -> Iterator[Iterator[tuple[int, Any]]]:
    """Run a command's per-item Runnable over ``items`` on Ray; Ray is shut down at the end.

    Each actor builds the Runnable once with ``build(args)`` (``build``: a module-level
    function of the command, so that it pickles by name). The arguments the actors get carry a
    :class:`~langchain_references.engine.RayLimiterBackend` (``limiter_backend``): every
    :func:`build_limiter` of the run draws on the same ``--rate`` limits.

    Args:
        items: The items to run (picklable); none: nothing is started.
        build: Builds the per-item Runnable from the parsed arguments, in each actor.
        args: The parsed arguments.
        options: The Ray run (:func:`ray_options`).

    Yields:
        ``(index in items, output or exception)`` in input order (Ctrl-C, or any error of the
        block, stops the run and shuts down the Ray it started).

    Raises:
        CLIError: If an actor could not build the Runnable.
    """
    if not items:
        yield iter(())
        return
    with ray_session(options):
        worker_args = copy.copy(args)
        worker_args.limiter_backend = RayLimiterBackend()
        results = map_runnable(items, functools.partial(build, worker_args), options)
        try:
            yield results
        except WorkerSetupError as exc:  # e.g. a model an actor cannot load
            raise CLIError(str(exc)) from exc
        finally:
            results.close()  # the generator's own Ray session ends here


def worker_stack() -> contextlib.ExitStack:
    """An exit stack for what a Ray actor's Runnable holds (servers, the run cache).

    Returns:
        The stack, closed when the actor's process exits.
    """
    stack = contextlib.ExitStack()
    atexit.register(stack.close)
    return stack


# ------------------------------------------------------------------------ retrieval


def add_retrieval_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--retrieval dense|bm25|hybrid`` (default ``hybrid``).

    Args:
        parser: The parser of a command that ranks evidence (``index build``, ``serve``,
            ``factcheck``).
        what: What the mode ranks, for the help text.
    """
    parser.add_argument(
        "--retrieval",
        choices=RETRIEVAL_MODES,
        default=DEFAULT_RETRIEVAL,
        help=f"how {what}: by embeddings (dense), by BM25 (bm25), or both fused by "
        f"reciprocal rank (hybrid; the default)",
    )


# ------------------------------------------------------------------------ progress


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    """Add ``-q/--quiet``: no progress on stderr (errors and notices still go there).

    Args:
        parser: The parser of a command that shows progress.
    """
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


class ProgressLines:
    r"""Progress of numbered items on stderr: a live, rewritten line on a terminal, else lines.

    Each line is tagged ``[i/n]``. On a terminal (``live``) the line of the step under way is
    rewritten in place (``\r``); elsewhere (a file, a pipe) only finished steps are written,
    one line each.

    Args:
        stream: The stream (stderr).
        total: Number of items.
        live: Rewrite one line instead of writing a line per step; defaults to whether
            ``stream`` is a terminal.
        enabled: Show nothing when false (``--quiet``).
    """

    def __init__(
        self, stream: TextIO, total: int, *, live: bool | None = None, enabled: bool = True
    ) -> None:
        self.stream = stream
        self.total = total
        self.enabled = enabled
        isatty = getattr(stream, "isatty", None)
        self.live = live if live is not None else bool(isatty and isatty())

    def _tag(self, index: int) -> str:
        return f"[{index + 1}/{self.total}]"

    def _write(self, line: str, *, final: bool) -> None:
        if not self.enabled:
            return
        if self.live:
            self.stream.write("\r\x1b[K" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def step(self, index: int, text: str, *, elapsed_s: float | None = None) -> None:
        """Show a step of item ``index``: under way (``elapsed_s`` None) or finished.

        A step under way is shown only on a live line (``text…``); a finished one as
        ``[i/n] text (1.23s)``.

        Args:
            index: 0-based item index.
            text: What the step does, e.g. ``"judge"``.
            elapsed_s: Seconds the finished step took; ``None`` while it runs.
        """
        if elapsed_s is not None:
            self._write(f"{self._tag(index)} {text} ({elapsed_s:.2f}s)", final=False)
        elif self.live:
            self._write(f"{self._tag(index)} {text}…", final=False)

    def done(self, index: int, text: str) -> None:
        """Show the outcome of item ``index`` (a line of its own, also on a terminal).

        Args:
            index: 0-based item index.
            text: The outcome.
        """
        self._write(f"{self._tag(index)} {text}", final=True)


DisplayT = TypeVar("DisplayT", bound=ProgressLines)


class ItemProgress(Generic[DisplayT]):
    """The item a progress callback handler reports on: a display and the item's index.

    A base of the commands' callback handlers (mixed in before the LangChain handler class).

    Args:
        display: The display.
        index: 0-based index of the item (statement, record...).
    """

    def __init__(self, display: DisplayT, index: int) -> None:
        self.display = display
        self.index = index


# ------------------------------------------------------------------------ tables


def format_number(value: float | None, digits: int = 3) -> str:
    """A table cell for a number: ``-`` for None, else ``digits`` decimals.

    Args:
        value: The number, or None when undefined.
        digits: Decimals.

    Returns:
        The cell.
    """
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, with a dashed line under the header.

    Args:
        rows: The header row, then the data rows; all of the same length.

    Returns:
        The table, without a final newline.
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
