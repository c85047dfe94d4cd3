"""The evidence index's errors: one base class, and an index not found, incomplete or not built."""

from __future__ import annotations

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "EvidenceIndexError",
    "IncompleteIndexError",
    "IndexBuildError",
    "IndexNotFoundError",
]


class EvidenceIndexError(LangchainReferencesError, RuntimeError):
    """The evidence index cannot be opened, written or searched."""


class IndexNotFoundError(EvidenceIndexError, LookupError):
    """No index of that name exists at that location."""


class IncompleteIndexError(EvidenceIndexError):
    """The index has no complete generation to serve.

    Its first build was interrupted or failed, its generation is missing or short of entries,
    an in-place update was interrupted, or an older version built it without a completion
    mark. The message is one line that says which, and to run ``index build`` again.
    """


class IndexBuildError(EvidenceIndexError):
    """A build failed and was undone: the message says what still serves (or that none does)."""
