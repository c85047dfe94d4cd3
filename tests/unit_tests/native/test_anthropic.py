"""The Anthropic adapter, fed with chunks made by ``langchain-anthropic`` from SDK objects."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from functools import reduce
from typing import Any

import pytest
from anthropic.types import CitationsSearchResultLocation, TextBlock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.runnables import Runnable

from langchain_references.errors import LangchainReferencesError
from langchain_references.native._markers import UnsupportedMessageError, coalesce
from langchain_references.native.anthropic import AnthropicAdapter, citation_from_anthropic
from langchain_references.native.base import NativeCitation, Piece
from tests.unit_tests.native import _openai_streams
from tests.unit_tests.native._anthropic_streams import (
    SCENARIOS,
    WEB_SEARCH_TOOL,
    BlockPlan,
    Recorder,
    Scenario,
    fake_chat_anthropic,
    invoke_message,
    request_input,
    stream_chunks,
    stream_events,
)

NAMES = sorted(SCENARIOS)


def run(messages: Sequence[BaseMessage]) -> list[Piece]:
    adapter = AnthropicAdapter()
    pieces: list[Piece] = []
    for message in messages:
        pieces.extend(adapter.feed(message))
    pieces.extend(adapter.finish())
    return coalesce(pieces)


# --- invoke --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_invoke_message_gives_the_expected_pieces(name: str) -> None:
    scenario = SCENARIOS[name]
    message = invoke_message(scenario)
    assert isinstance(message.content, list)
    assert run([message]) == list(scenario.expected)


def test_invoke_feeds_everything_at_once_and_finish_adds_nothing() -> None:
    scenario = SCENARIOS["web_search"]
    adapter = AnthropicAdapter()
    assert adapter.feed(invoke_message(scenario)) == list(scenario.expected)
    assert adapter.finish() == []


def test_single_uncited_text_block_arrives_as_a_string() -> None:
    scenario = Scenario("plain", (TextBlock(type="text", text="Just text."),), ("Just text.",), "")
    message = invoke_message(scenario)
    assert message.content == "Just text."
    assert run([message]) == ["Just text."]


@pytest.mark.parametrize("name", NAMES)
def test_aggregated_stream_message_gives_the_same_pieces(name: str) -> None:
    """``invoke`` of a streaming model returns the chunks merged into one message."""
    chunks = stream_chunks(stream_events(SCENARIOS[name]))
    merged = message_chunk_to_message(reduce(operator.add, chunks))
    assert isinstance(merged, AIMessage)
    assert run([merged]) == list(SCENARIOS[name].expected)


# --- stream ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_stream_chunks_give_the_expected_pieces(name: str) -> None:
    chunks = stream_chunks(stream_events(SCENARIOS[name]))
    assert any(
        isinstance(block, dict) and "citations" in block and "text" not in block
        for chunk in chunks
        for block in chunk.content
    ), "the stream must carry citations_delta chunks"
    assert run(chunks) == list(SCENARIOS[name].expected)


def test_stream_releases_a_block_when_the_next_block_starts() -> None:
    chunks = stream_chunks(stream_events(SCENARIOS["mixed"]))
    adapter = AnthropicAdapter()
    released: list[list[Piece]] = [adapter.feed(chunk) for chunk in chunks]
    first_of: dict[int, int] = {}
    for position, chunk in enumerate(chunks):
        for block in chunk.content:
            if isinstance(block, dict):
                first_of.setdefault(block["index"], position)
    # Nothing of block 0 comes out before block 1 starts; then all of it does.
    assert all(not pieces for pieces in released[: first_of[1]])
    assert released[first_of[1]] == ["Tea was first drunk in China "]
    # The cited block comes out, citation at its end, as soon as block 2 starts.
    cited = released[first_of[2]]
    assert cited[0] == "around 2737 BC"
    assert isinstance(cited[1], NativeCitation)
    # The last block is released by the final chunk (stop reason), before finish().
    assert released[-1] == [SCENARIOS["mixed"].expected[-1]]
    assert adapter.finish() == []


def test_citation_before_or_after_the_text_anchors_at_the_block_end() -> None:
    scenario = SCENARIOS["documents"]

    def early(_index: int, block: TextBlock) -> BlockPlan:
        return BlockPlan(deltas=(block.text,), citations_after=(0,) * len(block.citations or ()))

    def late(_index: int, block: TextBlock) -> BlockPlan:
        return BlockPlan(deltas=(block.text,), citations_after=(1,) * len(block.citations or ()))

    early_chunks = stream_chunks(stream_events(scenario, early))
    late_chunks = stream_chunks(stream_events(scenario, late))
    assert early_chunks != late_chunks
    assert run(early_chunks) == run(late_chunks) == list(scenario.expected)


def test_string_chunks_stream_through_at_once() -> None:
    """Without tools or documents in the request the integration streams text as strings.

    Citations (from ``search_result`` blocks, which do not switch the integration to
    structured content) still come as list chunks; they land where they arrive.
    """
    chunks = stream_chunks(stream_events(SCENARIOS["mixed"]), coerce_content_to_string=True)
    assert any(isinstance(chunk.content, list) and chunk.content for chunk in chunks)
    adapter = AnthropicAdapter()
    pieces: list[Piece] = []
    for chunk in chunks:
        released = adapter.feed(chunk)
        if isinstance(chunk.content, str) and chunk.content:
            assert released[-1] == chunk.content
        pieces.extend(released)
    pieces.extend(adapter.finish())
    assert coalesce(pieces) == list(SCENARIOS["mixed"].expected)


@st.composite
def block_plans(draw: st.DrawFn, block: TextBlock) -> BlockPlan:
    text = block.text
    cuts = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=6)))
    bounds = [0, *(c for c in cuts if c < len(text)), len(text)]
    deltas = tuple(text[a:b] for a, b in itertools.pairwise(bounds)) or ("",)
    count = len(block.citations or ())
    after = sorted(draw(st.lists(st.integers(0, len(deltas)), min_size=count, max_size=count)))
    return BlockPlan(deltas=deltas, citations_after=tuple(after), start_text=draw(st.booleans()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NAMES), data=st.data())
def test_chunking_does_not_change_the_result(name: str, data: st.DataObject) -> None:
    """Any split of the text deltas, citations anywhere in their block: same pieces."""
    scenario = SCENARIOS[name]
    plans = {
        index: data.draw(block_plans(block))
        for index, block in enumerate(scenario.blocks)
        if isinstance(block, TextBlock)
    }
    chunks = stream_chunks(stream_events(scenario, lambda index, _block: plans[index]))
    assert run(chunks) == list(scenario.expected)
    # Fed one by one or with the chunks merged in runs, the pieces are the same.
    cut = data.draw(st.integers(1, len(chunks)))
    merged = [reduce(operator.add, chunks[:cut]), *chunks[cut:]]
    assert run(merged) == list(scenario.expected)


# --- the real ChatAnthropic over an in-memory transport: invoke, stream, astream --------------


def _chat_model(scenario: Scenario, recorder: Recorder) -> Runnable[Any, BaseMessage]:
    """The real model, with the web search tool bound when the scenario needs tools."""
    llm = fake_chat_anthropic(scenario, recorder)
    return llm.bind_tools([WEB_SEARCH_TOOL]) if scenario.needs == "tools" else llm


@pytest.mark.parametrize("name", NAMES)
def test_chat_anthropic_invoke(name: str) -> None:
    scenario = SCENARIOS[name]
    recorder = Recorder()
    message = _chat_model(scenario, recorder).invoke(request_input(scenario))
    assert recorder.bodies[0].get("stream") is not True
    assert AnthropicAdapter.matches(message)
    assert run([message]) == list(scenario.expected)


@pytest.mark.parametrize("name", NAMES)
def test_chat_anthropic_stream(name: str) -> None:
    scenario = SCENARIOS[name]
    recorder = Recorder()
    chunks = list(_chat_model(scenario, recorder).stream(request_input(scenario)))
    assert recorder.bodies[0]["stream"] is True
    assert all(isinstance(chunk.content, list) for chunk in chunks)
    assert all(AnthropicAdapter.matches(chunk) for chunk in chunks)
    assert run(chunks) == list(scenario.expected)


@pytest.mark.parametrize("name", NAMES)
async def test_chat_anthropic_astream(name: str) -> None:
    scenario = SCENARIOS[name]
    recorder = Recorder()
    adapter = AnthropicAdapter()
    pieces: list[Piece] = []
    async for chunk in _chat_model(scenario, recorder).astream(request_input(scenario)):
        pieces.extend(adapter.feed(chunk))
    pieces.extend(adapter.finish())
    assert coalesce(pieces) == list(scenario.expected)


# --- citation records -------------------------------------------------------------------


def test_hostile_titles_and_urls_are_kept_verbatim() -> None:
    pieces = run([invoke_message(SCENARIOS["hostile"])])
    citations = [p for p in pieces if isinstance(p, NativeCitation)]
    assert citations[0].title == '</a><img src=x onerror="alert(document.cookie)">'
    assert (
        citations[0].url == 'https://evil.example/a?q="><script>alert(1)</script>&utm_medium=x#frag'
    )
    assert citations[0].source is not None
    assert "utm_medium" not in citations[0].source
    assert citations[1].url == "javascript:alert(document.domain)"
    assert pieces[0] == "Read <this> & that"


@pytest.mark.parametrize(
    ("source", "expected_source", "expected_url"),
    [
        (
            "https://docs.example.com/guide?utm_campaign=a&page=2",
            "https://docs.example.com/guide?page=2",
            "https://docs.example.com/guide?utm_campaign=a&page=2",
        ),
        ("kb://internal/article-17", "kb://internal/article-17", None),
    ],
)
def test_search_result_location(
    source: str, expected_source: str, expected_url: str | None
) -> None:
    raw = CitationsSearchResultLocation(
        type="search_result_location",
        cited_text="Step 2: restart the service.",
        source=source,
        title="Runbook",
        search_result_index=0,
        start_block_index=1,
        end_block_index=2,
    ).model_dump()
    assert citation_from_anthropic(raw) == NativeCitation(
        provider="anthropic",
        source=expected_source,
        url=expected_url,
        title="Runbook",
        cited_text="Step 2: restart the service.",
    )


def test_document_citation_keeps_its_file_id() -> None:
    raw = {
        "type": "page_location",
        "cited_text": "x",
        "document_index": 4,
        "document_title": None,
        "file_id": "file_011CNha8iCJcU1wXNR6q4V8w",
        "start_page_number": 7,
        "end_page_number": 8,
    }
    citation = citation_from_anthropic(raw)
    assert citation is not None
    assert (citation.source, citation.page, citation.document_index) == (
        "file_011CNha8iCJcU1wXNR6q4V8w",
        7,
        4,
    )


def test_unknown_citation_without_location_is_skipped() -> None:
    assert citation_from_anthropic({"type": "future_location", "cited_text": "x"}) is None
    message = AIMessage(
        content=[{"type": "text", "text": "A", "citations": [{"type": "future_location"}]}],
        response_metadata={"model_provider": "anthropic"},
    )
    assert run([message]) == ["A"]


def test_trailing_space_of_a_cited_block_follows_the_citation() -> None:
    pieces = run([invoke_message(SCENARIOS["documents"])])
    position = pieces.index(" Parking is free on weekends")
    assert pieces[position - 2] == " and closes at 5 pm."
    assert isinstance(pieces[position - 1], NativeCitation)


# --- matching and errors ----------------------------------------------------------------


def test_matches() -> None:
    assert AnthropicAdapter.matches(invoke_message(SCENARIOS["documents"]))
    assert all(
        AnthropicAdapter.matches(chunk)
        for chunk in stream_chunks(stream_events(SCENARIOS["documents"]))
    )
    shape_only = AIMessage(content=invoke_message(SCENARIOS["web_search"]).content)
    assert shape_only.response_metadata == {}
    assert AnthropicAdapter.matches(shape_only)
    assert not AnthropicAdapter.matches(AIMessage(content="hello"))
    assert not AnthropicAdapter.matches(_openai_streams.scenario_message("web_search"))
    v1 = AIMessage(
        content=[{"type": "text", "text": "x"}],
        response_metadata={"model_provider": "anthropic", "output_version": "v1"},
    )
    assert not AnthropicAdapter.matches(v1)


def test_feeding_something_else_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedMessageError) as caught:
        AnthropicAdapter().feed({"content": "x"})
    assert isinstance(caught.value, LangchainReferencesError)


def test_finish_twice_and_without_feed() -> None:
    adapter = AnthropicAdapter()
    assert adapter.finish() == []
    chunks = stream_chunks(stream_events(SCENARIOS["mixed"]))
    for chunk in chunks[:-1]:  # stop before the final (stop reason) chunk
        adapter.feed(chunk)
    assert adapter.finish() == [SCENARIOS["mixed"].expected[-1]]
    assert adapter.finish() == []
