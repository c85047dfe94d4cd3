"""Provider-native citations in the same numbering and styles as ``[n](id=k)`` citations.

One adapter per provider reads the model's own citations from its raw chunks (Anthropic
Citations, OpenAI Responses annotations, Perplexity ``[k]`` markers, Gemini grounding
metadata, Cohere citations, LangChain v1 ``citation`` annotations) and turns each into a
:class:`NativeCitation`; ``manage_references(model, native="auto")`` numbers them with the
``[n](id=k)`` citations of the same answer, in one reference list. See
:mod:`~langchain_references.native.base` for the record and the adapter protocol.
"""

from langchain_references.native.base import NativeAdapter, NativeCitation, Piece, normalize_url
from langchain_references.native.registry import (
    ADAPTER_NAMES,
    NativeOption,
    UnknownAdapterError,
    adapter_class,
    select_adapter,
)

__all__ = [
    "ADAPTER_NAMES",
    "NativeAdapter",
    "NativeCitation",
    "NativeOption",
    "Piece",
    "UnknownAdapterError",
    "adapter_class",
    "normalize_url",
    "select_adapter",
]
