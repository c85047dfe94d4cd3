"""The README's Python snippets run.

Every ```python block of README.md is executed, in order, in one namespace (so a snippet may
use what an earlier one defined), from the repository root. A block right after a
``<!-- readme: needs ... -->`` comment needs something the tests do not have (an API key, the
internet): it is compiled, and its ``langchain_references`` imports are executed, so the names
it shows exist.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_BLOCK = re.compile(
    r"(?P<marker><!-- readme: needs [^>]*-->\s*\n)?```python\n(?P<code>.*?)```", re.S
)


def _blocks() -> list[tuple[int, str, bool]]:
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        blocks.append((line, match.group("code"), match.group("marker") is not None))
    return blocks


def _our_imports(code: str) -> str:
    tree = ast.parse(code)
    keep = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("langchain_references")
    ]
    return ast.unparse(ast.Module(body=keep, type_ignores=[]))


def test_the_readme_has_offline_snippets() -> None:
    blocks = _blocks()
    assert sum(1 for _, _, needs in blocks if not needs) >= 5


@pytest.mark.slow
def test_readme_snippets_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    namespace: dict[str, object] = {"__name__": "readme"}
    for line, code, needs in _blocks():
        source = _our_imports(code) if needs else code
        compile(code, f"README.md:{line}", "exec")
        try:
            exec(compile(source, f"README.md:{line}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            raise AssertionError(f"README.md snippet at line {line} failed: {exc!r}") from exc
    assert os.getcwd() == str(ROOT)
