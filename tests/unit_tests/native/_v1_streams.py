"""LangChain v1 (``output_version="v1"``) answers with ``citation`` annotations.

``"openai"`` answers are OpenAI Responses API stream events (the ``openai`` SDK's own
types) converted by ``langchain-openai``'s ``_convert_responses_chunk_to_generation_chunk``
and then to v1 blocks by ``langchain-core``'s ``_update_message_content_to_blocks`` (what
``BaseChatModel.stream`` does for ``output_version="v1"``): ``url_citation`` annotations
become ``citation`` annotations with ``start_index``/``end_index`` over the block's text
(each span is the ``([title](url))`` link the model wrote). The invoked message is the
merged stream, converted the same way (``generate_from_stream``).

``"blocks"`` is built with ``langchain-core``'s ``create_text_block``/``create_citation``:
Anthropic-style citations (no span in the answer; ``extras`` with a ``document_index`` or a
page), one text block per claim, and a hostile title.

Answers ``"openai"`` and ``"blocks"`` have no ``[n](id=k)``; ``"mixed"`` (OpenAI events)
has both kinds.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models._utils import _update_message_content_to_blocks
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.content import create_citation, create_text_block
from langchain_openai.chat_models.base import _convert_responses_chunk_to_generation_chunk
from openai.types.responses import (
    ResponseOutputTextAnnotationAddedEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

from langchain_references.native.base import NativeCitation, Piece

__all__ = [
    "ANSWERS",
    "expected_pieces",
    "invoke_message",
    "sdk_events",
    "stream_chunks",
]

_NASA = "https://www.nasa.gov/moon?utm_source=openai"
_ESA = "https://www.esa.int/x?ref=a&utm_medium=chat"
_HOSTILE_URL = "https://evil.example/p?q=<script>alert(1)</script>"

#: OpenAI answers: the streamed deltas, and each annotation as (link text, url, title).
ANSWERS: dict[str, tuple[list[str], list[tuple[str, str, str]]]] = {
    "openai": (
        [
            "The Moon is 384,400 km away ([nasa.gov](",
            _NASA,
            ")). Its crust is ~50 km thick ([esa.int](" + _ESA + ")). Café au lait",
            " is unrelated.",
        ],
        [
            (f"([nasa.gov]({_NASA}))", _NASA, "Moon facts - NASA"),
            (f"([esa.int]({_ESA}))", _ESA, '<b onmouseover="x()">ESA</b>'),
        ],
    ),
    "mixed": (
        [
            "Your notes agree [1](id=2",
            ") and so does NASA ([nasa.gov](" + _NASA + ")).",
        ],
        [(f"([nasa.gov]({_NASA}))", _NASA, "Moon facts - NASA")],
    ),
}


def _annotation(text: str, link: str, url: str, title: str) -> dict[str, Any]:
    start = text.index(link)
    return {
        "type": "url_citation",
        "url": url,
        "title": title,
        "start_index": start,
        "end_index": start + len(link),
    }


def sdk_events(answer: str) -> list[Any]:
    """The OpenAI Responses stream events of an OpenAI ``answer`` (text, annotations, done)."""
    deltas, annotations = ANSWERS[answer]
    text = "".join(deltas)
    common: dict[str, Any] = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    events: list[Any] = []
    sequence = 0
    for delta in deltas:
        sequence += 1
        events.append(
            ResponseTextDeltaEvent.model_validate(
                {
                    "type": "response.output_text.delta",
                    "delta": delta,
                    "sequence_number": sequence,
                    "logprobs": [],
                    **common,
                }
            )
        )
    for position, (link, url, title) in enumerate(annotations):
        sequence += 1
        events.append(
            ResponseOutputTextAnnotationAddedEvent.model_validate(
                {
                    "type": "response.output_text.annotation.added",
                    "annotation_index": position,
                    "annotation": _annotation(text, link, url, title),
                    "sequence_number": sequence,
                    **common,
                }
            )
        )
    events.append(
        ResponseTextDoneEvent.model_validate(
            {
                "type": "response.output_text.done",
                "text": text,
                "sequence_number": sequence + 1,
                "logprobs": [],
                **common,
            }
        )
    )
    return events


def _raw_chunks(answer: str) -> list[AIMessageChunk]:
    index = output_index = sub_index = -1
    chunks = []
    for event in sdk_events(answer):
        index, output_index, sub_index, generation = _convert_responses_chunk_to_generation_chunk(
            event, index, output_index, sub_index, output_version="v1"
        )
        if generation is not None:
            message = generation.message
            if not isinstance(message, AIMessageChunk):
                raise TypeError(type(message).__name__)
            chunks.append(message)
    return chunks


def _blocks_message() -> AIMessage:
    content: list[Any] = [
        create_text_block("Per the report, "),
        create_text_block(
            "revenue grew 12%",
            annotations=[
                create_citation(
                    title="Annual report",
                    cited_text="Revenue grew by 12% in 2025.",
                    document_index=1,
                    start_char_index=0,
                    end_char_index=28,
                    type="char_location",
                )
            ],
        ),
        create_text_block(" and costs fell"),
        create_text_block(
            "",
            annotations=[
                create_citation(
                    url=_HOSTILE_URL,
                    title="<img src=x onerror=alert(1)>",
                    cited_text="Costs fell.",
                ),
                create_citation(
                    title="Slides",
                    cited_text="Costs down",
                    document_index=0,
                    start_page_number=4,
                    end_page_number=5,
                    type="page_location",
                ),
            ],
        ),
        create_text_block("."),
    ]
    return AIMessage(
        content=content,
        response_metadata={"model_provider": "anthropic", "output_version": "v1"},
    )


def stream_chunks(answer: str = "openai") -> list[AIMessageChunk]:
    """The v1 chunks a streaming run yields for ``answer``."""
    if answer == "blocks":
        message = _blocks_message()
        return [
            AIMessageChunk(
                content=[{**block, "index": position}],
                response_metadata=dict(message.response_metadata),
            )
            for position, block in enumerate(message.content)
            if isinstance(block, dict)
        ]
    return [_update_message_content_to_blocks(chunk, "v1") for chunk in _raw_chunks(answer)]


def invoke_message(answer: str = "openai") -> AIMessage:
    """The v1 message an invoke returns for ``answer``."""
    if answer == "blocks":
        return _blocks_message()
    raw = _raw_chunks(answer)
    merged = raw[0]
    for chunk in raw[1:]:
        merged = merged + chunk
    message = AIMessage(
        content=merged.content,
        response_metadata=dict(merged.response_metadata),
        id="msg_1",
    )
    return _update_message_content_to_blocks(message, "v1")


def _openai(index: int) -> NativeCitation:
    if index == 0:
        return NativeCitation(
            provider="v1",
            source="https://www.nasa.gov/moon",
            url=_NASA,
            title="Moon facts - NASA",
        )
    return NativeCitation(
        provider="v1",
        source="https://www.esa.int/x?ref=a",
        url=_ESA,
        title='<b onmouseover="x()">ESA</b>',
    )


def expected_pieces(answer: str) -> list[Piece]:
    """The pieces the v1 adapter must return for ``answer`` (written by hand)."""
    if answer == "openai":
        return [
            "The Moon is 384,400 km away",
            _openai(0),
            ". Its crust is ~50 km thick",
            _openai(1),
            ". Café au lait is unrelated.",
        ]
    if answer == "mixed":
        return [
            "Your notes agree [1](id=2) and so does NASA",
            _openai(0),
            ".",
        ]
    if answer == "blocks":
        return [
            "Per the report, revenue grew 12%",
            NativeCitation(
                provider="v1",
                title="Annual report",
                cited_text="Revenue grew by 12% in 2025.",
                document_index=1,
                start=0,
                end=28,
            ),
            " and costs fell",
            NativeCitation(
                provider="v1",
                source="https://evil.example/p?q=%3Cscript%3Ealert%281%29%3C%2Fscript%3E",
                url=_HOSTILE_URL,
                title="<img src=x onerror=alert(1)>",
                cited_text="Costs fell.",
            ),
            NativeCitation(
                provider="v1",
                title="Slides",
                cited_text="Costs down",
                page=4,
                document_index=0,
            ),
            ".",
        ]
    raise KeyError(answer)
