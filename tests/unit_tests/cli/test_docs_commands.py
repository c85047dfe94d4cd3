"""The docs describe the command line that exists: every command line and option they name."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from langchain_references.cli import build_parser
from tests.unit_tests.conftest import REPO_ROOT

PAGES = sorted((REPO_ROOT / "docs").glob("*.md"))
COMMANDS = ("index build", "index add", "factcheck", "factuality", "citations", "demo", "serve")
_CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_SHELL_END = {"|", "&&", ";", ">", "2>", "<", "&"}


def _options(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """The option strings of every command (``"index build"``...), walking the subparsers."""
    found: dict[str, set[str]] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found[name] = {s for action in parser._actions for s in action.option_strings}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    walk(f"{name} {sub}".strip(), subparser)

    walk("", parser)
    return found


def command_lines(text: str) -> list[list[str]]:
    """The arguments of each ``langchain-references`` line of the page's shell blocks."""
    lines = []
    for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if "langchain-references" in words:
                argv = words[words.index("langchain-references") + 1 :]
                ends = [i for i, word in enumerate(argv) if word in _SHELL_END]
                lines.append(argv[: ends[0]] if ends else argv)
    return lines


def inline_commands(text: str) -> list[tuple[str, list[str]]]:
    """The options of each code span that shows a command (``index build --retrieval dense``)."""
    found = []
    for span in _CODE_SPAN.findall(text):
        words = span.removeprefix("langchain-references ").split()
        for command in COMMANDS:
            if " ".join(words[: command.count(" ") + 1]) == command:
                options = [w.split("=")[0] for w in words if w.startswith("--")]
                found.append((command, options))
                break
    return found


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_command_line_in_the_docs_parses(page: Path) -> None:
    parser = build_parser()
    for argv in command_lines(page.read_text(encoding="utf-8")):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:  # argparse printed why on stderr
            pytest.fail(f"{page.name}: langchain-references {shlex.join(argv)} (exit {exc.code})")


def test_the_docs_show_every_command() -> None:
    shown = {
        " ".join(argv[: 2 if argv[0] == "index" else 1])
        for page in PAGES
        for argv in command_lines(page.read_text(encoding="utf-8"))
    }
    assert shown == set(COMMANDS)


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_option_the_docs_name_exists(page: Path) -> None:
    options = _options(build_parser())
    for command, named in inline_commands(page.read_text(encoding="utf-8")):
        unknown = [option for option in named if option not in options[command]]
        assert unknown == [], f"{page.name}: {command} has no {', '.join(unknown)}"


def test_the_option_walk_sees_each_commands_own_options() -> None:
    options = _options(build_parser())
    assert {"--graph-version", "--judge-concurrency"} <= options["factuality"]
    assert "--input" in options["index add"]
    assert "--retrieval" not in options["index add"]
    assert "--graph-version" not in options["factcheck"]


#: Pages that name options of other programs (benchmark scripts, mutmut), not of this one.
OTHER_PROGRAMS = {"benchmarks.md", "testing.md"}


@pytest.mark.parametrize(
    "page", [p for p in PAGES if p.name not in OTHER_PROGRAMS], ids=lambda p: p.name
)
def test_every_bare_option_the_docs_name_is_one_of_a_command(page: Path) -> None:
    known = set().union(*_options(build_parser()).values())
    spans = _CODE_SPAN.findall(page.read_text(encoding="utf-8"))
    bare = [span.split()[0].split("=")[0] for span in spans if span.startswith("--")]
    assert [option for option in bare if option not in known] == []


def test_the_exit_status_table_lists_the_statuses_main_returns() -> None:
    from langchain_references.cli import INTERRUPTED, USAGE_ERROR

    text = (REPO_ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    table = text.split("### Exit status", 1)[1].split("\n\n")[2]
    statuses = [int(row.split("|")[1]) for row in table.splitlines()[2:]]
    assert statuses == [0, 1, USAGE_ERROR, INTERRUPTED] == [0, 1, 2, 130]
