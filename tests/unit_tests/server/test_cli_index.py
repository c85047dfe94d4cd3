"""The ``index build`` and ``serve`` commands (in process; the slow test runs them for real)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from langchain_references.cli import main
from langchain_references.server.index import EvidenceIndex

from .conftest import CORPUS


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
