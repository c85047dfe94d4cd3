"""``NativeRun`` on list content: which blocks it keeps, where the text goes, which index it has.

And when ``native="auto"`` decides a run has no adapter (which message contents count as text).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk

from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import MarkdownReferenceStyle, TextReferenceStyle
from langchain_references.native.stream import NativeRun, _has_text

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


def test_the_default_cite_passes_the_providers_cited_text_as_the_quote() -> None:
    """Without a ``cite`` of its own, the run cites through the rewriter with the citation's
    cited text, so a deep-linking style links the quoted passage inline."""
    rewriter = ReferenceRewriter([], MarkdownReferenceStyle(deep_links=True))
    run = NativeRun("anthropic", rewriter, [], rewriter.feed)
    web = {**WEB, "cited_text": "Grass in the meadow is green in spring."}
    content = run.rewrite(
        AIMessage(content=[{"type": "text", "text": "Grass is green.", "citations": [web]}])
    )
    assert content == [
        {
            "type": "text",
            "text": "Grass is green.<sup>[[1](https://grass.example/"
            "#:~:text=Grass%20in%20the%20meadow%20is%20green%20in%20spring.)]</sup>",
        }
    ]
    assert run.finish() == ""
    assert rewriter.finish() == "\n\n- **1** [Grass](https://grass.example/)"


def test_a_cite_given_renders_each_provider_citation_with_its_document_and_quote() -> None:
    """A ``cite`` passed in (the session's) replaces the rewriter's: it gets the cited
    document and the citation's cited text, and its return value is the marker."""
    rewriter = ReferenceRewriter([], TextReferenceStyle())
    calls: list[tuple[Document, str | None]] = []

    def cite(document: Document, quote: str | None) -> str:
        calls.append((document, quote))
        return f"<{document.metadata['source']}|{quote}>"

    run = NativeRun("anthropic", rewriter, [], rewriter.feed, cite)
    content = run.rewrite(
        AIMessage(content=[{"type": "text", "text": "Grass is green.", "citations": [WEB]}])
    )
    assert content == [
        {"type": "text", "text": "Grass is green.<https://grass.example/|Grass is green.>"}
    ]
    assert [(document.metadata["source"], quote) for document, quote in calls] == [
        ("https://grass.example/", "Grass is green.")
    ]
    assert rewriter.finish() == ""  # the rewriter numbered nothing


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


def test_a_run_is_idle_only_once_known_to_have_no_adapter() -> None:
    """``idle`` is a bool: False while ``native="auto"`` has not decided, or once an adapter
    is picked; True once text went by without one."""
    undecided, _rewriter = native_run("auto")
    assert undecided.idle is False
    assert undecided.rewrite(AIMessageChunk(content="", id="run-1")) is None
    assert undecided.idle is False  # no text yet: still undecided
    assert undecided.rewrite(AIMessageChunk(content="Hello. ")) is None
    assert undecided.idle is True
    picked, _rewriter = native_run("anthropic")
    assert picked.idle is False
    assert picked.rewrite(AIMessageChunk(content="Hello. ")) == "Hello."  # the blank held
    assert picked.idle is False


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
