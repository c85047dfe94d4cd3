"""A LangGraph node that calls ``manage_references(prompt | model)``: every stream mode.

With ``stream_mode="messages"`` the reader sees the rewritten answer token by token (never the
raw ``[n](id=k)`` markers), each piece once, the last chunk carrying the references; whether
the node invokes or streams the chain, sync or async.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any, TypedDict
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import (
    LC_ID_PREFIX,
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
)
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import LLMResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from langchain_references import REFERENCES_EVENT, TextReferenceStyle, manage_references
from tests.unit_tests.fakes import AgentChatModel, RunCollector, StreamingChatModel

DOCS = [
    Document("The Space Needle is in Seattle.", metadata={"source": "https://needle.example"}),
    Document("It opened in 1962.", metadata={"source": "https://history.example"}),
]
PROMPT = ChatPromptTemplate.from_messages([("system", "{documents}"), ("human", "{question}")])
ANSWER = "Seattle [4](id=1), since 1962 [5](id=2); tall [6](id=1)."
TEXT = (
    "Seattle [1], since 1962 [2]; tall [1].\n\n"
    "- [1] https://needle.example\n- [2] https://history.example"
)


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]


def graph(how: str, *, parser: bool = False) -> Any:
    """A one-node graph whose node calls the chain in one of the four ways."""
    model = AgentChatModel(script=[AIMessage(ANSWER)])
    chain = manage_references(
        PROMPT | model | StrOutputParser() if parser else PROMPT | model,
        style=TextReferenceStyle(),
    )
    request = {"documents": DOCS, "question": "Tell me"}

    def node(state: State) -> dict[str, Any]:
        if how == "invoke":
            return {"messages": [chain.invoke(request)]}
        out: Any = None
        for chunk in chain.stream(request):
            out = chunk if out is None else out + chunk
        return {"messages": [out]}

    async def anode(state: State) -> dict[str, Any]:
        if how == "ainvoke":
            return {"messages": [await chain.ainvoke(request)]}
        out: Any = None
        async for chunk in chain.astream(request):
            out = chunk if out is None else out + chunk
        return {"messages": [out]}

    builder = StateGraph(State)
    builder.add_node("answer", node if not how.startswith("a") else anode)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile()


QUESTION = {"messages": [HumanMessage("Tell me")]}


def check_tokens(messages: list[tuple[Any, dict[str, Any]]]) -> None:
    tokens = [m for m, meta in messages if meta["langgraph_node"] == "answer"]
    assert all(isinstance(t, AIMessageChunk) for t in tokens)
    texts = [t.text for t in tokens]
    assert len([t for t in texts if t]) >= 10  # token by token
    assert not any("id=" in t or "](" in t for t in texts)  # never the raw markers
    assert "".join(texts) == TEXT  # each piece once, in order
    assert len({t.id for t in tokens}) == 1
    assert [r["number"] for r in tokens[-1].response_metadata["references"]] == [1, 2]


@pytest.mark.parametrize("how", ["invoke", "stream"])
def test_messages_mode_streams_rewritten_tokens(how: str) -> None:
    check_tokens(list(graph(how).stream(QUESTION, stream_mode="messages")))


@pytest.mark.parametrize("how", ["ainvoke", "astream"])
async def test_messages_mode_streams_rewritten_tokens_async(how: str) -> None:
    how = how[1:]
    compiled = graph("a" + how)
    check_tokens([item async for item in compiled.astream(QUESTION, stream_mode="messages")])


@pytest.mark.parametrize("how", ["invoke", "stream"])
def test_updates_and_values_hold_the_rewritten_message(how: str) -> None:
    updates = list(graph(how).stream(QUESTION, stream_mode="updates"))
    assert [u["answer"]["messages"][0].text for u in updates] == [TEXT]
    values = list(graph(how).stream(QUESTION, stream_mode="values"))
    assert [v["messages"][-1].text for v in values] == ["Tell me", TEXT]
    assert graph(how).invoke(QUESTION)["messages"][-1].text == TEXT


async def test_astream_events_and_the_references_event() -> None:
    events = [e async for e in graph("ainvoke").astream_events(QUESTION, version="v2")]
    custom = [e for e in events if (e["event"], e["name"]) == ("on_custom_event", REFERENCES_EVENT)]
    assert [[r["source"] for r in e["data"]["references"]] for e in custom] == [
        ["https://needle.example", "https://history.example"]
    ]
    final = [e for e in events if e["event"] == "on_chain_end" and e["name"] == "LangGraph"]
    assert final[-1]["data"]["output"]["messages"][-1].text == TEXT


def test_a_string_chain_streams_its_rewritten_text_as_message_tokens() -> None:
    # prompt | model | StrOutputParser: the relay makes the rewritten text chat tokens
    messages = list(graph("stream", parser=True).stream(QUESTION, stream_mode="messages"))
    tokens = [m for m, meta in messages if meta["langgraph_node"] == "answer"]
    assert "".join(t.text for t in tokens) == TEXT
    assert len(tokens) >= 10
    assert not any("id=" in t.text for t in tokens)
    (relay_id,) = {t.id for t in tokens}  # the tokens of one message: the relay run's id
    assert relay_id.startswith("lc_run-")


def test_outside_a_graph_nothing_is_relayed_and_nothing_tagged() -> None:
    model = AgentChatModel(script=[AIMessage(ANSWER)])
    chain = manage_references(PROMPT | model, style=TextReferenceStyle())
    collector = RunCollector()
    out = chain.invoke({"documents": DOCS, "question": "q"}, {"callbacks": [collector]})
    assert out.text == TEXT
    runs, todo = [], list(collector.runs)
    while todo:
        run = todo.pop()
        runs.append(run)
        todo.extend(run.child_runs)
    assert sorted(run.run_type for run in runs) == ["chain", "chain", "llm", "prompt"]
    assert all("nostream" not in (run.tags or []) for run in runs)


class ChatRuns(BaseCallbackHandler):
    """Records each chat model run as a handler (a tracer such as Langfuse) sees it."""

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self.runs[run_id] = {
            "serialized": serialized,
            "name": kwargs.get("name"),
            "tags": kwargs.get("tags") or [],
            "tokens": [],
        }

    def on_llm_new_token(self, token: str, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["tokens"].append(token)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["end"] = response.generations[0][0].message  # type: ignore[attr-defined]

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["error"] = error

    def relayed(self) -> tuple[UUID, dict[str, Any]]:
        """The one chat model run of the wrapper (the wrapped model's runs are tagged)."""
        ((run_id, run),) = [(k, r) for k, r in self.runs.items() if "nostream" not in r["tags"]]
        return run_id, run


def node_graph(node: Callable[..., Any]) -> Any:
    """A one-node graph running ``node`` (sync or async)."""
    builder = StateGraph(State)
    builder.add_node("answer", node)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile()


def answer_tokens(messages: list[tuple[Any, dict[str, Any]]]) -> list[Any]:
    return [m for m, meta in messages if meta["langgraph_node"] == "answer"]


@pytest.mark.parametrize("how", ["stream", "astream"])
async def test_handlers_see_the_relay_as_a_chat_model_run_named_after_the_wrapper(
    how: str,
) -> None:
    runs = ChatRuns()
    config: Any = {"callbacks": [runs]}
    [m async for m in graph(how).astream(QUESTION, config, stream_mode="messages")]
    _, run = runs.relayed()
    name = "ManageReferences[RunnableSequence]"
    assert (run["serialized"], run["name"]) == ({"name": name}, name)
    assert "".join(run["tokens"]) == TEXT
    assert all(type(token) is not list for token in run["tokens"])
    assert run["end"].text == TEXT


def test_the_tokens_of_content_blocks_are_their_text() -> None:
    blocks = [[{"type": "text", "text": p, "index": 0}] for p in ["Seattle [4", "](id=1)."]]
    model = StreamingChatModel(chunks=[AIMessageChunk(content=b) for b in blocks])
    chain = manage_references(PROMPT | model, style=TextReferenceStyle())
    request = {"documents": DOCS, "question": "q"}
    runs = ChatRuns()

    def node(state: State) -> dict[str, Any]:
        return {"messages": [chain.invoke(request)]}

    list(node_graph(node).stream(QUESTION, {"callbacks": [runs]}, stream_mode="messages"))
    _, run = runs.relayed()
    assert run["tokens"] == ["Seattle", " [1].", "\n\n- [1] https://needle.example"]


def failing_source() -> Runnable[Any, str]:
    """A string stream that breaks after its first token."""

    def gen(_: Iterator[Any]) -> Iterator[str]:
        yield "Seattle [4](id=1)"
        raise ConnectionError("stream cut")

    async def agen(_: AsyncIterator[Any]) -> AsyncIterator[str]:
        yield "Seattle [4](id=1)"
        raise ConnectionError("stream cut")

    return RunnableGenerator(gen, agen)


def test_a_failing_answer_fails_the_relayed_run_with_its_error() -> None:
    chain = manage_references(failing_source(), style=TextReferenceStyle())
    request = {"documents": DOCS}

    def node(state: State) -> dict[str, Any]:
        return {"messages": [chain.invoke(request)]}

    runs = ChatRuns()
    with pytest.raises(ConnectionError, match="stream cut") as caught:
        list(node_graph(node).stream(QUESTION, {"callbacks": [runs]}, stream_mode="messages"))
    _, run = runs.relayed()
    assert run["error"] is caught.value
    assert run["tokens"] == ["Seattle [1]"]
    assert "end" not in run


async def test_a_failing_answer_fails_the_relayed_run_with_its_error_async() -> None:
    chain = manage_references(failing_source(), style=TextReferenceStyle())
    request = {"documents": DOCS}

    async def node(state: State) -> dict[str, Any]:
        return {"messages": [await chain.ainvoke(request)]}

    runs = ChatRuns()
    compiled = node_graph(node)
    with pytest.raises(ConnectionError, match="stream cut") as caught:
        await compiled.ainvoke(QUESTION, {"callbacks": [runs]}, stream_mode="messages")
    _, run = runs.relayed()
    assert run["error"] is caught.value
    assert run["tokens"] == ["Seattle [1]"]
    assert "end" not in run


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_a_whole_message_answer_reaches_the_messages_stream_once_rewritten(how: str) -> None:
    chain = manage_references(
        RunnableLambda(lambda _: AIMessage(ANSWER, id="m1")), style=TextReferenceStyle()
    )

    def node(state: State) -> dict[str, Any]:
        return {"messages": [chain.invoke({"documents": DOCS})]}

    async def anode(state: State) -> dict[str, Any]:
        return {"messages": [await chain.ainvoke({"documents": DOCS})]}

    compiled = node_graph(node if how == "invoke" else anode)
    messages = [m async for m in compiled.astream(QUESTION, stream_mode="messages")]
    (message,) = answer_tokens(messages)
    assert type(message) is AIMessage
    assert (message.content, message.id) == (TEXT, "m1")
    assert [r["number"] for r in message.response_metadata["references"]] == [1, 2]


@pytest.mark.parametrize("how", ["stream", "astream"])
async def test_an_empty_answer_reaches_the_messages_stream_as_one_empty_message(how: str) -> None:
    chain = manage_references(RunnableLambda(lambda _: ""))

    def node(state: State) -> dict[str, Any]:
        assert list(chain.stream({"documents": DOCS})) == []
        return {"messages": []}

    async def anode(state: State) -> dict[str, Any]:
        assert [c async for c in chain.astream({"documents": DOCS})] == []
        return {"messages": []}

    runs = ChatRuns()
    compiled = node_graph(node if how == "stream" else anode)
    config: Any = {"callbacks": [runs]}
    messages = [m async for m in compiled.astream(QUESTION, config, stream_mode="messages")]
    run_id, _ = runs.relayed()
    (message,) = answer_tokens(messages)
    assert (type(message), message.content, message.id) == (
        AIMessage,
        "",
        f"{LC_ID_PREFIX}-{run_id}",
    )


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_invoke_in_a_streaming_graph_returns_the_whole_message(how: str) -> None:
    # the answer is streamed to relay its tokens, and still returned as invoke returns it
    compiled = graph(how)
    items = [i async for i in compiled.astream(QUESTION, stream_mode=["messages", "updates"])]
    updates = [data for mode, data in items if mode == "updates"]
    ((message,),) = [u["answer"]["messages"] for u in updates]
    assert type(message) is AIMessage
    assert message.text == TEXT
    assert [r["number"] for r in message.response_metadata["references"]] == [1, 2]
    assert len([data for mode, data in items if mode == "messages"]) >= 10
