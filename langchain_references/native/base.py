"""The one record every provider's citations become, and the adapter protocol.

A provider adapter reads the raw chunks (or the whole message) a chat model produced and
turns them into an ordered sequence of *pieces*: answer text with the provider's own citation
markup removed, and :class:`NativeCitation` records at the places where a reference marker
belongs. The references runnable numbers each record like a ``[n](id=k)`` citation (first use,
one number per source) and renders it in the run's style, so provider citations and
``[n](id=k)`` citations share one numbering and one reference list.

Adapters are sans-IO and per run: one instance per answer, never shared between runs.
Their output must not depend on how the stream was chunked: concatenating the text pieces
and keeping the citations in order gives the same result for any split of the same answer.
The built-in adapters derive from :class:`BaseNativeAdapter`, which holds the entry points
they share (the message check of ``feed``, the documented ``matches``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage

from langchain_references.core.numbering import ABSENT_DOCUMENT
from langchain_references.errors import LangchainReferencesError

__all__ = [
    "BaseNativeAdapter",
    "NativeAdapter",
    "NativeCitation",
    "Piece",
    "UnsupportedMessageError",
    "as_message",
    "normalize_url",
]


def normalize_url(url: str) -> str:
    """Return ``url`` without its ``utm_*`` tracking parameters (the source key of a URL).

    Args:
        url: An absolute URL.

    Returns:
        The URL with every ``utm_*`` query parameter removed (the rest kept in order) and an
        empty fragment dropped.

    Examples:
        >>> normalize_url("https://a.org/x?utm_source=openai&id=3")
        'https://a.org/x?id=3'
    """
    parts = urlsplit(url.strip())
    if not parts.query:
        return urlunsplit(parts)
    kept = [
        (key, value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if not key.lower().startswith("utm_")
    ]
    return urlunsplit(parts._replace(query=urlencode(kept)))


@dataclass(frozen=True, slots=True)
class NativeCitation:
    """One provider citation, whatever the provider.

    Attributes:
        provider: The adapter that read it (``"anthropic"``, ``"openai"``, ...).
        source: The source key: a normalized URL, a file id, or None when the citation
            points at ``documents[document_index]`` (whose own source is then used).
        url: The URL to link to, if the provider gave one.
        title: The source's title, if known.
        cited_text: The quoted passage, if the provider gave one (used for deep links).
        page: 1-based page number for page-located citations (PDFs), if any.
        document_index: 0-based index into the run's ``documents`` when the provider cites a
            document of the prompt by position.
        start: Start of the cited span in the source (characters), if given.
        end: End of the cited span in the source (characters), if given.
    """

    provider: str
    source: str | None = None
    url: str | None = None
    title: str | None = None
    cited_text: str | None = None
    page: int | None = None
    document_index: int | None = None
    start: int | None = None
    end: int | None = None

    def to_document(self, documents: Sequence[Document] = ()) -> Document:
        """Return the document this citation refers to.

        A document-index citation inside ``documents`` is that document; anything else
        becomes a new :class:`~langchain_core.documents.Document` whose metadata carries the
        source, title, URL and page (and whose content is the cited text).

        Args:
            documents: The documents of the run, if any.

        Returns:
            The cited document.
        """
        if (
            self.document_index is not None
            and 0 <= self.document_index < len(documents)
            and documents[self.document_index] is not ABSENT_DOCUMENT
        ):
            return documents[self.document_index]
        metadata: dict[str, Any] = {"source": self.source or self.url}
        if self.url:
            metadata["url"] = self.url
        if self.title:
            metadata["title"] = self.title
        if self.page is not None:
            metadata["page_number"] = self.page  # 1-based, as deep links read it
        metadata["provider"] = self.provider
        return Document(page_content=self.cited_text or "", metadata=metadata)


Piece = str | NativeCitation
"""An adapter's output: answer text, or a citation at the current position."""


class NativeAdapter(Protocol):
    """Reads one answer's provider citations; one instance per run.

    ``feed`` takes each message chunk (or the whole message of a non-streaming model) in
    order and returns the pieces now certain; ``finish`` returns the rest. An adapter may
    hold text back until the citations that point into it are known.
    """

    provider: str

    def feed(self, message: Any) -> list[Piece]:
        """Consume one message chunk (or whole message); return the pieces now certain."""
        ...

    def finish(self) -> list[Piece]:
        """End the answer; return every piece still held back."""
        ...


class UnsupportedMessageError(LangchainReferencesError, TypeError):
    """An adapter was fed something that is not a LangChain message."""


def as_message(message: Any) -> BaseMessage:
    """Return ``message`` if it is a LangChain message (or chunk); raise otherwise.

    Args:
        message: What an adapter was fed.

    Returns:
        The same object, typed as a message.

    Raises:
        UnsupportedMessageError: If ``message`` is not a LangChain message.
    """
    if not isinstance(message, BaseMessage):
        msg = f"expected a LangChain message or message chunk, got {type(message).__name__}"
        raise UnsupportedMessageError(msg)
    return message


class BaseNativeAdapter(ABC):
    """The entry points every built-in adapter shares; a subclass supplies the reading.

    A subclass sets :attr:`provider` and implements :meth:`matches` (which messages it
    reads), :meth:`_read` (one message, already checked) and :meth:`finish`.
    """

    __slots__ = ()

    provider: str

    @classmethod
    @abstractmethod
    def matches(cls, message: BaseMessage) -> bool:
        """Return True when this adapter reads ``message`` (used by ``native="auto"``).

        Args:
            message: A message or chunk.

        Returns:
            Whether this adapter reads it.
        """

    def feed(self, message: Any) -> list[Piece]:
        """Consume one chunk (or the whole message); return the pieces now certain.

        Args:
            message: A LangChain message chunk of a stream, or the whole message.

        Returns:
            Text and citations in order; an adapter may hold text back until the citations
            that point into it are known.

        Raises:
            UnsupportedMessageError: If ``message`` is not a LangChain message.
        """
        return self._read(as_message(message))

    @abstractmethod
    def _read(self, message: BaseMessage) -> list[Piece]:
        """Consume one checked message (or chunk); return the pieces now certain."""

    @abstractmethod
    def finish(self) -> list[Piece]:
        """End the answer; return every piece still held back.

        Returns:
            The remaining pieces.
        """
