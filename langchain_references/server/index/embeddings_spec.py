"""The embeddings of an index, named by a spec: ``"minilm"`` or ``"package.module:factory"``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

__all__ = ["load_embeddings"]


def load_embeddings(spec: str | None = None) -> Embeddings:
    """The embeddings named by ``spec``.

    Args:
        spec: ``None`` or ``"minilm"`` for the offline all-MiniLM-L6-v2 (the process's one
            instance, :func:`~langchain_references.services.embeddings.shared_minilm`), or
            ``"package.module:factory"``: a LangChain ``Embeddings`` class or function called
            without arguments (configure it with its environment variables).

    Returns:
        The embeddings.

    Raises:
        ValueError: If the spec is malformed or does not give an ``Embeddings``.
        ImportError: If its module cannot be imported.
    """
    from langchain_core.embeddings import Embeddings

    if spec is None or spec == "minilm":
        from langchain_references.services.embeddings import shared_minilm

        return shared_minilm()
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"embeddings must be 'minilm' or 'module:factory', got {spec!r}")
    factory = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(factory):
        raise ValueError(f"{spec!r} is not a callable in {module_name}")
    try:
        embeddings = factory()
    except Exception as exc:  # a factory's own error (missing key, bad signature...)
        raise ValueError(f"{spec}() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(embeddings, Embeddings):
        raise ValueError(f"{spec!r} gave a {type(embeddings).__name__}, not an Embeddings")
    return embeddings
