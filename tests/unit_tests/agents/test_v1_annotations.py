"""LangChain v1 ``Citation`` annotations on the final message (``output_version="v1"``)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableGenerator, RunnableLambda

from langchain_references import MarkdownReferenceStyle, TextReferenceStyle, manage_references
from langchain_references.core._parser import CITATION_RE
from langchain_references.core.rewriter import CitedSpan, ReferenceRewriter
from tests.unit_tests.fakes import (
    AgentChatModel,
    ScriptedChatModel,
    StreamingChatModel,
    text_chunks,
)

DOCS = [
    Document("The Space Needle is in Seattle.", metadata={"source": "https://needle.example"}),
    Document("It opened in 1962.", metadata={"source": "https://history.example", "title": "H"}),
    Document("No link here.", metadata={"source": "notes.txt"}),
]
ANSWER = "Seattle [1](id=1), 1962 [2](id=2), notes [3](id=3), again [4](id=1)."
CONVERSATION = [
    HumanMessage("q"),
    AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "c"}]),
    ToolMessage("...", artifact=DOCS, tool_call_id="c"),
]
TEXT = (
    "Seattle [1], 1962 [2], notes [3], again [1].\n\n"
    "- [1] https://needle.example\n- [2] H (https://history.example)\n- [3] notes.txt"
)
WANT = [  # (marker, url, title, cited_text)
    ("[1]", "https://needle.example", None, "The Space Needle is in Seattle."),
    ("[2]", "https://history.example", "H", "It opened in 1962."),
    ("[3]", None, None, "No link here."),
    ("[1]", "https://needle.example", None, "The Space Needle is in Seattle."),
]


def seen(message: Any) -> list[tuple[Any, ...]]:
    """The annotations of a message's v1 text block, read back through ``content_blocks``."""
    (block,) = [b for b in message.content_blocks if b["type"] == "text"]
    assert block["text"] == message.text
    return [
        (
            message.text[a["start_index"] : a["end_index"]],
            a.get("url"),
            a.get("title"),
            a["cited_text"],
        )
        for a in block["annotations"]
        if a["type"] == "citation"
    ]


def joined(chunks: Any) -> Any:
    out = None
    for chunk in chunks:
        out = chunk if out is None else out + chunk
    return out


def test_the_chat_model_wrapper_annotates_invoke_and_stream() -> None:
    model = AgentChatModel(script=[AIMessage(ANSWER)] * 4)
    wrapped = manage_references(model, style=TextReferenceStyle(), output_version="v1")
    for message in (
        wrapped.invoke(CONVERSATION),
        joined(wrapped.stream(CONVERSATION)),
        asyncio.run(wrapped.ainvoke(CONVERSATION)),
    ):
        assert message.text == TEXT
        assert seen(message) == WANT


def test_markdown_markers_are_annotated_whole() -> None:
    model = AgentChatModel(script=[AIMessage("Seattle [1](id=1).")])
    style = MarkdownReferenceStyle()
    message = manage_references(model, style=style, output_version="v1").invoke(CONVERSATION)
    ((marker, url, _, _),) = seen(message)
    assert marker.startswith("<sup>[[1](https://needle.example")
    assert marker.endswith(")]</sup>")
    assert url == "https://needle.example"


def test_a_chain_of_message_chunks_and_a_whole_message_are_annotated() -> None:
    prompt = ChatPromptTemplate.from_messages([("human", "{question}")])
    request = {"documents": DOCS, "question": "q"}
    streaming = manage_references(
        prompt | AgentChatModel(script=[AIMessage(ANSWER)]),
        style=TextReferenceStyle(),
        output_version="v1",
    )
    assert seen(joined(streaming.stream(request))) == WANT
    whole = manage_references(
        prompt | ScriptedChatModel(script=[AIMessage(ANSWER)]),
        style=TextReferenceStyle(),
        output_version="v1",
    )
    message = whole.invoke(request)
    assert message.text == TEXT
    assert seen(message) == WANT


def test_without_v1_the_content_stays_a_string() -> None:
    model = AgentChatModel(script=[AIMessage(ANSWER)])
    message = manage_references(model, style=TextReferenceStyle()).invoke(CONVERSATION)
    assert message.content == TEXT


def test_a_provider_citation_keeps_its_quote() -> None:
    rewriter = ReferenceRewriter(DOCS, TextReferenceStyle(), track_spans=True)
    outside = Document("Far away.", metadata={"source": "https://far.example"})
    text = rewriter.feed("A [1](id=2) b ") + rewriter.cite(outside, quote="Far") + " c."
    assert text == "A [1] b [2] c."
    assert rewriter.spans == [
        CitedSpan(2, 5, DOCS[1], None),
        CitedSpan(8, 11, outside, "Far"),
    ]


def test_spans_are_kept_only_when_asked() -> None:
    plain = ReferenceRewriter(DOCS, TextReferenceStyle())
    assert plain.feed("A [1](id=2) b ") + plain.cite(DOCS[0]) == "A [1] b [2]"
    assert plain.spans == []
    tracked = ReferenceRewriter(DOCS, TextReferenceStyle(), track_spans=True)
    assert tracked.feed("A [1](id=2) b ") + tracked.cite(DOCS[0]) == "A [1] b [2]"
    assert tracked.spans == [CitedSpan(2, 5, DOCS[1], None), CitedSpan(8, 11, DOCS[0], None)]


PIECES = st.sampled_from(
    ["Text ", "[1](id=1)", "[2](id=2)", "[9](id=9)", " and ", "[", "x]", "(id=", "3)", ". "]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(PIECES, max_size=25), st.data())
def test_spans_mark_exactly_the_rendered_markers_however_the_text_is_split(
    pieces: list[str], data: st.DataObject
) -> None:
    answer = "".join(pieces)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(answer)), max_size=12)))
    fragments = [answer[a:b] for a, b in zip([0, *cuts], [*cuts, len(answer)], strict=True)]
    whole = ReferenceRewriter(DOCS, TextReferenceStyle(), track_spans=True)
    split = ReferenceRewriter(DOCS, TextReferenceStyle(), track_spans=True)
    text = whole.feed(answer) + whole.finish()
    assert "".join(split.feed(f) for f in fragments) + split.finish() == text
    assert split.spans == whole.spans
    markers = [text[s.start : s.end] for s in whole.spans]
    assert all(m.startswith("[") and m.endswith("]") for m in markers)
    numbers = {ref.number: ref.positions for ref in whole.references}
    for span, marker in zip(whole.spans, markers, strict=True):
        assert DOCS.index(span.document) + 1 in numbers[int(marker[1:-1])]
    cited = [m for m in CITATION_RE.finditer(answer) if 1 <= int(m["doc"]) <= len(DOCS)]
    assert len(whole.spans) == len(cited)


def test_spans_of_provider_citations_count_everything_written_before_them() -> None:
    rewriter = ReferenceRewriter(DOCS, TextReferenceStyle(), track_spans=True)
    far = Document("Far away.", metadata={"source": "https://far.example"})
    near = Document("Near.", metadata={"source": "https://near.example"})
    text = rewriter.feed("A ") + rewriter.cite(far, quote="Far")
    text += rewriter.feed(" b [1](id=1) c ") + rewriter.cite(near) + rewriter.cite(far)
    assert text == "A [1] b [2] c [3][1]"
    assert rewriter.spans == [
        CitedSpan(2, 5, far, "Far"),
        CitedSpan(8, 11, DOCS[0], None),
        CitedSpan(14, 17, near, None),
        CitedSpan(17, 20, far, None),
    ]
    assert [text[s.start : s.end] for s in rewriter.spans] == ["[1]", "[2]", "[3]", "[1]"]


def test_a_held_back_chunk_yields_no_empty_text_block() -> None:
    prompt = ChatPromptTemplate.from_messages([("human", "{question}")])
    model = StreamingChatModel(chunks=text_chunks(["Seattle ", "[1](", "id=1)", " rocks."]))
    chain = manage_references(prompt | model, style=TextReferenceStyle(), output_version="v1")
    chunks = list(chain.stream({"documents": DOCS, "question": "q"}))
    assert [[(b["type"], b["text"], b["index"]) for b in c.content] for c in chunks] == [
        [("text", "Seattle", 0)],
        [("text", " [1]", 0)],  # "[1](" was held back: no chunk for it
        [("text", " rocks.", 0)],
        [("text", "\n\n- [1] https://needle.example", 0)],
    ]


def test_a_whole_message_of_mixed_blocks_keeps_its_other_blocks_and_joins_its_text() -> None:
    image = {"type": "image", "url": "https://img.example/needle.png"}
    content = [
        "Seattle [1](id=1). ",  # a bare string block
        image,
        {"type": "text"},  # a text block without text
        {"type": "text", "text": "Since 1962 [2](id=2)."},
    ]
    chain = manage_references(
        RunnableLambda(lambda _: AIMessage(content=content)),  # type: ignore[arg-type]
        style=TextReferenceStyle(),
        output_version="v1",
    )
    message = chain.invoke({"documents": DOCS})
    assert message.content[0] == image
    assert [b["type"] for b in message.content] == ["image", "text"]
    assert message.text == (
        "Seattle [1]. Since 1962 [2].\n\n"
        "- [1] https://needle.example\n- [2] H (https://history.example)"
    )
    assert seen(message) == WANT[:2]


def test_the_annotation_title_is_the_title_of_the_reference_list() -> None:
    style = TextReferenceStyle()
    style.title_key = "name"
    docs = [
        Document("A.", metadata={"source": "https://a.example", "name": "Atlas"}),
        Document("B.", metadata={"source": "https://b.example", "name": 1984}),
        Document("C.", metadata={"source": "https://c.example", "title": "not the title key"}),
    ]
    answer = "A [1](id=1), B [2](id=2), C [3](id=3)."
    chain = manage_references(
        RunnableLambda(lambda _: AIMessage(answer)), style=style, output_version="v1"
    )
    message = chain.invoke({"documents": docs})
    assert message.text.endswith(
        "- [1] Atlas (https://a.example)\n- [2] 1984 (https://b.example)\n- [3] https://c.example"
    )
    assert [title for _, _, title, _ in seen(message)] == ["Atlas", "1984", None]


def stream_of(chunks: list[AIMessageChunk]) -> Any:
    """A chain streaming these message chunks, its references managed in v1."""

    def gen(_: Any) -> Any:
        yield from chunks

    return manage_references(
        RunnableGenerator(gen), style=TextReferenceStyle(), output_version="v1"
    )


REASONING = {"type": "reasoning", "reasoning": "Where is it?", "index": 0}
IMAGE = {"type": "image", "url": "https://img.example/needle.png", "index": 2}
CLOSED = "Seattle [1] rocks.\n\n- [1] https://needle.example"


def test_the_closing_block_joins_the_text_block_at_its_index() -> None:
    chunks = [
        AIMessageChunk(content=[REASONING]),
        AIMessageChunk(content=[{"type": "text", "text": "Seattle [1](", "index": 1}]),
        AIMessageChunk(content=[{"type": "text", "text": "id=1) rocks.", "index": 1}]),
        AIMessageChunk(content=[IMAGE]),  # a later block: its index is not the text's
    ]
    message = joined(stream_of(chunks).stream({"documents": DOCS}))
    assert [b["type"] for b in message.content] == ["reasoning", "text", "image"]
    assert (message.content[0], message.content[2]) == (REASONING, IMAGE)
    assert (message.content[1]["index"], message.text) == (1, CLOSED)
    assert seen(message) == WANT[:1]


def test_without_text_block_indexes_the_closing_block_has_none() -> None:
    # at index 0, it would merge into the reasoning block: the list lost from the text
    chunks = [
        AIMessageChunk(content=[REASONING]),
        AIMessageChunk(content=[{"type": "text", "text": "Seattle [1](id=1)"}]),
        AIMessageChunk(content=[{"type": "text", "text": " rocks."}]),
    ]
    message = joined(stream_of(chunks).stream({"documents": DOCS}))
    assert message.content[0] == REASONING
    assert message.text == CLOSED
    closing = message.content[-1]
    assert (closing["text"], "index" in closing) == ("\n\n- [1] https://needle.example", False)
    assert [a["url"] for a in closing["annotations"]] == ["https://needle.example"]
