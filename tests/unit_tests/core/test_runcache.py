"""The run cache: content keys, reuse switch, threads, asyncio, and a SIGKILL mid-run."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from langchain_references.services.runcache import RunCache, RunCacheError, content_key


def test_content_key_ignores_dict_order_but_not_list_order() -> None:
    assert content_key({"a": 1, "b": 2}) == content_key({"b": 2, "a": 1})
    assert content_key([1, 2]) != content_key([2, 1])
    assert content_key("x", "y") != content_key("xy")
    assert len(content_key("x")) == 64


def test_round_trip_and_namespaces(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "run.sqlite3")
    cache.put("a", "k", {"v": [1, "é"]})
    assert cache.get("a", "k") == {"v": [1, "é"]}
    assert cache.get("b", "k") is None
    assert cache.stats() == {"a": (1, 0), "b": (0, 1)}
    assert cache.reused("a") == 1
    assert (cache.count(), cache.count("a"), cache.count("b")) == (1, 1, 0)
    assert cache.clear("a") == 1
    assert cache.get("a", "k") is None


def test_a_fresh_run_records_but_does_not_read(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite3"
    RunCache(path).put("item", "k", 1)
    fresh = RunCache(path, reuse=False)
    assert fresh.get("item", "k") is None
    fresh.put("item", "k", 2)
    assert fresh.stats() == {}
    assert RunCache(path).get("item", "k") == 2


def test_none_is_refused_and_a_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    cache = RunCache(":memory:")
    with pytest.raises(ValueError, match="None"):
        cache.put("a", "k", None)
    bad = tmp_path / "not.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RunCacheError, match="cannot open the cache"):
        RunCache(bad)


def test_threads_each_write_whole_items(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "run.sqlite3")

    def work(worker: int) -> None:
        for i in range(50):
            cache.put("item", f"{worker}-{i}", {"worker": worker, "i": i})

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.count("item") == 400
    assert cache.get("item", "7-49") == {"worker": 7, "i": 49}
    cache.close()


def test_asyncio_tasks_share_one_cache(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "run.sqlite3")

    async def one(i: int) -> None:
        await asyncio.to_thread(cache.put, "item", str(i), i)
        cache.put("direct", str(i), i)

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(40)))

    asyncio.run(main())
    assert (cache.count("item"), cache.count("direct")) == (40, 40)
    assert [cache.get("item", str(i)) for i in range(40)] == list(range(40))


_KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from langchain_references.services.runcache import RunCache
    cache = RunCache(sys.argv[1])
    i = 0
    while True:
        cache.put("item", str(i), {"i": i, "payload": "x" * 5000})
        print(i, flush=True)
        i += 1
        time.sleep(0.002)
    """
)


def test_sigkill_mid_run_leaves_a_usable_cache(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite3"
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    reported = [int(process.stdout.readline()) for _ in range(30)]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    cache = RunCache(path)
    # every item reported finished is there, whole; nothing is half-written
    assert [cache.get("item", str(i)) for i in reported] == [
        {"i": i, "payload": "x" * 5000} for i in reported
    ]
    count = cache.count("item")
    assert count >= 30
    values = [cache.get("item", str(i)) for i in range(count)]
    assert all(v == {"i": i, "payload": "x" * 5000} for i, v in enumerate(values))
    cache.put("item", "after", 1)  # still writable
    assert cache.get("item", "after") == 1


def test_lone_surrogates_are_keyed_and_stored(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "run.sqlite3")
    key = content_key("bad \ud800 text")
    cache.put("item", key, {"text": "bad \ud800 text"})
    assert cache.get("item", key) == {"text": "bad \ud800 text"}


# ------------------------------------------------------------------ failures mid-run


def _locked(path: Path) -> sqlite3.Connection:
    """Another process's write lock on the cache file (held until the connection closes)."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    return other


def test_a_locked_cache_is_one_warning_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "run.sqlite3"
    cache = RunCache(path, keep_going=True, busy_timeout_s=0.05)
    cache.put("item", "a", 1)
    other = _locked(path)
    try:
        with caplog.at_level("WARNING", logger="langchain_references.services.runcache"):
            cache.put("item", "b", 2)  # waits 50 ms for the lock, then goes on without
            cache.put("item", "c", 3)  # not tried
            assert cache.get("item", "a") is None  # lookups miss from now on
    finally:
        other.close()
    assert isinstance(cache.failure, RunCacheError)
    assert [r.getMessage() for r in caplog.records] == [
        f"cache {path}: database is locked; the run goes on without its cache: what finishes "
        "from now on is reported but not recorded for --resume"
    ]
    assert RunCache(path).get("item", "a") == 1  # what was written before is kept
    assert RunCache(path).get("item", "c") is None


def test_without_keep_going_a_locked_cache_raises(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite3"
    cache = RunCache(path, busy_timeout_s=0.05)
    other = _locked(path)
    try:
        with pytest.raises(RunCacheError, match="database is locked"):
            cache.put("item", "b", 2)
    finally:
        other.close()
    assert cache.failure is None


def test_damaged_pages_mid_run_are_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "run.sqlite3"
    writer = RunCache(path)
    for i in range(300):
        writer.put("item", f"k{i}", {"text": "x" * 200, "i": i})
    writer.close()
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    data[2 * page : len(data) - page] = b"\xff" * (len(data) - 3 * page)  # all but 2 pages
    path.write_bytes(bytes(data))
    cache = RunCache(path, keep_going=True)  # opens: its first page is sound
    with caplog.at_level("WARNING", logger="langchain_references.services.runcache"):
        values = [cache.get("item", f"k{i}") for i in range(300)]
    assert values == [None] * 300
    assert cache.failure is not None
    assert len(caplog.records) == 1
    assert "malformed" in caplog.records[0].getMessage()


# ------------------------------------------------------------------ size cap


def test_the_oldest_entries_are_evicted_past_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import langchain_references.services.runcache as runcache

    ticks = iter(range(1_000_000))
    monkeypatch.setattr(runcache.time, "time", lambda: float(next(ticks)))
    cache = RunCache(tmp_path / "run.sqlite3", max_bytes=20_000)
    keys = [f"k{i:04d}" for i in range(640)]
    for key in keys:
        cache.put("item", key, "v" * 90)  # 92 bytes of JSON and a 5-byte key
    assert cache.entry_bytes() <= 20_000
    kept = [key for key in keys if cache.get("item", key) is not None]
    assert kept == keys[-len(kept) :]  # the newest survive, in one run of keys
    assert 20_000 * 0.9 - 97 * 64 <= len(kept) * 97 <= 20_000


def test_no_cap_keeps_everything(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "run.sqlite3", max_bytes=None)
    for i in range(200):
        cache.put("item", f"k{i}", "v" * 500)
    assert cache.evict() == 0
    assert cache.count() == 200
    with pytest.raises(ValueError, match="max_bytes must be positive"):
        RunCache(":memory:", max_bytes=0)
