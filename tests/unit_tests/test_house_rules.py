"""House rules that ruff and mypy do not check, read from the library's syntax trees."""

from __future__ import annotations

import ast
from pathlib import Path

import langchain_references

ROOT = Path(langchain_references.__file__).parent


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(ROOT.rglob("*.py"))
    ]


def _module_logger(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "logger" for t in node.targets)
        for node in tree.body
    )


def _reads_logger(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Name) and node.id == "logger" and isinstance(node.ctx, ast.Load)
        for node in ast.walk(tree)
    )


def test_every_module_logger_is_used() -> None:
    modules = _modules()
    with_logger = [name for name, tree in modules if _module_logger(tree)]
    unused = [name for name, tree in modules if _module_logger(tree) and not _reads_logger(tree)]
    assert len(with_logger) > 40  # the check reads the library, not an empty folder
    assert unused == []


def test_an_unused_logger_is_seen() -> None:
    used = ast.parse("import logging\nlogger = logging.getLogger(__name__)\nlogger.info('x')\n")
    unused = ast.parse("import logging\nlogger = logging.getLogger(__name__)\n")
    assert (_module_logger(used), _reads_logger(used)) == (True, True)
    assert (_module_logger(unused), _reads_logger(unused)) == (True, False)


def _prints_to_stdout(node: ast.AST) -> bool:
    """A ``print`` call without ``file=`` (the CLI writes to the stream it is given)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
        and not any(keyword.arg == "file" for keyword in node.keywords)
    )


def test_the_library_logs_instead_of_printing() -> None:
    printing = [
        f"{name}:{node.lineno}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if _prints_to_stdout(node)
    ]
    assert printing == []


def test_a_print_to_stdout_is_seen() -> None:
    codes = ("print('x')", "print('x', file=out)", "out.print('x')")
    seen = [any(_prints_to_stdout(node) for node in ast.walk(ast.parse(c))) for c in codes]
    assert seen == [True, False, False]
