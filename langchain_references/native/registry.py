"""Which adapter reads a model's own citations: by name, or picked from the first message.

``native="auto"`` picks the adapter from the first message chunk of a run:
LangChain v1 output (``output_version="v1"``, whatever the provider) first, then the
provider named in ``response_metadata["model_provider"]``, then the first adapter whose
chunk shapes match. Adapters are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any, Final, Literal, cast

from langchain_core.messages import BaseMessage

from langchain_references.errors import LangchainReferencesError
from langchain_references.native.base import NativeAdapter

__all__ = [
    "ADAPTER_NAMES",
    "NativeOption",
    "UnknownAdapterError",
    "adapter_class",
    "select_adapter",
]

#: Adapter name -> (module of this package, class name), in shape-matching order.
_ADAPTERS: Final[dict[str, tuple[str, str]]] = {
    "v1": ("v1", "V1Adapter"),
    "anthropic": ("anthropic", "AnthropicAdapter"),
    "openai": ("openai", "OpenAIAdapter"),
    "perplexity": ("perplexity", "PerplexityAdapter"),
    "gemini": ("gemini", "GeminiAdapter"),
    "cohere": ("cohere", "CohereAdapter"),
}

#: The names ``native=`` accepts besides ``"auto"`` and None.
ADAPTER_NAMES: Final = tuple(_ADAPTERS)

#: ``response_metadata["model_provider"]`` values -> adapter name.
_PROVIDERS: Final[dict[str, str]] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azure_openai": "openai",
    "azure": "openai",
    "perplexity": "perplexity",
    "google_genai": "gemini",
    "google_vertexai": "gemini",
    "google": "gemini",
    "gemini": "gemini",
    "cohere": "cohere",
}

NativeOption = Literal["auto", "v1", "anthropic", "openai", "perplexity", "gemini", "cohere"] | None


class UnknownAdapterError(LangchainReferencesError, ValueError):
    """``native=`` names no adapter."""


def adapter_class(name: str) -> type[NativeAdapter]:
    """Return the adapter class registered under ``name``.

    Args:
        name: One of :data:`ADAPTER_NAMES`.

    Returns:
        The adapter class (imported on first use).

    Raises:
        UnknownAdapterError: If no adapter has that name.
    """
    try:
        module_name, class_name = _ADAPTERS[name]
    except KeyError:
        raise UnknownAdapterError(
            f"native={name!r} is not an adapter: use 'auto', None or one of {list(_ADAPTERS)}"
        ) from None
    module = importlib.import_module(f"langchain_references.native.{module_name}")
    return cast("type[NativeAdapter]", getattr(module, class_name))


def _matches(name: str, message: BaseMessage) -> bool:
    matches: Any = getattr(adapter_class(name), "matches")  # noqa: B009 - a classmethod
    return bool(matches(message))


def select_adapter(message: BaseMessage, native: str) -> NativeAdapter | None:
    """Return a new adapter for a run whose first message (chunk) is ``message``.

    Args:
        message: The first message chunk (or the whole message) of the run.
        native: ``"auto"`` or an adapter name.

    Returns:
        A fresh adapter, or None when ``native="auto"`` finds none for this message.

    Raises:
        UnknownAdapterError: If ``native`` names no adapter.
    """
    if native != "auto":
        return adapter_class(native)()
    if _matches("v1", message):
        return adapter_class("v1")()
    provider = message.response_metadata.get("model_provider")
    named = _PROVIDERS.get(str(provider).lower()) if provider else None
    if named is not None:
        return adapter_class(named)()
    for name in _ADAPTERS:
        if name != "v1" and _matches(name, message):
            return adapter_class(name)()
    return None
