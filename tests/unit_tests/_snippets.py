"""Run the ```python blocks of a Markdown file, in order, in one namespace.

Used by the README test and the docs test. A block right after a ``<!-- readme: needs ... -->``
or ``<!-- docs: needs ... -->`` comment needs something the tests do not have (an API key, the
internet): it is compiled, and its ``langchain_references`` imports are executed, so the names
it shows exist.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(
    r"(?P<marker><!-- (?:readme|docs): needs [^>]*-->\s*\n)?```python\n(?P<code>.*?)```", re.S
)


@dataclass(frozen=True)
class Snippet:
    """One ```python block: where it starts, its code, and whether it needs a key or a network."""

    line: int
    code: str
    needs: bool


def snippets(path: Path) -> list[Snippet]:
    text = path.read_text(encoding="utf-8")
    return [
        Snippet(
            line=text.count("\n", 0, match.start("code")) + 1,
            code=match.group("code"),
            needs=match.group("marker") is not None,
        )
        for match in _BLOCK.finditer(text)
    ]


def _our_imports(code: str) -> str:
    tree = ast.parse(code)
    keep = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("langchain_references")
    ]
    return ast.unparse(ast.Module(body=keep, type_ignores=[]))


def run_snippets(path: Path, label: str) -> int:
    """Execute every block of ``path`` in one fresh namespace; return how many ran in full."""
    namespace: dict[str, object] = {"__name__": label.replace("/", "_").replace(".", "_")}
    ran = 0
    for snippet in snippets(path):
        where = f"{label}:{snippet.line}"
        compile(snippet.code, where, "exec")
        source = _our_imports(snippet.code) if snippet.needs else snippet.code
        try:
            exec(compile(source, where, "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            raise AssertionError(f"{where}: snippet failed: {exc!r}") from exc
        ran += not snippet.needs
    return ran
