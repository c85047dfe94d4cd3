"""``--retrieval`` on ``index build``, ``serve`` and ``factcheck``, and the setting it fills."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from langchain_references.cli import build_parser, main
from langchain_references.cli.index import open_index
from langchain_references.cli.serve import settings_from_args
from langchain_references.server import bm25_store
from langchain_references.server.settings import ServerSettings, SettingsError

from .conftest import CORPUS

FAKE = "tests.unit_tests.server._build_fakes:WordHashEmbeddings"


def _build(db: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["index", "build", "--input", str(CORPUS), "--name", "cli-ret"]
    argv += ["--persist-dir", str(db), "--embeddings", FAKE, "--quiet", *extra]
    return main(argv, out=out, err=err), out.getvalue(), err.getvalue()


def _serve_args(db: Path, *extra: str) -> list[str]:
    return ["serve", "--index", "cli-ret", "--persist-dir", str(db), "--embeddings", FAKE, *extra]


@pytest.mark.parametrize(
    ("extra", "saved"),
    [
        ((), True),
        (("--retrieval", "hybrid"), True),
        (("--retrieval", "bm25"), True),
        (("--retrieval", "dense"), False),
    ],
)
def test_index_build_saves_bm25_unless_dense(
    tmp_path: Path, extra: tuple[str, ...], saved: bool
) -> None:
    status, _, err = _build(tmp_path, *extra)
    assert (status, err) == (0, "")
    generation = bm25_store.bm25_root(tmp_path) / "cli-ret__g1"
    assert generation.exists() is saved
    if saved:
        assert sorted(p.name for p in generation.iterdir()) == ["abstract", "phrase"]


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_serve_opens_the_index_in_the_chosen_mode(tmp_path: Path, mode: str) -> None:
    _build(tmp_path)
    args = build_parser().parse_args(_serve_args(tmp_path, "--retrieval", mode))
    assert settings_from_args(args).retrieval == mode
    index = open_index(args, create=False)
    assert index.retrieval == mode
    hits = index.search("honey bees", granularity="phrase", k=2)
    assert hits[0].record_id == "bees-1"


def test_serve_defaults_to_hybrid_and_the_setting_travels_to_the_workers(tmp_path: Path) -> None:
    args = build_parser().parse_args(_serve_args(tmp_path))
    settings = settings_from_args(args)
    assert settings.retrieval == "hybrid"
    env = ServerSettings(retrieval="bm25").to_env()
    assert env["LANGCHAIN_REFERENCES_SERVER_RETRIEVAL"] == "bm25"
    assert ServerSettings.from_env(env).retrieval == "bm25"
    with pytest.raises(SettingsError, match="retrieval must be one of dense, bm25, hybrid"):
        ServerSettings(retrieval="sparse")  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["index build", "serve", "factcheck"])
def test_the_flag_accepts_only_the_three_modes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*command.split(), "--retrieval", "sparse"]
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--retrieval: invalid choice: 'sparse'" in err
    assert "'dense', 'bm25', 'hybrid'" in err


@pytest.mark.parametrize(("extra", "mode"), [((), "hybrid"), (("--retrieval", "bm25"), "bm25")])
def test_factcheck_passes_the_mode_to_its_relevance_stage(
    tmp_path: Path, extra: tuple[str, ...], mode: str
) -> None:
    from langchain_references.cli.factcheck import build_chain
    from langchain_references.factcheck.stages import RelevanceStage

    (tmp_path / "page.txt").write_text("Honey bees dance.")
    argv = ["factcheck", "a claim", "--search", f"local:{tmp_path}", "--quiet", *extra]
    args = build_parser().parse_args(argv)
    with contextlib.ExitStack() as stack:
        chain = build_chain(args, stack, io.StringIO())
    (relevance,) = [s for s in chain.stages if isinstance(s, RelevanceStage)]
    assert relevance.options["retrieval"] == mode
