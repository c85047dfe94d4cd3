"""The Ray engine: order, per-item failures, the Dataset API, shared rate limits.

On one local Ray (127.0.0.1, ``local_ray``: shared with the run's other Ray tests).
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from langchain_core.runnables import Runnable, RunnableLambda

from langchain_references.services.engine import (
    RayLimiterBackend,
    RayOptions,
    RunnableWorker,
    WorkerSetupError,
    apply_runnable,
    map_runnable,
    to_json,
)
from langchain_references.services.ratelimit import RateLimit, RateLimiter
from tests.unit_tests.factcheck.throttled_server import serve_throttled

ray = pytest.importorskip("ray")


# ------------------------------------------------------------------ without Ray


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workers", 0),
        ("workers", True),
        ("workers", 1.5),
        ("batch_size", 0),
        ("max_concurrency", 0),
        ("cpus_per_worker", 0.0),
        ("cpus_per_worker", float("nan")),
    ],
)
def test_ray_options_refuse_bad_counts(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        RayOptions(**{field: value})


def test_ray_options_defaults_and_local() -> None:
    options = RayOptions()
    assert (options.workers, options.batch_size, options.max_concurrency) == (1, 4, None)
    assert options.local
    assert RayOptions(address="local").local
    assert not RayOptions(address="auto").local


@dataclass
class Point:
    x: int


class Dumps:
    def to_json(self) -> str:
        return '{"a": 1}'


def test_to_json_of_the_kinds_of_outputs() -> None:
    assert to_json(Dumps()) == '{"a": 1}'
    assert json.loads(to_json(Point(3))) == {"x": 3}
    assert json.loads(to_json({"b": [1, 2]})) == {"b": [1, 2]}


# ------------------------------------------------------------------ the runnables of the tests


def _slow_double(x: int) -> int:
    # Earlier items are slower: later ones finish first, on the other actor.
    time.sleep(0.02 * (12 - x) if x < 12 else 0)
    if x == 5:
        raise ValueError(f"item {x} is bad")
    return 2 * x


def make_doubler() -> Runnable[int, int]:
    return RunnableLambda(_slow_double)


class UnpicklableError(Exception):
    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def _raise_unpicklable(x: int) -> int:
    if x == 1:
        raise UnpicklableError
    return x


def make_unpicklable() -> Runnable[int, int]:
    return RunnableLambda(_raise_unpicklable)


def make_nothing() -> Runnable[int, int]:
    raise RuntimeError("no model here")


def _claim(row: str) -> dict[str, Any]:
    if "bad" in row:
        raise ValueError("cannot check a bad claim")
    return {"claim": row, "words": len(row.split())}


def make_claims() -> Runnable[str, dict[str, Any]]:
    return RunnableLambda(_claim)


def test_unpicklable_exceptions_are_named_in_a_runtime_error() -> None:
    from langchain_references.services.engine import _picklable

    with pytest.raises(TypeError):
        pickle.dumps(UnpicklableError())
    replaced = _picklable(UnpicklableError())
    assert isinstance(replaced, RuntimeError)
    assert str(replaced) == "UnpicklableError: holds a lock"
    kept = ValueError("fine")
    assert _picklable(kept) is kept


# ------------------------------------------------------------------ on a local Ray


def test_results_come_in_input_order_and_a_failure_is_its_items_only(local_ray: None) -> None:
    options = RayOptions(workers=2, batch_size=1)
    results = list(map_runnable(range(14), make_doubler, options))
    assert [index for index, _ in results] == list(range(14))
    values = [value for _, value in results]
    assert [v for i, v in enumerate(values) if i != 5] == [2 * i for i in range(14) if i != 5]
    assert isinstance(values[5], ValueError)
    assert str(values[5]) == "item 5 is bad"


def test_an_unpicklable_exception_comes_back_as_a_runtime_error(local_ray: None) -> None:
    results = list(map_runnable([0, 1, 2], make_unpicklable, RayOptions(workers=2)))
    assert [r for _, r in results if not isinstance(r, BaseException)] == [0, 2]
    error = results[1][1]
    assert type(error) is RuntimeError
    assert str(error) == "UnpicklableError: holds a lock"


def test_no_items_start_nothing() -> None:
    assert list(map_runnable([], make_doubler)) == []


def test_a_factory_that_fails_is_one_typed_error(local_ray: None) -> None:
    with pytest.raises(WorkerSetupError, match=r"could not build .*RuntimeError: no model here"):
        list(map_runnable([1, 2, 3], make_nothing, RayOptions(workers=2)))


def test_apply_runnable_adds_output_and_error_columns(local_ray: None) -> None:
    claims = ["Water boils at 100 C", "a bad claim", "The Moon orbits Earth", "Ice is cold"]
    dataset = ray.data.from_items([{"id": i, "claim": c} for i, c in enumerate(claims)])
    checked = apply_runnable(
        dataset, make_claims, input_column="claim", options=RayOptions(workers=2, batch_size=1)
    )
    rows = sorted(checked.take_all(), key=lambda row: row["id"])
    assert [row["claim"] for row in rows] == claims  # the other columns pass through
    assert [row["error"] for row in rows] == [
        None,
        "ValueError: cannot check a bad claim",
        None,
        None,
    ]
    outputs = [None if row["output"] is None else json.loads(row["output"]) for row in rows]
    assert outputs == [
        {"claim": claims[0], "words": 5},
        None,
        {"claim": claims[2], "words": 4},
        {"claim": claims[3], "words": 3},
    ]


def test_apply_runnable_with_a_failing_factory_fails_every_row(local_ray: None) -> None:
    dataset = ray.data.from_items([{"claim": "a"}, {"claim": "b"}])
    rows = apply_runnable(dataset, make_nothing, input_column="claim", error_column="why")
    errors = [row["why"] for row in rows.take_all()]
    assert (
        errors
        == [
            "WorkerSetupError: a Ray worker could not build its Runnable: "
            "RuntimeError: no model here"
        ]
        * 2
    )


# ------------------------------------------------------------------ shared rate limits

RATE = 5.0  # the server's limit and the limiter's, requests per second


def _fetch_page(backend: Any, base_url: str) -> Runnable[str, list[str]]:
    """An actor's runnable: fetch one page under the run's limits; return its failures."""
    from langchain_references.factcheck.fetch import PageFetcher

    limits = {"fetch": RateLimit(requests_per_second=RATE, max_concurrent=2)}
    limiter = RateLimiter(limits, backend=backend)
    fetcher = PageFetcher(allow_private=True, limiter=limiter)

    def fetch(name: str) -> list[str]:
        report = fetcher.fetch_all([base_url + f"page/{name}"])
        return [f.reason for f in report.failures]

    return RunnableLambda(fetch)


def arrivals_in_a_second(site: Any) -> int:
    """Most requests (served or refused) the server got in any one second."""
    times = sorted(site.served + site.refused)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        best = max(best, end - start + 1)
    return best


def _run_fetches(backend: Any, site: Any, count: int) -> list[list[str]]:
    factory = functools.partial(_fetch_page, backend, site.base_url)
    options = RayOptions(workers=2, batch_size=2, max_concurrency=2)
    results = list(map_runnable([str(i) for i in range(count)], factory, options))
    return [r if not isinstance(r, BaseException) else [repr(r)] for _, r in results]


def test_a_ray_backend_keeps_two_actors_within_one_rate(local_ray: None) -> None:
    backend = RayLimiterBackend()
    assert pickle.loads(pickle.dumps(backend)).handle == backend.handle  # travels as the handle
    with serve_throttled(RATE, burst=2) as site:  # burst 2: slack for network jitter only
        failures = _run_fetches(backend, site, 16)
    assert failures == [[]] * 16  # no item failed: a 429 (under load, jitter) was retried
    assert len(site.served) == 16
    # The requests of both actors together, refused ones included, kept to the one rate.
    assert arrivals_in_a_second(site) <= RATE + 2


def test_the_requests_of_both_actors_go_through_the_one_state(local_ray: None) -> None:
    # What makes the limit shared, checked without timing: every request of the run was let
    # through by the driver's one state actor (a backend per actor would leave it at 0).
    backend = RayLimiterBackend()
    with serve_throttled(RATE, burst=2, retry_after="0.3") as site:
        failures = _run_fetches(backend, site, 16)
    assert failures == [[]] * 16
    granted = backend.granted()
    assert sum(granted.values()) == len(site.served) + len(site.refused)  # retries included
    assert len(site.served) == 16
    assert 1 <= len(granted) <= 2  # by the worker processes (the pool's 2 actors), not the driver
    assert os.getpid() not in granted


def _slow_stamp(x: int) -> float:
    time.sleep(0.5)
    return time.time()


def make_slow_stamps() -> Runnable[int, float]:
    return RunnableLambda(_slow_stamp)


def test_each_result_reaches_the_driver_before_its_batch_is_done(local_ray: None) -> None:
    # one actor, a batch of 4 items run one at a time: item 0 is done 1.5 s before item 3
    options = RayOptions(workers=1, batch_size=4, max_concurrency=1)
    arrived: list[tuple[int, float, float]] = []
    for index, finished in map_runnable(range(4), make_slow_stamps, options):
        arrived.append((index, finished, time.time()))
    assert [index for index, _, _ in arrived] == [0, 1, 2, 3]
    first_seen = arrived[0][2]
    last_finished = arrived[3][1]
    assert first_seen < last_finished  # streamed as done, not with its whole batch


def test_a_worker_runs_its_batch_in_order_as_items_finish() -> None:
    worker = RunnableWorker(
        make_doubler,
        input_column="x",
        output_column="y",
        error_column="error",
        pickled=False,
        max_concurrency=4,
        streamed=True,
    )
    rows = list(worker({"x": np.array([1, 2, 3]), "keep": np.array(["a", "b", "c"])}))
    assert [(list(r["x"]), list(r["keep"]), r["y"], r["error"]) for r in rows] == [
        ([1], ["a"], ["2"], [None]),
        ([2], ["b"], ["4"], [None]),
        ([3], ["c"], ["6"], [None]),
    ]


def test_rays_messages_to_the_driver_go_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray")
    from ray._private import worker

    from langchain_references.services.engine import _ray_messages_to_stderr

    original = worker.print_to_stdstream  # patched already if a Ray session ran here
    try:
        _ray_messages_to_stderr()
        patched = worker.print_to_stdstream
        _ray_messages_to_stderr()  # once per process: not wrapped twice
        assert worker.print_to_stdstream is patched
        assert getattr(patched, "_to_stderr", False)
        # what listen_error_messages prints when a task fails as a run is interrupted
        message = {"lines": ["Task MapWorker(x).submit failed"], "pid": "raylet", "is_err": False}
        worker.print_to_stdstream(message, ignore_prefix=False)
        out, err = capfd.readouterr()
    finally:
        worker.print_to_stdstream = original
    assert out == ""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", err)  # Ray colours the prefix
    assert plain == "(raylet) Task MapWorker(x).submit failed\n"
