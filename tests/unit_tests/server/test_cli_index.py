"""The ``index build`` and ``serve`` commands (in process; the slow test runs them for real)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from langchain_references.cli import main
from langchain_references.server.index import EvidenceIndex, IncompleteIndexError

from .conftest import CORPUS, free_port
from .test_index import INCOMPLETE


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def _corpus_with_bad_lines(tmp_path: Path) -> Path:
    lines = CORPUS.read_text().splitlines()
    lines.insert(2, '{"id": "broken", "title": "x", "text": "ok", "year": "soon"}')
    lines.insert(5, "{not json")
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_build_reports_bad_lines_and_indexes_the_rest(tmp_path: Path) -> None:
    corpus = _corpus_with_bad_lines(tmp_path)
    db = tmp_path / "db"
    status, out, err = _run(
        "index",
        "build",
        "--input",
        str(corpus),
        "--name",
        "cli-idx",
        "--persist-dir",
        str(db),
        "--quiet",
        "--batch-size",
        "7",
    )
    assert status == 1
    assert f"error: {corpus}:3: year: must be an integer (record skipped)" in err
    assert f"error: {corpus}:6: invalid JSON" in err
    assert "indexed 8 record(s)" in out
    assert "2 line(s) skipped" in out
    index = EvidenceIndex.open("cli-idx", persist_dir=db)
    assert index.count("abstract") == 8
    first = index.count()
    assert f"holds {first} entries (+{first})" in out

    status, out, _ = _run(
        "index",
        "build",
        "--input",
        str(corpus),
        "--name",
        "cli-idx",
        "--persist-dir",
        str(db),
        "--quiet",
    )
    assert status == 1
    assert f"holds {first} entries (+0)" in out
    assert index.count() == first


def test_build_shows_progress(tmp_path: Path) -> None:
    status, _, err = _run(
        "index",
        "build",
        "--input",
        str(CORPUS),
        "--name",
        "bar-idx",
        "--persist-dir",
        str(tmp_path),
    )
    assert status == 0
    assert "indexing" in err
    assert "8/8" in err


def test_build_without_valid_records_fails(tmp_path: Path) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text(json.dumps({"id": "a"}) + "\n" + json.dumps({"text": "b"}) + "\n")
    status, _, err = _run(
        "index", "build", "--input", str(corpus), "--name", "x-idx", "--persist-dir", str(tmp_path)
    )
    assert status == 2
    assert "no valid record" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--name", "no"], "invalid index name"),
        (["--name", "ok-idx", "--embeddings", "nomodule"], "--embeddings nomodule"),
        (["--name", "ok-idx", "--embeddings", "builtins:object"], "not an Embeddings"),
        (["--name", "ok-idx", "--embeddings", "json:dumps"], "json:dumps() failed: TypeError"),
        (
            ["--name", "ok-idx", "--workers", "2"],
            "error: --workers needs --engine ray (the default is local)",
        ),
        (
            ["--name", "ok-idx", "--ray-address", "auto", "--workers", "2"],
            "error: --ray-address and --workers need --engine ray (the default is local)",
        ),
        (["--name", "ok-idx", "--engine", "spark"], "invalid choice: 'spark'"),
    ],
)
def test_build_option_errors(tmp_path: Path, extra: list[str], message: str) -> None:
    status, _, err = _run(
        "index", "build", "--input", str(CORPUS), "--persist-dir", str(tmp_path), *extra
    )
    assert status == 2
    assert message in err


def test_build_rejects_both_locations(tmp_path: Path) -> None:
    status, _, err = _run(
        "index",
        "build",
        "--input",
        str(CORPUS),
        "--name",
        "abc",
        "--persist-dir",
        str(tmp_path),
        "--chroma-url",
        "http://127.0.0.1:9",
    )
    assert status == 2
    assert "not allowed with argument" in err


def test_serve_refuses_a_missing_index(tmp_path: Path) -> None:
    status, _, err = _run("serve", "--index", "nothing-here", "--persist-dir", str(tmp_path))
    assert status == 2
    assert "nothing-here" in err


def test_serve_needs_the_api_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LR_TEST_KEY", raising=False)
    status, _, err = _run(
        "serve", "--index", "abc", "--persist-dir", str(tmp_path), "--api-key-env", "LR_TEST_KEY"
    )
    assert status == 2
    assert "LR_TEST_KEY" in err


def test_serve_settings_from_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_references.cli import build_parser
    from langchain_references.cli.serve import settings_from_args

    monkeypatch.setenv("LR_TEST_KEY", "k1")
    args = build_parser().parse_args(
        [
            "serve",
            "--index",
            "abc",
            "--chroma-url",
            "http://127.0.0.1:9",
            "--workers",
            "2",
            "--api-key-env",
            "LR_TEST_KEY",
            "--cors-origin",
            "https://a.example",
            "--max-top-k",
            "5",
            "--max-claims",
            "3",
        ]
    )
    settings = settings_from_args(args)
    assert settings.api_key == "k1"
    assert settings.cors_origins == ("https://a.example",)
    assert (settings.max_top_k, settings.default_top_k, settings.max_claims) == (5, 5, 3)
    assert settings.chroma_url == "http://127.0.0.1:9"
    assert settings.persist_dir is None


# --------------------------------------------------------------------------- atomic builds

FAKE = "tests.unit_tests.server._build_fakes:WordHashEmbeddings"
REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
QUERIES = ("carbon dioxide warming", "honey bees", "sea level rise", "coral bleaching")


def _build(corpus: Path, db: Path) -> tuple[int, str, str]:
    return _run(
        "index",
        "build",
        "--input",
        str(corpus),
        "--name",
        "cli-gen",
        "--persist-dir",
        str(db),
        "--embeddings",
        FAKE,
        "--batch-size",
        "4",
        "--quiet",
    )


def _served(db: Path, name: str = "cli-gen") -> EvidenceIndex:
    """The index `serve --index NAME --persist-dir DB` opens (or its CLIError)."""
    from langchain_references.cli import build_parser
    from langchain_references.cli.index import open_index

    args = build_parser().parse_args(
        ["serve", "--index", name, "--persist-dir", str(db), "--embeddings", FAKE]
    )
    return open_index(args, create=False)


def _answers(index: EvidenceIndex) -> list[list[str]]:
    return [
        [h.id for h in index.search(q, granularity=g, k=4)]
        for q in QUERIES
        for g in ("abstract", "phrase")
    ]


def _bigger_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "bigger.jsonl"
    extra = {"id": "new-1", "title": "Bees", "text": "Honey bees dance to point at flowers."}
    path.write_text(CORPUS.read_text() + json.dumps(extra) + "\n")
    return path


def test_a_rebuild_switches_to_a_new_generation(tmp_path: Path) -> None:
    db = tmp_path / "db"
    status, out, _ = _build(CORPUS, db)
    assert status == 0
    assert "generation 'cli-gen__g1'; the index holds 24 entries (+24)\n" in out
    status, out, _ = _build(_bigger_corpus(tmp_path), db)
    assert status == 0
    assert "generation 'cli-gen__g2'; the index holds 26 entries (+2); generation " in out
    assert "'cli-gen__g1' kept until the next build" in out
    assert _served(db).generation == "cli-gen__g2"


@pytest.mark.parametrize(("failure", "status"), [("error", 2), ("interrupt", 130)])
def test_a_failed_build_leaves_the_previous_generation_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str, status: int
) -> None:
    db = tmp_path / "db"
    assert _build(CORPUS, db)[0] == 0
    before = _answers(_served(db))
    monkeypatch.setenv("LR_TEST_FAIL_AFTER", "3")
    monkeypatch.setenv("LR_TEST_FAIL_WITH", failure)
    code, out, err = _build(_bigger_corpus(tmp_path), db)
    assert (code, out) == (status, "")
    (line,) = err.splitlines()
    kept = "index 'cli-gen' left as it was: generation 'cli-gen__g1' (24 entries) still current"
    if failure == "error":
        assert line.startswith("error: build of index 'cli-gen' failed: cannot write to index")
        assert "embeddings failed after 3 batches" in line
    else:
        assert line.startswith("error: interrupted; ")
    assert line.endswith(kept)
    monkeypatch.delenv("LR_TEST_FAIL_AFTER")
    served = _served(db)
    assert served.generation == "cli-gen__g1"
    assert _answers(served) == before
    assert "new-1:abstract" not in [
        h.id for h in served.search("Honey bees dance", granularity="abstract", k=8)
    ]


def test_a_failed_first_build_says_there_is_no_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "db"
    monkeypatch.setenv("LR_TEST_FAIL_AFTER", "2")
    status, _, err = _build(CORPUS, db)
    assert status == 2
    assert err.endswith("; no index 'cli-gen' was made\n")
    status, _, err = _run("serve", "--index", "cli-gen", "--persist-dir", str(db))
    assert status == 2
    assert err == f"error: no index 'cli-gen' in {db}\n"


@pytest.mark.parametrize("state", sorted(INCOMPLETE))
def test_serve_refuses_an_incomplete_index_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *_, **__: pytest.fail("serve started"))
    make, message = INCOMPLETE[state]
    make(tmp_path)
    status, out, err = _run(
        "serve", "--index", "gen-idx", "--persist-dir", str(tmp_path), "--embeddings", FAKE
    )
    assert (status, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"error: index 'gen-idx' in {tmp_path} ")
    assert message in line
    assert line.endswith("run `index build` again")


def _killed_build(db: Path, tmp_path: Path) -> None:
    """Run `index build` in a process and kill it (SIGKILL) after three batches."""
    marker = tmp_path / "hanging"
    marker.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "LR_TEST_FAIL_AFTER": "3",
        "LR_TEST_FAIL_WITH": "hang",
        "LR_TEST_MARKER": str(marker),
    }
    argv = [str(BIN / "langchain-references"), "index", "build", "--input", str(CORPUS)]
    argv += ["--name", "cli-gen", "--persist-dir", str(db), "--embeddings", FAKE, "--quiet"]
    process = subprocess.Popen(
        [*argv, "--batch-size", "4"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, "the build ended before it was killed"
            assert time.monotonic() < deadline, "the build never reached its third batch"
            time.sleep(0.1)
    finally:
        process.kill()
        process.wait(timeout=30)


@pytest.mark.slow
def test_a_killed_build_is_never_served(tmp_path: Path) -> None:
    db = tmp_path / "db"
    _killed_build(db, tmp_path)  # the first build: no index to serve
    argv = [str(BIN / "langchain-references"), "serve", "--index", "cli-gen"]
    serve = subprocess.run(
        [*argv, "--persist-dir", str(db), "--embeddings", FAKE, "--port", str(free_port())],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert serve.returncode == 2
    assert serve.stdout == ""
    (line,) = serve.stderr.splitlines()
    assert line.startswith("error: index 'cli-gen' in ")
    assert "has no complete build" in line

    assert _build(CORPUS, db)[0] == 0  # a build repairs it
    before = _answers(_served(db))
    assert _served(db).generation == "cli-gen__g2"

    _killed_build(db, tmp_path)  # a rebuild killed midway: the previous generation serves
    served = _served(db)
    assert served.generation == "cli-gen__g2"
    assert served.count() == 24
    assert _answers(served) == before


def test_build_skips_oversized_and_surrogate_records_naming_their_lines(tmp_path: Path) -> None:
    lines = CORPUS.read_text().splitlines()
    lines.insert(1, json.dumps({"id": "huge", "title": "Huge", "text": "Big text. " * 100}))
    lines.insert(3, '{"id": "s", "title": "bad \\ud800", "text": "Fine text here."}')
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    db = tmp_path / "db"
    argv = ["index", "build", "--input", str(corpus), "--name", "cap-idx"]
    status, _out, err = _run(
        *argv, "--persist-dir", str(db), "--quiet", "--max-record-chars", "500"
    )
    assert status == 1
    assert err.splitlines() == [
        f"error: {corpus}:2: text: 1000 characters, above max_record_chars (500) (record skipped)",
        f"error: {corpus}:4: title: holds a lone surrogate (U+D800) at character 4 "
        "(record skipped)",
    ]
    assert EvidenceIndex.open("cap-idx", persist_dir=db).count("abstract") == 8


def test_build_skips_a_line_that_is_not_utf8_naming_it(tmp_path: Path) -> None:
    lines = CORPUS.read_bytes().splitlines()
    lines.insert(2, b'{"id": "latin1", "title": "Caf\xe9", "text": "A text in Latin-1."}')
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"\n".join(lines) + b"\n")
    db = tmp_path / "db"
    argv = ["index", "build", "--input", str(corpus), "--name", "utf-idx"]
    status, out, err = _run(*argv, "--persist-dir", str(db), "--quiet")
    assert status == 1
    assert err.splitlines() == [
        f"error: {corpus}:3: not UTF-8: byte 0xE9 at column 31 (record skipped)"
    ]
    assert "1 line(s) skipped" in out
    assert EvidenceIndex.open("utf-idx", persist_dir=db).count("abstract") == 8


# ------------------------------------------------------------------ index add


def _write_corpus(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_add_upserts_records_in_place(tmp_path: Path) -> None:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    db = tmp_path / "db"
    first = _write_corpus(tmp_path / "first.jsonl", lines[:5])
    assert (
        _run(
            "index",
            "build",
            "--input",
            str(first),
            "--name",
            "upd",
            "--persist-dir",
            str(db),
            "--quiet",
        )[0]
        == 0
    )
    index = EvidenceIndex.open("upd", persist_dir=db)
    (generation, before) = (index.generation, index.count())
    replaced = json.loads(lines[0]) | {"title": "CO2", "text": "One sentence only."}
    more = _write_corpus(tmp_path / "more.jsonl", [json.dumps(replaced), *lines[5:]])

    status, out, err = _run(
        "index", "add", "--input", str(more), "--name", "upd", "--persist-dir", str(db), "--quiet"
    )

    assert (status, err) == (0, "")
    index = EvidenceIndex.open("upd", persist_dir=db)
    after = index.count()
    assert index.generation == generation  # in place: no new generation
    assert index.count("abstract") == 8
    assert out == (
        # co2-1's 3 entries (abstract, 2 sentences) became 2: written = the gain + 3
        f"added 4 record(s) as {after - before + 3} entries to 'upd' at {index.location}, "
        f"generation {generation!r}; the index holds {after} entries ({after - before:+d})\n"
    )
    (hit,) = index.search("One sentence only.", granularity="phrase", k=1)
    assert (hit.id, hit.title) == ("co2-1:phrase:0", "CO2")
    added = json.loads(lines[7])
    (top,) = index.search(added["text"], granularity="abstract", k=1)
    assert top.record_id == str(added["id"]) == "42"  # a numeric id is kept as text


def test_add_refuses_an_index_that_does_not_exist(tmp_path: Path) -> None:
    status, out, err = _run(
        "index",
        "add",
        "--input",
        str(CORPUS),
        "--name",
        "typo",
        "--persist-dir",
        str(tmp_path),
        "--quiet",
    )
    assert (status, out) == (2, "")
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert "typo" in err
    assert "Traceback" not in err
    with pytest.raises(Exception, match="typo"):
        EvidenceIndex.open("typo", persist_dir=tmp_path)  # nothing was created


def test_add_reports_bad_lines_and_adds_the_rest(tmp_path: Path) -> None:
    db = tmp_path / "db"
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    first = _write_corpus(tmp_path / "first.jsonl", lines[:2])
    assert (
        _run(
            "index",
            "build",
            "--input",
            str(first),
            "--name",
            "bad",
            "--persist-dir",
            str(db),
            "--quiet",
        )[0]
        == 0
    )
    more = _write_corpus(tmp_path / "more.jsonl", [lines[2], "{not json", lines[3]])
    status, out, err = _run(
        "index", "add", "--input", str(more), "--name", "bad", "--persist-dir", str(db), "--quiet"
    )
    assert status == 1
    assert err.startswith(f"error: {more}:2: invalid JSON")
    assert err.count("\n") == 1
    assert out.startswith("added 2 record(s) as ")
    assert out.endswith("; 1 line(s) skipped\n")
    assert EvidenceIndex.open("bad", persist_dir=db).count("abstract") == 4


def test_an_interrupted_add_is_completed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "db"
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    first = _write_corpus(tmp_path / "first.jsonl", lines[:4])
    more = _write_corpus(tmp_path / "more.jsonl", lines[4:])
    assert (
        _run(
            "index",
            "build",
            "--input",
            str(first),
            "--name",
            "cut",
            "--persist-dir",
            str(db),
            "--quiet",
        )[0]
        == 0
    )

    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(EvidenceIndex, "_write", interrupted)
        status, out, err = _run(
            "index",
            "add",
            "--input",
            str(more),
            "--name",
            "cut",
            "--persist-dir",
            str(db),
            "--quiet",
        )
    assert (status, out) == (130, "")
    assert err == (
        "error: interrupted; index 'cut' is marked incomplete until an index add completes "
        "(run it again: re-added records replace their entries)\n"
    )
    with pytest.raises(IncompleteIndexError):
        EvidenceIndex.open("cut", persist_dir=db)

    status, out, err = _run(
        "index", "add", "--input", str(more), "--name", "cut", "--persist-dir", str(db), "--quiet"
    )
    assert (status, err) == (0, "")
    assert EvidenceIndex.open("cut", persist_dir=db).count("abstract") == 8


def test_serve_on_a_busy_port_fails_at_once_in_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, out, err = _run(
            "serve", "--index", "climate", "--persist-dir", str(tmp_path), "--port", str(port)
        )
    assert (status, out) == (2, "")  # nothing announced, no judge or index loaded
    assert err == (
        f"error: port {port} on 127.0.0.1 is in use (another serve?): choose another --port\n"
    )


def test_the_port_check_leaves_a_free_port_free() -> None:
    import socket

    from langchain_references.cli.serve import check_port

    port = free_port()
    check_port("127.0.0.1", port)
    check_port("127.0.0.1", port)  # the probe let it go
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
