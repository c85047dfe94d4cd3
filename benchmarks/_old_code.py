"""Old versions of the package's modules, read with ``git show``, importing today's modules.

The benchmarks that compare with an earlier commit execute that commit's modules beside
today's package: :func:`git_show` reads them, and their imports of modules that have moved
since are sent to today's path (:func:`today_imports`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

#: The checkout the benchmarks run from (``git show`` runs there).
REPO = Path(__file__).resolve().parents[1]


def git_show(rev: str, path: str) -> str | None:
    """The text of ``path`` (from the checkout's root) at commit ``rev``.

    Args:
        rev: A commit.
        path: A file's path in the repository.

    Returns:
        The text, or None without git, the commit or the file.
    """
    try:
        return subprocess.run(
            ["git", "show", f"{rev}:{path}"],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


CORE_MODULES = ("_parser", "_code", "deeplinks", "styles", "numbering", "rewriter", "prompting")
SERVICE_MODULES = (
    "embeddings",
    "_vectors",
    "_chroma",
    "retrieval",
    "embedding_cache",
    "runcache",
    "ratelimit",
    "engine",
    "_isolation",
    "loading",
    "_endpoint",
    "_structured",
    "_concurrency",
)
#: Modules of the package that moved into ``core`` and ``services``: old path -> today's.
MOVED = {
    **{
        f"langchain_references.{name}": f"langchain_references.core.{name}" for name in CORE_MODULES
    },
    **{
        f"langchain_references.{name}": f"langchain_references.services.{name}"
        for name in SERVICE_MODULES
    },
}


def today_imports(code: str) -> str:
    """``code`` with its imports of moved modules sent to their path today."""
    for old, today in MOVED.items():
        code = code.replace(f"from {old} import", f"from {today} import")
        code = code.replace(f"import {old} as", f"import {today} as")
    return code
