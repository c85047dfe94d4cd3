"""Cohere RAG answers, produced by ``langchain-cohere`` from the Cohere SDK's v2 types.

The SDK objects (``V2ChatResponse`` for invoke; ``content-delta``, ``citation-start``,
``citation-end`` and ``message-end`` stream events for streaming, built with the SDK's own
``construct_type`` as its client does from the wire) are fed through a real ``ChatCohere``
whose clients replay them, so the chunks and messages are exactly what the integration
yields. On invoke, ``additional_kwargs["citations"]`` holds the SDK's ``Citation`` objects
and ``additional_kwargs["documents"]`` the request's documents (``{"id": "doc-<i>",
"data": {...}}``). ``langchain-cohere`` 0.6 drops the citation events of a stream: its
chunks carry the text only, so a streamed answer has no citations to read.

Answers (both invoked with :data:`DOCUMENTS` as ``documents=``):
    ``"plain"``: citations of the request's documents (document-index citations) and of a
        web-search tool output with a hostile title and a tracking-parameter URL.
    ``"mixed"``: Cohere citations and ``[n](id=k)`` citations the model wrote itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from cohere.core.unchecked_base_model import construct_type
from cohere.v2.types import V2ChatResponse, V2ChatStreamResponse
from langchain_cohere import ChatCohere
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk

from langchain_references.native.base import NativeCitation, Piece

__all__ = [
    "ANSWERS",
    "DOCUMENTS",
    "chat_model",
    "expected_pieces",
    "invoke_message",
    "sdk_events",
    "stream_chunks",
]

MODEL = "command-a-03-2025"

#: The documents of the run (and of the request: ``ChatCohere.invoke(..., documents=...)``).
DOCUMENTS = [
    Document(page_content="Emperor penguins are the tallest penguins, up to 1.2 m."),
    Document(page_content="Emperor penguins only live in Antarctica."),
]

_TOOL_OUTPUT = {
    "title": '<script>alert("p")</script> Penguins & "friends"',
    "url": "https://penguins.example/emperor?utm_campaign=ai&lang=fr",
    "snippet": "Emperor penguins dive to 500 m.",
}

#: Each answer: its streamed text deltas and its citations as (cited span, sources).
ANSWERS: dict[str, tuple[list[str], list[tuple[str, list[dict[str, Any]]]]]] = {
    "plain": (
        [
            "The tallest penguins are the Emperor ",
            "penguins. They live only in Antarctica",
            " and dive to 500 m — impressive.",
        ],
        [
            ("Emperor penguins", [{"type": "document", "id": "doc-0"}]),
            ("live only in Antarctica", [{"type": "document", "id": "doc-1"}]),
            (
                "dive to 500 m",
                [
                    {"type": "tool", "id": "web_search_k2:0", "tool_output": _TOOL_OUTPUT},
                    {"type": "document", "id": "doc-0"},
                ],
            ),
        ],
    ),
    "mixed": (
        [
            "Emperor penguins are the tallest [1](id=1",
            "). They live in Antarctica [2](id=2) and ",
            "dive deep.",
        ],
        [
            ("Emperor penguins are the tallest", [{"type": "document", "id": "doc-0"}]),
            (
                "dive deep",
                [{"type": "tool", "id": "web_search_k2:0", "tool_output": _TOOL_OUTPUT}],
            ),
        ],
    ),
}


def _doc(index: int) -> NativeCitation:
    return NativeCitation(provider="cohere", document_index=index)


_WEB = NativeCitation(
    provider="cohere",
    source="https://penguins.example/emperor?lang=fr",
    url="https://penguins.example/emperor?utm_campaign=ai&lang=fr",
    title='<script>alert("p")</script> Penguins & "friends"',
)


def expected_pieces(answer: str, *, streamed: bool = False) -> list[Piece]:
    """The pieces the Cohere adapter must return for ``answer`` (written by hand).

    Args:
        answer: ``"plain"`` or ``"mixed"``.
        streamed: True for the streamed answer, which carries no citations.
    """
    if streamed:
        return ["".join(ANSWERS[answer][0])]
    if answer == "plain":
        return [
            "The tallest penguins are the Emperor penguins",
            _doc(0),
            ". They live only in Antarctica",
            _doc(1),
            " and dive to 500 m",
            _WEB,
            _doc(0),
            " — impressive.",
        ]
    if answer == "mixed":
        return [
            "Emperor penguins are the tallest",
            _doc(0),
            " [1](id=1). They live in Antarctica [2](id=2) and dive deep",
            _WEB,
            ".",
        ]
    raise KeyError(answer)


def _citations(answer: str) -> list[dict[str, Any]]:
    deltas, citations = ANSWERS[answer]
    text = "".join(deltas)
    out = []
    for quoted, sources in citations:
        start = text.index(quoted)
        full_sources = []
        for source in sources:
            if source["type"] == "document":
                position = int(source["id"].removeprefix("doc-"))
                document = {"id": source["id"], "text": DOCUMENTS[position].page_content}
                full_sources.append({**source, "document": document})
            else:
                full_sources.append(source)
        out.append(
            {
                "start": start,
                "end": start + len(quoted),
                "text": quoted,
                "sources": full_sources,
                "type": "TEXT_CONTENT",
            }
        )
    return out


_USAGE = {
    "billed_units": {"input_tokens": 120, "output_tokens": 30},
    "tokens": {"input_tokens": 900, "output_tokens": 30},
}


def _response(answer: str) -> V2ChatResponse:
    text = "".join(ANSWERS[answer][0])
    data = {
        "id": "c0a1",
        "finish_reason": "COMPLETE",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "citations": _citations(answer),
        },
        "usage": _USAGE,
    }
    response: V2ChatResponse = construct_type(type_=V2ChatResponse, object_=data)
    return response


def sdk_events(answer: str) -> list[Any]:
    """The SDK stream of ``answer``, citation events included (as the API sends them)."""
    deltas, _ = ANSWERS[answer]
    raw: list[dict[str, Any]] = [
        {"type": "message-start", "id": "c0a1", "delta": {"message": {"role": "assistant"}}},
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"text": ""}}}},
    ]
    raw.extend(
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": d}}}}
        for d in deltas
    )
    for index, citation in enumerate(_citations(answer)):
        raw.append(
            {
                "type": "citation-start",
                "index": index,
                "delta": {"message": {"citations": citation}},
            }
        )
        raw.append({"type": "citation-end", "index": index})
    raw.append({"type": "content-end", "index": 0})
    raw.append(
        {
            "type": "message-end",
            "id": "c0a1",
            "delta": {"finish_reason": "COMPLETE", "usage": _USAGE},
        }
    )
    event_type = cast("type[Any]", V2ChatStreamResponse)  # an annotated union
    return [construct_type(type_=event_type, object_=event) for event in raw]


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


class _V2:
    def __init__(self, answer: str) -> None:
        self._answer = answer

    def chat(self, **request: Any) -> V2ChatResponse:
        return _response(self._answer)

    def chat_stream(self, **request: Any) -> Iterator[Any]:
        return iter(sdk_events(self._answer))


class _AsyncV2:
    def __init__(self, answer: str) -> None:
        self._answer = answer

    async def chat(self, **request: Any) -> V2ChatResponse:
        return _response(self._answer)

    def chat_stream(self, **request: Any) -> AsyncIterator[Any]:
        return _aiter(sdk_events(self._answer))


class _Client:
    def __init__(self, v2: Any) -> None:
        self.v2 = v2


def chat_model(answer: str = "plain") -> ChatCohere:
    """A real ``ChatCohere`` whose sync and async clients replay ``answer``."""
    model = ChatCohere(cohere_api_key="offline", model=MODEL)
    model.client = _Client(_V2(answer))
    model.async_client = _Client(_AsyncV2(answer))
    return model


def stream_chunks(answer: str = "plain") -> list[AIMessageChunk]:
    """The chunks ``ChatCohere.stream`` yields for ``answer`` (with the documents)."""
    return list(chat_model(answer).stream("Tell me about penguins.", documents=DOCUMENTS))


def invoke_message(answer: str = "plain") -> AIMessage:
    """The message ``ChatCohere.invoke`` returns for ``answer`` (with the documents)."""
    message = chat_model(answer).invoke("Tell me about penguins.", documents=DOCUMENTS)
    if not isinstance(message, AIMessage):
        raise TypeError(type(message).__name__)
    return message
