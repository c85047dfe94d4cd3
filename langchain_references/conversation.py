"""The documents of a conversation: read from its tool results, given ids, shown to the model.

An agent's documents are the :class:`~langchain_core.documents.Document` lists in the
``artifact`` of its ``ToolMessage`` s (``content_and_artifact`` tools). A conversation that
comes back from a checkpoint does not give them back as it got them: a checkpoint serializer
returns each document as a plain dict (``{"id": None, "metadata": {...}, "page_content":
"...", "type": "Document"}``), and LangChain's serialization as its constructor form
(``{"lc": 1, "type": "constructor", "id": [..., "Document"], "kwargs": {...}}``).
:func:`artifact_documents` reads all three forms; any other artifact (text, numbers, a list
mixing documents with other values, an empty list) is not a list of documents and is left
alone. A document-shaped item that is not a valid document (its ``page_content`` not text) is
skipped with a warning that names the tool call (when the tool result is new: after the
model's last message), and the rest of the artifact is kept.

:func:`number_conversation` gives the documents ids: in conversation order, the documents of
each tool result after those of the results before it. Given the ids of an earlier call
(:class:`ConversationIds`, as :class:`~langchain_references.ReferencesMiddleware` keeps them in
the agent's state), each tool result keeps the ids it had, whatever was removed from the
conversation since (old messages summarized away): ids are stable for the whole conversation.
An id whose document is no longer in the conversation is :data:`ABSENT_DOCUMENT`, which no
citation can cite.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_references.core.numbering import ABSENT_DOCUMENT
from langchain_references.core.prompting import format_documents
from langchain_references.errors import LangchainReferencesError

__all__ = [
    "ConversationIds",
    "NumberedConversation",
    "artifact_documents",
    "as_document",
    "give_ids",
    "number_conversation",
]

logger = logging.getLogger(__name__)

#: The last element of the ``id`` of a serialized LangChain ``Document``.
_DOCUMENT_CLASS: Final = "Document"


class _InvalidDocumentError(LangchainReferencesError, ValueError):
    """An item shaped like a document that is not a valid one (the reason is the message)."""


def as_document(item: object) -> Document | None:
    """The document an artifact item stands for, or None if it is not one.

    Args:
        item: A :class:`~langchain_core.documents.Document`, the dict a checkpoint serializer
            makes of one (``"type": "Document"`` with ``page_content``), or LangChain's
            serialized constructor form of one.

    Returns:
        The document, or None for anything else.

    Raises:
        _InvalidDocumentError: If the item is shaped like a document but its content is not text or
            its metadata not a mapping.
    """
    if isinstance(item, Document):
        fields: Mapping[str, Any] = {"page_content": item.page_content, "metadata": item.metadata}
        document: Document | None = item
    elif not isinstance(item, Mapping):
        return None
    elif item.get("lc") == 1 and item.get("type") == "constructor":
        path = item.get("id")
        kwargs = item.get("kwargs")
        if not (isinstance(path, list) and path and path[-1] == _DOCUMENT_CLASS):
            return None
        if not isinstance(kwargs, Mapping):
            raise _InvalidDocumentError("a serialized Document without kwargs")
        fields, document = kwargs, None
    elif item.get("type") == _DOCUMENT_CLASS and "page_content" in item:
        fields, document = item, None
    else:
        return None
    content, metadata = fields.get("page_content"), fields.get("metadata")
    if not isinstance(content, str):
        raise _InvalidDocumentError(f"page_content is {type(content).__name__}, not text")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _InvalidDocumentError(f"metadata is {type(metadata).__name__}, not a mapping")
    if document is not None:
        return document
    identifier = fields.get("id")
    return Document(
        page_content=content,
        metadata=dict(metadata or {}),
        id=identifier if isinstance(identifier, str) else None,
    )


def artifact_documents(message: BaseMessage, *, warn: bool = True) -> list[Document] | None:
    """The documents a tool message carries in its artifact, or None if it carries none.

    Args:
        message: A message of the conversation.
        warn: Log a warning for each invalid document skipped.

    Returns:
        The documents (in any of the forms :func:`as_document` reads, made ``Document`` s),
        or None: the message is not a tool message, or its artifact is not a non-empty
        document or list of documents, or none of its documents is valid.
    """
    if not isinstance(message, ToolMessage):
        return None
    artifact = message.artifact
    items: Sequence[object]
    if isinstance(artifact, Document | Mapping):
        items = [artifact]
    elif isinstance(artifact, Sequence) and not isinstance(artifact, str | bytes):
        items = artifact
    else:
        if warn and isinstance(artifact, Iterator):  # read once, by whoever reads it first
            _unread(message, f"an iterator ({type(artifact).__name__})")
        return None
    documents: list[Document] = []
    for index, item in enumerate(items):
        try:
            document = as_document(item)
        except _InvalidDocumentError as error:
            if not warn:
                continue
            logger.warning(
                "Skipped item %d of the artifact of tool call %r: %s",
                index,
                message.tool_call_id,
                error,
            )
            continue
        if document is None:
            if warn and _holds_documents(item):
                _unread(message, f"a nested list (its item {index} is a list of documents)")
            return None  # not a list of documents: left alone
        documents.append(document)
    return documents or None


def _holds_documents(item: object) -> bool:
    """Whether ``item`` is a list whose first element is a document (a nested artifact)."""
    if not isinstance(item, Sequence) or isinstance(item, str | bytes) or not item:
        return False
    try:
        return as_document(item[0]) is not None
    except _InvalidDocumentError:
        return True  # a document-like item, invalid: still a list of documents


def _unread(message: ToolMessage, what: str) -> None:
    """Say that a tool's artifact holds documents in a form that is not read (once per result)."""
    logger.warning(
        "The artifact of tool call %r is %s: its documents are not numbered or cited; "
        "return a Document or a flat list of Documents",
        message.tool_call_id,
        what,
    )


@dataclass(frozen=True, slots=True)
class ConversationIds:
    """The document ids given in a conversation, to give them again on the next call.

    Attributes:
        first: The id of the first document of each tool result, by the tool message's id
            (or its ``tool_call_id`` when it has none).
        next_id: The id the next new document gets.
    """

    first: Mapping[str, int] = field(default_factory=dict)
    next_id: int = 1

    def to_state(self) -> dict[str, Any]:
        """A JSON-friendly form (what an agent's state keeps)."""
        return {"first": dict(self.first), "next_id": self.next_id}

    @classmethod
    def from_state(cls, value: object) -> ConversationIds:
        """Read :meth:`to_state`'s form back (anything else: no ids given yet).

        Args:
            value: What the state holds.

        Returns:
            The ids.
        """
        if not isinstance(value, Mapping):
            return cls()
        first = value.get("first")
        next_id = value.get("next_id")
        return cls(
            {
                str(key): start
                for key, start in (first.items() if isinstance(first, Mapping) else ())
                if isinstance(start, int) and start >= 1
            },
            next_id if isinstance(next_id, int) and next_id >= 1 else 1,
        )


class NumberedConversation(NamedTuple):
    """A conversation as the model is shown it, with its documents by id.

    Attributes:
        shown: The conversation, each tool message whose artifact holds documents shown as
            ``<document id=N>`` blocks.
        documents: The documents by id: id ``k`` at position ``k`` (:data:`ABSENT_DOCUMENT`
            where that id's tool result is no longer in the conversation).
        ids: The ids given, for the next call (see :class:`ConversationIds`).
    """

    shown: list[BaseMessage]
    documents: list[Document]
    ids: ConversationIds


def give_ids(
    messages: Sequence[BaseMessage], ids: ConversationIds | None = None, *, warn: bool = True
) -> tuple[list[tuple[int, list[Document]] | None], ConversationIds]:
    """Give the documents of a conversation's tool results their ids.

    Args:
        messages: The conversation.
        ids: The ids given on earlier calls: each tool result they name keeps its ids, new
            ones go on from :attr:`ConversationIds.next_id`. None: ids follow the order of
            the documents in ``messages`` alone (a tool result shown twice is numbered twice).
        warn: Warn about the invalid documents of the new tool results (see
            :func:`artifact_documents`).

    Returns:
        For each message, None or, for a tool result with documents, the id of its first
        document and the documents; and the ids given (for the next call).
    """
    first = dict(ids.first) if ids is not None else {}
    next_id = ids.next_id if ids is not None else 1
    given: list[tuple[int, list[Document]] | None] = []
    # the tool results since the model's last message are new: only they warn (once, not
    # on every later call of the conversation)
    new_from = next(
        (i + 1 for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)),
        0,
    )
    for index, message in enumerate(messages):
        found = artifact_documents(message, warn=warn and index >= new_from)
        if found is None:
            given.append(None)
            continue
        key = (message.id or getattr(message, "tool_call_id", None)) if ids is not None else None
        start = first.get(key) if key else None
        if start is None:
            start = next_id
            if key:
                first[key] = start
        next_id = max(next_id, start + len(found))
        given.append((start, found))
    return given, ConversationIds(first, next_id)


def number_conversation(
    messages: Sequence[BaseMessage],
    *,
    instruction: str | None,
    ids: ConversationIds | None = None,
) -> NumberedConversation:
    """Give the documents of a conversation's tool results ids, and show them to the model so.

    Args:
        messages: The conversation.
        instruction: The citation instruction put before each tool result's documents, or
            None for none.
        ids: The ids given on earlier calls (see :func:`give_ids`).

    Returns:
        The conversation shown, the documents by id, and the ids given.
    """
    given, new_ids = give_ids(messages, ids)
    by_id: dict[int, Document] = {}
    shown: list[BaseMessage] = []
    for message, numbered in zip(messages, given, strict=True):
        if numbered is None:
            shown.append(message)
            continue
        start, found = numbered
        by_id.update(enumerate(found, start=start))
        blocks = format_documents(found, start=start)
        content = blocks if instruction is None else f"{instruction}\n\n{blocks}"
        shown.append(message.model_copy(update={"content": content}))
    last = max(by_id, default=0)
    documents = [by_id.get(i, ABSENT_DOCUMENT) for i in range(1, last + 1)]
    return NumberedConversation(shown, documents, new_ids)
