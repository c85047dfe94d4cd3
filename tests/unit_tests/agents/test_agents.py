"""``manage_references(chat_model)`` inside ``create_agent`` (real langchain and langgraph).

The model is scripted (tests/unit_tests/fakes.py: it streams its replies three characters at a
time, so markers arrive split); everything else is the libraries' own code.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import create_retriever_tool, tool
from pydantic import BaseModel

from langchain_references import (
    REFERENCES_EVENT,
    ReferencedChatModel,
    TextReferenceStyle,
    manage_references,
)
from langchain_references.manager import NOSTREAM_TAG
from tests.unit_tests.fakes import AgentChatModel

NEEDLE = [
    Document("The Space Needle is in Seattle.", metadata={"source": "https://needle.example"}),
    Document("It opened in 1962.", metadata={"source": "https://history.example"}),
]
TOWER = [
    Document("The Eiffel Tower is in Paris.", metadata={"source": "https://tower.example"}),
    Document("The Needle is 184 m tall.", metadata={"source": "https://needle.example"}),
]


class ListRetriever(BaseRetriever):
    """Returns the documents of the query's key."""

    corpus: dict[str, list[Document]]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.corpus[query]


def retriever_tool() -> Any:
    retriever = ListRetriever(corpus={"needle": NEEDLE, "tower": TOWER})
    return create_retriever_tool(
        retriever, "search", "Search the documents.", response_format="content_and_artifact"
    )


def call(query: str, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "search", "args": {"query": query}, "id": call_id}])


def agent_for(*replies: Any, **options: Any) -> tuple[Any, AgentChatModel]:
    model = AgentChatModel(script=list(replies))
    wrapped = manage_references(model, style=TextReferenceStyle(), **options)
    return create_agent(wrapped, tools=[retriever_tool()]), model


TWO_CALLS = (
    call("needle", "c1"),
    call("tower", "c2"),
    AIMessage("Seattle [1](id=1), 184 m [7](id=4), opened 1962 [2](id=2); Paris [3](id=3)."),
)
TWO_CALLS_TEXT = (
    "Seattle [1], 184 m [1], opened 1962 [2]; Paris [3].\n\n"
    "- [1] https://needle.example\n- [2] https://history.example\n- [3] https://tower.example"
)


def test_the_wrapper_is_a_chat_model_that_binds_tools() -> None:
    model = AgentChatModel()
    wrapped = manage_references(model)
    assert isinstance(wrapped, ReferencedChatModel)
    bound = wrapped.bind_tools([retriever_tool()])
    assert isinstance(bound, ReferencedChatModel)
    assert [t["function"]["name"] for t in model.bound_tools] == ["search"]
    assert wrapped.bound is None  # binding made a copy


def test_an_agent_numbers_documents_across_tool_calls_and_rewrites_the_answer() -> None:
    agent, model = agent_for(*TWO_CALLS)
    result = agent.invoke({"messages": [HumanMessage("Tell me about the Needle")]})
    final = result["messages"][-1]
    assert final.content == TWO_CALLS_TEXT
    assert final.response_metadata["references"] == [
        {"number": 1, "source": "https://needle.example", "title": None, "positions": [1, 4]},
        {"number": 2, "source": "https://history.example", "title": None, "positions": [2]},
        {"number": 3, "source": "https://tower.example", "title": None, "positions": [3]},
    ]
    # the model saw every document once, with an id unique in the conversation
    shown = [m.content for m in model.calls[-1] if isinstance(m, ToolMessage)]
    assert [line for text in shown for line in text.splitlines() if "<document" in line] == [
        "<document id=1>",
        "<document id=2>",
        "<document id=3>",
        "<document id=4>",
    ]
    assert "[NUMBER](id=ID_NUMBER)" in shown[0]
    # the state keeps the tool results as the tools returned them
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool_messages[0].content == "The Space Needle is in Seattle.\n\nIt opened in 1962."
    # the tool-call turns pass through: their calls and usage are intact
    first = result["messages"][1]
    assert [c["id"] for c in first.tool_calls] == ["c1"]
    assert first.usage_metadata["input_tokens"] == 10
    assert final.usage_metadata["output_tokens"] == len(TWO_CALLS[2].content)


def test_ids_go_on_across_turns_and_each_answer_numbers_from_one() -> None:
    agent, _ = agent_for(
        call("needle", "c1"),
        AIMessage("Seattle [1](id=1)."),
        call("tower", "c2"),
        AIMessage("Paris [1](id=3), 184 m [2](id=4), 1962 [3](id=2)."),
    )
    state = agent.invoke({"messages": [HumanMessage("Where is the Needle?")]})
    assert state["messages"][-1].content == "Seattle [1].\n\n- [1] https://needle.example"
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("And the tower?")]})
    assert state["messages"][-1].content == (
        "Paris [1], 184 m [2], 1962 [3].\n\n"
        "- [1] https://tower.example\n- [2] https://needle.example\n- [3] https://history.example"
    )


def _model_tokens(stream: Any) -> list[AIMessageChunk]:
    return [
        message
        for message, metadata in stream
        if metadata["langgraph_node"] == "model" and isinstance(message, AIMessageChunk)
    ]


def test_messages_mode_streams_the_rewritten_answer_token_by_token() -> None:
    agent, _ = agent_for(*TWO_CALLS)
    tokens = _model_tokens(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="messages"))
    answer = [t for t in tokens if t.id == tokens[-1].id]
    texts = [t.text for t in answer]
    assert len([t for t in texts if t]) > 10  # token by token, not one chunk at the end
    assert not any("](id=" in t or "(id" in t for t in texts)  # never the raw markers
    assert "".join(texts) == TWO_CALLS_TEXT  # each piece once, in order
    assert answer[-1].response_metadata["references"][0]["source"] == "https://needle.example"
    assert answer[-1].text.startswith("\n\n- [1]")  # the last chunk carries the list


async def test_messages_mode_async_and_astream_events() -> None:
    agent, _ = agent_for(*TWO_CALLS)
    tokens = [
        m
        async for m, meta in agent.astream(
            {"messages": [HumanMessage("q")]}, stream_mode="messages"
        )
        if meta["langgraph_node"] == "model"
    ]
    answer = [t for t in tokens if t.id == tokens[-1].id]
    assert "".join(t.text for t in answer) == TWO_CALLS_TEXT
    assert len(answer) > 10

    agent, _ = agent_for(*TWO_CALLS)
    events = [
        e async for e in agent.astream_events({"messages": [HumanMessage("q")]}, version="v2")
    ]
    custom = [
        e for e in events if e["event"] == "on_custom_event" and e["name"] == REFERENCES_EVENT
    ]
    assert [[r["number"] for r in e["data"]["references"]] for e in custom] == [[], [], [1, 2, 3]]
    ends = [e for e in events if e["event"] == "on_chain_end" and e["name"] == "LangGraph"]
    assert ends[-1]["data"]["output"]["messages"][-1].content == TWO_CALLS_TEXT


def test_updates_and_values_modes_carry_the_rewritten_message() -> None:
    agent, _ = agent_for(*TWO_CALLS)
    updates = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="updates"))
    assert [next(iter(u)) for u in updates] == ["model", "tools", "model", "tools", "model"]
    assert updates[-1]["model"]["messages"][-1].content == TWO_CALLS_TEXT
    agent, _ = agent_for(*TWO_CALLS)
    values = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="values"))
    assert values[-1]["messages"][-1].content == TWO_CALLS_TEXT


def test_a_dict_input_still_works_on_the_chat_model_wrapper() -> None:
    model = AgentChatModel(script=[AIMessage("Seattle [1](id=2).")] * 4)
    wrapped = manage_references(model, style=TextReferenceStyle())
    request = {"documents": NEEDLE, "input": [HumanMessage("q")]}
    want = "Seattle [1].\n\n- [1] https://history.example"
    assert wrapped.invoke(request).content == want
    streamed: Any = None
    for chunk in wrapped.stream(request):
        streamed = chunk if streamed is None else streamed + chunk
    assert streamed.content == want
    assert asyncio.run(wrapped.ainvoke(request)).content == want
    assert wrapped.batch([request])[0].content == want


def test_without_documents_the_chat_model_passes_text_through() -> None:
    model = AgentChatModel(script=[AIMessage("Hello there [x].")])
    out = manage_references(model).invoke([HumanMessage("hi")])
    assert out.content == "Hello there [x]."
    assert out.response_metadata["references"] == []


class Answer(BaseModel):
    city: str


def test_with_structured_output_and_with_config_go_through_the_wrapper() -> None:
    model = AgentChatModel(
        script=[
            AIMessage("", tool_calls=[{"name": "Answer", "args": {"city": "Seattle"}, "id": "s"}])
        ]
    )
    structured = manage_references(model).with_structured_output(Answer)
    assert structured.with_config(run_name="x").invoke("where?") == Answer(city="Seattle")
    assert [t["function"]["name"] for t in model.bound_tools] == ["Answer"]


def test_any_content_and_artifact_tool_gives_documents() -> None:
    @tool(response_format="content_and_artifact")
    def lookup(topic: str) -> tuple[str, list[Document]]:
        """Look a topic up."""
        return "two notes", TOWER

    model = AgentChatModel(
        script=[
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": "t"}, "id": "l1"}]),
            AIMessage("Paris [1](id=1)."),
        ]
    )
    agent = create_agent(manage_references(model, style=TextReferenceStyle()), tools=[lookup])
    final = agent.invoke({"messages": [HumanMessage("q")]})["messages"][-1]
    assert final.content == "Paris [1].\n\n- [1] https://tower.example"


@pytest.mark.parametrize("markers", [("source",), ("id", "source")])
def test_the_wrapper_reads_other_marker_dialects(markers: tuple[str, ...]) -> None:
    agent, model = agent_for(
        call("needle", "c1"), AIMessage("Seattle 【2†source】."), markers=markers
    )
    final = agent.invoke({"messages": [HumanMessage("q")]})["messages"][-1]
    assert final.content == "Seattle [1].\n\n- [1] https://history.example"
    tool_text = next(m.content for m in model.calls[-1] if isinstance(m, ToolMessage))
    # the [n](id=k) instruction is given only when the prompt's dialect is that one
    assert ("[NUMBER](id=ID_NUMBER)" in tool_text) == ("id" in markers)


@pytest.mark.parametrize("mode", ["invoke", "messages"])
def test_provider_native_citations_work_inside_an_agent(mode: str) -> None:
    """A real ChatAnthropic (in-memory transport) answering with web-search citations."""
    from tests.unit_tests.native import _anthropic_streams as anthropic
    from tests.unit_tests.native.test_manager_native import _split, expected_text

    scenario = anthropic.SCENARIOS["web_search"]
    model = anthropic.fake_chat_anthropic(scenario, anthropic.Recorder())
    agent = create_agent(manage_references(model, style=TextReferenceStyle()), tools=[])
    question = {"messages": anthropic.request_input(scenario)}
    want, keys = expected_text(anthropic.expected_pieces("web_search"), [])
    if mode == "invoke":
        final = agent.invoke(question)["messages"][-1]
        text = final.text
        assert [r["source"] for r in final.response_metadata["references"]] == keys
    else:
        text = "".join(
            m.text
            for m, meta in agent.stream(question, stream_mode="messages")
            if meta["langgraph_node"] == "model"
        )
    assert _split(text)[0] == want
    assert len(keys) >= 2


HISTORY = [HumanMessage("q"), ToolMessage("tool text", artifact=NEEDLE, tool_call_id="c1")]


def test_a_bound_model_that_does_not_stream_keeps_its_whole_message_when_streamed() -> None:
    """Streamed (``stream=True``), a bound model's whole message keeps all it carries."""

    def whole(messages: Any, **kwargs: Any) -> AIMessage:
        return AIMessage(
            "Seattle [4](id=1).",
            id="answer-1",
            response_metadata={"model_name": "m"},
            tool_calls=[{"name": "search", "args": {"query": "x"}, "id": "t9"}],
            usage_metadata={"input_tokens": 3, "output_tokens": 5, "total_tokens": 8},
        )

    wrapped = manage_references(AgentChatModel(), style=TextReferenceStyle())
    model = wrapped.model_copy(update={"bound": RunnableLambda(whole)})
    message = model.invoke(HISTORY, stream=True)
    assert message.content == "Seattle [1].\n\n- [1] https://needle.example"
    assert message.id == "answer-1"
    assert message.response_metadata == {
        "model_name": "m",
        "references": [
            {"number": 1, "source": "https://needle.example", "title": None, "positions": [1]}
        ],
    }
    assert message.tool_calls == [
        {"name": "search", "args": {"query": "x"}, "id": "t9", "type": "tool_call"}
    ]
    assert message.usage_metadata == {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}


@pytest.mark.parametrize("stream", [False, True])
def test_a_bound_model_that_answers_text_gives_the_rewritten_text_as_a_message(
    stream: bool,
) -> None:
    def text(messages: Any, **kwargs: Any) -> str:
        return "Seattle [4](id=1)."

    wrapped = manage_references(AgentChatModel(), style=TextReferenceStyle())
    model = wrapped.model_copy(update={"bound": RunnableLambda(text)})
    message = model.invoke(HISTORY, stream=stream)
    assert isinstance(message, AIMessage)
    assert message.content == "Seattle [1].\n\n- [1] https://needle.example"


def test_stop_and_model_arguments_reach_the_bound_model_when_streamed() -> None:
    seen: list[dict[str, Any]] = []

    def answer(messages: Any, **kwargs: Any) -> str:
        seen.append(kwargs)
        return "Seattle [4](id=1)."

    wrapped = manage_references(AgentChatModel(), style=TextReferenceStyle())
    model = wrapped.model_copy(update={"bound": RunnableLambda(answer)})
    for options in ({"stop": ["END"]}, {"temperature": 0.5}, {"stop": ["X"], "seed": 3}, {}):
        chunks = list(model.stream(HISTORY, **options))
        assert "".join(map(str, chunks)) == "Seattle [1].\n\n- [1] https://needle.example"
    assert seen == [{"stop": ["END"]}, {"temperature": 0.5}, {"stop": ["X"], "seed": 3}, {}]


def test_a_bound_model_answering_a_chat_message_gives_an_ai_message_when_streamed() -> None:
    """A whole message without tool calls or usage (a ``ChatMessage``) becomes an AI message."""

    def answer(messages: Any, **kwargs: Any) -> ChatMessage:
        return ChatMessage(content="Seattle [4](id=1).", role="assistant", id="answer-2")

    wrapped = manage_references(AgentChatModel(), style=TextReferenceStyle())
    model = wrapped.model_copy(update={"bound": RunnableLambda(answer)})
    message = model.invoke(HISTORY, stream=True)
    assert isinstance(message, AIMessage)
    assert (message.content, message.id, message.tool_calls, message.usage_metadata) == (
        "Seattle [1].\n\n- [1] https://needle.example",
        "answer-2",
        [],
        None,
    )


def test_a_bound_models_whole_message_keeps_its_name_and_extra_fields_when_invoked() -> None:
    def whole(messages: Any, **kwargs: Any) -> AIMessage:
        return AIMessage("Seattle [4](id=1).", name="bot", additional_kwargs={"refusal": None})

    wrapped = manage_references(AgentChatModel(), style=TextReferenceStyle())
    model = wrapped.model_copy(update={"bound": RunnableLambda(whole)})
    message = model.invoke(HISTORY)
    assert (message.content, message.name, message.additional_kwargs) == (
        "Seattle [1].\n\n- [1] https://needle.example",
        "bot",
        {"refusal": None},
    )


def test_stop_and_model_arguments_reach_the_bound_model_when_invoked() -> None:
    seen: list[dict[str, Any]] = []

    def answer(messages: Any, **kwargs: Any) -> str:
        seen.append(kwargs)
        return "Seattle [4](id=1)."

    wrapped = manage_references(AgentChatModel(), style=TextReferenceStyle())
    model = wrapped.model_copy(update={"bound": RunnableLambda(answer)})
    assert model.invoke(HISTORY, stop=["END"], seed=3).content == (
        "Seattle [1].\n\n- [1] https://needle.example"
    )
    assert seen == [{"stop": ["END"], "seed": 3}]


async def test_stop_and_model_arguments_reach_the_bound_model_async() -> None:
    seen: list[dict[str, Any]] = []

    def answer(messages: Any, **kwargs: Any) -> str:
        seen.append(kwargs)
        return "Seattle [4](id=1)."

    wrapped = manage_references(AgentChatModel(), style=TextReferenceStyle())
    model = wrapped.model_copy(update={"bound": RunnableLambda(answer)})
    for stream in (False, True):
        message = await model.ainvoke(HISTORY, stop=["END"], seed=3, stream=stream)
        assert message.content == "Seattle [1].\n\n- [1] https://needle.example"
    assert seen == [
        {"stop": ["END"], "seed": 3, "stream": False},
        {"stop": ["END"], "seed": 3, "stream": True},
    ]


class ChatRuns(BaseCallbackHandler):
    """Records each chat model run: its id, its parent's and its tags."""

    def __init__(self) -> None:
        self.runs: list[tuple[Any, Any, list[str]]] = []

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: Any,
        parent_run_id: Any = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.runs.append((run_id, parent_run_id, sorted(tags or [])))


@pytest.mark.parametrize("use_async", [False, True])
def test_the_wrapped_models_invoked_run_is_a_child_of_the_wrappers_tagged_not_to_stream(
    use_async: bool,
) -> None:
    model = AgentChatModel(script=[AIMessage("Seattle [4](id=1).")])
    wrapped = manage_references(model, style=TextReferenceStyle())
    handler = ChatRuns()
    config: Any = {"callbacks": [handler]}
    if use_async:
        message = asyncio.run(wrapped.ainvoke(HISTORY, config))
    else:
        message = wrapped.invoke(HISTORY, config)
    assert message.content == "Seattle [1].\n\n- [1] https://needle.example"
    (outer, outer_parent, outer_tags), (_, inner_parent, inner_tags) = handler.runs
    assert (outer_parent, outer_tags) == (None, [])
    assert (inner_parent, inner_tags) == (outer, [NOSTREAM_TAG])


def _chat_messages() -> list[Any]:
    docs = [Document("Seattle is a city in Washington state.", metadata={"source": "https://wa"})]
    return [
        HumanMessage("Where is Seattle?"),
        AIMessage("", tool_calls=[{"name": "search", "args": {"query": "q"}, "id": "c1"}]),
        ToolMessage("found", artifact=docs, tool_call_id="c1"),
    ]


async def test_an_async_invoke_invokes_the_wrapped_model_and_an_async_stream_streams_it() -> None:
    from tests.unit_tests.fakes import StreamingChatModel, text_chunks

    trace: list[Any] = []
    model = StreamingChatModel(chunks=text_chunks(["Seattle ", "[1](id=1)."]), trace=trace)
    wrapped = manage_references(model, style=TextReferenceStyle())
    invoked = await wrapped.ainvoke(_chat_messages())
    assert invoked.content == "Seattle [1].\n\n- [1] https://wa"
    assert trace == []  # _agenerate, not _astream
    streamed = [chunk async for chunk in wrapped.astream(_chat_messages())]
    assert "".join(c.text for c in streamed) == invoked.content
    assert trace == [("", 0), ("", 1)]


async def test_the_async_paths_check_citations_with_the_async_judge_only() -> None:
    from langchain_references.citations.verifier import CitationVerifier
    from tests.unit_tests.citations.test_streaming import ContainsJudge
    from tests.unit_tests.fakes import StreamingChatModel, text_chunks

    chunks = text_chunks(["Seattle is a city in Washington state ", "[1](id=1)."])
    verifier = CitationVerifier(ContainsJudge(forbid_sync=True))  # the sync judge raises
    for streamed in (False, True):
        model = StreamingChatModel(chunks=chunks, forbid_sync=True)
        wrapped = manage_references(model, style=TextReferenceStyle(), verifier=verifier)
        if streamed:
            chunks_out = [c async for c in wrapped.astream(_chat_messages())]
            metadata = chunks_out[-1].response_metadata
        else:
            metadata = (await wrapped.ainvoke(_chat_messages())).response_metadata
        check = metadata["citation_check"]
        assert (check["citation_recall"], check["citation_precision"]) == (1.0, 1.0), streamed
        assert check["unsupported"] == []


def test_called_without_a_run_manager_the_wrapped_model_runs_in_the_callers_config() -> None:
    """``_generate`` called directly: the wrapped model's run keeps the ambient config's tags
    and handlers, tagged not to stream."""
    from langchain_core.runnables.config import var_child_runnable_config

    from tests.unit_tests.fakes import RunCollector

    collector = RunCollector()
    model = AgentChatModel(script=[AIMessage("Seattle [4](id=1).")])
    wrapped = manage_references(model, style=TextReferenceStyle())
    token = var_child_runnable_config.set({"tags": ["outer"], "callbacks": [collector]})
    try:
        result = wrapped._generate(list(HISTORY))
    finally:
        var_child_runnable_config.reset(token)
    assert result.generations[0].message.content == ("Seattle [1].\n\n- [1] https://needle.example")
    (run,) = collector.runs
    assert run.run_type == "llm"
    assert run.tags == ["outer", "nostream"]


def test_an_invoke_invokes_the_wrapped_model_and_a_stream_streams_it() -> None:
    from tests.unit_tests.fakes import StreamingChatModel, text_chunks

    class Counted(StreamingChatModel):
        def _stream(self, *args: Any, **kwargs: Any) -> Any:
            self.trace.append("stream")
            yield from super()._stream(*args, **kwargs)

    trace: list[Any] = []
    model = Counted(chunks=text_chunks(["Seattle ", "[1](id=1)."]), trace=trace)
    wrapped = manage_references(model, style=TextReferenceStyle())
    invoked = wrapped.invoke(_chat_messages())
    assert invoked.content == "Seattle [1].\n\n- [1] https://wa"
    assert trace == []  # _generate, not _stream
    streamed = list(wrapped.stream(_chat_messages()))
    assert "".join(c.text for c in streamed) == invoked.content
    assert trace == ["stream"]


def test_an_invoked_wrapper_answers_in_the_wrapped_models_output_version() -> None:
    from tests.unit_tests.fakes import StreamingChatModel, text_chunks

    model = StreamingChatModel(chunks=text_chunks(["Seattle ", "[1](id=1)."]), output_version="v1")
    wrapped = manage_references(model, style=TextReferenceStyle())
    message = wrapped.invoke(_chat_messages())
    (block,) = message.content
    assert block["text"] == "Seattle [1].\n\n- [1] https://wa"
    assert [
        (a["url"], block["text"][a["start_index"] : a["end_index"]]) for a in block["annotations"]
    ] == [("https://wa", "[1]")]


def test_stop_reaches_the_wrapped_model_when_an_invoke_streams() -> None:
    from tests.unit_tests.fakes import StreamingChatModel, text_chunks

    seen: list[Any] = []

    class Recording(StreamingChatModel):
        def _stream(self, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
            seen.append((stop, kwargs.get("temperature")))
            yield from super()._stream(messages, stop=stop, **kwargs)

    model = Recording(chunks=text_chunks(["Seattle ", "[1](id=1)."]))
    wrapped = manage_references(model, style=TextReferenceStyle())
    message = wrapped.invoke(_chat_messages(), stop=["END"], stream=True, temperature=0.5)
    assert message.content == "Seattle [1].\n\n- [1] https://wa"
    assert seen == [(["END"], 0.5)]


def test_the_nostream_tag_is_not_inherited_by_the_wrapped_models_own_child_runs() -> None:
    """Only the wrapped model's run is hidden from a messages stream, not what it calls."""
    from langchain_core.callbacks import CallbackManager, CallbackManagerForLLMRun
    from langchain_core.outputs import ChatGeneration, ChatResult

    from tests.unit_tests.fakes import RunCollector

    inner = AgentChatModel(script=[AIMessage("Seattle [4](id=1).")])

    class Delegating(AgentChatModel):
        def _generate(
            self,
            messages: list[Any],
            stop: Any = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            assert run_manager is not None
            child = CallbackManager(handlers=[], parent_run_id=run_manager.run_id)
            child.set_handlers(run_manager.inheritable_handlers)  # as a run's child inherits
            child.add_tags(run_manager.inheritable_tags)
            reply = inner.invoke(messages, {"callbacks": child})
            return ChatResult(generations=[ChatGeneration(message=reply)])

    collector = RunCollector()
    wrapped = manage_references(Delegating(), style=TextReferenceStyle())
    message = wrapped.invoke(list(HISTORY), {"callbacks": [collector]})
    assert message.content == "Seattle [1].\n\n- [1] https://needle.example"
    (root,) = collector.runs
    (wrapped_run,) = root.child_runs
    (inner_run,) = wrapped_run.child_runs
    assert "nostream" in wrapped_run.tags
    assert "nostream" not in inner_run.tags
