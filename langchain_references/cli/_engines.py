"""Engines (:func:`add_engine_options`): this process, or Ray Data actor pools.

``--engine local`` (the default) runs a batch in this process; ``--engine ray`` runs it on Ray
Data actor pools (:mod:`langchain_references.services.engine`), ``--workers N`` actors on a local
Ray started on 127.0.0.1, or on the cluster of ``--ray-address``. :func:`ray_options` reads them,
and :func:`~langchain_references.cli._runs.build_limiter` then shares the ``--rate`` limits
between the actors (:class:`~langchain_references.services.engine.RayLimiterBackend` in
``args.limiter_backend``, set by :func:`run_on_ray` before the arguments travel to the
actors).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import copy
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from langchain_references._optional import require
from langchain_references.cli._args import positive_int
from langchain_references.cli._errors import CLIError
from langchain_references.services.engine import (
    DEFAULT_ENGINE,
    ENGINES,
    RayLimiterBackend,
    RayOptions,
    WorkerSetupError,
    map_runnable,
    ray_session,
)

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable


__all__ = [
    "DEFAULT_RAY_BATCH_SIZE",
    "DEFAULT_WORKERS",
    "add_engine_options",
    "ray_options",
    "run_on_ray",
    "worker_stack",
]

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
    :class:`~langchain_references.services.engine.RayLimiterBackend` (``limiter_backend``): every
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
