"""The four drivers of manage_references() (stream, invoke and their async twins) agree."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda, RunnableParallel
from langchain_core.runnables.utils import AddableDict

from langchain_references import REFERENCES_EVENT, TextReferenceStyle, manage_references
from langchain_references.citations.streaming import StreamingCitationCheck
from langchain_references.citations.verifier import CitationVerifier
from tests.unit_tests.citations.test_streaming import ContainsJudge
from tests.unit_tests.fakes import StreamingChatModel, text_chunks

DOCS = [
    Document("The Space Needle is in Seattle.", metadata={"source": "https://s.org", "title": "S"}),
    Document("It opened in 1962.", metadata={"source": "https://h.org"}),
]
ANSWER = "The Needle is in Seattle [1](id=1). It opened in 1962 [7](id=2). Bad [3](id=9)."
EXPECTED = (
    "The Needle is in Seattle [1]. It opened in 1962 [2]. Bad."
    "\n\n- [1] S (https://s.org)\n- [2] https://h.org"
)
PIECES = [ANSWER[i : i + 3] for i in range(0, len(ANSWER), 3)]


class Text(str):
    """A str subclass, as some providers stream."""


def generator_of(chunks: list[Any]) -> Runnable[Any, Any]:
    """A runnable streaming the given chunks on both paths."""

    def gen(_: Iterator[Any]) -> Iterator[Any]:
        yield from chunks

    async def agen(_: AsyncIterator[Any]) -> AsyncIterator[Any]:
        for chunk in chunks:
            yield chunk

    return RunnableGenerator(gen, agen)


def text_of(outputs: list[Any]) -> str:
    parts = []
    for out in outputs:
        content = out if isinstance(out, str) else out.content
        if isinstance(content, list):
            content = "".join(b if isinstance(b, str) else b["text"] for b in content)
        parts.append(content)
    return "".join(parts)


def plain(outputs: list[Any]) -> list[Any]:
    """The outputs without the per-run message ids."""
    return [o if isinstance(o, str) else (type(o), o.model_dump(exclude={"id"})) for o in outputs]


SOURCES: dict[str, Callable[[], Runnable[Any, Any]]] = {
    "str stream": lambda: generator_of(PIECES),
    "str stream with empty and subclassed chunks": lambda: generator_of(
        [p for piece in PIECES for p in ("", Text(piece) if "[" in piece else piece)]
    ),
    "message chunks": lambda: StreamingChatModel(chunks=text_chunks(PIECES, id="run-1")),
    "list content": lambda: generator_of(
        [AIMessageChunk(content=[{"type": "text", "text": p, "index": 0}]) for p in PIECES]
    ),
    "whole message": lambda: RunnableLambda(lambda _: AIMessage(ANSWER)),
    "whole str": lambda: RunnableLambda(lambda _: ANSWER),
}
INPUT = {"documents": DOCS, "input": "q"}


def all_modes(wrapped: Runnable[Any, Any]) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        return {
            "astream": [c async for c in wrapped.astream(INPUT)],
            "ainvoke": await wrapped.ainvoke(INPUT),
        }

    return {
        "stream": list(wrapped.stream(INPUT)),
        "invoke": wrapped.invoke(INPUT),
        **asyncio.run(run()),
    }


@pytest.mark.parametrize("kind", list(SOURCES))
def test_sync_and_async_drivers_yield_the_same_chunks(kind: str) -> None:
    wrapped = manage_references(SOURCES[kind](), style=TextReferenceStyle())
    out = all_modes(wrapped)
    assert plain(out["stream"]) == plain(out["astream"])
    assert plain([out["invoke"]]) == plain([out["ainvoke"]])
    assert text_of(out["stream"]) == EXPECTED
    assert text_of([out["invoke"]]) == EXPECTED


@pytest.mark.parametrize("kind", ["message chunks", "list content", "whole message"])
def test_every_mode_reports_the_references_in_the_metadata(kind: str) -> None:
    out = all_modes(manage_references(SOURCES[kind](), style=TextReferenceStyle()))
    for mode in ("invoke", "ainvoke"):
        assert [r["number"] for r in out[mode].response_metadata["references"]] == [1, 2]
    for mode in ("stream", "astream"):
        assert [r["number"] for r in out[mode][-1].response_metadata["references"]] == [1, 2]


def test_invoking_a_runnable_that_returns_a_chunk_closes_it() -> None:
    chunk = AIMessageChunk(content=ANSWER, id="run-7")
    out = all_modes(manage_references(RunnableLambda(lambda _: chunk), style=TextReferenceStyle()))
    for mode in ("invoke", "ainvoke"):
        assert isinstance(out[mode], AIMessageChunk)
        assert out[mode].content == EXPECTED
        assert out[mode].id == "run-7"
        assert len(out[mode].response_metadata["references"]) == 2


def test_streamed_input_chunks_are_merged_in_both_drivers() -> None:
    upstream: RunnableParallel[Any] = RunnableParallel(
        documents=lambda _: DOCS, question=lambda _: "q"
    )
    chain = upstream | manage_references(generator_of(PIECES), style=TextReferenceStyle())
    assert "".join(chain.stream({})) == EXPECTED
    wrapped = manage_references(generator_of(PIECES), style=TextReferenceStyle())
    pieces = [AddableDict(question="q"), AddableDict(documents=DOCS)]
    assert "".join(wrapped.transform(iter(pieces))) == EXPECTED

    async def run() -> list[str]:
        async def agen() -> Any:
            for piece in pieces:
                yield piece

        return [
            "".join([c async for c in chain.astream({})]),
            "".join([c async for c in wrapped.atransform(agen())]),
        ]

    assert asyncio.run(run()) == [EXPECTED, EXPECTED]


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: list[str] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.names.append(name)


def failing_source() -> Runnable[Any, Any]:
    text = "Seattle [1](id=1)"  # no sentence end: nothing for a verifier to check yet

    def gen(_: Iterator[Any]) -> Iterator[str]:
        yield text
        raise RuntimeError("model broke")

    async def agen(_: AsyncIterator[Any]) -> AsyncIterator[str]:
        yield text
        raise RuntimeError("model broke")

    return RunnableGenerator(gen, agen)


def test_a_failing_source_fails_every_mode_without_a_references_event() -> None:
    wrapped = manage_references(failing_source())
    events = Events()
    config: Any = {"callbacks": [events]}
    with pytest.raises(RuntimeError, match="model broke"):
        list(wrapped.stream(INPUT, config))
    with pytest.raises(RuntimeError, match="model broke"):
        wrapped.invoke(INPUT, config)

    async def run() -> None:
        with pytest.raises(RuntimeError, match="model broke"):
            [c async for c in wrapped.astream(INPUT, config)]
        with pytest.raises(RuntimeError, match="model broke"):
            await wrapped.ainvoke(INPUT, config)

    asyncio.run(run())
    assert events.names == []


def test_a_non_text_chunk_fails_every_mode_alike() -> None:
    wrapped = manage_references(generator_of(["text ", 42]))

    async def run() -> None:
        with pytest.raises(TypeError, match=r"outputs text.*got int"):
            [c async for c in wrapped.astream(INPUT)]

    with pytest.raises(TypeError, match=r"outputs text.*got int"):
        list(wrapped.stream(INPUT))
    asyncio.run(run())


class NoJudge:
    """A verifier that never gets a complete sentence in these tests."""

    def verify(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called")

    async def averify(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called")


@pytest.mark.parametrize("leave", ["error", "early exit"])
def test_the_citation_check_is_cancelled_when_a_stream_ends_abruptly(
    leave: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled: list[bool] = []
    monkeypatch.setattr(StreamingCitationCheck, "cancel", lambda self: cancelled.append(True))
    source = failing_source() if leave == "error" else generator_of(["Seattle", " is", " big"])
    wrapped = manage_references(source, verifier=NoJudge())

    def sync() -> None:
        stream = wrapped.stream(INPUT)
        next(stream)
        if leave == "error":
            with pytest.raises(RuntimeError):
                next(stream)
        else:
            stream.close()  # type: ignore[attr-defined]

    async def run() -> None:
        stream = wrapped.astream(INPUT)
        await anext(stream)
        if leave == "error":
            with pytest.raises(RuntimeError):
                await anext(stream)
        else:
            await stream.aclose()  # type: ignore[attr-defined]

    sync()
    assert cancelled == [True]
    asyncio.run(run())
    assert cancelled == [True, True]


def test_the_references_event_comes_once_per_run_in_every_mode() -> None:
    events = Events()
    wrapped = manage_references(SOURCES["str stream"](), style=TextReferenceStyle())
    config: Any = {"callbacks": [events]}
    list(wrapped.stream(INPUT, config))
    wrapped.invoke(INPUT, config)

    async def run() -> None:
        [c async for c in wrapped.astream(INPUT, config)]
        await wrapped.ainvoke(INPUT, config)

    asyncio.run(run())
    assert events.names == [REFERENCES_EVENT] * 4


class AsyncOnlyVerifier(CitationVerifier):
    """Its sync ``verify`` fails: only an async run may check citations with it."""

    def verify(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the sync verify ran")


def test_the_async_drivers_check_citations_with_averify() -> None:
    wrapped = manage_references(
        generator_of(PIECES),
        style=TextReferenceStyle(),
        verifier=AsyncOnlyVerifier(ContainsJudge()),
    )

    async def run() -> tuple[list[Any], Any]:
        return [c async for c in wrapped.astream(INPUT)], await wrapped.ainvoke(INPUT)

    streamed, invoked = asyncio.run(run())
    assert text_of(streamed).startswith(EXPECTED)
    assert text_of([invoked]).startswith(EXPECTED)
    with pytest.raises(AssertionError, match="the sync verify ran"):
        list(wrapped.stream(INPUT))  # the sync driver does use verify
