from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM, FakeStreamingListLLM
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.output_parsers import JsonOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda

from langchain_references import (
    REFERENCES_EVENT,
    HTMLReferenceStyle,
    MissingDocumentsError,
    TextReferenceStyle,
    format_documents,
    manage_references,
)
from tests.unit_tests.fakes import RunCollector, StreamingChatModel, text_chunks

DOCS = [
    Document("The Space Needle is in Seattle.", metadata={"source": "https://s.org", "title": "S"}),
    Document("It opened in 1962.", metadata={"source": "https://h.org"}),
    Document("Also about the needle.", metadata={"source": "https://s.org"}),
]
ANSWER = "The Space Needle is in Seattle [1](id=1)[2](id=3), built in 1962 [NUMBER](id=2)."
EXPECTED = (
    "The Space Needle is in Seattle [1][1], built in 1962 [2]."
    "\n\n- [1] S (https://s.org)\n- [2] https://h.org"
)


def chat_model(n: int = 1) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(ANSWER)] * n))


def chat_inputs(n: int = 1) -> list[dict[str, Any]]:
    return [{"documents": DOCS, "input": "q"} for _ in range(n)]


def text_of(chunks: list[Any]) -> str:
    return "".join(c if isinstance(c, str) else c.content for c in chunks)


def test_chat_model_six_modes_agree() -> None:
    style = TextReferenceStyle()
    wrapped = manage_references(chat_model(8), style=style)
    assert wrapped.invoke(chat_inputs()[0]).content == EXPECTED
    assert text_of(list(wrapped.stream(chat_inputs()[0]))) == EXPECTED
    assert [m.content for m in wrapped.batch(chat_inputs(2))] == [EXPECTED] * 2

    async def run_async() -> None:
        assert (await wrapped.ainvoke(chat_inputs()[0])).content == EXPECTED
        assert text_of([c async for c in wrapped.astream(chat_inputs()[0])]) == EXPECTED
        assert [m.content for m in await wrapped.abatch(chat_inputs(2))] == [EXPECTED] * 2

    asyncio.run(run_async())


@pytest.mark.parametrize("split", [1, 2, 3, 5, 7])
def test_stream_split_anywhere_gives_the_same_text(split: int) -> None:
    pieces = [ANSWER[i : i + split] for i in range(0, len(ANSWER), split)]
    model = StreamingChatModel(chunks=text_chunks(pieces))
    wrapped = manage_references(model, style=TextReferenceStyle())
    assert text_of(list(wrapped.stream(chat_inputs()[0]))) == EXPECTED


def test_chain_with_prompt_and_string_llm() -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "{context}"), ("human", "{question}")]
    ).partial()
    llm = FakeStreamingListLLM(responses=[ANSWER] * 6)
    chain = (
        RunnableLambda(lambda x: {**x, "context": format_documents(x["documents"])}) | prompt | llm
    )
    wrapped = manage_references(chain, style=TextReferenceStyle())
    inp = {"documents": DOCS, "question": "Where?"}
    assert wrapped.invoke(inp) == EXPECTED
    streamed = list(wrapped.stream(inp))
    assert all(isinstance(c, str) for c in streamed)
    assert len(streamed) > 3  # really streamed, char by char
    assert "".join(streamed) == EXPECTED

    async def run_async() -> None:
        assert await wrapped.ainvoke(inp) == EXPECTED
        assert "".join([c async for c in wrapped.astream(inp)]) == EXPECTED

    asyncio.run(run_async())


def test_bare_string_llm_reads_the_input_key() -> None:
    wrapped = manage_references(FakeListLLM(responses=[ANSWER] * 2), style=TextReferenceStyle())
    assert wrapped.invoke({"documents": DOCS, "input": "q"}) == EXPECTED
    assert "".join(wrapped.stream({"documents": DOCS, "input": "q"})) == EXPECTED


@pytest.mark.parametrize("output", [AIMessage(ANSWER), ANSWER])
def test_non_streaming_runnables(output: AIMessage | str) -> None:
    runnable = RunnableLambda(lambda _: output)
    wrapped = manage_references(runnable, style=TextReferenceStyle())
    inp = {"documents": DOCS}
    streamed = list(wrapped.stream(inp))
    if isinstance(output, str):
        streamed = ["".join(streamed)]
    results = [wrapped.invoke(inp), *streamed, asyncio.run(wrapped.ainvoke(inp))]
    assert len(results) == 3
    for result in results:
        assert type(result) is type(output)
        assert (result if isinstance(result, str) else result.content) == EXPECTED
    if isinstance(output, AIMessage):
        assert results[0].response_metadata["references"][0]["source"] == "https://s.org"


def test_list_content_blocks() -> None:
    chunks = [
        AIMessageChunk(content=[{"type": "text", "text": ANSWER[:35], "index": 0}]),
        AIMessageChunk(content=[{"type": "text", "text": ANSWER[35:], "index": 0}]),
    ]
    wrapped = manage_references(StreamingChatModel(chunks=chunks), style=TextReferenceStyle())
    streamed = list(wrapped.stream(chat_inputs()[0]))
    assert [c.content for c in streamed] == [  # blocks stay blocks, the closing one too
        [{"type": "text", "text": "The Space Needle is in Seattle", "index": 0}],
        [{"type": "text", "text": " [1][1], built in 1962 [2].", "index": 0}],
        [{"type": "text", "text": "\n\n- [1] S (https://s.org)\n- [2] https://h.org"}],
    ]
    merged = streamed[0]
    for chunk in streamed[1:]:
        merged = merged + chunk
    text = "".join(b["text"] if isinstance(b, dict) else b for b in merged.content)
    assert text == EXPECTED
    invoked = wrapped.invoke(chat_inputs()[0])
    assert "".join(b["text"] for b in invoked.content) == EXPECTED


def test_metadata_usage_and_tool_call_chunks_survive() -> None:
    chunks = text_chunks(
        [ANSWER[:33], ANSWER[33:]],
        id="run-42",
        response_metadata={"model_name": "m"},
    )
    chunks.append(
        AIMessageChunk(
            content="",
            usage_metadata={"input_tokens": 3, "output_tokens": 5, "total_tokens": 8},
            tool_call_chunks=[{"name": "f", "args": '{"a": 1}', "id": "c1", "index": 0}],
        )
    )
    wrapped = manage_references(StreamingChatModel(chunks=chunks), style=TextReferenceStyle())
    streamed = list(wrapped.stream(chat_inputs()[0]))
    merged = streamed[0]
    for chunk in streamed[1:]:
        merged = merged + chunk
    assert merged.content == EXPECTED
    assert merged.id == "run-42"
    assert merged.usage_metadata == {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
    assert merged.tool_call_chunks[0]["name"] == "f"
    assert merged.tool_calls[0]["args"] == {"a": 1}
    assert merged.response_metadata["model_name"] == "m"
    assert merged.response_metadata["references"] == [
        {"number": 1, "source": "https://s.org", "title": "S", "positions": [1, 3]},
        {"number": 2, "source": "https://h.org", "title": None, "positions": [2]},
    ]
    invoked = wrapped.invoke(chat_inputs()[0])
    assert invoked.usage_metadata == {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
    assert invoked.response_metadata["references"] == merged.response_metadata["references"]


def test_missing_documents_key_names_the_key() -> None:
    wrapped = manage_references(RunnableLambda(lambda _: "x"), documents_key="docs")
    with pytest.raises(MissingDocumentsError) as caught:
        wrapped.invoke({"documents": DOCS})
    assert str(caught.value) == (  # the message as written, not quoted as a KeyError's key
        "manage_references() input has no 'docs' key: pass the list of Documents put in the "
        "prompt under 'docs' (keys found: ['documents'])"
    )
    assert str(MissingDocumentsError()) == ""
    with pytest.raises(KeyError):
        list(wrapped.stream({"question": "q"}))


def test_bad_documents_and_inputs() -> None:
    wrapped = manage_references(RunnableLambda(lambda _: "x"))
    with pytest.raises(TypeError, match="list of Documents"):
        wrapped.invoke({"documents": "not a list"})
    with pytest.raises(TypeError, match="not a Document"):
        wrapped.invoke({"documents": ["text"]})
    with pytest.raises(TypeError, match="dict"):
        wrapped.invoke("just a string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Runnable"):
        manage_references(lambda x: x)  # type: ignore[arg-type]


def test_non_text_output_raises_a_clear_type_error() -> None:
    chain = RunnableLambda(lambda _: '{"a": 1}') | JsonOutputParser()
    wrapped = manage_references(chain)
    with pytest.raises(TypeError, match="outputs text"):
        wrapped.invoke({"documents": DOCS})
    with pytest.raises(TypeError, match="outputs text"):
        list(wrapped.stream({"documents": DOCS}))


def test_no_valid_citation_and_empty_answer() -> None:
    for answer in ["Nothing cited [1] here.", ""]:
        wrapped = manage_references(RunnableLambda(lambda _, a=answer: a))
        assert wrapped.invoke({"documents": DOCS}) == answer
        assert "".join(wrapped.stream({"documents": DOCS})) == answer


def test_default_style_is_markdown() -> None:
    wrapped = manage_references(RunnableLambda(lambda _: "x [1](id=2)"))
    assert wrapped.invoke({"documents": DOCS}) == (
        "x <sup>[[1](https://h.org)]</sup>\n\n- **1** [https://h.org](https://h.org)"
    )  # the seed's format: the inline link is the plain source URL (deep links are opt-in)


def test_wrapped_runnable_is_a_child_run() -> None:
    tracer = RunCollector()
    wrapped = manage_references(chat_model(2), style=HTMLReferenceStyle())
    wrapped.invoke(chat_inputs()[0], {"callbacks": [tracer]})
    list(wrapped.stream(chat_inputs()[0], {"callbacks": [tracer]}))
    assert len(tracer.runs) == 2
    for root in tracer.runs:
        assert root.name.startswith("ManageReferences")
        assert [child.run_type for child in root.child_runs] == ["llm"]


class EventCatcher(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data))


def test_references_event_for_string_outputs() -> None:
    catcher = EventCatcher()
    wrapped = manage_references(RunnableLambda(lambda _: ANSWER), style=TextReferenceStyle())
    wrapped.invoke({"documents": DOCS}, {"callbacks": [catcher]})
    "".join(wrapped.stream({"documents": DOCS}, {"callbacks": [catcher]}))
    assert [name for name, _ in catcher.events] == [REFERENCES_EVENT] * 2
    for _, data in catcher.events:
        assert [r["number"] for r in data["references"]] == [1, 2]
        assert data["documents"] == [(1, DOCS[0]), (2, DOCS[1])]


def test_references_event_in_astream_events() -> None:
    wrapped = manage_references(RunnableLambda(lambda _: ANSWER), style=TextReferenceStyle())

    async def run() -> list[Any]:
        return [
            e["data"]
            async for e in wrapped.astream_events({"documents": DOCS}, version="v2")
            if e["event"] == "on_custom_event" and e["name"] == REFERENCES_EVENT
        ]

    (data,) = asyncio.run(run())
    assert [r["source"] for r in data["references"]] == ["https://s.org", "https://h.org"]


def test_references_event_reaches_bound_and_enclosing_handlers() -> None:
    """Handlers bound with with_config or given to an enclosing chain get the event too."""
    answer = RunnableLambda(lambda _: ANSWER)
    bound, outer = EventCatcher(), EventCatcher()
    wrapped = manage_references(answer, style=TextReferenceStyle()).with_config(callbacks=[bound])
    "".join(wrapped.stream({"documents": DOCS}))
    chain = RunnableLambda(lambda x: x) | manage_references(answer, style=TextReferenceStyle())
    chain.invoke({"documents": DOCS}, {"callbacks": [outer]})

    async def astream() -> None:
        async for _ in wrapped.astream({"documents": DOCS}):
            pass

    asyncio.run(astream())
    assert [name for name, _ in bound.events] == [REFERENCES_EVENT] * 2
    assert [name for name, _ in outer.events] == [REFERENCES_EVENT]


def test_references_event_is_not_dispatched_to_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a handler the event is not built nor dispatched; with one it is."""
    import langchain_references.manager as manager

    calls: list[str] = []

    def dispatch(name: str, data: Any, *, config: Any) -> None:
        calls.append(name)

    async def adispatch(name: str, data: Any, *, config: Any) -> None:
        calls.append("a" + name)

    monkeypatch.setattr(manager, "dispatch_custom_event", dispatch)
    monkeypatch.setattr(manager, "adispatch_custom_event", adispatch)
    wrapped = manage_references(RunnableLambda(lambda _: ANSWER), style=TextReferenceStyle())
    assert wrapped.invoke({"documents": DOCS}) == EXPECTED
    "".join(wrapped.stream({"documents": DOCS}))
    assert asyncio.run(wrapped.ainvoke({"documents": DOCS})) == EXPECTED
    assert calls == []
    wrapped.invoke({"documents": DOCS}, {"callbacks": [EventCatcher()]})
    asyncio.run(wrapped.ainvoke({"documents": DOCS}, {"callbacks": [EventCatcher()]}))
    assert calls == [REFERENCES_EVENT, "a" + REFERENCES_EVENT]


def test_async_path_uses_async_model_and_does_not_block_the_loop() -> None:
    trace: list[tuple[str, int]] = []
    pieces = [ANSWER[i : i + 4] for i in range(0, len(ANSWER), 4)]

    def model(tag: str) -> StreamingChatModel:
        return StreamingChatModel(
            chunks=text_chunks(pieces), async_delay=0.001, forbid_sync=True, trace=trace, tag=tag
        )

    async def run() -> list[str]:
        async def one(tag: str) -> str:
            wrapped = manage_references(model(tag), style=TextReferenceStyle())
            return text_of([c async for c in wrapped.astream(chat_inputs()[0])])

        return list(await asyncio.gather(*(one(t) for t in "abcd")))

    assert asyncio.run(run()) == [EXPECTED] * 4
    # The four streams progressed together: some chunk of every stream came before the
    # last chunk of the first stream to finish.
    first_done = min(max(i for i, (t, _) in enumerate(trace) if t == tag) for tag in "abcd")
    assert {t for t, _ in trace[:first_done]} == set("abcd")


def test_async_invoke_and_batch_use_async_model() -> None:
    model = StreamingChatModel(chunks=text_chunks([ANSWER]), forbid_sync=True)
    wrapped = manage_references(model, style=TextReferenceStyle())

    async def run() -> list[BaseMessage]:
        return [await wrapped.ainvoke(chat_inputs()[0]), *await wrapped.abatch(chat_inputs(2))]

    assert [m.content for m in asyncio.run(run())] == [EXPECTED] * 3


class AsyncEventCatcher(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.names: list[str] = []

    async def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.names.append(name)


def test_async_event() -> None:
    catcher = AsyncEventCatcher()
    wrapped = manage_references(chat_model(1), style=TextReferenceStyle())

    async def run() -> None:
        async for _ in wrapped.astream(chat_inputs()[0], {"callbacks": [catcher]}):
            pass

    asyncio.run(run())
    assert catcher.names == [REFERENCES_EVENT]
