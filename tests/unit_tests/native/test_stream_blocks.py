"""``NativeRun`` on list content: which blocks it keeps, where the text goes, which index it has.

And when ``native="auto"`` decides a run has no adapter (which message contents count as text).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk

from langchain_references.native.stream import NativeRun, _has_text
from langchain_references.rewriter import ReferenceRewriter
from langchain_references.styles import TextReferenceStyle

WEB = {
    "type": "web_search_result_location",
    "url": "https://grass.example/",
    "title": "Grass",
    "cited_text": "Grass is green.",
    "encrypted_index": "e",
}
TOOL = {"type": "server_tool_use", "id": "t1", "name": "web_search", "input": {"query": "grass"}}
RESULT = {"type": "web_search_tool_result", "tool_use_id": "t1", "content": []}


def native_run(native: str = "anthropic") -> tuple[NativeRun, ReferenceRewriter]:
    rewriter = ReferenceRewriter([], TextReferenceStyle())
    return NativeRun(native, rewriter, [], rewriter.feed), rewriter


@pytest.mark.parametrize(
    "first", [{"type": "text", "text": "Let me check. "}, "Let me check. "], ids=["block", "str"]
)
def test_whole_message_gives_one_text_block_first_then_the_other_blocks_in_order(
    first: Any,
) -> None:
    """The text (of text blocks and str items) is rendered into one leading block, no index."""
    run, rewriter = native_run()
    cited = {"type": "text", "text": "Grass is green.", "citations": [WEB]}
    content = run.rewrite(AIMessage(content=[first, TOOL, RESULT, cited]))
    assert content == [
        {"type": "text", "text": "Let me check. Grass is green.[1]"},
        TOOL,
        RESULT,
    ]
    assert run.finish() == ""
    assert rewriter.finish() == "\n\n- [1] Grass (https://grass.example/)"


def test_a_message_of_text_only_gives_one_text_block() -> None:
    run, _rewriter = native_run()
    content = run.rewrite(
        AIMessage(content=[{"type": "text", "text": "Grass is green.", "citations": [WEB]}])
    )
    assert content == [{"type": "text", "text": "Grass is green.[1]"}]


def test_streamed_text_keeps_the_index_of_the_block_it_came_from() -> None:
    """Each chunk's rendered text carries the index of the last text block seen, so chunks
    merge back into one block per index; the tool blocks follow it, in order."""
    run, rewriter = native_run()
    chunks = [
        AIMessageChunk(content=[{"type": "text", "text": "Let me check. ", "index": 0}]),
        AIMessageChunk(content=[{**TOOL, "index": 1}]),
        AIMessageChunk(content=[{**RESULT, "index": 2}]),
        AIMessageChunk(content=[{"type": "text", "text": "Grass is green.", "index": 3}]),
        AIMessageChunk(content=[{"type": "text", "citations": [WEB], "index": 3}]),
        AIMessageChunk(
            content=[], chunk_position="last", response_metadata={"stop_reason": "end_turn"}
        ),
    ]
    assert [run.rewrite(chunk) for chunk in chunks] == [
        [],  # the block is held until it is known to be over
        [{"type": "text", "text": "Let me check.", "index": 0}, {**TOOL, "index": 1}],
        [{**RESULT, "index": 2}],
        [],
        [],
        [{"type": "text", "text": " Grass is green.[1]", "index": 3}],
    ]
    assert run.finish() == ""
    assert rewriter.finish() == "\n\n- [1] Grass (https://grass.example/)"


def test_auto_run_without_an_adapter_once_text_went_by_reads_no_later_chunk() -> None:
    """With ``native="auto"``, text before any provider sign means the run has no adapter:
    a later chunk with citations is left to the caller (None), not rendered."""
    run, _rewriter = native_run("auto")
    cited = AIMessageChunk(
        content=[{"type": "text", "text": "Grass is green.", "citations": [WEB], "index": 0}],
        response_metadata={"model_provider": "anthropic"},
    )
    assert run.rewrite(AIMessageChunk(content="Hello. ")) is None
    assert run.rewrite(cited) is None
    assert run.finish() == ""


def test_auto_run_picks_its_adapter_after_chunks_without_text() -> None:
    run, _rewriter = native_run("auto")
    cited = AIMessageChunk(
        content=[{"type": "text", "text": "Grass is green.", "citations": [WEB]}],
        response_metadata={"model_provider": "anthropic"},
    )
    assert run.rewrite(AIMessageChunk(content="", id="run-1")) is None
    assert run.rewrite(cited) == [{"type": "text", "text": "Grass is green.[1]"}]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", False),
        ("a", True),
        ([], False),
        ([""], False),
        (["a"], True),
        ([{"type": "text", "text": "a"}], True),
        ([{"type": "output_text", "text": "a"}], True),
        ([{"type": "text", "text": ""}], False),
        ([{"type": "text"}], False),
        ([{"type": "image", "text": "a"}], False),
        ([{"text": "a"}], False),
        ([{"type": "tool_use", "id": "t1"}, {"type": "text", "text": "b"}], True),
        ([{"type": "tool_use", "id": "t1"}, ""], False),
    ],
)
def test_has_text(content: str | list[Any], expected: bool) -> None:
    assert _has_text(content) is expected
