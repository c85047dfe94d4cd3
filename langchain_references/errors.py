"""The package's exceptions: everything it raises on purpose is a :class:`LangchainReferencesError`.

Catch :class:`LangchainReferencesError` to handle any of them. The specific classes also derive
from the built-in exception a caller would expect (``ValueError`` for bad input, ``KeyError``
for a missing key...), so existing ``except ValueError`` code keeps working.
"""

from __future__ import annotations

__all__ = ["LangchainReferencesError", "RecordError"]


class LangchainReferencesError(Exception):
    """Base class of every exception raised by ``langchain_references``."""


class RecordError(LangchainReferencesError, ValueError):
    """An input record is malformed.

    Attributes:
        location: Where the record came from (e.g. ``"data.jsonl:3"``), if known.
        field: The offending field (e.g. ``"documents[2].page_content"``), if known.
    """

    def __init__(
        self, message: str, location: str | None = None, *, field: str | None = None
    ) -> None:
        super().__init__(f"{location}: {message}" if location else message)
        self.location = location
        self.field = field
        self.message = message
