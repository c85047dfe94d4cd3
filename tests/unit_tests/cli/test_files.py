"""The commands' shared file helpers: ``read_records``, ``check_output``, ``atomic_write``."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langchain_references.cli._errors import CLIError
from langchain_references.cli._files import atomic_write, check_output, read_records, writing
from langchain_references.errors import RecordError
from langchain_references.services.loading import LoadResult


class BoomError(Exception):
    """The writer's failure in the tests."""


def files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_bytes().decode("utf-8") for p in folder.iterdir()}


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    old=st.none() | st.text(max_size=30),
    lines=st.lists(st.text(max_size=20), max_size=6),
    fail_at=st.none() | st.integers(min_value=0, max_value=6),
)
def test_atomic_write_is_all_or_nothing(
    tmp_path: Path, old: str | None, lines: list[str], fail_at: int | None
) -> None:
    """After the block the file holds everything written or is exactly as before; no temp."""
    folder = tmp_path / "out"
    folder.mkdir(exist_ok=True)
    for stale in folder.iterdir():
        stale.unlink()
    target = folder / "results.jsonl"
    if old is not None:
        target.write_text(old, encoding="utf-8", newline="")
    fails = fail_at is not None and fail_at <= len(lines)
    try:
        with atomic_write(target) as handle:
            for i, line in enumerate(lines):
                if i == fail_at:
                    raise BoomError
                handle.write(line)
            if fail_at == len(lines):
                raise BoomError
    except BoomError:
        assert fails
    else:
        assert not fails
    if fails:
        assert files(folder) == ({} if old is None else {"results.jsonl": old})
    else:
        assert files(folder) == {"results.jsonl": "".join(lines)}


def test_atomic_write_cleans_up_after_an_os_error(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")

    def write() -> None:
        with writing(target), atomic_write(target) as handle:
            handle.write("new, half written")
            raise OSError("disk full")

    with pytest.raises(CLIError, match=f"cannot write {target}: disk full"):
        write()
    assert files(tmp_path) == {"out.txt": "old"}


def test_atomic_write_keeps_the_mode_of_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o600)
    with atomic_write(target) as handle:
        handle.write("new")
    assert target.read_text(encoding="utf-8") == "new"
    assert target.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "fresh.txt"
    umask = os.umask(0o022)
    os.umask(umask)
    with atomic_write(fresh) as handle:
        handle.write("x")
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask  # like open(path, "w")


def test_check_output(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n", encoding="utf-8")
    check_output(tmp_path / "out.jsonl", source, None)  # fine
    with pytest.raises(CLIError, match="refusing to overwrite the input"):
        check_output(source, None, source)
    with pytest.raises(CLIError, match="refusing to overwrite the input"):
        check_output(tmp_path / "." / "in.jsonl", source)
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(CLIError, match="refusing to overwrite the input"):
        check_output(missing, missing)  # the same path, even before it exists
    with pytest.raises(CLIError, match="it is a directory"):
        check_output(tmp_path, source)
    with pytest.raises(CLIError, match="no such directory"):
        check_output(tmp_path / "nope" / "out.jsonl", source)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_check_output_read_only_directory(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(CLIError, match="is not writable"):
            check_output(folder / "out.jsonl")
    finally:
        folder.chmod(0o700)


def test_read_records_reports_each_error_once(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    errors = [RecordError("bad", f"{path}:2", field="x"), RecordError("worse", f"{path}:3")]

    def load(_: Path) -> LoadResult[int]:
        return LoadResult([1], errors)

    err = io.StringIO()
    assert read_records(path, load, err) == ([1], errors)
    assert err.getvalue().splitlines() == [
        f"error: {path}:2: bad (record skipped)",
        f"error: {path}:3: worse (record skipped)",
    ]


def test_read_records_needs_a_record(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"

    def nothing(_: Path) -> LoadResult[int]:
        return LoadResult([])

    def only_errors(_: Path) -> LoadResult[int]:
        return LoadResult([], [RecordError("bad", f"{path}:1")])

    with pytest.raises(CLIError, match=f"^no records in {path}: the file is empty$"):
        read_records(path, nothing, io.StringIO())
    with pytest.raises(CLIError, match=rf"^no valid record in {path} \(1 skipped\)$"):
        read_records(path, only_errors, io.StringIO())

    def unreadable(_: Path) -> LoadResult[int]:
        raise RecordError("invalid JSON: Expecting value", f"{path}:1")

    with pytest.raises(CLIError, match=f"^cannot read {path}: {path}:1: invalid JSON"):
        read_records(path, unreadable, io.StringIO())
