"""The inference error type (internal module; re-exported by the package)."""

from __future__ import annotations

from langchain_references.errors import LangchainReferencesError


class InferenceError(LangchainReferencesError, ValueError):
    """Raised when the requested inference cannot be carried out."""
