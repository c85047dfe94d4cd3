"""The Cohere adapter: citation spans over the answer, document and tool sources."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from langchain_references.native._markers import UnsupportedMessageError, coalesce
from langchain_references.native.base import NativeCitation, Piece
from langchain_references.native.cohere import CohereAdapter
from tests.unit_tests.native import _cohere_streams as streams

ANSWERS = sorted(streams.ANSWERS)


# The Cohere SDK's own model construction uses a pydantic v1 attribute.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The `__fields__` attribute is deprecated:DeprecationWarning"
)


def run(messages: Iterable[BaseMessage]) -> list[Piece]:
    adapter = CohereAdapter()
    pieces: list[Piece] = []
    for message in messages:
        pieces.extend(adapter.feed(message))
    return coalesce([*pieces, *adapter.finish()])


@pytest.mark.parametrize("answer", ANSWERS)
def test_invoke(answer: str) -> None:
    message = streams.invoke_message(answer)
    assert CohereAdapter.matches(message)
    assert run([message]) == streams.expected_pieces(answer)


@pytest.mark.parametrize("answer", ANSWERS)
def test_stream_has_no_citations_in_langchain_cohere(answer: str) -> None:
    """``langchain-cohere`` drops the stream's citation events: only the text is left."""
    chunks = streams.stream_chunks(answer)
    assert not any("citations" in chunk.additional_kwargs for chunk in chunks)
    assert run(chunks) == streams.expected_pieces(answer, streamed=True)


@pytest.mark.parametrize("answer", ANSWERS)
async def test_astream(answer: str) -> None:
    model = streams.chat_model(answer)
    chunks = [c async for c in model.astream("Penguins?", documents=streams.DOCUMENTS)]
    assert run(chunks) == streams.expected_pieces(answer, streamed=True)


@pytest.mark.parametrize("answer", ANSWERS)
async def test_ainvoke(answer: str) -> None:
    message = await streams.chat_model(answer).ainvoke("Penguins?", documents=streams.DOCUMENTS)
    assert run([message]) == streams.expected_pieces(answer)


def test_document_sources_map_to_the_run_documents() -> None:
    pieces = run([streams.invoke_message("plain")])
    cited = [p.to_document(streams.DOCUMENTS) for p in pieces if isinstance(p, NativeCitation)]
    assert cited[0] is streams.DOCUMENTS[0]
    assert cited[1] is streams.DOCUMENTS[1]
    assert cited[2].metadata["title"] == '<script>alert("p")</script> Penguins & "friends"'


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_chunking_does_not_change_the_result(data: st.DataObject) -> None:
    """Text split anywhere, citations and documents on the last chunk."""
    answer = data.draw(st.sampled_from(ANSWERS))
    message = streams.invoke_message(answer)
    text = message.text
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=len(text)))))
    bounds = [0, *cuts, len(text)]
    chunks = [AIMessageChunk(content=text[a:b]) for a, b in itertools.pairwise(bounds)]
    kwargs = {key: message.additional_kwargs[key] for key in ("citations", "documents")}
    chunks.append(AIMessageChunk(content="", additional_kwargs=kwargs, chunk_position="last"))
    assert run(chunks) == streams.expected_pieces(answer)


def test_v1_api_citations_use_document_ids() -> None:
    """The deprecated v1 API: ``ChatCitation(start, end, text, document_ids)``."""
    from cohere.types import ChatCitation

    documents = [{"id": "web-1", "title": "W", "url": "https://w.org/"}, {"id": "d2", "t": "x"}]
    citations = [
        ChatCitation(start=1, end=5, text="Sky", document_ids=["web-1"]),  # offsets off by one
        ChatCitation(start=7, end=12, text="blue.", document_ids=["d2", "nope"]),
    ]
    message = AIMessage(
        "Sky is blue.",
        additional_kwargs={"citations": citations, "documents": documents},
    )
    assert run([message]) == [
        "Sky",  # found by its text
        NativeCitation(provider="cohere", url="https://w.org/", title="W", document_index=0),
        " is blue.",
        NativeCitation(provider="cohere", document_index=1),
        NativeCitation(provider="cohere", source="nope"),
    ]


def test_thinking_citations_are_skipped_and_unknown_sources_keep_their_id() -> None:
    citations = [
        {"start": 0, "end": 2, "text": "ok", "type": "THINKING_CONTENT", "sources": [{"id": "a"}]},
        {"start": 0, "end": 2, "text": "ok", "sources": [{"type": "tool", "id": "calc:0"}, {}]},
    ]
    pieces = run([AIMessage("ok.", additional_kwargs={"citations": citations})])
    assert pieces == ["ok", NativeCitation(provider="cohere", source="calc:0"), "."]


def test_matches() -> None:
    cited = {"citations": [{"start": 0, "end": 1, "text": "a", "sources": []}]}
    assert CohereAdapter.matches(AIMessage("a", additional_kwargs=cited))
    assert not CohereAdapter.matches(AIMessage("a", additional_kwargs={"citations": ["https://x"]}))
    assert not CohereAdapter.matches(AIMessage("a"))


def test_rejects_non_messages() -> None:
    with pytest.raises(UnsupportedMessageError):
        CohereAdapter().feed(None)
