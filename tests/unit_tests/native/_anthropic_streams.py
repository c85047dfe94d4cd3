"""Recorded-style Claude answers built from the ``anthropic`` SDK's own types.

Each scenario is the final list of content blocks of a Messages API response. From it:

* :func:`invoke_message` gives the ``AIMessage`` ``ChatAnthropic.invoke`` returns, through the
  integration's own ``_format_output``;
* :func:`stream_events` gives the SDK stream events (``message_start``,
  ``content_block_start`` / ``_delta`` / ``_stop`` per block, ``message_delta``,
  ``message_stop``), with a :class:`BlockPlan` per text block saying how its text is split
  into ``text_delta`` events and where its ``citations_delta`` events fall;
* :func:`stream_chunks` runs those events through the integration's own
  ``_make_message_chunk_from_anthropic_event``, giving the ``AIMessageChunk`` list that
  ``ChatAnthropic.stream`` / ``astream`` yield;
* :func:`sse_body` / :func:`fake_chat_anthropic` serve the same response over an in-memory httpx2
  transport so the real ``ChatAnthropic`` can be run (invoke, stream, astream) offline.

``SCENARIOS[name].expected`` are the adapter pieces, written out by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
from anthropic.types import (
    CitationCharLocation,
    CitationContentBlockLocation,
    CitationPageLocation,
    CitationsDelta,
    CitationsWebSearchResultLocation,
    InputJSONDelta,
    Message,
    MessageDeltaUsage,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    ServerToolUseBlock,
    TextBlock,
    TextCitation,
    TextDelta,
    Usage,
    WebSearchResultBlock,
    WebSearchToolResultBlock,
)
from anthropic.types.raw_message_delta_event import Delta
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, AIMessageChunk
from pydantic import SecretStr

from langchain_references.native.base import NativeCitation, Piece, normalize_url

MODEL = "claude-sonnet-5"
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}

ContentBlock = TextBlock | ServerToolUseBlock | WebSearchToolResultBlock


@dataclass(frozen=True)
class Scenario:
    """One Claude answer: its final content blocks and the pieces the adapter must give.

    Attributes:
        name: Short name.
        blocks: The response's content blocks, in order.
        expected: The adapter's pieces (adjacent text merged).
        needs: What the request must carry so the integration keeps structured content:
            ``"tools"`` (web search) or ``"documents"`` (citable documents).
    """

    name: str
    blocks: tuple[ContentBlock, ...]
    expected: tuple[Piece, ...]
    needs: str


@dataclass(frozen=True)
class BlockPlan:
    """How one text block streams.

    Attributes:
        deltas: The block's text cut into ``text_delta`` payloads (joined, they are the text).
        citations_after: For each citation of the block, how many of ``deltas`` are sent
            before its ``citations_delta`` (non-decreasing; 0 = before any text).
        start_text: Send ``deltas[0]`` on ``content_block_start`` instead of as a delta.
    """

    deltas: tuple[str, ...]
    citations_after: tuple[int, ...] = ()
    start_text: bool = False


def _web(url: str, title: str, cited_text: str) -> CitationsWebSearchResultLocation:
    return CitationsWebSearchResultLocation(
        type="web_search_result_location",
        url=url,
        title=title,
        cited_text=cited_text,
        encrypted_index="EqoBCioIAhgB",
    )


def _web_record(url: str, title: str, cited_text: str) -> NativeCitation:
    return NativeCitation(
        provider="anthropic",
        source=normalize_url(url),
        url=url,
        title=title,
        cited_text=cited_text,
    )


def _text(text: str, *citations: TextCitation) -> TextBlock:
    return TextBlock(type="text", text=text, citations=list(citations) or None)


# --- web search -------------------------------------------------------------------------

_EIFFEL_URL = "https://www.toureiffel.paris/en/the-monument/key-figures?utm_source=claude"
_EIFFEL_TITLE = "Key figures | Eiffel Tower"
_WIKI_URL = "https://en.wikipedia.org/wiki/Eiffel_Tower"
_WIKI_TITLE = "Eiffel Tower - Wikipedia"
_HEIGHT = "The Eiffel Tower is 330 metres (1,083 ft) tall."
_HEIGHT_WIKI = "It is 330 metres (1,083 ft) tall, about the same height as an 81-storey building."
_BUILT = "Construction was completed on 31 March 1889."

WEB_SEARCH = Scenario(
    name="web_search",
    needs="tools",
    blocks=(
        ServerToolUseBlock(
            type="server_tool_use",
            id="srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            name="web_search",
            input={"query": "Eiffel Tower height completion year"},
        ),
        WebSearchToolResultBlock(
            type="web_search_tool_result",
            tool_use_id="srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            content=[
                WebSearchResultBlock(
                    type="web_search_result",
                    url=_EIFFEL_URL,
                    title=_EIFFEL_TITLE,
                    encrypted_content="EqgfCioIARgBIiQ3YTAwMjY1Mi1",
                    page_age="April 30, 2025",
                ),
                WebSearchResultBlock(
                    type="web_search_result",
                    url=_WIKI_URL,
                    title=_WIKI_TITLE,
                    encrypted_content="Eo8BCioIAhgBIiQyYjQ0OWJmZi1",
                    page_age=None,
                ),
            ],
        ),
        _text("Here is what I found. "),
        _text(
            "The Eiffel Tower is 330 metres tall",
            _web(_EIFFEL_URL, _EIFFEL_TITLE, _HEIGHT),
            _web(_WIKI_URL, _WIKI_TITLE, _HEIGHT_WIKI),
        ),
        _text(". "),
        _text("It was completed in 1889", _web(_EIFFEL_URL, _EIFFEL_TITLE, _BUILT)),
        _text("."),
    ),
    expected=(
        "Here is what I found. The Eiffel Tower is 330 metres tall",
        _web_record(_EIFFEL_URL, _EIFFEL_TITLE, _HEIGHT),
        _web_record(_WIKI_URL, _WIKI_TITLE, _HEIGHT_WIKI),
        ". It was completed in 1889",
        _web_record(_EIFFEL_URL, _EIFFEL_TITLE, _BUILT),
        ".",
    ),
)

# --- documents (char / page / content-block locations) ---------------------------------

DOCUMENTS = Scenario(
    name="documents",
    needs="documents",
    blocks=(
        _text("According to the handbook, "),
        _text(
            "the office opens at 9 am",
            CitationCharLocation(
                type="char_location",
                cited_text="The office opens at 9 a.m. on weekdays.",
                document_index=0,
                document_title="Staff handbook",
                start_char_index=118,
                end_char_index=157,
            ),
        ),
        _text(" and "),
        _text(
            "closes at 5 pm. ",
            CitationPageLocation(
                type="page_location",
                cited_text="Closing time is 5 p.m.",
                document_index=1,
                document_title="Opening hours.pdf",
                start_page_number=3,
                end_page_number=4,
            ),
        ),
        _text(
            "Parking is free on weekends",
            CitationContentBlockLocation(
                type="content_block_location",
                cited_text="Weekend parking is free of charge.",
                document_index=2,
                document_title=None,
                start_block_index=1,
                end_block_index=2,
            ),
            CitationCharLocation(
                type="char_location",
                cited_text="Parking: free on Saturdays and Sundays.",
                document_index=0,
                document_title="Staff handbook",
                start_char_index=400,
                end_char_index=439,
            ),
        ),
        _text("."),
    ),
    expected=(
        "According to the handbook, the office opens at 9 am",
        NativeCitation(
            provider="anthropic",
            title="Staff handbook",
            cited_text="The office opens at 9 a.m. on weekdays.",
            document_index=0,
            start=118,
            end=157,
        ),
        " and closes at 5 pm.",
        NativeCitation(
            provider="anthropic",
            title="Opening hours.pdf",
            cited_text="Closing time is 5 p.m.",
            page=3,
            document_index=1,
        ),
        " Parking is free on weekends",
        NativeCitation(
            provider="anthropic",
            cited_text="Weekend parking is free of charge.",
            document_index=2,
        ),
        NativeCitation(
            provider="anthropic",
            title="Staff handbook",
            cited_text="Parking: free on Saturdays and Sundays.",
            document_index=0,
            start=400,
            end=439,
        ),
        ".",
    ),
)

# --- native citations mixed with the model's own [n](id=k) markers ----------------------

_TEA_URL = "https://www.britannica.com/topic/tea-beverage"
_TEA_TITLE = "Tea | Britannica"
_TEA_CITED = "Legend has it that tea was discovered in 2737 BCE by the Chinese emperor Shennong."

MIXED = Scenario(
    name="mixed",
    needs="tools",
    blocks=(
        _text("Tea was first drunk in China "),
        _text("around 2737 BC", _web(_TEA_URL, _TEA_TITLE, _TEA_CITED)),
        _text(", and it reached Europe in the 16th century [1](id=2). Milk came later [2](id=1)."),
    ),
    expected=(
        "Tea was first drunk in China around 2737 BC",
        _web_record(_TEA_URL, _TEA_TITLE, _TEA_CITED),
        ", and it reached Europe in the 16th century [1](id=2). Milk came later [2](id=1).",
    ),
)

# --- hostile titles and URLs -------------------------------------------------------------

HOSTILE_URL = 'https://evil.example/a?q="><script>alert(1)</script>&utm_medium=x#frag'
HOSTILE_TITLE = '</a><img src=x onerror="alert(document.cookie)">'
JAVASCRIPT_URL = "javascript:alert(document.domain)"
JAVASCRIPT_TITLE = '"><b onmouseover=alert(1)>bold</b>'

HOSTILE = Scenario(
    name="hostile",
    needs="tools",
    blocks=(
        _text(
            "Read <this> & that",
            _web(HOSTILE_URL, HOSTILE_TITLE, "<script>alert('cited')</script>"),
            _web(JAVASCRIPT_URL, JAVASCRIPT_TITLE, "x"),
        ),
        _text(" <br/> done."),
    ),
    expected=(
        "Read <this> & that",
        _web_record(HOSTILE_URL, HOSTILE_TITLE, "<script>alert('cited')</script>"),
        _web_record(JAVASCRIPT_URL, JAVASCRIPT_TITLE, "x"),
        " <br/> done.",
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (WEB_SEARCH, DOCUMENTS, MIXED, HOSTILE)}


# --- building the SDK objects ------------------------------------------------------------


def model() -> ChatAnthropic:
    """A ``ChatAnthropic`` whose conversion methods the fixtures use (no request is made)."""
    return ChatAnthropic(model=MODEL, api_key=SecretStr("sk-ant-test"), max_tokens=1024)


def response_message(scenario: Scenario) -> Message:
    """The SDK ``Message`` of the scenario's (non-streaming) response."""
    return Message(
        id="msg_01XFDUDYJgAACzvnptvVoYEL",
        type="message",
        role="assistant",
        model=MODEL,
        content=list(scenario.blocks),
        stop_reason="end_turn",
        stop_sequence=None,
        usage=Usage(input_tokens=2095, output_tokens=503),
    )


def invoke_message(scenario: Scenario) -> AIMessage:
    """The ``AIMessage`` ``ChatAnthropic.invoke`` returns for the scenario."""
    result = model()._format_output(response_message(scenario))
    message = result.generations[0].message
    if not isinstance(message, AIMessage):
        raise TypeError(type(message))
    return message


def default_plan(block: TextBlock, step: int = 7) -> BlockPlan:
    """Cut a block's text every ``step`` characters; its citations follow the text."""
    text = block.text
    deltas = tuple(text[i : i + step] for i in range(0, len(text), step)) or ("",)
    return BlockPlan(deltas=deltas, citations_after=(len(deltas),) * len(block.citations or ()))


def stream_events(
    scenario: Scenario,
    plan: Callable[[int, TextBlock], BlockPlan] | None = None,
) -> list[RawMessageStreamEvent]:
    """The SDK events of the scenario's stream.

    Args:
        scenario: The answer.
        plan: For the text block at a content index, how it streams (default:
            :func:`default_plan`).

    Returns:
        The events in wire order.
    """
    make_plan = plan or (lambda _index, block: default_plan(block))
    start = response_message(scenario).model_copy(
        update={
            "content": [],
            "stop_reason": None,
            "usage": Usage(input_tokens=2095, output_tokens=1),
        }
    )
    events: list[RawMessageStreamEvent] = [
        RawMessageStartEvent(type="message_start", message=start)
    ]
    for index, block in enumerate(scenario.blocks):
        if isinstance(block, TextBlock):
            events.extend(_text_block_events(index, block, make_plan(index, block)))
        elif isinstance(block, ServerToolUseBlock):
            events.append(
                RawContentBlockStartEvent(
                    type="content_block_start",
                    index=index,
                    content_block=block.model_copy(update={"input": {}}),
                )
            )
            events.append(
                RawContentBlockDeltaEvent(
                    type="content_block_delta",
                    index=index,
                    delta=InputJSONDelta(
                        type="input_json_delta", partial_json=json.dumps(block.input)
                    ),
                )
            )
            events.append(RawContentBlockStopEvent(type="content_block_stop", index=index))
        else:
            events.append(
                RawContentBlockStartEvent(
                    type="content_block_start", index=index, content_block=block
                )
            )
            events.append(RawContentBlockStopEvent(type="content_block_stop", index=index))
    events.append(
        RawMessageDeltaEvent(
            type="message_delta",
            delta=Delta(stop_reason="end_turn", stop_sequence=None),
            usage=MessageDeltaUsage(output_tokens=503),
        )
    )
    events.append(RawMessageStopEvent(type="message_stop"))
    return events


def _text_block_events(
    index: int, block: TextBlock, plan: BlockPlan
) -> list[RawMessageStreamEvent]:
    if "".join(plan.deltas) != block.text:
        raise ValueError("the plan's deltas must join into the block's text")
    citations = list(block.citations or ())
    if len(plan.citations_after) != len(citations):
        raise ValueError("the plan must place every citation of the block")
    deltas = list(plan.deltas)
    first = deltas.pop(0) if plan.start_text and deltas else ""
    offset = 1 if plan.start_text else 0
    events: list[RawMessageStreamEvent] = [
        RawContentBlockStartEvent(
            type="content_block_start",
            index=index,
            content_block=TextBlock(type="text", text=first, citations=None),
        )
    ]
    pending = sorted(zip(plan.citations_after, range(len(citations)), strict=True))

    def send_citations_up_to(sent: int) -> None:
        while pending and pending[0][0] <= sent:
            _, which = pending.pop(0)
            events.append(
                RawContentBlockDeltaEvent(
                    type="content_block_delta",
                    index=index,
                    delta=CitationsDelta(type="citations_delta", citation=citations[which]),
                )
            )

    send_citations_up_to(offset)
    for number, text in enumerate(deltas, start=offset + 1):
        events.append(
            RawContentBlockDeltaEvent(
                type="content_block_delta",
                index=index,
                delta=TextDelta(type="text_delta", text=text),
            )
        )
        send_citations_up_to(number)
    send_citations_up_to(len(plan.deltas) + len(citations) + 1)
    events.append(RawContentBlockStopEvent(type="content_block_stop", index=index))
    return events


def stream_chunks(
    events: Sequence[RawMessageStreamEvent], *, coerce_content_to_string: bool = False
) -> list[AIMessageChunk]:
    """Run SDK events through ``ChatAnthropic``'s own event conversion.

    Args:
        events: The stream's events.
        coerce_content_to_string: What the integration decides when the request has no
            tools, documents or thinking (plain string chunks).

    Returns:
        The chunks ``ChatAnthropic.stream`` yields (events without a chunk are skipped).
    """
    llm = model()
    chunks: list[AIMessageChunk] = []
    block_start: Any = None
    for event in events:
        chunk, block_start = llm._make_message_chunk_from_anthropic_event(
            event,
            stream_usage=True,
            coerce_content_to_string=coerce_content_to_string,
            block_start_event=block_start,
        )
        if chunk is not None:
            chunks.append(chunk)
    return chunks


def scenario_chunks(name: str) -> list[AIMessageChunk]:
    """The chunks a stream of scenario ``name`` yields (default plan)."""
    return stream_chunks(stream_events(SCENARIOS[name]))


def scenario_message(name: str) -> AIMessage:
    """The ``AIMessage`` an invoke of scenario ``name`` returns."""
    return invoke_message(SCENARIOS[name])


def expected_pieces(name: str) -> list[Piece]:
    """The adapter pieces of scenario ``name``."""
    return list(SCENARIOS[name].expected)


# --- serving the response over HTTP (in memory) ------------------------------------------


def sse_body(events: Sequence[Any]) -> bytes:
    """Encode SDK stream events (anything with ``type`` and ``model_dump_json``) as SSE."""
    lines = [f"event: {event.type}\ndata: {event.model_dump_json()}\n\n" for event in events]
    return "".join(lines).encode()


@dataclass
class Recorder:
    """The requests a fake transport received (their JSON bodies)."""

    bodies: list[dict[str, Any]] = field(default_factory=list)


def fake_transport(
    whole: Callable[[], bytes], streamed: Callable[[], bytes], recorder: Recorder
) -> httpx2.MockTransport:
    """An in-memory transport answering JSON or SSE depending on the request's ``stream``."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        recorder.bodies.append(body)
        if body.get("stream"):
            return httpx2.Response(
                200, content=streamed(), headers={"content-type": "text/event-stream"}
            )
        return httpx2.Response(200, content=whole(), headers={"content-type": "application/json"})

    return httpx2.MockTransport(handle)


def fake_chat_anthropic(scenario: Scenario, recorder: Recorder) -> ChatAnthropic:
    """A real ``ChatAnthropic`` whose SDK clients talk to an in-memory transport."""
    import anthropic

    transport = fake_transport(
        lambda: response_message(scenario).model_dump_json().encode(),
        lambda: sse_body(stream_events(scenario)),
        recorder,
    )
    llm = model()
    # The integration builds its SDK clients lazily (cached properties); give it ours.
    llm.__dict__["_client"] = anthropic.Anthropic(
        api_key="sk-ant-test", http_client=httpx2.Client(transport=transport), max_retries=0
    )
    llm.__dict__["_async_client"] = anthropic.AsyncAnthropic(
        api_key="sk-ant-test", http_client=httpx2.AsyncClient(transport=transport), max_retries=0
    )
    return llm


def request_input(scenario: Scenario) -> list[Any]:
    """Messages that make the integration keep structured (citation-bearing) content."""
    from langchain_core.messages import HumanMessage

    if scenario.needs == "documents":
        documents = [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": f"Document {i}."},
                "title": f"Document {i}",
                "citations": {"enabled": True},
            }
            for i in range(3)
        ]
        return [HumanMessage(content=[*documents, {"type": "text", "text": "When is it open?"}])]
    return [HumanMessage(content="Answer with sources.")]
