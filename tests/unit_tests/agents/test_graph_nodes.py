"""A LangGraph node that calls ``manage_references(prompt | model)``: every stream mode.

With ``stream_mode="messages"`` the reader sees the rewritten answer token by token (never the
raw ``[n](id=k)`` markers), each piece once, the last chunk carrying the references; whether
the node invokes or streams the chain, sync or async.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from langchain_references import REFERENCES_EVENT, TextReferenceStyle, manage_references
from tests.unit_tests.fakes import AgentChatModel, RunCollector

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
