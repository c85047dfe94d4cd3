"""One batch runner for ``factcheck``, ``factuality`` and ``citations``, local or on Ray.

A batch command runs one piece of work per item (a statement, a record, an answer) and reports
each item in input order. What differs between the commands (how one item is processed, how
its result or its failure is shown) is a :class:`BatchJob`; what they share is
:func:`run_batch`:

* **reuse**: :meth:`BatchJob.cached` gives an item an earlier run finished (the run cache,
  ``--resume``); it is reported without being processed again;
* **dispatch**: the other items are processed in this process, one at a time
  (:meth:`BatchJob.process`) or ``concurrency`` at a time (:meth:`BatchJob.aprocess`), or on
  Ray actors (:class:`RayRun`: each actor builds the command's Runnable once);
* **settle**: an item's outcome is its result, or the exception its processing raised;
  :meth:`BatchJob.done` sees it as soon as it is known (progress);
* **order**: :meth:`BatchJob.report` (a result) or :meth:`BatchJob.fail` (a failure) is
  called for every item in input order, each as soon as it and the ones before it are done;
* **Ctrl-C**: the run stops at once; what was reported stays reported (and in the run cache),
  Ray is shut down, and the ``KeyboardInterrupt`` carries the note of
  :meth:`BatchJob.interrupted` (what was kept) to :func:`langchain_references.cli.main`.

One error policy: an exception while looking up or processing one item (on either engine) is
that item's failure, reported for it by :meth:`BatchJob.fail` (:func:`failure_text` words
it), and the run goes on with the others; it never stops the run. Only a setup error stops a
run, before any item (bad arguments, an unreadable input, a missing extra or API key, a judge
or model that cannot be loaded: a :class:`~langchain_references.cli._errors.CLIError`, exit
status 2), or a Ray actor that cannot build the command's Runnable. A command whose items
failed exits with status 1.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from langchain_references.cli._engines import run_on_ray
from langchain_references.services._concurrency import run_sync

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable

    from langchain_references.services.engine import RayOptions

__all__ = ["BatchJob", "BatchRun", "RayRun", "failure_text", "run_batch"]

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


def failure_text(error: Exception) -> str:
    """How an item's failure is named: the message of a ``ValueError``, else ``Type: message``.

    A ``ValueError`` (:class:`~langchain_references.errors.RecordError` among them) says what
    is wrong with the item, for its user; any other exception is named with its type.

    Args:
        error: What the item's processing raised.

    Returns:
        One line.
    """
    text = str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"
    return " ".join(text.split())


@dataclass
class BatchRun:
    """Where a batch is: how many items it has, reported, reused and failed so far.

    Attributes:
        total: The items of the run.
        reported: The items reported so far, in input order (results and failures).
        reused: The items taken from the run cache.
        failed: The index of each item whose processing raised, in input order.
    """

    total: int
    reported: int = 0
    reused: int = 0
    failed: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class RayRun:
    """A batch run on Ray actors (``--engine ray``).

    Attributes:
        build: Builds the per-item Runnable from the parsed arguments, once in each actor (a
            module-level function of the command, so that it pickles by name); it takes an
            item as it is (the items travel pickled) and gives what :meth:`BatchJob.process`
            gives for it.
        args: The parsed arguments.
        options: The Ray run (:func:`~langchain_references.cli._engines.ray_options`).
    """

    build: Callable[[argparse.Namespace], Runnable[Any, Any]]
    args: argparse.Namespace
    options: RayOptions


class BatchJob(abc.ABC, Generic[ItemT, ResultT]):
    """The command-specific parts of a batch: process an item, report a result or a failure."""

    def cached(self, index: int, item: ItemT) -> ResultT | None:
        """The result of ``item`` that an earlier run finished, if it is to be reused.

        Args:
            index: 0-based item index.
            item: The item.

        Returns:
            The stored result, or ``None`` (not resuming, not finished, or nothing stored).
        """
        return None

    def process(self, index: int, item: ItemT) -> ResultT:
        """Process one item in this process (one at a time).

        Args:
            index: 0-based item index.
            item: The item.

        Returns:
            Its result.

        Raises:
            NotImplementedError: If the job only runs concurrently (:meth:`aprocess`).
        """
        raise NotImplementedError(f"{type(self).__name__} has no sync process")

    async def aprocess(self, index: int, item: ItemT) -> ResultT:
        """Process one item in this process, with others at once (``concurrency``).

        Args:
            index: 0-based item index.
            item: The item.

        Returns:
            Its result.

        Raises:
            NotImplementedError: If the job only runs one item at a time (:meth:`process`).
        """
        raise NotImplementedError(f"{type(self).__name__} has no async process")

    def done(self, index: int, item: ItemT, outcome: ResultT | Exception, *, reused: bool) -> None:
        """See an item's outcome as soon as it is known (not in input order): progress.

        Args:
            index: 0-based item index.
            item: The item.
            outcome: Its result, or the exception its processing raised.
            reused: The result came from the run cache (:meth:`cached`).
        """

    @abc.abstractmethod
    def report(self, index: int, item: ItemT, result: ResultT, *, reused: bool) -> None:
        """Report an item's result (called in input order).

        Args:
            index: 0-based item index.
            item: The item.
            result: Its result.
            reused: It came from the run cache (:meth:`cached`).
        """

    @abc.abstractmethod
    def fail(self, index: int, item: ItemT, error: Exception) -> None:
        """Report that an item's processing raised (called in input order); the run goes on.

        The report names the item (its line, its statement...) and the error
        (:func:`failure_text`); it is never a result or a score.

        Args:
            index: 0-based item index.
            item: The item.
            error: What its processing raised.
        """

    def interrupted(self, run: BatchRun) -> str:
        """Keep what the run finished, on Ctrl-C, and say what was kept.

        Args:
            run: Where the run is.

        Returns:
            The note added to the ``KeyboardInterrupt`` (one line).
        """
        return f"{run.reported} of {run.total} item(s) reported"


@dataclass
class _Batch(Generic[ItemT, ResultT]):
    """One run of :func:`run_batch`: the items, the job and where it is."""

    items: Sequence[ItemT]
    job: BatchJob[ItemT, ResultT]
    run: BatchRun

    def lookup(self, index: int) -> ResultT | None:
        """Item ``index``'s result from the run cache (shown as done), if any."""
        cached = self.job.cached(index, self.items[index])
        if cached is not None:
            self.job.done(index, self.items[index], cached, reused=True)
        return cached

    def finish(self, index: int, outcome: ResultT | BaseException) -> ResultT | Exception:
        """Item ``index``'s outcome, just known: shown as done (an interrupt is raised)."""
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # KeyboardInterrupt, SystemExit: not an item's failure
        self.job.done(index, self.items[index], outcome, reused=False)
        return outcome

    def settle(self, index: int, outcome: ResultT | Exception, *, reused: bool = False) -> None:
        """Report item ``index``'s result or failure (in input order)."""
        item = self.items[index]
        if isinstance(outcome, Exception):
            self.job.fail(index, item, outcome)
            self.run.failed.append(index)
        else:
            self.job.report(index, item, outcome, reused=reused)
            self.run.reused += reused
        self.run.reported += 1

    def one_at_a_time(self) -> None:
        """Each item in this process, after the one before it."""
        for index, item in enumerate(self.items):
            outcome, reused = self.one(index, item)
            self.settle(index, outcome, reused=reused)

    def one(self, index: int, item: ItemT) -> tuple[ResultT | Exception, bool]:
        """Item ``index``'s outcome in this process, and whether it was reused."""
        outcome: ResultT | Exception
        try:
            cached = self.lookup(index)
            if cached is not None:
                return cached, True
            outcome = self.job.process(index, item)
        except Exception as exc:  # the item's failure, reported for it
            outcome = exc
        return self.finish(index, outcome), False

    async def concurrently(self, concurrency: int) -> None:
        """The items in this process, ``concurrency`` at a time, reported in input order."""
        semaphore = asyncio.Semaphore(concurrency)

        async def one(index: int, item: ItemT) -> tuple[ResultT | Exception, bool]:
            outcome: ResultT | Exception
            try:
                cached = await asyncio.to_thread(self.job.cached, index, item)
                if cached is not None:
                    self.job.done(index, item, cached, reused=True)
                    return cached, True
                async with semaphore:
                    outcome = await self.job.aprocess(index, item)
            except Exception as exc:  # the item's failure, reported for it
                outcome = exc
            return self.finish(index, outcome), False

        tasks = [asyncio.create_task(one(i, item)) for i, item in enumerate(self.items)]
        try:
            for index, task in enumerate(tasks):
                outcome, reused = await task
                self.settle(index, outcome, reused=reused)
        finally:
            for task in tasks:
                task.cancel()

    def on_ray(self, ray: RayRun) -> None:
        """The items the run cache has not finished on Ray actors, reported in input order."""
        known: dict[int, tuple[ResultT | Exception, bool]] = {}  # not sent: reused or failed
        for index in range(len(self.items)):
            try:
                cached = self.lookup(index)
            except Exception as exc:  # the item's failure, reported for it
                known[index] = self.finish(index, exc), False
                continue
            if cached is not None:
                known[index] = cached, True
        todo = [item for index, item in enumerate(self.items) if index not in known]
        with run_on_ray(todo, ray.build, ray.args, ray.options) as results:
            for index in range(len(self.items)):
                if index in known:
                    outcome, reused = known[index]
                    self.settle(index, outcome, reused=reused)
                    continue
                _, sent = next(results)  # in input order, as ``todo``
                self.settle(index, self.finish(index, sent))


def run_batch(
    items: Sequence[ItemT],
    job: BatchJob[ItemT, ResultT],
    *,
    concurrency: int | None = None,
    ray: RayRun | None = None,
) -> BatchRun:
    """Run a batch command's items and report each one, in input order.

    Args:
        items: The items.
        job: What the command does with each item and with its outcome.
        concurrency: ``None``: one item at a time in this process (:meth:`BatchJob.process`);
            a number: that many at once (:meth:`BatchJob.aprocess`, on an event loop).
        ray: Run on Ray actors instead (``concurrency`` is then the actors' own).

    Returns:
        How many items were reported, reused and failed.

    Raises:
        KeyboardInterrupt: On Ctrl-C, once what finished is kept, with the note of
            :meth:`BatchJob.interrupted`.
        CLIError: If a Ray actor could not build the command's Runnable (a setup error).
    """
    batch = _Batch(items, job, BatchRun(total=len(items)))
    try:
        if ray is not None:
            batch.on_ray(ray)
        elif concurrency is None:
            batch.one_at_a_time()
        else:
            run_sync(batch.concurrently(concurrency))
    except KeyboardInterrupt as exc:  # main says "interrupted" with this note
        exc.add_note(job.interrupted(batch.run))
        raise
    return batch.run
