"""Run a Runnable over many items, in this process or on Ray Data actor pools.

Batch work (``index build``, ``factcheck --file``, ``factuality``, ``citations``) is "the same
Runnable applied to every item". The local engine calls it in this process; the Ray engine
(extra ``[ray]``) reads the items as a :class:`ray.data.Dataset` and calls it in a pool of
actors, each of which builds the Runnable **once** (models loaded once per actor) from a
picklable factory, and feeds it batches with ``Runnable.batch(..., return_exceptions=True)``:
an item that fails comes back as its exception, for that item only, as a local run reports it.

One actor class (:class:`RunnableWorker`) does the work for both entry points:

* :func:`map_runnable`: for a driver that handles every result itself (the CLI). Items and
  results travel pickled; results come back **in input order**, as they finish.
* :func:`apply_runnable`: the Python API over a :class:`ray.data.Dataset`: adds an output
  column (the result as JSON) and an error column to a dataset, lazily, like any Ray Data
  transform.

:func:`ray_session` starts a local Ray on 127.0.0.1 (or connects to ``address``) for the time of
a run, unless Ray is already initialised (a test's or a notebook's cluster is reused and left
running). :class:`RayLimiterBackend` shares a run's rate limits between every actor.

Examples:
    >>> import ray  # doctest: +SKIP
    >>> ds = ray.data.from_items([{"claim": "Water boils at 100 C at sea level."}])
    >>> checked = apply_runnable(ds, make_chain, input_column="claim", workers=2)
    >>> checked.write_json("checked/")
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pickle
import threading
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from langchain_references._optional import require
from langchain_references.errors import LangchainReferencesError
from langchain_references.services.ratelimit import LocalLimiterBackend, RateLimit

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable, RunnableConfig
    from ray.data import Dataset

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Engine",
    "RayLimiterBackend",
    "RayOptions",
    "RunnableWorker",
    "WorkerSetupError",
    "apply_runnable",
    "map_runnable",
    "ray_session",
    "to_json",
]

logger = logging.getLogger(__name__)


Engine: TypeAlias = Literal["local", "ray"]
#: The engines, the default first.
ENGINES: Final[tuple[Engine, ...]] = ("local", "ray")
DEFAULT_ENGINE: Final[Engine] = "local"

RunnableFactory: TypeAlias = Callable[[], "Runnable[Any, Any]"]

_INDEX: Final = "__lr_index"
_PAYLOAD: Final = "__lr_payload"
_SESSION_LOCK: Final = threading.Lock()


@dataclass(frozen=True, slots=True)
class RayOptions:
    """Where and how wide a Ray run is.

    Attributes:
        address: ``None`` (or ``"local"``) starts a Ray on this machine, bound to 127.0.0.1,
            for the run; ``"auto"`` or ``"ray://host:10001"`` joins an existing cluster.
        workers: Actors in the pool; each builds the Runnable (its models) once.
        batch_size: Items handed to an actor at a time (``Runnable.batch`` over them).
        max_concurrency: Items an actor works on at once (``Runnable.batch``'s
            ``max_concurrency``; ``None``: LangChain's default).
        cpus_per_worker: CPUs Ray reserves for each actor.

    Raises:
        ValueError: If a count is not positive.
    """

    address: str | None = None
    workers: int = 1
    batch_size: int = 4
    max_concurrency: int | None = None
    cpus_per_worker: float = 1.0

    def __post_init__(self) -> None:
        for name in ("workers", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be positive, got {self.max_concurrency!r}")
        if not self.cpus_per_worker > 0:
            raise ValueError(f"cpus_per_worker must be positive, got {self.cpus_per_worker!r}")

    @property
    def local(self) -> bool:
        """Whether the run starts its own Ray on this machine."""
        return self.address in (None, "local")


#: The output block size of :func:`map_runnable`'s runs: one result per block.
_STREAMED_BLOCK_BYTES: Final = 1


def _ray() -> Any:
    return require("ray", "ray", feature="The Ray engine")


def _quiet_ray_data() -> None:
    """No progress bars or execution banners: the CLI's stdout carries results only."""
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    context.enable_auto_log_stats = False
    context.execution_options.preserve_order = True
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # "progress bars disabled"...
    # _map turns actor restarts off through ray_remote_args (max_restarts has no named
    # parameter in Ray 2.60), which Ray says is deprecated on every run
    warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")


def _ray_messages_to_stderr() -> None:
    """Send what Ray prints for the driver to stderr: stdout carries the results only.

    The driver of a Ray job prints the cluster's error messages (a task that failed as the run
    was interrupted: ``(raylet) Task MapWorker(...).submit failed ...``) to *stdout*, whatever
    ``log_to_driver`` says (``ray._private.worker.listen_error_messages`` marks them
    ``is_err=False``), where they would break ``--json``'s JSON lines. Its printer is replaced,
    once per process, by one that writes everything to stderr.
    """
    from ray._private import worker

    printer = worker.print_to_stdstream
    if getattr(printer, "_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr._to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


#: The logger of Ray's notice that a local cluster uses token authentication (it does: fine).
_AUTH_LOGGER: Final = "ray._private.authentication"


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """Let only errors of logger ``name`` through for the block (stderr has progress only)."""
    quieted = logging.getLogger(name)
    level = quieted.level
    quieted.setLevel(logging.ERROR)
    try:
        yield
    finally:
        quieted.setLevel(level)


@contextlib.contextmanager
def ray_session(options: RayOptions | None = None) -> Iterator[None]:
    """Have Ray initialised for the block: start (or join) it, and shut down what was started.

    An already initialised Ray is used as it is and left running.

    Args:
        options: Where Ray runs (default: a local Ray on 127.0.0.1).

    Yields:
        Nothing; Ray is initialised inside the block.

    Raises:
        MissingDependencyError: If the ``[ray]`` extra is not installed.
    """
    options = options or RayOptions()
    ray = _ray()
    with _SESSION_LOCK:
        started = not ray.is_initialized()
        if started:
            settings: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if options.local:
                cpus = max(os.cpu_count() or 1, int(options.workers * options.cpus_per_worker))
                with _quiet_logger(_AUTH_LOGGER):  # "Token authentication is enabled..."
                    ray.init(
                        address="local", num_cpus=cpus, _node_ip_address="127.0.0.1", **settings
                    )
            else:
                ray.init(address=options.address, **settings)
    _quiet_ray_data()
    _ray_messages_to_stderr()
    try:
        yield
    finally:
        if started:
            with _SESSION_LOCK:
                ray.shutdown()


def to_json(value: Any) -> str:
    """A result as JSON text: its ``to_json``/``to_dict``/pydantic dump, a dataclass, or as is.

    Args:
        value: A Runnable's output.

    Returns:
        JSON text (``default=str`` for values JSON has no type for).
    """
    to_json_method = getattr(value, "to_json", None)
    if callable(to_json_method):
        dumped = to_json_method()
        return dumped if isinstance(dumped, str) else json.dumps(dumped, default=str)
    for name in ("to_dict", "model_dump"):
        method = getattr(value, name, None)
        if callable(method):
            return json.dumps(method(), default=str)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.dumps(dataclasses.asdict(value), default=str)
    return json.dumps(value, default=str)


class WorkerSetupError(LangchainReferencesError, RuntimeError):
    """An actor could not build its Runnable (the factory raised): nothing can run.

    Every item given to that actor comes back as this error (the actor stays up, so Ray does
    not restart it in a loop); :func:`map_runnable` raises it at the first such item.
    """


def _picklable(exc: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RuntimeError naming it."""
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own bytes, just made
    except Exception:  # an exception holding a lock, a client...
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class RunnableWorker:
    """A Ray Data actor: builds the Runnable once, then runs it over each batch it is given.

    Args:
        factory: Builds the Runnable (called once, in the actor).
        input_column: The batch column holding the inputs.
        output_column: The column the outputs go to.
        error_column: The column the failures go to (``None``: failures go to the output
            column as exceptions, for :func:`map_runnable`).
        pickled: Inputs and outputs travel pickled (:func:`map_runnable`); otherwise inputs
            are the column's values and outputs JSON text (:func:`to_json`).
        max_concurrency: Items worked on at once (``Runnable.batch``'s ``max_concurrency``).
        streamed: Yield each item's output as soon as it and the ones before it are done
            (``Runnable.batch_as_completed``, reordered), not when the batch is
            (``Runnable.batch``).
    """

    def __init__(
        self,
        factory: RunnableFactory,
        *,
        input_column: str,
        output_column: str,
        error_column: str | None,
        pickled: bool,
        max_concurrency: int | None = None,
        streamed: bool = False,
    ) -> None:
        self._streamed = streamed
        self._runnable: Runnable[Any, Any] | None = None
        self._setup_error: WorkerSetupError | None = None
        try:
            self._runnable = factory()
        except Exception as exc:  # reported with each item, not as a dying actor
            logger.debug("The Runnable's factory failed", exc_info=True)
            self._setup_error = WorkerSetupError(
                f"a Ray worker could not build its Runnable: {_error_text(exc)}"
            )
        self._input = input_column
        self._output = output_column
        self._error = error_column
        self._pickled = pickled
        self._config: RunnableConfig = (
            {"max_concurrency": max_concurrency} if max_concurrency is not None else {}
        )

    def run(self, inputs: Sequence[Any]) -> list[Any]:
        """The Runnable's outputs for ``inputs``, in order; a failed item gives its exception.

        Args:
            inputs: The items.

        Returns:
            One output or exception per item.
        """
        return list(self.run_in_order(inputs))

    def run_in_order(self, inputs: Sequence[Any]) -> Iterator[Any]:
        """The outputs of :meth:`run`, each as soon as it and every one before it are done.

        The items run at once (up to ``max_concurrency``); an item that finishes early waits
        for the ones before it. Without ``streamed``, they all come when the batch is done.

        Args:
            inputs: The items.

        Yields:
            One output or exception per item, in order.
        """
        if not inputs:
            return
        if self._runnable is None:
            yield from [self._setup_error] * len(inputs)
            return
        if not self._streamed:  # the Runnable's own batch (a judge's is vectorised)
            yield from self._runnable.batch(list(inputs), self._config, return_exceptions=True)
            return
        done: dict[int, Any] = {}
        following = 0
        for index, output in self._runnable.batch_as_completed(
            list(inputs), self._config, return_exceptions=True
        ):
            done[index] = output
            while following in done:
                yield done.pop(following)
                following += 1

    def __call__(self, batch: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Run one Ray Data batch (``batch_format="numpy"``); other columns pass through.

        Yields one row per item, in order, as soon as it is done (with small output blocks,
        :func:`map_runnable`'s, each reaches the driver then, not with its whole batch).
        """
        column = batch[self._input]
        values = list(column.tolist() if hasattr(column, "tolist") else column)
        if self._pickled:
            values = [pickle.loads(value) for value in values]  # noqa: S301 - the driver's own
        for row, output in enumerate(self.run_in_order(values)):
            out = {name: values_[row : row + 1] for name, values_ in batch.items()}
            yield self._with_output(out, output)

    def _with_output(self, out: dict[str, Any], output: Any) -> dict[str, Any]:
        """One row's batch with its output (and error) columns."""
        failed = isinstance(output, BaseException)
        if self._pickled:
            out.pop(self._input)
            out[self._output] = [pickle.dumps(_picklable(output) if failed else output)]
            return out
        out[self._output] = [None if failed else to_json(output)]
        if self._error is not None:
            out[self._error] = [_error_text(output) if failed else None]
        return out


def apply_runnable(
    dataset: Dataset,
    factory: RunnableFactory,
    *,
    input_column: str,
    output_column: str = "output",
    error_column: str = "error",
    options: RayOptions | None = None,
) -> Dataset:
    """Add a Runnable's output (JSON text) and error columns to a Ray dataset, lazily.

    Each actor of the pool builds the Runnable once with ``factory`` (which must be picklable:
    a module-level function, a ``functools.partial``, a lambda) and runs it over batches of the
    input column. An item whose run raised has ``None`` as output and ``"Type: message"`` as
    error; the other items are unaffected. Rows keep their other columns.

    Args:
        dataset: The input dataset (Ray must be initialised: see :func:`ray_session`).
        factory: Builds the Runnable, e.g. ``lambda: FactCheckChain(...)``.
        input_column: The column holding each item's input.
        output_column: The column for the output, as JSON text (:func:`to_json`).
        error_column: The column for the error text (``None`` when the item succeeded).
        options: Pool width, batch size and concurrency (``address`` is ignored here).

    Returns:
        The transformed dataset (nothing runs until it is consumed).
    """
    options = options or RayOptions()
    _quiet_ray_data()
    return _map(
        dataset,
        factory,
        options,
        input_column=input_column,
        output_column=output_column,
        error_column=error_column,
        pickled=False,
    )


def _map(
    dataset: Dataset,
    factory: RunnableFactory,
    options: RayOptions,
    *,
    input_column: str,
    output_column: str,
    error_column: str | None,
    pickled: bool,
    streamed: bool = False,
) -> Dataset:
    import ray.data

    return dataset.map_batches(
        RunnableWorker,
        fn_constructor_args=(factory,),
        fn_constructor_kwargs={
            "input_column": input_column,
            "output_column": output_column,
            "error_column": error_column,
            "pickled": pickled,
            "max_concurrency": options.max_concurrency,
            "streamed": streamed,
        },
        batch_size=options.batch_size,
        batch_format="numpy",
        # one batch at a time per actor: a batch is not queued behind another on a busy
        # actor while an idle one waits (each actor runs its batch's items at once)
        compute=ray.data.ActorPoolStrategy(size=options.workers, max_tasks_in_flight_per_actor=1),
        num_cpus=options.cpus_per_worker,
        # No actor restarts: Ray Data keeps a worker's constructor arguments in the object
        # store, from which a restart is not guaranteed (Ray logs that at error level on
        # every run otherwise); a worker that dies ends the run with Ray's error instead.
        max_restarts=0,
    )


def map_runnable(
    items: Iterable[Any], factory: RunnableFactory, options: RayOptions | None = None
) -> Generator[tuple[int, Any], None, None]:
    """Run a Runnable over items on Ray actors; yield ``(index, output or exception)`` in order.

    Ray is started for the run (or joined) unless it is initialised already. Results are
    yielded in input order as soon as every earlier item is done; an item that raised yields
    its exception (a :class:`RuntimeError` naming it if it cannot be pickled).

    Args:
        items: The inputs (picklable).
        factory: Builds the Runnable, once per actor (picklable).
        options: Where Ray runs and how wide the pool is.

    Yields:
        ``(index, result)`` pairs, ``index`` counting from 0 in input order.

    Raises:
        MissingDependencyError: If the ``[ray]`` extra is not installed.
        WorkerSetupError: If an actor could not build the Runnable.
    """
    options = options or RayOptions()
    rows = [{_INDEX: i, _PAYLOAD: pickle.dumps(item)} for i, item in enumerate(items)]
    if not rows:
        return
    # No more actors than items (Ray Data warns of idle ones).
    options = dataclasses.replace(options, workers=min(options.workers, len(rows)))
    with ray_session(options):
        import ray.data

        blocks = min(len(rows), max(1, options.workers) * 4)
        dataset = ray.data.from_items(rows, override_num_blocks=blocks)
        # each result its own block: it reaches the driver as soon as it is made (its
        # actor yields it then), not when its whole batch is done
        dataset.context.target_max_block_size = _STREAMED_BLOCK_BYTES
        mapped = _map(
            dataset,
            factory,
            options,
            input_column=_PAYLOAD,
            output_column=_PAYLOAD,
            error_column=None,
            pickled=True,
            streamed=True,
        )
        waiting: dict[int, Any] = {}
        following = 0
        for row in mapped.iter_rows():
            result = pickle.loads(row[_PAYLOAD])  # noqa: S301 - our actors'
            if isinstance(result, WorkerSetupError):
                raise result
            waiting[int(row[_INDEX])] = result
            while following in waiting:
                yield following, waiting.pop(following)
                following += 1
        if waiting:  # cannot happen unless Ray lost rows: say so rather than drop them quietly
            raise RuntimeError(f"Ray returned {len(waiting)} result(s) out of sequence")
        if following != len(rows):
            raise RuntimeError(f"Ray returned {following} of {len(rows)} result(s)")


class _LimiterState:
    """The Ray actor behind :class:`RayLimiterBackend`: one token-bucket state for the run."""

    def __init__(self) -> None:
        self._backend = LocalLimiterBackend()
        self._granted: dict[int, int] = {}

    def try_acquire(self, key: str, limit: RateLimit, caller: int = 0) -> float:
        wait = self._backend.try_acquire(key, limit)
        if wait == 0.0:
            self._granted[caller] = self._granted.get(caller, 0) + 1
        return wait

    def granted(self) -> dict[int, int]:
        return dict(self._granted)

    def release(self, key: str) -> None:
        self._backend.release(key)

    def defer(self, key: str, seconds: float) -> None:
        self._backend.defer(key, seconds)


class RayLimiterBackend:
    """Rate-limit state in one Ray actor, shared by every worker of a run.

    Pass it as :class:`~langchain_references.services.ratelimit.RateLimiter`'s ``backend``: a
    limiter built in each actor with this backend (it pickles as the actor's handle) counts the
    requests of all actors together, so ``--rate search=2/s`` means 2/s for the whole run.

    Args:
        handle: The state actor (default: a new one; Ray must be initialised).
    """

    def __init__(self, handle: Any = None) -> None:
        if handle is None:
            ray = _ray()
            handle = ray.remote(num_cpus=0)(_LimiterState).remote()
        self.handle = handle

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayLimiterBackend, (self.handle,))

    def _get(self, ref: Any) -> Any:
        return _ray().get(ref)

    def try_acquire(self, key: str, limit: RateLimit) -> float:
        """See :class:`~langchain_references.services.ratelimit.LimiterBackend`."""
        return float(self._get(self.handle.try_acquire.remote(key, limit, os.getpid())))

    def granted(self) -> dict[int, int]:
        """Requests let through so far, by the process id of the worker that asked."""
        return cast("dict[int, int]", self._get(self.handle.granted.remote()))

    def release(self, key: str) -> None:
        """See :class:`~langchain_references.services.ratelimit.LimiterBackend`."""
        self._get(self.handle.release.remote(key))

    def defer(self, key: str, seconds: float) -> None:
        """See :class:`~langchain_references.services.ratelimit.LimiterBackend`."""
        self._get(self.handle.defer.remote(key, seconds))
