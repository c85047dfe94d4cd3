"""The Gemini adapter: grounding supports (UTF-8 byte spans) placed after their segments."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from langchain_references.native._markers import UnsupportedMessageError, coalesce
from langchain_references.native._spans import char_offset, span_end
from langchain_references.native.base import NativeCitation, Piece
from langchain_references.native.gemini import GeminiAdapter
from tests.unit_tests.native import _gemini_streams as streams

ANSWERS = sorted(streams.ANSWERS)
MODELS = ["gemini-2.5-flash", "gemini-3-flash-preview"]  # string / list content


def run(messages: Iterable[BaseMessage]) -> list[Piece]:
    adapter = GeminiAdapter()
    pieces: list[Piece] = []
    for message in messages:
        pieces.extend(adapter.feed(message))
    return coalesce([*pieces, *adapter.finish()])


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("answer", ANSWERS)
def test_invoke(answer: str, model: str) -> None:
    message = streams.invoke_message(answer, model)
    assert GeminiAdapter.matches(message)
    assert run([message]) == streams.expected_pieces(answer)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("answer", ANSWERS)
def test_stream(answer: str, model: str) -> None:
    chunks = streams.stream_chunks(answer, model)
    assert GeminiAdapter.matches(chunks[0])
    assert run(chunks) == streams.expected_pieces(answer)


@pytest.mark.parametrize("answer", ANSWERS)
async def test_astream(answer: str) -> None:
    chunks = [chunk async for chunk in streams.chat_model(answer).astream("Who won?")]
    assert run(chunks) == streams.expected_pieces(answer)


@pytest.mark.parametrize("answer", ANSWERS)
def test_v1_output_is_read_the_same(answer: str) -> None:
    """``output_version="v1"`` keeps the raw metadata next to the v1 blocks."""
    from langchain_references.native.v1 import V1Adapter

    model = streams.chat_model(answer).model_copy(update={"output_version": "v1"})
    chunks = list(model.stream("Who won?"))
    adapter = V1Adapter()
    assert V1Adapter.matches(chunks[0])
    pieces: list[Piece] = []
    for chunk in chunks:
        pieces.extend(adapter.feed(chunk))
    assert coalesce([*pieces, *adapter.finish()]) == streams.expected_pieces(answer)


def test_text_is_held_until_the_end() -> None:
    adapter = GeminiAdapter()
    assert all(adapter.feed(chunk) == [] for chunk in streams.stream_chunks("plain"))
    assert coalesce(adapter.finish()) == streams.expected_pieces("plain")


def test_merged_chunks_do_not_duplicate_citations() -> None:
    """Merging chunks that each carry the metadata concatenates its lists."""
    message = streams.invoke_message("plain")
    metadata = message.response_metadata["grounding_metadata"]
    first = AIMessageChunk(content=message.text, response_metadata={"grounding_metadata": metadata})
    again = AIMessageChunk(content="", response_metadata={"grounding_metadata": metadata})
    merged = first + again
    doubled = merged.response_metadata["grounding_metadata"]
    assert len(doubled["grounding_supports"]) == 2 * len(metadata["grounding_supports"])
    assert run([merged]) == streams.expected_pieces("plain")


def test_hostile_title_and_url_are_kept_verbatim() -> None:
    citations = [p for p in run([streams.invoke_message("plain")]) if not isinstance(p, str)]
    assert citations[-1].title == '<img src=x onerror="alert(1)"> Zoë’s notes'
    assert citations[-1].url == "javascript:alert(document.cookie)"


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_chunking_does_not_change_the_result(data: st.DataObject) -> None:
    answer = data.draw(st.sampled_from(ANSWERS))
    message = streams.invoke_message(answer)
    text = message.text
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=len(text)))))
    bounds = [0, *cuts, len(text)]
    chunks = [AIMessageChunk(content=text[a:b]) for a, b in itertools.pairwise(bounds)]
    chunks.append(AIMessageChunk(content="", response_metadata=dict(message.response_metadata)))
    assert run(chunks) == streams.expected_pieces(answer)


_TEXT = st.text(
    alphabet=st.sampled_from(["a", " ", ".", "é", "—", "中", "🏆", "\n"]), min_size=1, max_size=30
)


@settings(max_examples=200, deadline=None)
@given(_TEXT, st.data())
def test_byte_offsets_become_character_offsets(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    encoded = text.encode("utf-8")
    byte_start = len(text[:start].encode("utf-8"))
    byte_end = len(text[:end].encode("utf-8"))
    assert char_offset(text, byte_end) == end
    assert encoded[byte_start:byte_end].decode("utf-8") == text[start:end]
    # Whatever the segment's text, the offsets that select it win.
    assert span_end(text, byte_start, byte_end, text[start:end], utf8=True) == end
    metadata: dict[str, Any] = {
        "grounding_chunks": [{"web": {"uri": "https://s.org/", "title": "s"}}],
        "grounding_supports": [
            {
                "segment": {"start_index": byte_start, "end_index": byte_end},
                "grounding_chunk_indices": [0],
            }
        ],
    }
    pieces = run([AIMessage(content=text, response_metadata={"grounding_metadata": metadata})])
    cite = NativeCitation(
        provider="gemini", source="https://s.org/", url="https://s.org/", title="s"
    )
    assert pieces == coalesce([text[:end], cite, text[end:]])


def test_offset_inside_a_character_falls_back_to_its_start() -> None:
    assert char_offset("a🏆b", 3) == 1
    assert char_offset("a🏆b", 5) == 2
    assert char_offset("a🏆b", 99) == 3


def test_wrong_offsets_are_corrected_by_the_segment_text() -> None:
    """Offsets of another part (or characters taken for bytes) still find the segment."""
    text = "Zoë ran. Zoë swam."
    metadata = {
        "grounding_chunks": [{"web": {"uri": "https://s.org/", "title": "s"}}],
        "grounding_supports": [
            {
                "segment": {"part_index": 1, "start_index": 0, "end_index": 9, "text": "Zoë swam."},
                "grounding_chunk_indices": [0, 7],
            }
        ],
    }
    pieces = run([AIMessage(content=text, response_metadata={"grounding_metadata": metadata})])
    assert [p if isinstance(p, str) else p.source for p in pieces] == [text, "https://s.org/"]


def test_retrieved_context_and_unnamed_chunks() -> None:
    metadata = {
        "grounding_chunks": [
            {
                "retrieved_context": {
                    "document_name": "projects/p/docs/d1",
                    "text": "Q",
                    "title": "T",
                }
            },
            {"image": None, "web": None},
        ],
        "grounding_supports": [
            {"segment": {"end_index": 2}, "grounding_chunk_indices": [1]},
            {"segment": {"end_index": 2}, "grounding_chunk_indices": [0]},
        ],
    }
    pieces = run([AIMessage(content="ab cd", response_metadata={"grounding_metadata": metadata})])
    assert pieces == [
        "ab",
        NativeCitation(provider="gemini", source="projects/p/docs/d1", title="T", cited_text="Q"),
        " cd",
    ]


def test_without_metadata_the_text_is_returned() -> None:
    assert run([AIMessageChunk(content="a"), AIMessageChunk(content="b")]) == ["ab"]
    assert run([]) == []


def test_matches() -> None:
    assert GeminiAdapter.matches(
        AIMessage("x", response_metadata={"model_provider": "google_genai"})
    )
    assert GeminiAdapter.matches(AIMessage("x", response_metadata={"grounding_metadata": {"a": 1}}))
    assert not GeminiAdapter.matches(AIMessage("x"))


def test_rejects_non_messages() -> None:
    with pytest.raises(UnsupportedMessageError):
        GeminiAdapter().feed({"content": "x"})


@pytest.mark.parametrize(
    "bad",
    [
        {"segment": {"start_index": 0, "end_index": 3, "text": ["Zoë"]}},
        {"segment": {"start_index": [0], "end_index": 3}},
        {"segment": {"start_index": 0, "end_index": {"x": 1}}},
        {"segment": {"part_index": [0], "end_index": 3}},
        {"segment": {"end_index": 3}, "grounding_chunk_indices": 0},
        {"segment": {"end_index": 3}, "grounding_chunk_indices": [[0]]},
    ],
)
def test_a_malformed_support_is_dropped_and_the_answer_kept(
    bad: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    bad.setdefault("grounding_chunk_indices", [0])
    metadata = {
        "grounding_chunks": [{"web": {"uri": "https://a.org/", "title": "a.org"}}],
        "grounding_supports": [
            bad,
            {"segment": {"start_index": 0, "end_index": 9}, "grounding_chunk_indices": [0]},
        ],
    }
    message = AIMessage("Zoë ran. Then?", response_metadata={"grounding_metadata": metadata})
    with caplog.at_level("WARNING", logger="langchain_references.native.gemini"):
        pieces = run([message])
    assert pieces == [
        "Zoë ran.",
        NativeCitation(
            provider="gemini", source="https://a.org/", url="https://a.org/", title="a.org"
        ),
        " Then?",
    ]
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "malformed Gemini grounding support dropped"
    ]


def test_malformed_metadata_lists_keep_the_answer() -> None:
    metadata = {"grounding_chunks": "x", "grounding_supports": 7}
    message = AIMessage("Zoë ran.", response_metadata={"grounding_metadata": metadata})
    assert run([message]) == ["Zoë ran."]
