"""The documentation's Python snippets run, and the site builds.

Every ```python block of each ``docs/*.md`` page is executed, in the order of the page, in
one namespace per page (a snippet may use what an earlier one of the same page defined), from
the repository root, offline. A block right after a ``<!-- docs: needs ... -->`` comment needs
something the tests do not have (an API key, the internet): it is compiled, and its
``langchain_references`` imports are executed, so the names it shows exist.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit_tests._snippets import run_snippets, snippets

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(path for path in DOCS.glob("*.md") if snippets(path))


def test_the_docs_have_offline_snippets() -> None:
    offline = sum(1 for page in PAGES for snippet in snippets(page) if not snippet.needs)
    marked = sum(1 for page in PAGES for snippet in snippets(page) if snippet.needs)
    assert offline >= 11
    assert marked <= 3  # the few that need a key or the internet


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        assert f": {page.name}" in config, page.name


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_docs_snippets_run(page: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every snippet runs as a reader runs it, from whatever directory they are in."""
    monkeypatch.chdir(tmp_path)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    run_snippets(page, f"docs/{page.name}")
    assert os.getcwd() == str(tmp_path)


@pytest.mark.slow
def test_the_site_builds_strict_offline(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("manage_references", "CitationVerifier", "create_fact_check_chain"):
        assert name in api, name
    assert (site / "images" / "service-page.png").is_file()
    shutil.rmtree(site)
