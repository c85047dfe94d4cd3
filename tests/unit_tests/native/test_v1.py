"""The LangChain v1 adapter: ``citation`` annotations on standard text blocks."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from langchain_references.native._markers import UnsupportedMessageError, coalesce
from langchain_references.native.base import NativeCitation, Piece
from langchain_references.native.v1 import V1Adapter
from tests.unit_tests.native import _cohere_streams, _gemini_streams, _perplexity_streams
from tests.unit_tests.native import _v1_streams as streams

ANSWERS = ["blocks", "mixed", "openai"]


# The Cohere SDK's own model construction uses a pydantic v1 attribute.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The `__fields__` attribute is deprecated:DeprecationWarning"
)


def run(messages: Iterable[BaseMessage]) -> list[Piece]:
    adapter = V1Adapter()
    pieces: list[Piece] = []
    for message in messages:
        pieces.extend(adapter.feed(message))
    return coalesce([*pieces, *adapter.finish()])


@pytest.mark.parametrize("answer", ANSWERS)
def test_invoke(answer: str) -> None:
    message = streams.invoke_message(answer)
    assert V1Adapter.matches(message)
    assert run([message]) == streams.expected_pieces(answer)


@pytest.mark.parametrize("answer", ANSWERS)
def test_stream(answer: str) -> None:
    chunks = streams.stream_chunks(answer)
    assert V1Adapter.matches(chunks[0])
    assert run(chunks) == streams.expected_pieces(answer)


async def test_astream_gemini_v1() -> None:
    """A real integration's v1 astream (Gemini: handed to the Gemini adapter)."""
    model = _gemini_streams.chat_model("plain").model_copy(update={"output_version": "v1"})
    chunks = [chunk async for chunk in model.astream("Who won?")]
    assert chunks[0].response_metadata["output_version"] == "v1"
    assert run(chunks) == _gemini_streams.expected_pieces("plain")


async def test_astream_perplexity_v1() -> None:
    model = _perplexity_streams.chat_model("mixed").model_copy(update={"output_version": "v1"})
    chunks = [chunk async for chunk in model.astream("How tall?")]
    assert run(chunks) == _perplexity_streams.expected_pieces("mixed")


def test_blocks_are_released_when_the_next_block_starts() -> None:
    adapter = V1Adapter()
    chunks = streams.stream_chunks("blocks")
    assert adapter.feed(chunks[0]) == []
    assert adapter.feed(chunks[1]) == ["Per the report, "]
    released = adapter.feed(chunks[2])
    assert released[0] == "revenue grew 12%"
    assert isinstance(released[1], NativeCitation)


def test_a_final_chunk_releases_the_open_block() -> None:
    adapter = V1Adapter()
    text = AIMessageChunk(content=[{"type": "text", "text": "x", "index": 0}])
    assert adapter.feed(text) == []
    last = AIMessageChunk(content=[], chunk_position="last")
    assert adapter.feed(last) == ["x"]
    assert adapter.finish() == []


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_chunking_does_not_change_the_result(data: st.DataObject) -> None:
    """The block's text split anywhere, each annotation on a chunk after its text."""
    answer = data.draw(st.sampled_from(["openai", "mixed"]))
    message = streams.invoke_message(answer)
    block = message.content[0]
    assert isinstance(block, dict)
    text, annotations = block["text"], block["annotations"]
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=len(text)))))
    bounds = [0, *cuts, len(text)]
    chunks = [
        AIMessageChunk(content=[{"type": "text", "text": text[a:b], "index": "lc_txt_0"}])
        for a, b in itertools.pairwise(bounds)
    ]
    for annotation in annotations:
        # An annotation comes after the chunk that completes its span.
        done = next(i for i, bound in enumerate(bounds[1:], 1) if bound >= annotation["end_index"])
        position = data.draw(st.integers(min(done, len(chunks)), len(chunks)))
        chunks.insert(
            position,
            AIMessageChunk(
                content=[
                    {"type": "text", "text": "", "annotations": [annotation], "index": "lc_txt_0"}
                ]
            ),
        )
    assert run(chunks) == streams.expected_pieces(answer)


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet="ab .([1](id=2))é", min_size=1, max_size=30),
    st.lists(st.integers(0, 30), max_size=8),
    st.integers(0, 30),
)
def test_any_text_is_split_invariant(text: str, cuts: list[int], end: int) -> None:
    annotation = {"type": "citation", "url": "https://s.org/", "end_index": min(end, len(text))}
    whole = run([AIMessage(content=[{"type": "text", "text": text, "annotations": [annotation]}])])
    bounds = [0, *sorted({min(c, len(text)) for c in cuts}), len(text)]
    chunks = [
        AIMessageChunk(content=[{"type": "text", "text": text[a:b], "index": 0}])
        for a, b in itertools.pairwise(bounds)
    ]
    chunks.append(
        AIMessageChunk(
            content=[{"type": "text", "text": "", "annotations": [annotation], "index": 0}]
        )
    )
    assert run(chunks) == whole
    assert "".join(p for p in whole if isinstance(p, str)) == text
    assert sum(isinstance(p, NativeCitation) for p in whole) == 1


def test_marker_never_splits_a_model_citation() -> None:
    annotation = {"type": "citation", "url": "https://s.org/", "start_index": 0, "end_index": 5}
    pieces = run(
        [
            AIMessage(
                content=[{"type": "text", "text": "x [1](id=2) y", "annotations": [annotation]}]
            )
        ]
    )
    assert pieces[0] == "x [1](id=2)"


def test_gemini_v1_annotations_count_bytes() -> None:
    """Gemini's translator copies byte offsets as they are; ``extras`` tells them apart."""
    text = "Zoë ran. Then?"
    annotation = {
        "type": "citation",
        "url": "https://a.org/",
        "start_index": 0,
        "end_index": 9,
        "cited_text": "Zoë ran.",
        "extras": {"google_ai_metadata": {"grounding_chunk_index": 0}},
    }
    message = AIMessage(content=[{"type": "text", "text": text, "annotations": [annotation]}])
    assert run([message]) == [
        "Zoë ran.",
        NativeCitation(provider="v1", source="https://a.org/", url="https://a.org/"),
        " Then?",
    ]


@pytest.mark.parametrize("answer", sorted(_perplexity_streams.ANSWERS))
def test_perplexity_v1_output_is_handed_to_the_perplexity_adapter(answer: str) -> None:
    model = _perplexity_streams.chat_model(answer).model_copy(update={"output_version": "v1"})
    chunks = list(model.stream("How tall?"))
    assert isinstance(chunks[0].content, list)
    assert V1Adapter.matches(chunks[0])
    assert run(chunks) == _perplexity_streams.expected_pieces(answer)
    assert run([model.invoke("How tall?")]) == _perplexity_streams.expected_pieces(answer)


@pytest.mark.parametrize("answer", sorted(_cohere_streams.ANSWERS))
def test_cohere_v1_output_is_handed_to_the_cohere_adapter(answer: str) -> None:
    model = _cohere_streams.chat_model(answer).model_copy(update={"output_version": "v1"})
    message = model.invoke("Penguins?", documents=_cohere_streams.DOCUMENTS)
    assert run([message]) == _cohere_streams.expected_pieces(answer)


def test_non_citation_annotations_and_blocks_are_ignored() -> None:
    content: list[str | dict[str, Any]] = [
        {"type": "reasoning", "reasoning": "hmm"},
        {"type": "text", "text": "a", "annotations": [{"type": "non_standard_annotation"}]},
        "b",
    ]
    assert run([AIMessage(content=content)]) == ["ab"]


def test_matches() -> None:
    assert V1Adapter.matches(AIMessage("x", response_metadata={"output_version": "v1"}))
    cited: list[str | dict[str, Any]] = [
        {"type": "text", "text": "x", "annotations": [{"type": "citation"}]}
    ]
    assert V1Adapter.matches(AIMessage(content=cited))
    assert not V1Adapter.matches(AIMessage("x"))
    assert not V1Adapter.matches(AIMessage(content=[{"type": "text", "text": "x"}]))


def test_rejects_non_messages() -> None:
    with pytest.raises(UnsupportedMessageError):
        V1Adapter().feed(["x"])
