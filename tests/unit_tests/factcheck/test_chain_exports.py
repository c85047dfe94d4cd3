"""The package exports its public API lazily, so importing it stays light."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import langchain_references.factcheck as factcheck
from tests.unit_tests.conftest import REPO_ROOT

HEAVY = ("chromadb", "trafilatura", "httpx", "tiktoken", "onnxruntime")


def test_every_exported_name_resolves_to_its_defining_module() -> None:
    assert sorted(factcheck.__all__) == sorted(factcheck._EXPORTS)
    for name, module in factcheck._EXPORTS.items():
        expected = getattr(importlib.import_module(f"{factcheck.__name__}.{module}"), name)
        assert getattr(factcheck, name) is expected
    assert set(factcheck.__all__) <= set(dir(factcheck))


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = factcheck.nope


def test_importing_the_package_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, langchain_references.factcheck as f\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
        "f.create_fact_check_chain\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after = completed.stdout.splitlines()
    assert before == "[]"
    assert after == str(sorted(["chromadb", "trafilatura", "httpx", "tiktoken"]))
