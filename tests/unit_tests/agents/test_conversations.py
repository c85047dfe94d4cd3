"""Citations across an agent's turns with a real checkpointer, by the wrapper and the middleware.

A checkpointer gives the earlier ToolMessages back with their artifact documents as dicts; the
documents of all three turns keep distinct, stable ids, and each answer numbers its sources
from 1. Real langchain ``create_agent``, real langgraph checkpointers (``InMemorySaver`` and
``langgraph-checkpoint-sqlite`` on a temporary file); the model is scripted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from langchain_references import ReferencesMiddleware, TextReferenceStyle, manage_references
from tests.unit_tests._snippets import run_snippets
from tests.unit_tests.agents.test_agents import NEEDLE, TOWER, ListRetriever, call
from tests.unit_tests.conftest import REPO_ROOT
from tests.unit_tests.fakes import AgentChatModel

RAIN = [Document("It rains 150 days a year.", metadata={"source": "https://rain.example"})]


def search_tool() -> Any:
    from langchain_core.tools import create_retriever_tool

    retriever = ListRetriever(corpus={"needle": NEEDLE, "tower": TOWER, "rain": RAIN})
    return create_retriever_tool(
        retriever, "search", "Search the documents.", response_format="content_and_artifact"
    )


#: The three turns: a question, the model's script, the answer the reader gets.
TURNS = [
    (
        "Where is the Needle?",
        [call("needle", "c1"), AIMessage("Seattle [1](id=1), opened 1962 [2](id=2).")],
        "Seattle [1], opened 1962 [2].\n\n"
        "- [1] https://needle.example\n- [2] https://history.example",
    ),
    (
        "And the tower?",
        [call("tower", "c2"), AIMessage("Paris [1](id=3), 184 m [2](id=4), Seattle [3](id=1).")],
        "Paris [1], 184 m [2], Seattle [2].\n\n"
        "- [1] https://tower.example\n- [2] https://needle.example",
    ),
    (
        "Does it rain?",
        [call("rain", "c3"), AIMessage("Rain [1](id=5), Paris [2](id=3), 1962 [3](id=2).")],
        "Rain [1], Paris [2], 1962 [3].\n\n"
        "- [1] https://rain.example\n- [2] https://tower.example\n- [3] https://history.example",
    ),
]
#: response_metadata["references"] of each turn's answer (positions are document ids).
REFERENCES = [
    [(1, "https://needle.example", [1]), (2, "https://history.example", [2])],
    [(1, "https://tower.example", [3]), (2, "https://needle.example", [4, 1])],
    [
        (1, "https://rain.example", [5]),
        (2, "https://tower.example", [3]),
        (3, "https://history.example", [2]),
    ],
]


def build(form: str, checkpointer: Any, model: AgentChatModel) -> Any:
    style = TextReferenceStyle()
    if form == "wrapper":
        wrapped = manage_references(model, style=style)
        return create_agent(wrapped, tools=[search_tool()], checkpointer=checkpointer)
    middleware = [ReferencesMiddleware(style=style)]
    return create_agent(
        model, tools=[search_tool()], checkpointer=checkpointer, middleware=middleware
    )


@contextmanager
def saver(kind: str, tmp_path: Path) -> Iterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as sqlite:
            yield sqlite


@asynccontextmanager
async def asaver(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.sqlite")) as sqlite:
            yield sqlite


def shown_ids(model: AgentChatModel) -> list[int]:
    """The document ids the model was shown in its last call, in conversation order."""
    return [int(i) for m in model.calls[-1] for i in re.findall(r"<document id=(\d+)>", m.text)]


def summary(message: Any) -> list[tuple[int, str, list[int]]]:
    return [
        (ref["number"], ref["source"], ref["positions"])
        for ref in message.response_metadata["references"]
    ]


def answer_tokens(stream: Any) -> list[AIMessageChunk]:
    tokens = [
        m
        for m, meta in stream
        if meta["langgraph_node"] == "model" and isinstance(m, AIMessageChunk)
    ]
    return [t for t in tokens if t.id == tokens[-1].id]


def model_for_turns() -> AgentChatModel:
    return AgentChatModel(script=[step for _, script, _ in TURNS for step in script])


FORMS = ["wrapper", "middleware"]
SAVERS = ["memory", "sqlite"]


@pytest.mark.parametrize("kind", SAVERS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mode", ["invoke", "messages"])
def test_three_turns_cite_documents_of_all_turns_with_stable_ids(
    form: str, kind: str, mode: str, tmp_path: Path
) -> None:
    model = model_for_turns()
    config = {"configurable": {"thread_id": "t"}}
    with saver(kind, tmp_path) as checkpointer:
        agent = build(form, checkpointer, model)
        for turn, (question, _, expected) in enumerate(TURNS):
            inputs = {"messages": [HumanMessage(question)]}
            if mode == "invoke":
                last = agent.invoke(inputs, config)["messages"][-1]
            else:
                tokens = answer_tokens(agent.stream(inputs, config, stream_mode="messages"))
                assert "".join(t.text for t in tokens) == expected
                assert not any("(id=" in t.text for t in tokens)
                last = agent.get_state(config).values["messages"][-1]
            assert last.content == expected
            assert summary(last) == REFERENCES[turn]
            assert shown_ids(model) == [[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5]][turn]
        assert model.script == []


@pytest.mark.parametrize("kind", SAVERS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mode", ["ainvoke", "amessages"])
async def test_three_turns_async(form: str, kind: str, mode: str, tmp_path: Path) -> None:
    model = model_for_turns()
    config = {"configurable": {"thread_id": "t"}}
    async with asaver(kind, tmp_path) as checkpointer:
        agent = build(form, checkpointer, model)
        for turn, (question, _, expected) in enumerate(TURNS):
            inputs = {"messages": [HumanMessage(question)]}
            if mode == "ainvoke":
                last = (await agent.ainvoke(inputs, config))["messages"][-1]
            else:
                stream = agent.astream(inputs, config, stream_mode="messages")
                tokens = answer_tokens([item async for item in stream])
                assert "".join(t.text for t in tokens) == expected
                last = (await agent.aget_state(config)).values["messages"][-1]
            assert last.content == expected
            assert summary(last) == REFERENCES[turn]
            assert shown_ids(model) == [[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5]][turn]


def test_the_checkpointed_history_gives_dicts_back_and_the_ids_still_hold() -> None:
    """The case the wrapper missed: turn 2's earlier documents come back as plain dicts."""
    model = model_for_turns()
    config = {"configurable": {"thread_id": "t"}}
    agent = build("wrapper", InMemorySaver(), model)
    agent.invoke({"messages": [HumanMessage(TURNS[0][0])]}, config)
    history = agent.get_state(config).values["messages"]
    artifact = next(m for m in history if m.type == "tool").artifact
    assert all(isinstance(item, dict) for item in artifact)  # not Documents any more
    last = agent.invoke({"messages": [HumanMessage(TURNS[1][0])]}, config)["messages"][-1]
    assert last.content == TURNS[1][2]


@pytest.mark.parametrize("form", FORMS)
def test_earlier_answers_in_the_history_do_not_change_the_next_numbering(form: str) -> None:
    """Plain ``[k]`` markers: the rendered ``[1]``/``[2]`` of earlier answers are not re-read."""
    model = AgentChatModel(
        script=[
            call("needle", "c1"),
            AIMessage("Seattle [2], 1962 [1]."),
            call("tower", "c2"),
            AIMessage("Paris [3]."),
        ]
    )
    style = TextReferenceStyle()
    if form == "wrapper":
        agent = create_agent(
            manage_references(model, style=style, markers=("bracket",)),
            tools=[search_tool()],
            checkpointer=InMemorySaver(),
        )
    else:
        agent = create_agent(
            model,
            tools=[search_tool()],
            checkpointer=InMemorySaver(),
            middleware=[ReferencesMiddleware(style=style, markers=("bracket",))],
        )
    config = {"configurable": {"thread_id": "t"}}
    first = agent.invoke({"messages": [HumanMessage("a")]}, config)["messages"][-1]
    assert first.content == (
        "Seattle [1], 1962 [2].\n\n- [1] https://history.example\n- [2] https://needle.example"
    )
    second = agent.invoke({"messages": [HumanMessage("b")]}, config)["messages"][-1]
    assert second.content == "Paris [1].\n\n- [1] https://tower.example"
    assert summary(second) == [(1, "https://tower.example", [3])]


@pytest.mark.slow
def test_the_agents_page_prints_what_it_shows(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ```text block of docs/agents-and-langgraph.md is what its snippets print."""
    page = REPO_ROOT / "docs" / "agents-and-langgraph.md"
    monkeypatch.chdir(REPO_ROOT)
    run_snippets(page, "docs/agents-and-langgraph.md")
    printed = capsys.readouterr().out
    shown = re.findall(r"```text\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert len(shown) >= 4
    for block in shown:
        assert block in printed


@pytest.mark.parametrize("form", FORMS)
def test_an_invalid_document_in_an_artifact_is_skipped_and_the_answer_kept(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain_core.tools import tool

    @tool(response_format="content_and_artifact")
    def lookup(query: str) -> tuple[str, list[Document]]:
        """Look the query up."""
        broken = Document.model_construct(page_content=None, metadata={})
        return "two pages", [broken, RAIN[0]]

    model = AgentChatModel(
        script=[
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"query": "q"}, "id": "c1"}]),
            AIMessage("Rain [1](id=1)."),
        ]
    )
    style = TextReferenceStyle()
    if form == "wrapper":
        agent = create_agent(manage_references(model, style=style), tools=[lookup])
    else:
        agent = create_agent(model, tools=[lookup], middleware=[ReferencesMiddleware(style=style)])
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        last = agent.invoke({"messages": [HumanMessage("q")]})["messages"][-1]
    assert last.content == "Rain [1].\n\n- [1] https://rain.example"
    assert [r.getMessage() for r in caplog.records] == [
        "Skipped item 0 of the artifact of tool call 'c1': page_content is NoneType, not text"
    ]
