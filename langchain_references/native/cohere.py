"""Cohere: citation spans over the answer, each naming the documents or tool outputs cited.

``langchain-cohere`` (Chat API v2) puts the response's citations in
``additional_kwargs["citations"]`` of the invoked message: the SDK's ``Citation`` objects,
``start``/``end`` (characters of the answer), ``text`` (the cited span of the answer),
``type`` (``TEXT_CONTENT``, ``THINKING_CONTENT``, ``PLAN``) and ``sources``
(``DocumentSource(id, document)`` or ``ToolSource(id, tool_output)``). The documents sent
with the request are in ``additional_kwargs["documents"]`` (``{"id", "data"}``, ids
``doc-<i>`` unless the document had its own ``metadata["id"]``). The deprecated v1 API gives
``ChatCitation(start, end, text, document_ids)`` and the documents as dicts with an ``id``.

``langchain-cohere`` 0.6 drops the citation events of a stream (its chunks carry text
only), so citations come with ``invoke`` (or any message that carries them). Because a span
can only be placed once the text it covers is known and citations may come last, **the
adapter holds the answer back until the stream ends** (or a chunk marks itself as the last).

A source that is one of the request's documents becomes a document-index citation
(``documents[i]`` of the run, assuming the run's documents are the ones sent to Cohere);
any other source becomes a citation with the source's ``url``/``title``/``id``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from typing_extensions import override

from langchain_references.native._markers import Cut, apply_cuts, is_final_chunk
from langchain_references.native._spans import SpanLocator, field_of
from langchain_references.native.base import (
    BaseNativeAdapter,
    NativeCitation,
    Piece,
    normalize_url,
)

__all__ = ["CohereAdapter"]

logger = logging.getLogger(__name__)

_SKIPPED_TYPES = frozenset({"THINKING_CONTENT"})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_cohere_citation(item: Any) -> bool:
    return isinstance(field_of(item, "start"), int) and (
        field_of(item, "sources") is not None or field_of(item, "document_ids") is not None
    )


def _document_fields(document: Any) -> Mapping[str, Any]:
    """The fields of a cited document: its ``data`` when wrapped, else itself."""
    if not isinstance(document, Mapping):
        return {}
    data = document.get("data")
    return data if isinstance(data, Mapping) else document


class CohereAdapter(BaseNativeAdapter):
    """Places Cohere's citations after the spans they support.

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> citation = {"start": 0, "end": 7, "text": "Cats nap",
        ...             "sources": [{"type": "document", "id": "doc-0",
        ...                          "document": {"id": "doc-0", "text": "..."}}]}
        >>> message = AIMessage("Cats nap a lot.", additional_kwargs={
        ...     "citations": [citation],
        ...     "documents": [{"id": "doc-0", "data": {"text": "..."}}]})
        >>> adapter = CohereAdapter()
        >>> pieces = adapter.feed(message) + adapter.finish()
        >>> [p if isinstance(p, str) else p.document_index for p in pieces]
        ['Cats nap', 0, ' a lot.']
    """

    provider: str = "cohere"

    __slots__ = ("_citations", "_documents", "_ids", "_parts")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._citations: list[Any] = []
        self._documents: list[Any] = []
        self._ids: dict[Any, int] | None = None

    @classmethod
    @override
    def matches(cls, message: BaseMessage) -> bool:
        """Return True for a Cohere message: its provider, or Cohere-shaped citations."""
        if message.response_metadata.get("model_provider") == "cohere":
            return True
        citations = message.additional_kwargs.get("citations")
        return (
            isinstance(citations, list)
            and bool(citations)
            and all(_is_cohere_citation(item) for item in citations)
        )

    @override
    def _read(self, message: BaseMessage) -> list[Piece]:
        """Keep the text and citations; return everything once a last chunk comes."""
        self._parts.append(message.text)
        kwargs = message.additional_kwargs
        citations = kwargs.get("citations")
        if isinstance(citations, list):
            self._citations.extend(item for item in citations if _is_cohere_citation(item))
        documents = kwargs.get("documents")
        if isinstance(documents, list) and documents:
            self._documents = list(documents)
            self._ids = None
        if is_final_chunk(message):
            return self.finish()
        return []

    @override
    def finish(self) -> list[Piece]:
        """End the answer; return it with citations after the cited spans."""
        text, self._parts = "".join(self._parts), []
        citations, self._citations = self._citations, []
        locator = SpanLocator(text)
        cuts: list[Cut] = []
        for citation in citations:
            kind = field_of(citation, "type")
            if isinstance(kind, str) and kind.upper() in _SKIPPED_TYPES:
                continue
            records = self._records(citation)
            if not records:
                continue
            quoted = field_of(citation, "text")
            position = locator.span_end(
                field_of(citation, "start"),
                field_of(citation, "end"),
                quoted if isinstance(quoted, str) else None,
            )
            cuts.append(Cut(position, position, records))
        return apply_cuts(text, cuts)

    def _records(self, citation: Any) -> list[NativeCitation]:
        sources = field_of(citation, "sources")
        if isinstance(sources, Sequence) and not isinstance(sources, str):
            out = [self._from_source(source) for source in sources]
            return [record for record in out if record is not None]
        ids = field_of(citation, "document_ids")
        if not isinstance(ids, list | tuple):
            ids = ()
        out = [self._from_id(document_id) for document_id in ids if isinstance(document_id, str)]
        return [record for record in out if record is not None]

    def _index_of(self, document_id: str) -> int | None:
        """The first request document with this id (its index built once per documents)."""
        if self._ids is None:
            self._ids = {}
            for index, document in enumerate(self._documents):
                key = field_of(document, "id")
                if isinstance(key, str):
                    self._ids.setdefault(key, index)
        return self._ids.get(document_id)

    def _from_id(self, document_id: str) -> NativeCitation | None:
        index = self._index_of(document_id)
        document = self._documents[index] if index is not None else None
        return self._record(document_id, _document_fields(document), index)

    def _from_source(self, source: Any) -> NativeCitation | None:
        source_id = _str(field_of(source, "id"))
        body = field_of(source, "document")
        if body is None:
            body = field_of(source, "tool_output")
        fields = body if isinstance(body, Mapping) else {}
        index = self._index_of(source_id) if source_id else None
        return self._record(source_id, fields, index)

    def _record(
        self, source_id: str | None, fields: Mapping[str, Any], index: int | None
    ) -> NativeCitation | None:
        url = _str(fields.get("url"))
        title = _str(fields.get("title"))
        if index is not None:
            source = None
        elif url:
            source = normalize_url(url)
        else:
            source = source_id or title
        if index is None and source is None:
            logger.debug("Cohere citation source without id, url or title: skipped")
            return None
        return NativeCitation(
            provider=self.provider,
            source=source,
            url=url,
            title=title,
            document_index=index,
        )
