"""Every cross-reference to this package in its docstrings names something that exists.

Sphinx-style roles (``:class:`~langchain_references.x.Y```, ``:func:``, ``:meth:``...) that
name a module, class, function or attribute of the package are resolved by importing: a
reference left behind by a rename or a move fails here (the docs site would link nowhere).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_references"
ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):`~?(langchain_references[\w.]*)`")
# Modules that import optional packages (a missing extra is not a broken reference).
OPTIONAL = ("ray", "fastapi", "chromadb", "langchain_chroma", "trafilatura", "playwright")


def _resolve(target: str) -> bool:
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name and error.name.split(".")[0] in OPTIONAL:
                pytest.skip(f"{target} needs the optional package {error.name}")
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                # a dataclass or pydantic field without a class default is still an attribute
                fields = getattr(obj, "__dataclass_fields__", None) or {}
                return name in fields or name in getattr(obj, "model_fields", {})
            obj = getattr(obj, name)
        return True
    return False


def _references() -> list[tuple[str, str]]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for match in ROLE.finditer(path.read_text(encoding="utf-8")):
            found.add((str(path.relative_to(PACKAGE.parent)), match.group(1)))
    return sorted(found)


def test_the_scan_finds_the_references() -> None:
    references = _references()
    assert len(references) > 200
    assert (
        "langchain_references/server/links.py",
        "langchain_references.core.styles.safe_url",
    ) in (references)


def test_every_reference_names_something_that_exists() -> None:
    broken = [(path, target) for path, target in _references() if not _resolve(target)]
    assert broken == []


def test_a_broken_reference_is_found() -> None:
    assert not _resolve("langchain_references.core.numbering.Reference.to_dict")
    assert _resolve("langchain_references.core.numbering.UsedReference.to_dict")
    assert _resolve("langchain_references.services.loading.LoadResult.errors")  # a dataclass field
