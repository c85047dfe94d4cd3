"""Many statements checked at once lose none of them (the relevance stage's shared Chroma).

Chroma's first-time set-up is not thread-safe: when several executor threads each created
``chromadb.EphemeralClient()`` at once, some statements failed with
``KeyError: 'ephemeral'`` or ``'RustBindingsAPI' object has no attribute 'bindings'``. Each
round below starts from a fresh process's Chroma state (the in-memory system stopped and
forgotten), so that every round goes through that first-time set-up again under concurrency,
and the set-up is made slower (as on a loaded machine, or with a heavier embedding model
loading at the same time) so that the checks of a batch reach it together.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.config import System

from langchain_references.cli import factcheck as cli_factcheck
from langchain_references.cli import main
from langchain_references.demo.site import DemoSiteSearch, LocalOriginGuard, serve_demo_site
from langchain_references.factcheck import PageFetcher, create_fact_check_chain, relevance
from langchain_references.factcheck.passages import DEFAULT_ENCODING
from langchain_references.factcheck.result import FactCheckResult
from langchain_references.judges import HeuristicJudge
from langchain_references.services import _isolation
from tests.unit_tests.factcheck.test_relevance import BagOfWords  # cheap hashed bag of words

logger = logging.getLogger(__name__)

ROUNDS = 5
CHECKS_PER_ROUND = 10  # x ROUNDS = 50 checks through abatch
CONCURRENCY = 8
#: Extra seconds Chroma's first-time set-up takes here (it is a few tens of ms when idle).
SLOW_START_S = 0.4
STATEMENTS = (
    "Europa has a global ocean of liquid water under its ice.",
    "Honeybees communicate the location of flowers with a waggle dance.",
    "The Space Needle is an icon of Seattle.",
    "Pike Place Market is a public market in Seattle.",
    "Python was created by Guido van Rossum.",
    "The Seattle Center Monorail links downtown Seattle to Seattle Center.",
    "The Moon is Earth's only natural satellite.",
    "A honeybee colony has one queen, workers and drones.",
    "Python lets you chain comparisons such as a < b < c.",
    "Europa is a moon of Jupiter.",
)


def fresh_chroma() -> None:
    """Chroma as in a new process: the in-memory system stopped and forgotten."""
    systems = list(SharedSystemClient._identifier_to_system.values())
    SharedSystemClient.clear_system_cache()
    for system in systems:
        system.stop()
    relevance._shared_client.reset()


def warm_up() -> None:
    """Open what the libraries keep for the life of the process, then reset Chroma.

    Chroma's Rust runtime opens a socket pair the first time a system starts in a process, and
    tiktoken makes its cache folder in the temp directory when it first loads an encoding:
    neither is a per-run leak, so both exist before the descriptors and temp files are counted.
    """
    tiktoken.get_encoding(DEFAULT_ENCODING)  # the offline encoding the splitter uses
    relevance.chroma_client()
    fresh_chroma()


def temp_entries(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


def end_idle_workers() -> None:
    """End the extraction worker processes kept idle for later calls.

    The pool (:mod:`langchain_references.services._isolation`) keeps up to ``MAX_WORKERS`` workers,
    two pipes each, for the life of the process, started by whichever test of the process
    first extracts a page: the count of descriptors must not depend on the tests run before.
    """
    with _isolation._lock:
        idle = list(_isolation._idle)
        _isolation._idle.clear()
    for worker in idle:
        _isolation._end(worker)


def open_fds() -> dict[str, str]:
    """The open file descriptors of this process and what they point at (no idle worker)."""
    end_idle_workers()
    gc.collect()
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the descriptor os.listdir itself used
            continue
    return fds


@pytest.fixture
def private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp directory of this test only (Python's ``tempfile`` and ``TMPDIR`` for others).

    Other processes writing to the shared ``/tmp`` at the same time cannot disturb the check.
    """
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    assert tempfile.gettempdir() == str(tmp)
    yield tmp
    fresh_chroma()


@pytest.fixture
def slow_chroma_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma's system start takes :data:`SLOW_START_S` longer: a wide race window."""
    real_start = System.start

    def slow_start(self: System) -> None:
        time.sleep(SLOW_START_S)
        real_start(self)

    monkeypatch.setattr(System, "start", slow_start)


def lost(results: Sequence[FactCheckResult | BaseException]) -> list[str]:
    """Descriptions of the checks that raised or ended in an error verdict."""
    return [
        repr(r) if isinstance(r, BaseException) else f"{r.statement}: {r.error}"
        for r in results
        if isinstance(r, BaseException) or r.error is not None
    ]


@pytest.mark.slow
@pytest.mark.usefixtures("slow_chroma_start")
async def test_fifty_checks_through_abatch_lose_no_statement(private_tempdir: Path) -> None:
    embeddings = BagOfWords()
    statements: list[Any] = [STATEMENTS[i % len(STATEMENTS)] for i in range(CHECKS_PER_ROUND)]
    warm_up()
    fds_before, temp_before = open_fds(), temp_entries(private_tempdir)
    lost_all: list[str] = []
    checked = 0
    with serve_demo_site() as base_url:
        chain = create_fact_check_chain(
            search=DemoSiteSearch(base_url),
            judge=HeuristicJudge(embeddings),
            embeddings=embeddings,
            fetcher=PageFetcher(guard=LocalOriginGuard([base_url])),
        )
        for _ in range(ROUNDS):
            fresh_chroma()
            results = await chain.abatch(
                statements, {"max_concurrency": CONCURRENCY}, return_exceptions=True
            )
            assert len(results) == len(statements)
            lost_all += lost(results)
            checked += sum(
                isinstance(r, FactCheckResult) and r.error is None and r.statement == statement
                for r, statement in zip(results, statements, strict=True)
            )
    fresh_chroma()
    logger.info("abatch: %d checks, %d lost", ROUNDS * len(statements), len(lost_all))
    assert lost_all == []
    assert checked == ROUNDS * CHECKS_PER_ROUND == 50
    assert open_fds() == fds_before
    assert temp_entries(private_tempdir) == temp_before


@pytest.mark.slow
@pytest.mark.usefixtures("slow_chroma_start")
def test_cli_file_with_five_statements_loses_none(
    private_tempdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_factcheck, "_embeddings", BagOfWords)
    statements = STATEMENTS[:5]
    file = tmp_path / "statements.txt"
    file.write_text("\n".join(statements) + "\n", encoding="utf-8")
    warm_up()
    fds_before, temp_before = open_fds(), temp_entries(private_tempdir)
    lost_all: list[str] = []
    codes: list[int] = []
    checked = lost_count = 0
    for _ in range(ROUNDS):
        fresh_chroma()
        out, err = io.StringIO(), io.StringIO()
        code = main(
            [
                "factcheck",
                "--file",
                str(file),
                "--search",
                "demo",
                "--concurrency",
                str(CONCURRENCY),
                "--json",
            ],
            out=out,
            err=err,
        )
        results = [json.loads(line) for line in out.getvalue().splitlines()]
        lost_all += [f"{r['statement']}: {r['error']}" for r in results if r["error"] is not None]
        lost_all += [line for line in err.getvalue().splitlines() if "error:" in line]
        lost_all += ["missing"] * (len(statements) - len(results))
        lost_count += len(statements) - sum(r["error"] is None for r in results)
        codes.append(code)
        checked += [r["statement"] for r in results] == list(statements)
    fresh_chroma()
    logger.info("CLI: %d statements, %d lost", ROUNDS * len(statements), lost_count)
    assert lost_all == []
    assert codes == [0] * ROUNDS
    assert checked == ROUNDS  # every round: all five results, in input order
    assert open_fds() == fds_before
    assert temp_entries(private_tempdir) == temp_before
