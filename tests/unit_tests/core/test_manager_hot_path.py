"""The drivers against the run's step, and the parser caches behind the ``str`` fast path.

Both drivers hand every chunk to the run's one step; these tests pin that the chunks they yield
are exactly those of the step alone, in both drivers, whatever the chunks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import Runnable, RunnableGenerator

from langchain_references import TextReferenceStyle, manage_references
from langchain_references.core._parser import _HELD, _HELD_SIZE, Citation, CitationParser
from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import ReferenceStyle
from langchain_references.manager import _Session, _Steps

DOCS = [Document(f"doc {i}", metadata={"source": f"https://e.org/{i % 3}"}) for i in range(4)]


class Text(str):
    """A str subclass, as some providers stream."""


def generator_of(chunks: list[Any]) -> Runnable[Any, Any]:
    def gen(_: Iterator[Any]) -> Iterator[Any]:
        yield from chunks

    async def agen(_: AsyncIterator[Any]) -> AsyncIterator[Any]:
        for chunk in chunks:
            yield chunk

    return RunnableGenerator(gen, agen)


def step_only(chunks: list[Any]) -> list[Any]:
    """What a run yields with every chunk going through the step alone."""
    session = _Session(ReferenceRewriter(DOCS, TextReferenceStyle()))
    step = session.step
    out = [o for o in map(step, chunks) if o is not None]
    return [*out, *session.closing()]


def comparable(outputs: list[Any]) -> list[Any]:
    return [o if isinstance(o, str) else (type(o), o.model_dump(exclude={"id"})) for o in outputs]


PIECES = st.sampled_from(
    [
        " text",
        "",
        "[",
        "[1",
        "](id=",
        "2)",
        "[2](id=3)",
        ").",
        "[x]",
        " [NUMBER](id=1) and",
        "id=9)",
        "[1](id=",
        "4",
    ]
)


@st.composite
def chunk_streams(draw: st.DrawFn) -> list[Any]:
    pieces = draw(st.lists(PIECES, max_size=30))
    wrap = draw(st.sampled_from(["str", "subclass", "mixed"]))
    if wrap == "str":
        return pieces
    if wrap == "subclass":
        return [Text(p) if i % 2 else p for i, p in enumerate(pieces)]
    return [AIMessageChunk(content=p, id="r") if i % 3 == 0 else p for i, p in enumerate(pieces)]


@settings(max_examples=200, deadline=None)
@given(chunk_streams())
def test_both_drivers_yield_what_the_step_alone_yields(chunks: list[Any]) -> None:
    wrapped = manage_references(generator_of(chunks), style=TextReferenceStyle())
    inp = {"documents": DOCS}

    async def astream() -> list[Any]:
        return [c async for c in wrapped.astream(inp)]

    expected = comparable(step_only(chunks))
    assert comparable(list(wrapped.stream(inp))) == expected
    assert comparable(asyncio.run(astream())) == expected


def test_plain_text_chunks_are_yielded_as_they_are() -> None:
    chunks = [" a", "", " b", "[1](id=1)", " c"]
    out = list(manage_references(generator_of(chunks)).stream({"documents": DOCS}))
    # plain text is yielded as the very object; an empty chunk carries nothing: not yielded
    assert [o is c for o, c in zip(out[:2], [chunks[0], chunks[2]], strict=True)] == [True, True]
    assert out[3] is chunks[4]


def test_the_drivers_table_takes_text_to_the_rewriter_and_the_rest_to_rewrite() -> None:
    session = _Session(ReferenceRewriter(DOCS, TextReferenceStyle()))
    steps = _Steps(session)
    # text, a str subclass included, goes straight to the rewriter's feed (one call per chunk)
    assert steps[str] == session.rewriter.feed
    assert steps[Text] == session.rewriter.feed
    assert steps[AIMessageChunk] == session.rewrite
    # the table is filled as classes come, each class's step looked up once
    assert list(steps) == [str, Text, AIMessageChunk]
    assert steps[str] is steps[str]
    # what the table's steps return is what step() returns, with "" for nothing yet
    chunks = [" a", "[1", "](id=2) b", AIMessageChunk(content=" c", id="r")]
    other = _Session(ReferenceRewriter(DOCS, TextReferenceStyle()))
    assert [steps[c.__class__](c) for c in chunks[:3]] == [" a", "", "[1] b"]
    assert [other.step(c) for c in chunks[:3]] == [" a", None, "[1] b"]
    assert steps[AIMessageChunk](chunks[3]).content == other.step(chunks[3]).content == " c"


def test_the_held_text_cache_is_bounded_and_does_not_change_results() -> None:
    _HELD.clear()
    for i in range(_HELD_SIZE + 10):
        parser = CitationParser()
        assert parser.feed(f"[{i}](id") == []
        assert parser.feed("=1)") == [Citation(str(i), 1, f"[{i}](id=1)")]
        assert len(_HELD) <= _HELD_SIZE
    parser = CitationParser()  # a cut seen before, after the cache was cleared
    assert parser.feed("[1") == []
    assert parser.feed("](id=1)") == [Citation("1", 1, "[1](id=1)")]
    assert parser.feed("[1](id=1)") == [Citation("1", 1, "[1](id=1)")]  # from the cache
    assert parser.feed("[1](id=x") == ["[1](id=x"]


class Counting(TextReferenceStyle):
    """Counts the calls of format_reference."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, str]] = []

    def format_reference(self, ref: int, media: Document) -> str | None:
        self.calls.append((ref, media.page_content))
        return super().format_reference(ref, media)


def test_a_document_cited_again_reuses_the_text_of_its_first_citation() -> None:
    style = Counting()
    rewriter = ReferenceRewriter(DOCS, style)
    text = "".join(rewriter.feed(p) for p in ["a [1](id=2)", " b [", "2](id=2)", " c [3](id=1)"])
    assert text == "a [1] b [1] c [2]"
    assert style.calls == [(1, "doc 1"), (2, "doc 0")]


class Refusing(TextReferenceStyle):
    """Refuses every citation (format_reference returns None)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def format_reference(self, ref: int, media: Document) -> str | None:
        self.calls += 1
        return None


def test_a_refused_citation_is_asked_again() -> None:
    style: ReferenceStyle = Refusing()
    rewriter = ReferenceRewriter(DOCS, style)
    # a refused citation takes the blank before it along (held back until what follows is known)
    assert rewriter.feed("a [1](id=2) b [1](id=2)") == "a b"
    assert rewriter.finish() == ""
    assert isinstance(style, Refusing)
    assert style.calls == 2
    assert rewriter.references == []


#: Documents of several sentences, so that a deep link's quote depends on the citing sentence.
DEEP_DOCS = [
    Document(
        "The tower is in Seattle. It opened for the fair in 1962. Its deck turns slowly.",
        metadata={"source": f"https://e.org/deep/{i % 2}"},
    )
    for i in range(3)
]
MESSAGE_PIECES = st.sampled_from(
    [
        *(" the tower", " opened", " for the fair", " its deck", " turns", ". ", ""),
        *("[", "[1", "](id=", "2)", "[2](id=3)", "[1](id=1)", " [x]", "id=9)"),
    ]
)


@st.composite
def message_streams(draw: st.DrawFn) -> list[Any]:
    """Message chunks of str content (ids present or not), now and then a list-content one."""
    chunks: list[Any] = []
    for i, piece in enumerate(draw(st.lists(MESSAGE_PIECES, max_size=30))):
        chunk_id = draw(st.sampled_from([None, "run-1", "run-2"]))
        if draw(st.integers(0, 9)) == 0:
            content: Any = [{"type": "text", "text": piece, "index": 0}]
        else:
            content = piece
        chunks.append(AIMessageChunk(content=content, id=chunk_id) if i % 7 else piece)
    return chunks


def session_for(deep: bool, native: str | None) -> _Session:
    from langchain_references import MarkdownReferenceStyle
    from langchain_references.native.stream import NativeRun

    session = _Session(ReferenceRewriter(DEEP_DOCS, MarkdownReferenceStyle(deep_links=deep)))
    if native is not None:
        session.native = NativeRun(native, session.rewriter, DEEP_DOCS, session.feed)
    return session


def test_plain_message_chunks_are_yielded_as_they_are() -> None:
    chunks = [AIMessageChunk(content=t, id="run-1") for t in (" a", " b", " [1](id=1)", " c")]
    out = list(manage_references(generator_of(chunks)).stream({"documents": DOCS}))
    assert [o is c for o, c in zip(out, chunks, strict=False)] == [True, True, False, True]


def test_message_chunks_of_blocks_without_a_citation_are_yielded_as_they_are() -> None:
    chunks = [
        AIMessageChunk(content=[], id="run-1"),
        AIMessageChunk(content=[{"type": "text", "text": " a", "index": 0}], id="run-1"),
        AIMessageChunk(content=[" b", {"type": "image", "url": "https://e.org/i.png"}]),
        AIMessageChunk(content=[{"type": "text", "text": " [1](id=1)", "index": 0}]),
        AIMessageChunk(content=[{"type": "text", "text": " c", "index": 0}], id="run-1"),
    ]
    out = list(manage_references(generator_of(chunks)).stream({"documents": DOCS}))
    assert [o is c for o, c in zip(out, chunks, strict=False)] == [True, True, True, False, True]


def test_a_held_back_message_chunk_is_yielded_only_if_it_carries_more_than_text() -> None:
    usage = {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}
    chunks = [
        AIMessageChunk(content=" a [1", id="run-1"),  # yields " a", holds " " and "[1"
        AIMessageChunk(content="](id", id="run-1"),  # all held, nothing else: not yielded
        AIMessageChunk(content="=2", id="run-1", usage_metadata=usage),  # held, but usage
        AIMessageChunk(content=")", id="run-1"),  # completes the citation
    ]
    out = list(
        manage_references(generator_of(chunks), style=TextReferenceStyle()).stream(
            {"documents": DOCS}
        )
    )
    assert [o.content for o in out[:-1]] == [" a", "", " [1]"]
    assert out[1].usage_metadata == usage
    assert all(o.id == "run-1" for o in out)
    whole = out[0]
    for o in out[1:]:
        whole = whole + o
    assert whole.content == " a [1]\n\n- [1] https://e.org/1"
