"""Offline sentence embeddings: all-MiniLM-L6-v2 on onnxruntime, without torch (public module).

The implementation is :mod:`langchain_references.services.embeddings`; this module is its
public name, kept for ``from langchain_references.embeddings import MiniLMEmbeddings``.
"""

from langchain_references.services.embeddings import (
    EMBEDDING_DIMENSION,
    MAX_SEQ_LENGTH,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    ChecksumMismatchError,
    EmbeddingDependencyError,
    EmbeddingModelError,
    MiniLMEmbeddings,
    default_model_path,
    default_tokenizer_path,
    shared_minilm,
)

__all__ = [
    "EMBEDDING_DIMENSION",
    "MAX_SEQ_LENGTH",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "ChecksumMismatchError",
    "EmbeddingDependencyError",
    "EmbeddingModelError",
    "MiniLMEmbeddings",
    "default_model_path",
    "default_tokenizer_path",
    "shared_minilm",
]
