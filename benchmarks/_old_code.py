"""Old versions of the package's modules, read with ``git show``, importing today's modules.

The benchmarks that compare with an earlier commit execute that commit's modules beside
today's package: their imports of modules that have moved since are sent to today's path.
"""

from __future__ import annotations

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
