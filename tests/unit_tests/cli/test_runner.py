"""The batch runner of ``factcheck``, ``factuality`` and ``citations``: reuse, order, failures."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from langchain_references.cli import _runner
from langchain_references.cli._runner import BatchJob, BatchRun, RayRun, failure_text, run_batch
from langchain_references.errors import RecordError
from langchain_references.services.engine import RayOptions


class Job(BatchJob[str, str]):
    """Upper-cases items; raises for items starting with ``boom``; ``cache`` holds finished ones.

    Every call is logged in ``events`` as ``(call, index, ...)``.
    """

    def __init__(self, cache: dict[str, str] | None = None, delays: dict[str, float] | None = None):
        self.cache = cache or {}
        self.delays = delays or {}
        self.events: list[tuple[Any, ...]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    def cached(self, index: int, item: str) -> str | None:
        return self.cache.get(item)

    def _result(self, item: str) -> str:
        if item.startswith("boom"):
            raise RuntimeError(f"{item} exploded")
        if item == "interrupt":
            raise KeyboardInterrupt
        return item.upper()

    def process(self, index: int, item: str) -> str:
        self.events.append(("process", index))
        return self._result(item)

    async def aprocess(self, index: int, item: str) -> str:
        self.events.append(("process", index))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delays.get(item, 0.0))
            return self._result(item)
        finally:
            self.in_flight -= 1

    def done(self, index: int, item: str, outcome: str | Exception, *, reused: bool) -> None:
        shown = f"{type(outcome).__name__}" if isinstance(outcome, Exception) else outcome
        self.events.append(("done", index, shown, reused))

    def report(self, index: int, item: str, result: str, *, reused: bool) -> None:
        self.events.append(("report", index, result, reused))

    def fail(self, index: int, item: str, error: Exception) -> None:
        self.events.append(("fail", index, f"{type(error).__name__}: {error}"))

    def interrupted(self, run: BatchRun) -> str:
        return f"kept {run.reported} of {run.total}"

    def calls(self, name: str) -> list[tuple[Any, ...]]:
        return [event[1:] for event in self.events if event[0] == name]


ITEMS = ["a", "boom b", "c", "d"]


def test_one_at_a_time_reuses_processes_and_reports_each_item_in_order() -> None:
    job = Job(cache={"c": "C (cached)"})
    run = run_batch(ITEMS, job)
    assert job.events == [
        ("process", 0),
        ("done", 0, "A", False),
        ("report", 0, "A", False),
        ("process", 1),
        ("done", 1, "RuntimeError", False),
        ("fail", 1, "RuntimeError: boom b exploded"),  # reported for that item...
        ("done", 2, "C (cached)", True),  # ...and the run goes on; c is not processed again
        ("report", 2, "C (cached)", True),
        ("process", 3),
        ("done", 3, "D", False),
        ("report", 3, "D", False),
    ]
    assert run == BatchRun(total=4, reported=4, reused=1, failed=[1])


def test_concurrent_items_are_reported_in_input_order_as_they_finish() -> None:
    # a is the slowest: b (failing), c and d finish first, and wait for it to be reported
    job = Job(cache={"d": "D (cached)"}, delays={"a": 0.3, "boom b": 0.1, "c": 0.0})
    run = run_batch(ITEMS, job, concurrency=3)
    done = [index for index, *_ in job.calls("done")]
    assert sorted(done) == [0, 1, 2, 3]
    assert done.index(0) == 3  # a finished last...
    reported = [e for e in job.events if e[0] in ("report", "fail")]
    assert reported == [  # ...and was reported first
        ("report", 0, "A", False),
        ("fail", 1, "RuntimeError: boom b exploded"),
        ("report", 2, "C", False),
        ("report", 3, "D (cached)", True),
    ]
    assert [index for (index,) in job.calls("process")] == [0, 1, 2]  # d came from the cache
    assert job.most_in_flight == 3
    assert run == BatchRun(total=4, reported=4, reused=1, failed=[1])


def test_concurrency_bounds_the_items_in_flight() -> None:
    job = Job(delays={item: 0.05 for item in "abcdef"})
    run_batch(list("abcdef"), job, concurrency=2)
    assert job.most_in_flight == 2
    assert job.calls("report") == [(i, c.upper(), False) for i, c in enumerate("abcdef")]


def build(args: argparse.Namespace) -> Any:
    raise AssertionError("the fake Ray builds nothing")


RAY = RayRun(build, argparse.Namespace(), RayOptions())


def fake_ray(
    outcomes: dict[str, Any], sent: list[list[Any]]
) -> Any:  # stands in for _engines.run_on_ray: the actors' outcomes, in order
    @contextlib.contextmanager
    def run_on_ray(
        items: Sequence[Any], build: Any, args: argparse.Namespace, options: RayOptions
    ) -> Iterator[Iterator[tuple[int, Any]]]:
        sent.append(list(items))
        yield iter([(i, outcomes[item]) for i, item in enumerate(items)])

    return run_on_ray


def test_on_ray_only_the_unfinished_items_are_sent_and_each_is_reported_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[list[Any]] = []
    outcomes = {"a": "A", "boom b": RuntimeError("boom b exploded"), "d": "D"}
    monkeypatch.setattr(_runner, "run_on_ray", fake_ray(outcomes, sent))
    job = Job(cache={"c": "C (cached)"})
    run = run_batch(ITEMS, job, ray=RAY)
    assert sent == [["a", "boom b", "d"]]
    assert job.calls("process") == []  # the actors did the work
    assert job.events == [
        ("done", 2, "C (cached)", True),  # found before anything is sent
        ("done", 0, "A", False),
        ("report", 0, "A", False),
        ("done", 1, "RuntimeError", False),
        ("fail", 1, "RuntimeError: boom b exploded"),
        ("report", 2, "C (cached)", True),
        ("done", 3, "D", False),
        ("report", 3, "D", False),
    ]
    assert run == BatchRun(total=4, reported=4, reused=1, failed=[1])


def test_an_interrupt_the_actors_return_is_not_an_items_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcomes = {"a": "A", "b": KeyboardInterrupt(), "c": "C"}
    monkeypatch.setattr(_runner, "run_on_ray", fake_ray(outcomes, []))
    job = Job()
    with pytest.raises(KeyboardInterrupt) as raised:
        run_batch(["a", "b", "c"], job, ray=RAY)
    assert raised.value.__notes__ == ["kept 1 of 3"]
    assert job.calls("fail") == []


@pytest.mark.parametrize("concurrency", [None, 1])
def test_ctrl_c_stops_the_run_keeping_what_was_reported(concurrency: int | None) -> None:
    job = Job(delays={"interrupt": 0.05})
    with pytest.raises(KeyboardInterrupt) as raised:
        run_batch(["a", "boom b", "interrupt", "d"], job, concurrency=concurrency)
    assert raised.value.__notes__ == ["kept 2 of 4"]  # the job's note: a and b were reported
    assert [e[0:2] for e in job.events if e[0] in ("report", "fail")] == [
        ("report", 0),
        ("fail", 1),
    ]
    processed = [index for (index,) in job.calls("process")]
    assert processed[:3] == [0, 1, 2]
    if concurrency is None:
        assert processed == [0, 1, 2]  # nothing after the interrupt


def test_no_items_is_an_empty_run() -> None:
    job = Job()
    assert run_batch([], job) == BatchRun(total=0)
    assert run_batch([], job, concurrency=2) == BatchRun(total=0)
    assert job.events == []


class LookupFails(Job):
    """Its run cache cannot be read for items starting with ``unreadable``."""

    def cached(self, index: int, item: str) -> str | None:
        if item.startswith("unreadable"):
            raise RuntimeError("cache entry unreadable")
        return super().cached(index, item)


@pytest.mark.parametrize("mode", ["one at a time", "concurrently", "ray"])
def test_a_lookup_that_raises_is_that_items_failure_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    sent: list[list[Any]] = []
    monkeypatch.setattr(_runner, "run_on_ray", fake_ray({"a": "A", "c": "C"}, sent))
    job = LookupFails()
    options: dict[str, Any] = {
        "one at a time": {},
        "concurrently": {"concurrency": 2},
        "ray": {"ray": RAY},
    }[mode]
    run = run_batch(["a", "unreadable b", "c"], job, **options)
    assert [e for e in job.events if e[0] in ("report", "fail")] == [
        ("report", 0, "A", False),
        ("fail", 1, "RuntimeError: cache entry unreadable"),
        ("report", 2, "C", False),
    ]
    assert run == BatchRun(total=3, reported=3, reused=0, failed=[1])
    assert (1,) not in job.calls("process")  # not processed, nor sent to Ray
    assert sent == ([["a", "c"]] if mode == "ray" else [])


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (ValueError("the input has no atoms"), "the input has no atoms"),
        (RecordError("bad field", "in.jsonl:3", field="x"), "in.jsonl:3: bad field"),
        (RuntimeError("index corrupted"), "RuntimeError: index corrupted"),
        (KeyError("atoms"), "KeyError: 'atoms'"),
        (OSError("disk\nfull"), "OSError: disk full"),  # one line
    ],
)
def test_failure_text_names_the_type_unless_the_item_itself_is_wrong(
    error: Exception, text: str
) -> None:
    assert failure_text(error) == text
