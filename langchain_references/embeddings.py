"""Offline sentence embeddings: all-MiniLM-L6-v2 on onnxruntime, without torch (public module).

The implementation is :mod:`langchain_references.services.embeddings`; this module is its
public name, kept for ``from langchain_references.embeddings import MiniLMEmbeddings``.
"""

from langchain_references.services.embeddings import *  # noqa: F403 (the public names, __all__)
from langchain_references.services.embeddings import __all__ as __all__
