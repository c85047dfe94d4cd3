"""Recorded-style OpenAI Responses API answers built from the ``openai`` SDK's own types.

Each scenario is the final ``output`` of a ``Response``. From it:

* :func:`invoke_message` gives the ``AIMessage`` ``ChatOpenAI(use_responses_api=True).invoke``
  returns, through the integration's own ``_construct_lc_result_from_responses_api``;
* :func:`stream_events` gives the SDK stream events in wire order (``response.created``,
  ``response.in_progress``, per item ``response.output_item.added`` / ``.done``, per text part
  ``response.content_part.added``, ``response.output_text.delta``,
  ``response.output_text.annotation.added`` after the text it points at,
  ``response.output_text.done``, ``response.content_part.done``, then
  ``response.completed``), with a :class:`PartPlan` per text part saying how its text is
  split and how late each annotation comes;
* :func:`stream_chunks` runs them through the integration's own
  ``_convert_responses_chunk_to_generation_chunk`` (with the index bookkeeping of
  ``ChatOpenAI._stream_responses``), giving the ``AIMessageChunk`` list of a stream;
* :func:`fake_chat_openai` is a real ``ChatOpenAI`` served by an in-memory httpx transport.

``SCENARIOS[name].expected`` are the adapter pieces, written out by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import (
    _construct_lc_result_from_responses_api,
    _convert_responses_chunk_to_generation_chunk,
)
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFileSearchToolCall,
    ResponseFunctionWebSearch,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseOutputTextAnnotationAddedEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from openai.types.responses.response_function_web_search import ActionSearch
from openai.types.responses.response_output_text import (
    AnnotationFileCitation,
    AnnotationURLCitation,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import SecretStr

from langchain_references.native.base import NativeCitation, Piece, normalize_url

# The in-memory SSE transport is shared with the Anthropic fixtures.
from tests.unit_tests.native._anthropic_streams import Recorder, fake_transport, sse_body

MODEL = "gpt-5.1"
OutputItem = ResponseOutputMessage | ResponseFunctionWebSearch | ResponseFileSearchToolCall
Annotation = AnnotationURLCitation | AnnotationFileCitation


@dataclass(frozen=True)
class Scenario:
    """One Responses API answer: its output items and the pieces the adapter must give."""

    name: str
    output: tuple[OutputItem, ...]
    expected: tuple[Piece, ...]


@dataclass(frozen=True)
class PartPlan:
    """How one output text part streams.

    Attributes:
        deltas: The part's text cut into ``response.output_text.delta`` payloads.
        delays: For each annotation, how many more deltas are sent after the first moment it
            may come (once the text it points at has been sent); annotations keep their order.
    """

    deltas: tuple[str, ...]
    delays: tuple[int, ...] = ()


def _link(domain: str, url: str) -> str:
    return f"([{domain}]({url}))"


def _url_annotation(text: str, link: str, url: str, title: str) -> AnnotationURLCitation:
    start = text.index(link)
    return AnnotationURLCitation(
        type="url_citation", start_index=start, end_index=start + len(link), url=url, title=title
    )


def _url_record(url: str, title: str) -> NativeCitation:
    return NativeCitation(provider="openai", source=normalize_url(url), url=url, title=title)


def _file_annotation(file_id: str, filename: str, index: int) -> AnnotationFileCitation:
    return AnnotationFileCitation(
        type="file_citation", file_id=file_id, filename=filename, index=index
    )


def _file_record(file_id: str, filename: str) -> NativeCitation:
    return NativeCitation(provider="openai", source=file_id, title=filename)


def _message(item_id: str, text: str, annotations: Sequence[Annotation]) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=list(annotations))],
    )


def _web_call(query: str) -> ResponseFunctionWebSearch:
    return ResponseFunctionWebSearch(
        id="ws_68c1f2a4b0d48190a3e1c2d4e5f60718",
        type="web_search_call",
        status="completed",
        action=ActionSearch(type="search", query=query),
    )


# --- web search -------------------------------------------------------------------------

_EIFFEL_URL = "https://www.toureiffel.paris/en/the-monument/key-figures?utm_source=openai"
_EIFFEL_TITLE = "Key figures | Eiffel Tower"
_WIKI_URL = "https://en.wikipedia.org/wiki/Eiffel_Tower?utm_source=openai"
_WIKI_TITLE = "Eiffel Tower - Wikipedia"
_EIFFEL_LINK = _link("toureiffel.paris", _EIFFEL_URL)
_WIKI_LINK = _link("en.wikipedia.org", _WIKI_URL)
_WEB_TEXT = (
    f"The Eiffel Tower is 330 metres tall {_EIFFEL_LINK}. It was completed in 1889 {_WIKI_LINK}."
)

WEB_SEARCH = Scenario(
    name="web_search",
    output=(
        _web_call("Eiffel Tower height completion year"),
        _message(
            "msg_68c1f2a7c5f08190b7e2d3c4a5b6c7d8",
            _WEB_TEXT,
            [
                _url_annotation(_WEB_TEXT, _EIFFEL_LINK, _EIFFEL_URL, _EIFFEL_TITLE),
                _url_annotation(_WEB_TEXT, _WIKI_LINK, _WIKI_URL, _WIKI_TITLE),
            ],
        ),
    ),
    expected=(
        "The Eiffel Tower is 330 metres tall ",
        _url_record(_EIFFEL_URL, _EIFFEL_TITLE),
        ". It was completed in 1889 ",
        _url_record(_WIKI_URL, _WIKI_TITLE),
        ".",
    ),
)

# --- file search: file_citation at an index, leaked markers ------------------------------

_FILES_TEXT = (
    "The office opens at 9 am【4:0†handbook.pdf】 and closes at 5 pm. "
    "Parking is free on weekends【4:1†policy.pdf】. "
    "Visitors sign in at the desk\ue200filecite\ue202turn0file2\ue201."
)

FILE_SEARCH = Scenario(
    name="file_search",
    output=(
        ResponseFileSearchToolCall(
            id="fs_68c1f3b2a1d081909c8d7e6f5a4b3c2d",
            type="file_search_call",
            status="completed",
            queries=["office opening hours", "visitor sign-in"],
            results=None,
        ),
        _message(
            "msg_68c1f3b5e2f48190a1b2c3d4e5f6a7b8",
            _FILES_TEXT,
            [
                # Points at the start of the leaked marker: the marker becomes this citation.
                _file_annotation("file-HB1x9a", "handbook.pdf", _FILES_TEXT.index("【4:0")),
                # A plain insertion point (no marker there).
                _file_annotation(
                    "file-OH2k3b", "opening-hours.pdf", _FILES_TEXT.index(" pm.") + len(" pm")
                ),
                # Points just past the private-use run: the run becomes this citation.
                _file_annotation("file-VS3m7c", "visitors.md", _FILES_TEXT.index("\ue201") + 1),
            ],
        ),
    ),
    expected=(
        "The office opens at 9 am",
        _file_record("file-HB1x9a", "handbook.pdf"),
        " and closes at 5 pm",
        _file_record("file-OH2k3b", "opening-hours.pdf"),
        # The unresolved 【4:1†policy.pdf】 marker is dropped.
        ". Parking is free on weekends. Visitors sign in at the desk",
        _file_record("file-VS3m7c", "visitors.md"),
        ".",
    ),
)

# --- native citations mixed with the model's own [n](id=k) markers ----------------------

_TEA_URL = "https://www.britannica.com/topic/tea-beverage?utm_source=openai"
_TEA_TITLE = "Tea | Britannica"
_TEA_LINK = _link("britannica.com", _TEA_URL)
_MIXED_TEXT = (
    f"Tea was first drunk in China around 2737 BC {_TEA_LINK}, "
    "and it reached Europe in the 16th century [1](id=2). Milk came later [2](id=1)."
)

MIXED = Scenario(
    name="mixed",
    output=(
        _web_call("history of tea"),
        _message(
            "msg_68c1f4c0d3e58190b2c3d4e5f6a7b8c9",
            _MIXED_TEXT,
            [_url_annotation(_MIXED_TEXT, _TEA_LINK, _TEA_URL, _TEA_TITLE)],
        ),
    ),
    expected=(
        "Tea was first drunk in China around 2737 BC ",
        _url_record(_TEA_URL, _TEA_TITLE),
        ", and it reached Europe in the 16th century [1](id=2). Milk came later [2](id=1).",
    ),
)

# --- hostile titles and URLs -------------------------------------------------------------

HOSTILE_URL = 'https://evil.example/a?q="><script>alert(1)</script>&utm_medium=x#frag'
HOSTILE_TITLE = '</a><img src=x onerror="alert(document.cookie)">'
JAVASCRIPT_URL = "javascript:alert(document.domain)"
JAVASCRIPT_TITLE = '"><b onmouseover=alert(1)>bold</b>'
_HOSTILE_LINK = _link("evil.example", HOSTILE_URL)
_JS_LINK = _link("<b>x</b>", JAVASCRIPT_URL)
_HOSTILE_TEXT = f"Read <this> & that {_HOSTILE_LINK}{_JS_LINK} <br/> done."

HOSTILE = Scenario(
    name="hostile",
    output=(
        _web_call("<script>"),
        _message(
            "msg_68c1f5d1e4f68190c3d4e5f6a7b8c9d0",
            _HOSTILE_TEXT,
            [
                _url_annotation(_HOSTILE_TEXT, _HOSTILE_LINK, HOSTILE_URL, HOSTILE_TITLE),
                _url_annotation(_HOSTILE_TEXT, _JS_LINK, JAVASCRIPT_URL, JAVASCRIPT_TITLE),
            ],
        ),
    ),
    expected=(
        "Read <this> & that ",
        _url_record(HOSTILE_URL, HOSTILE_TITLE),
        _url_record(JAVASCRIPT_URL, JAVASCRIPT_TITLE),
        " <br/> done.",
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (WEB_SEARCH, FILE_SEARCH, MIXED, HOSTILE)}


# --- building the SDK objects ------------------------------------------------------------


def response(scenario: Scenario, *, done: bool = True) -> Response:
    """The SDK ``Response`` of the scenario (``done=False``: the in-progress shell)."""
    return Response(
        id="resp_68c1f2a3f1a881909e7f6d5c4b3a2918",
        object="response",
        created_at=1763884800.0,
        model=MODEL,
        status="completed" if done else "in_progress",
        output=list(scenario.output) if done else [],
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        usage=ResponseUsage(
            input_tokens=812,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens=164,
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            total_tokens=976,
        )
        if done
        else None,
    )


def invoke_message(scenario: Scenario, output_version: str | None = None) -> AIMessage:
    """The ``AIMessage`` an invoke returns (``output_version`` as ``ChatOpenAI``'s)."""
    result = _construct_lc_result_from_responses_api(
        response(scenario), output_version=output_version
    )
    message = result.generations[0].message
    if not isinstance(message, AIMessage):
        raise TypeError(type(message))
    return message


def _annotations(part: ResponseOutputText) -> list[Annotation]:
    return [
        a for a in part.annotations if isinstance(a, AnnotationURLCitation | AnnotationFileCitation)
    ]


def _points_at(annotation: Annotation) -> int:
    """The last text position an annotation refers to."""
    if isinstance(annotation, AnnotationFileCitation):
        return annotation.index
    return annotation.end_index


def default_plan(part: ResponseOutputText, step: int = 9) -> PartPlan:
    """Cut a part's text every ``step`` characters; annotations come as early as possible."""
    text = part.text
    deltas = tuple(text[i : i + step] for i in range(0, len(text), step))
    return PartPlan(deltas=deltas, delays=(0,) * len(_annotations(part)))


def stream_events(
    scenario: Scenario,
    plan: Callable[[ResponseOutputText], PartPlan] | None = None,
) -> list[Any]:
    """The SDK events of the scenario's stream.

    Args:
        scenario: The answer.
        plan: How each output text part streams (default: :func:`default_plan`).

    Returns:
        The events in wire order.
    """
    make_plan = plan or default_plan
    events: list[Any] = []

    def emit(cls: Any, **fields: Any) -> None:
        events.append(cls(sequence_number=len(events), **fields))

    emit(ResponseCreatedEvent, type="response.created", response=response(scenario, done=False))
    emit(
        ResponseInProgressEvent,
        type="response.in_progress",
        response=response(scenario, done=False),
    )
    for output_index, item in enumerate(scenario.output):
        if not isinstance(item, ResponseOutputMessage):
            emit(
                ResponseOutputItemAddedEvent,
                type="response.output_item.added",
                output_index=output_index,
                item=item.model_copy(update={"status": "in_progress"}),
            )
            emit(
                ResponseOutputItemDoneEvent,
                type="response.output_item.done",
                output_index=output_index,
                item=item,
            )
            continue
        emit(
            ResponseOutputItemAddedEvent,
            type="response.output_item.added",
            output_index=output_index,
            item=item.model_copy(update={"status": "in_progress", "content": []}),
        )
        for content_index, part in enumerate(item.content):
            if not isinstance(part, ResponseOutputText):
                continue
            where = {
                "item_id": item.id,
                "output_index": output_index,
                "content_index": content_index,
            }
            emit(
                ResponseContentPartAddedEvent,
                type="response.content_part.added",
                part=ResponseOutputText(type="output_text", text="", annotations=[]),
                **where,
            )
            _emit_part(part, make_plan(part), where, emit)
            emit(
                ResponseTextDoneEvent,
                type="response.output_text.done",
                text=part.text,
                logprobs=[],
                **where,
            )
            emit(
                ResponseContentPartDoneEvent, type="response.content_part.done", part=part, **where
            )
        emit(
            ResponseOutputItemDoneEvent,
            type="response.output_item.done",
            output_index=output_index,
            item=item,
        )
    emit(ResponseCompletedEvent, type="response.completed", response=response(scenario))
    return events


def _emit_part(
    part: ResponseOutputText,
    plan: PartPlan,
    where: dict[str, Any],
    emit: Callable[..., None],
) -> None:
    if "".join(plan.deltas) != part.text:
        raise ValueError("the plan's deltas must join into the part's text")
    annotations = _annotations(part)
    if len(plan.delays) != len(annotations):
        raise ValueError("the plan must delay every annotation")
    # The number of deltas sent before each annotation: not before its text, order kept.
    slots: list[int] = []
    for annotation, delay in zip(annotations, plan.delays, strict=True):
        sent, length = 0, 0
        while length < _points_at(annotation) and sent < len(plan.deltas):
            length += len(plan.deltas[sent])
            sent += 1
        slot = min(sent + delay, len(plan.deltas))
        slots.append(max(slot, slots[-1]) if slots else slot)

    def send_annotations(sent: int) -> None:
        while slots and slots[0] <= sent and annotations:
            slots.pop(0)
            annotation = annotations.pop(0)
            emit(
                ResponseOutputTextAnnotationAddedEvent,
                type="response.output_text.annotation.added",
                annotation_index=len(_annotations(part)) - len(annotations) - 1,
                annotation=annotation.model_dump(),
                **where,
            )

    send_annotations(0)
    for number, delta in enumerate(plan.deltas, start=1):
        emit(
            ResponseTextDeltaEvent,
            type="response.output_text.delta",
            delta=delta,
            logprobs=[],
            **where,
        )
        send_annotations(number)


def stream_chunks(events: Sequence[Any], output_version: str | None = None) -> list[AIMessageChunk]:
    """Run SDK events through ``langchain-openai``'s own Responses chunk conversion.

    Args:
        events: The stream's events.
        output_version: As ``ChatOpenAI(output_version=...)`` (None: ``"responses/v1"``).

    Returns:
        The chunks ``ChatOpenAI.stream`` yields.
    """
    chunks: list[AIMessageChunk] = []
    current_index, current_output_index, current_sub_index = -1, -1, -1
    item_output_indices: dict[str, int] = {}
    for event in events:
        current_index, current_output_index, current_sub_index, generation = (
            _convert_responses_chunk_to_generation_chunk(
                event,
                current_index,
                current_output_index,
                current_sub_index,
                metadata={},
                output_version=output_version,
                item_output_indices=item_output_indices,
            )
        )
        if generation is not None:
            message = generation.message
            if not isinstance(message, AIMessageChunk):
                raise TypeError(type(message))
            chunks.append(message)
    return chunks


def scenario_chunks(name: str, output_version: str | None = None) -> list[AIMessageChunk]:
    """The chunks a stream of scenario ``name`` yields (default plan)."""
    return stream_chunks(stream_events(SCENARIOS[name]), output_version)


def scenario_message(name: str, output_version: str | None = None) -> AIMessage:
    """The ``AIMessage`` an invoke of scenario ``name`` returns."""
    return invoke_message(SCENARIOS[name], output_version)


def expected_pieces(name: str) -> list[Piece]:
    """The adapter pieces of scenario ``name``."""
    return list(SCENARIOS[name].expected)


def fake_chat_openai(
    scenario: Scenario, recorder: Recorder, output_version: str | None = None
) -> ChatOpenAI:
    """A real ``ChatOpenAI`` (Responses API) served by an in-memory transport."""
    transport = fake_transport(
        lambda: response(scenario).model_dump_json().encode(),
        lambda: sse_body(stream_events(scenario)),
        recorder,
    )
    return ChatOpenAI(
        model=MODEL,
        api_key=SecretStr("sk-test"),
        use_responses_api=True,
        output_version=output_version,
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
        http_async_client=httpx2.AsyncClient(transport=transport),
    )
