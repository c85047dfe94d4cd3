"""The README's Python snippets run.

Every ```python block of README.md is executed, in order, in one namespace (so a snippet may
use what an earlier one defined), from the repository root. A block right after a
``<!-- readme: needs ... -->`` comment needs something the tests do not have (an API key, the
internet): it is compiled, and its ``langchain_references`` imports are executed, so the names
it shows exist. The README is a quickstart: its first block is the two commands, and it stays
short (the rest is in ``docs/``, whose snippets ``test_docs_snippets.py`` runs). The
``langchain-references`` commands of its ```bash blocks are not run (they need a corpus, a
Chroma server...): they are parsed, so the options they show exist.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.unit_tests._snippets import run_snippets, snippets

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_the_readme_is_a_quickstart() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.index("make demo") < text.index("```python")
    assert "make test" in text
    assert "pprados" in text  # the package-name warning
    assert len(text.splitlines()) <= 160
    assert sum(1 for snippet in snippets(README) if not snippet.needs) >= 3


def test_the_readme_links_to_existing_docs_pages() -> None:
    text = README.read_text(encoding="utf-8")
    pages = {part.split(")")[0].split("#")[0] for part in text.split("](docs/")[1:]}
    assert pages
    for page in pages:
        assert (ROOT / "docs" / page).is_file(), page


@pytest.mark.slow
def test_readme_snippets_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    assert run_snippets(README, "README.md") >= 3
    assert os.getcwd() == str(ROOT)


def _commands(text: str) -> list[list[str]]:
    """The ``langchain-references`` command lines of the ```bash blocks, comments left out."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["langchain-references"]:
                found.append(words[1:])
    return found


def test_the_readme_commands_parse() -> None:
    from langchain_references.cli import build_parser

    commands = _commands(README.read_text(encoding="utf-8"))
    assert [c[:2] for c in commands if c[0] == "index"] == [["index", "build"]] * 2
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv)  # exits (SystemExit) on an option that does not exist
    engines = [parser.parse_args(c).engine for c in commands if c[0] == "index"]
    assert engines == ["local", "ray"]
