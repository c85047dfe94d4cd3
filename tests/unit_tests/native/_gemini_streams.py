"""Gemini grounded answers, produced by ``langchain-google-genai`` from ``google.genai`` types.

Each answer is a list of ``GenerateContentResponse`` objects (the SDK's own types, shaped
like the documented Grounding-with-Google-Search responses: ``grounding_chunks`` with
``web``/``retrieved_context``, ``grounding_supports`` whose ``segment`` offsets are UTF-8
*bytes* of the answer). They are fed through a real ``ChatGoogleGenerativeAI`` whose client
methods replay them, so the chunks and messages are exactly what the integration yields:
``response_metadata["grounding_metadata"]`` (a ``model_dump``) on the last chunk, after the
text. A penultimate chunk carries partial metadata (queries only), as Gemini streams do.

Answers:
    ``"plain"``: grounding citations over non-ASCII text (en dash, accents, emoji), one
        support citing two chunks, a hostile title and a ``javascript:`` URI.
    ``"mixed"``: grounding citations and ``[n](id=k)`` citations the model wrote, one
        segment ending inside such a citation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from google.genai import types
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_google_genai import ChatGoogleGenerativeAI

from langchain_references.native.base import NativeCitation, Piece

__all__ = [
    "ANSWERS",
    "chat_model",
    "expected_pieces",
    "invoke_message",
    "sdk_responses",
    "stream_chunks",
]

MODEL = "gemini-2.5-flash"

_WIKI = (
    "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQE1"
    "?utm_source=gemini&hl=en"
)
_UEFA = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQH7"
_EVIL = "javascript:alert(document.cookie)"

CHUNKS: list[types.GroundingChunk] = [
    types.GroundingChunk(web=types.GroundingChunkWeb(uri=_WIKI, title="wikipedia.org")),
    types.GroundingChunk(web=types.GroundingChunkWeb(uri=_UEFA, title="uefa.com")),
    types.GroundingChunk(
        retrieved_context=types.GroundingChunkRetrievedContext(
            uri=_EVIL,
            title='<img src=x onerror="alert(1)"> Zoë’s notes',
            text="Rodri won the Ballon d’Or in 2024.",
            page_number=3,
        )
    ),
]

#: Each answer: its streamed text deltas and its supports, as (segment text, chunk indices).
ANSWERS: dict[str, tuple[list[str], list[tuple[str, list[int]]]]] = {
    "plain": (
        [
            "Spain won Euro 2024, defeating England 2–1 in the ",
            "final in Berlin. Its midfielder Rodri — named player of the ",
            "tournament 🏆 — later won the Ballon d’Or.",
            " Nothing else.",
        ],
        [
            ("Spain won Euro 2024, defeating England 2–1 in the final in Berlin.", [0, 1]),
            ("Its midfielder Rodri — named player of the tournament 🏆 —", [1]),
            ("later won the Ballon d’Or.", [2]),
        ],
    ),
    "mixed": (
        [
            "España beat England 2–1 [1](id=2",
            ") in Berlin. The final was ",
            "watched by millions [2](id=1).",
        ],
        [
            ("España beat England 2–1 [1](id", [0]),
            ("The final was watched by millions", [1]),
        ],
    ),
}


def _cite(index: int) -> NativeCitation:
    if index == 0:
        return NativeCitation(
            provider="gemini",
            source=(
                "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQE1?hl=en"
            ),
            url=_WIKI,
            title="wikipedia.org",
        )
    if index == 1:
        return NativeCitation(provider="gemini", source=_UEFA, url=_UEFA, title="uefa.com")
    return NativeCitation(
        provider="gemini",
        source=_EVIL,
        url=_EVIL,
        title='<img src=x onerror="alert(1)"> Zoë’s notes',
        cited_text="Rodri won the Ballon d’Or in 2024.",
        page=3,
    )


def expected_pieces(answer: str) -> list[Piece]:
    """The pieces the Gemini adapter must return for ``answer`` (written by hand)."""
    if answer == "plain":
        return [
            "Spain won Euro 2024, defeating England 2–1 in the final in Berlin.",
            _cite(0),
            _cite(1),
            " Its midfielder Rodri — named player of the tournament 🏆 —",
            _cite(1),
            " later won the Ballon d’Or.",
            _cite(2),
            " Nothing else.",
        ]
    if answer == "mixed":
        return [
            "España beat England 2–1 [1](id=2)",
            _cite(0),
            " in Berlin. The final was watched by millions",
            _cite(1),
            " [2](id=1).",
        ]
    raise KeyError(answer)


def grounding_metadata(answer: str) -> types.GroundingMetadata:
    """The answer's metadata; segment offsets are UTF-8 bytes, as the API counts them."""
    deltas, supports = ANSWERS[answer]
    encoded = "".join(deltas).encode("utf-8")
    grounding_supports = []
    for quoted, indices in supports:
        start = encoded.index(quoted.encode("utf-8"))
        grounding_supports.append(
            types.GroundingSupport(
                segment=types.Segment(
                    start_index=start,
                    end_index=start + len(quoted.encode("utf-8")),
                    text=quoted,
                ),
                grounding_chunk_indices=indices,
            )
        )
    return types.GroundingMetadata(
        web_search_queries=["euro 2024 winner", "euro 2024 player of the tournament"],
        search_entry_point=types.SearchEntryPoint(rendered_content="<style>.x{}</style>"),
        grounding_chunks=CHUNKS,
        grounding_supports=grounding_supports,
    )


def _response(
    text: str,
    *,
    model: str = MODEL,
    metadata: types.GroundingMetadata | None = None,
    last: bool = False,
) -> types.GenerateContentResponse:
    candidate = types.Candidate(
        content=types.Content(role="model", parts=[types.Part(text=text)]),
        index=0,
        grounding_metadata=metadata,
        finish_reason=types.FinishReason.STOP if last else None,
    )
    return types.GenerateContentResponse(
        candidates=[candidate],
        model_version=model,
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=12, candidates_token_count=40, total_token_count=52
        ),
    )


def sdk_responses(answer: str, model: str = MODEL) -> list[types.GenerateContentResponse]:
    """The SDK stream of ``answer``: text, then partial metadata, then the full metadata."""
    deltas, _ = ANSWERS[answer]
    partial = types.GroundingMetadata(web_search_queries=["euro 2024 winner"])
    out = [_response(delta, model=model) for delta in deltas[:-1]]
    out.append(_response(deltas[-1], model=model, metadata=partial))
    out.append(_response("", model=model, metadata=grounding_metadata(answer), last=True))
    return out


def _whole(answer: str, model: str) -> types.GenerateContentResponse:
    deltas, _ = ANSWERS[answer]
    return _response("".join(deltas), model=model, metadata=grounding_metadata(answer), last=True)


async def _aiter(items: list[types.GenerateContentResponse]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def chat_model(answer: str = "plain", model: str = MODEL) -> ChatGoogleGenerativeAI:
    """A real ``ChatGoogleGenerativeAI`` whose client replays ``answer`` (sync and async)."""
    chat = ChatGoogleGenerativeAI(model=model, api_key="offline")
    client = chat.client
    if client is None:
        raise RuntimeError("ChatGoogleGenerativeAI built no client")

    def generate_content(**request: Any) -> types.GenerateContentResponse:
        return _whole(answer, model)

    def generate_content_stream(**request: Any) -> Iterator[types.GenerateContentResponse]:
        return iter(sdk_responses(answer, model))

    async def agenerate_content(**request: Any) -> types.GenerateContentResponse:
        return _whole(answer, model)

    async def agenerate_content_stream(**request: Any) -> AsyncIterator[Any]:
        return _aiter(sdk_responses(answer, model))

    object.__setattr__(client.models, "generate_content", generate_content)
    object.__setattr__(client.models, "generate_content_stream", generate_content_stream)
    object.__setattr__(client.aio.models, "generate_content", agenerate_content)
    object.__setattr__(client.aio.models, "generate_content_stream", agenerate_content_stream)
    return chat


def stream_chunks(answer: str = "plain", model: str = MODEL) -> list[AIMessageChunk]:
    """The chunks ``ChatGoogleGenerativeAI.stream`` yields for ``answer``."""
    return list(chat_model(answer, model).stream("Who won the euro 2024?"))


def invoke_message(answer: str = "plain", model: str = MODEL) -> AIMessage:
    """The message ``ChatGoogleGenerativeAI.invoke`` returns for ``answer``."""
    message = chat_model(answer, model).invoke("Who won the euro 2024?")
    if not isinstance(message, AIMessage):
        raise TypeError(type(message).__name__)
    return message
