"""Recorded-shape Perplexity answers, produced by ``langchain-perplexity`` itself.

The Perplexity SDK's ``StreamChunk`` objects (built the way its client builds them from the
wire, with ``model_construct``) are fed through a real ``ChatPerplexity`` whose clients are
replaced by in-memory fakes, so every chunk and message here is exactly what the
integration yields: ``citations``/``search_results`` in ``additional_kwargs`` of the first
streamed chunk only, and of the whole message on invoke (``search_results`` as SDK objects).

Answers:
    ``"plain"``: Perplexity markers only, one split inside ``[1`` + ``2]``-style runs, one
        marker beyond the list (dropped), a hostile title and URL.
    ``"mixed"``: Perplexity markers and ``[n](id=k)`` citations the model wrote itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_perplexity import ChatPerplexity
from perplexity.types.stream_chunk import StreamChunk

from langchain_references.native.base import NativeCitation, Piece

__all__ = [
    "ANSWERS",
    "CITATIONS",
    "SEARCH_RESULTS",
    "chat_model",
    "expected_pieces",
    "invoke_message",
    "sdk_chunks",
    "stream_chunks",
]

MODEL = "sonar-pro"

#: What the API returns in ``citations`` (URLs) and ``search_results``, parallel lists.
CITATIONS = [
    "https://en.wikipedia.org/wiki/Eiffel_Tower?utm_source=perplexity",
    "https://www.toureiffel.paris/en/the-monument/key-figures",
    "https://evil.example/x?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E&utm_medium=ai",
]
SEARCH_RESULTS: list[dict[str, Any]] = [
    {
        "title": "Eiffel Tower - Wikipedia",
        "url": CITATIONS[0],
        "date": "2026-10-02",
        "last_updated": "2026-11-01",
        "snippet": "The Eiffel Tower is a wrought-iron lattice tower...",
        "source": "web",
    },
    {
        "title": "Key figures | Official Eiffel Tower website",
        "url": CITATIONS[1],
        "date": None,
        "last_updated": None,
        "snippet": "330 metres high...",
        "source": "web",
    },
    {
        "title": '<script>alert("t")</script> & "Tour" <b>',
        "url": CITATIONS[2],
        "date": None,
        "last_updated": None,
        "snippet": "<img src=x onerror=alert(1)>",
        "source": "web",
    },
]

#: The streamed deltas of each answer (the model's text, split as the API split it).
ANSWERS: dict[str, list[str]] = {
    "plain": [
        "The Eiffel Tower is 330 ",
        "metres tall[1",
        "][2]. It was completed in 1889[2",
        "], and its lattice is wrought iron[",
        "3]. Some blogs disagree[7].",
        " Lists like a[0] stay.",
    ],
    "mixed": [
        "Your notes say it was repainted in 2024 [1](id=2)",
        ". Paris hosts it[1] and ",
        "[2](id=1) the Louvre[3",
        "].",
    ],
}


def _cite(index: int) -> NativeCitation:
    sources = [
        "https://en.wikipedia.org/wiki/Eiffel_Tower",
        "https://www.toureiffel.paris/en/the-monument/key-figures",
        "https://evil.example/x?q=%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E",
    ]
    return NativeCitation(
        provider="perplexity",
        source=sources[index],
        url=CITATIONS[index],
        title=SEARCH_RESULTS[index]["title"],
    )


def expected_pieces(answer: str) -> list[Piece]:
    """The pieces the Perplexity adapter must return for ``answer`` (written by hand)."""
    if answer == "plain":
        return [
            "The Eiffel Tower is 330 metres tall",
            _cite(0),
            _cite(1),
            ". It was completed in 1889",
            _cite(1),
            ", and its lattice is wrought iron",
            _cite(2),
            ". Some blogs disagree. Lists like a[0] stay.",
        ]
    if answer == "mixed":
        return [
            "Your notes say it was repainted in 2024 [1](id=2). Paris hosts it",
            _cite(0),
            " and [2](id=1) the Louvre",
            _cite(2),
            ".",
        ]
    raise KeyError(answer)


def sdk_chunks(answer: str) -> list[StreamChunk]:
    """The SDK stream of ``answer``: every chunk repeats the lists, as the API sends them."""
    deltas = ANSWERS[answer]
    chunks = []
    for position, delta in enumerate(deltas):
        last = position == len(deltas) - 1
        data: dict[str, Any] = {
            "id": "pplx-1",
            "model": MODEL,
            "created": 1_795_000_000,
            "object": "chat.completion.chunk",
            "citations": CITATIONS,
            "search_results": SEARCH_RESULTS,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": delta},
                    "finish_reason": "stop" if last else None,
                }
            ],
        }
        if last:
            data["usage"] = {"prompt_tokens": 9, "completion_tokens": 60, "total_tokens": 69}
        chunks.append(StreamChunk.model_construct(**data))
    return chunks


def _response(answer: str) -> StreamChunk:
    text = "".join(ANSWERS[answer])
    data: dict[str, Any] = {
        "id": "pplx-1",
        "model": MODEL,
        "created": 1_795_000_000,
        "object": "chat.completion",
        "citations": CITATIONS,
        "search_results": [dict(result) for result in SEARCH_RESULTS],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 60, "total_tokens": 69},
    }
    return StreamChunk.model_construct(**data)


class _Completions:
    def __init__(self, answer: str) -> None:
        self._answer = answer

    def create(self, *, messages: Any, stream: bool = False, **params: Any) -> Any:
        if stream:
            return iter(sdk_chunks(self._answer))
        return _response(self._answer)


class _AsyncCompletions:
    def __init__(self, answer: str) -> None:
        self._answer = answer

    async def create(self, *, messages: Any, stream: bool = False, **params: Any) -> Any:
        if stream:
            return _aiter(sdk_chunks(self._answer))
        return _response(self._answer)


async def _aiter(items: list[StreamChunk]) -> AsyncIterator[StreamChunk]:
    for item in items:
        yield item


class _Chat:
    def __init__(self, completions: Any) -> None:
        self.completions = completions


class _Client:
    def __init__(self, completions: Any) -> None:
        self.chat = _Chat(completions)


def chat_model(answer: str = "plain") -> ChatPerplexity:
    """A real ``ChatPerplexity`` whose sync and async clients replay ``answer``."""
    model = ChatPerplexity(api_key="offline", model=MODEL)
    model.client = _Client(_Completions(answer))
    model.async_client = _Client(_AsyncCompletions(answer))
    return model


def stream_chunks(answer: str = "plain") -> list[AIMessageChunk]:
    """The chunks ``ChatPerplexity.stream`` yields for ``answer``."""
    chunks: Iterator[AIMessageChunk] = chat_model(answer).stream("How tall is it?")
    return list(chunks)


def invoke_message(answer: str = "plain") -> AIMessage:
    """The message ``ChatPerplexity.invoke`` returns for ``answer``."""
    message = chat_model(answer).invoke("How tall is it?")
    if not isinstance(message, AIMessage):
        raise TypeError(type(message).__name__)
    return message
