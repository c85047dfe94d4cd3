"""``create_agent(model, tools, middleware=[ReferencesMiddleware(...)])``.

The middleware gives what wrapping the model gives (it wraps each call's model in the same
``ReferencedChatModel``), keeps document ids in the agent's state, and composes with LangChain's
own middleware (summarization, fallback, retry) and structured output.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ExtendedModelResponse,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelResponse,
    ModelRetryMiddleware,
    SummarizationMiddleware,
)
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from langchain_references import (
    ReferencedChatModel,
    ReferencesMiddleware,
    TextReferenceStyle,
    manage_references,
)
from langchain_references.conversation import ConversationIds
from langchain_references.middleware import REFERENCE_IDS_KEY
from tests.unit_tests.agents.test_agents import (
    NEEDLE,
    TWO_CALLS,
    TWO_CALLS_TEXT,
    call,
    retriever_tool,
)
from tests.unit_tests.agents.test_conversations import RAIN, answer_tokens, search_tool, shown_ids
from tests.unit_tests.fakes import AgentChatModel


def middleware_agent(*replies: Any, **options: Any) -> tuple[Any, AgentChatModel]:
    model = AgentChatModel(script=list(replies))
    middleware = ReferencesMiddleware(style=TextReferenceStyle(), **options)
    return create_agent(model, tools=[retriever_tool()], middleware=[middleware]), model


def wrapper_agent(*replies: Any, **options: Any) -> Any:
    model = AgentChatModel(script=list(replies))
    return create_agent(
        manage_references(model, style=TextReferenceStyle(), **options), tools=[retriever_tool()]
    )


def final(agent: Any) -> AIMessage:
    message: AIMessage = agent.invoke({"messages": [HumanMessage("q")]})["messages"][-1]
    return message


def test_the_middleware_gives_the_wrappers_answer_and_metadata() -> None:
    by_middleware = final(middleware_agent(*TWO_CALLS)[0])
    by_wrapper = final(wrapper_agent(*TWO_CALLS))
    assert by_middleware.content == by_wrapper.content == TWO_CALLS_TEXT
    assert (
        by_middleware.response_metadata["references"]
        == (by_wrapper.response_metadata["references"])
    )
    assert [r["positions"] for r in by_middleware.response_metadata["references"]] == [
        [1, 4],
        [2],
        [3],
    ]


def test_the_middleware_gives_the_wrappers_v1_annotations() -> None:
    by_middleware = final(middleware_agent(*TWO_CALLS, output_version="v1")[0])
    by_wrapper = final(wrapper_agent(*TWO_CALLS, output_version="v1"))

    def without_ids(message: AIMessage) -> list[Any]:  # annotation ids are random
        return [
            {
                **b,
                "annotations": [
                    {k: v for k, v in a.items() if k != "id"} for a in b["annotations"]
                ],
            }
            for b in message.content
            if isinstance(b, dict)
        ]

    assert without_ids(by_middleware) == without_ids(by_wrapper)
    (block,) = by_middleware.content
    assert isinstance(block, dict)
    annotations = block["annotations"]
    assert [(a["url"], block["text"][a["start_index"] : a["end_index"]]) for a in annotations] == [
        ("https://needle.example", "[1]"),
        ("https://needle.example", "[1]"),
        ("https://history.example", "[2]"),
        ("https://tower.example", "[3]"),
    ]


def test_the_middleware_streams_the_wrappers_tokens() -> None:
    def texts(agent: Any) -> list[str]:
        stream = agent.stream({"messages": [HumanMessage("q")]}, stream_mode="messages")
        return [t.text for t in answer_tokens(stream)]

    by_middleware = texts(middleware_agent(*TWO_CALLS)[0])
    assert by_middleware == texts(wrapper_agent(*TWO_CALLS))
    assert "".join(by_middleware) == TWO_CALLS_TEXT
    assert len([t for t in by_middleware if t]) > 10


def test_the_ids_are_kept_in_the_private_state_not_in_the_output() -> None:
    model = AgentChatModel(script=[call("needle", "c1"), AIMessage("Seattle [1](id=1).")])
    agent = create_agent(
        model,
        tools=[retriever_tool()],
        middleware=[ReferencesMiddleware(style=TextReferenceStyle())],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    output = agent.invoke({"messages": [HumanMessage("q")]}, config)
    assert sorted(output) == ["messages"]
    ids = agent.get_state(config).values[REFERENCE_IDS_KEY]
    tool_message = next(m for m in output["messages"] if m.type == "tool")
    assert ids == {"first": {tool_message.id: 1}, "next_id": 3}


def summarizing_agent(model: AgentChatModel, *, references: bool) -> Any:
    summarizer = AgentChatModel(script=[AIMessage("A summary.")] * 4)
    middleware: list[Any] = [
        SummarizationMiddleware(model=summarizer, trigger=("messages", 6), keep=("messages", 3))
    ]
    tool = search_tool()
    if references:
        middleware.append(ReferencesMiddleware(style=TextReferenceStyle()))
        return create_agent(
            model, tools=[tool], middleware=middleware, checkpointer=InMemorySaver()
        )
    wrapped = manage_references(model, style=TextReferenceStyle())
    return create_agent(wrapped, tools=[tool], middleware=middleware, checkpointer=InMemorySaver())


SUMMARIZED = [
    call("needle", "c1"),
    AIMessage("Seattle [1](id=1)."),
    call("tower", "c2"),
    AIMessage("Paris [1](id=3)."),
    call("rain", "c3"),
    AIMessage("Rain [1](id=5), Seattle [2](id=1)."),
]


def test_ids_stay_stable_when_old_messages_are_summarized_away(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = AgentChatModel(script=list(SUMMARIZED))
    agent = summarizing_agent(model, references=True)
    config = {"configurable": {"thread_id": "t"}}
    answers = []
    with caplog.at_level(logging.WARNING, logger="langchain_references.core.rewriter"):
        for question in ("a", "b", "c"):
            state = agent.invoke({"messages": [HumanMessage(question)]}, config)
            answers.append(state["messages"][-1].content)
    # the third turn: the first two tool results are summarized away; the rain page keeps id 5
    assert shown_ids(model) == [5]
    assert "A summary." in model.calls[-1][0].text
    assert answers[2] == "Rain [1], Seattle.\n\n- [1] https://rain.example"
    assert [r.getMessage() for r in caplog.records] == [
        "Dropped citation [2](id=1): document id 1 is no longer in the conversation"
    ]


def test_without_the_middleware_ids_restart_after_summarization() -> None:
    """What the middleware's state fixes: the wrapper alone numbers what it is shown."""
    model = AgentChatModel(script=list(SUMMARIZED))
    agent = summarizing_agent(model, references=False)
    config = {"configurable": {"thread_id": "t"}}
    for question in ("a", "b", "c"):
        state = agent.invoke({"messages": [HumanMessage(question)]}, config)
    assert shown_ids(model) == [1]  # the rain page is id 1 now: Seattle is cited to it
    assert state["messages"][-1].content == "Rain, Seattle [1].\n\n- [1] https://rain.example"


class ProviderDownError(RuntimeError):
    pass


def fail(messages: Any) -> AIMessage:
    raise ProviderDownError("provider down")


def test_a_fallback_model_listed_before_is_wrapped_too() -> None:
    primary = AgentChatModel(script=[fail, fail])
    fallback = AgentChatModel(script=[call("needle", "c1"), AIMessage("Seattle [5](id=1).")])
    agent = create_agent(
        primary,
        tools=[retriever_tool()],
        middleware=[
            ModelFallbackMiddleware(fallback),
            ReferencesMiddleware(style=TextReferenceStyle()),
        ],
    )
    assert final(agent).content == "Seattle [1].\n\n- [1] https://needle.example"


def test_a_middleware_after_it_that_replaces_the_model_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    primary = AgentChatModel(script=[fail, fail])
    fallback = AgentChatModel(script=[call("needle", "c1"), AIMessage("Seattle [5](id=1).")])
    agent = create_agent(
        primary,
        tools=[retriever_tool()],
        middleware=[
            ReferencesMiddleware(style=TextReferenceStyle()),
            ModelFallbackMiddleware(fallback),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="langchain_references.middleware"):
        assert final(agent).content == "Seattle [5](id=1)."  # what the warning is about
    assert [r.getMessage() for r in caplog.records] == [
        "ReferencesMiddleware: an answer came back without its citations rewritten: "
        "a middleware listed after ReferencesMiddleware replaced the model of the call. "
        "List ReferencesMiddleware after it (e.g. after ModelFallbackMiddleware)."
    ]


@pytest.mark.parametrize("outer", [True, False])
def test_a_retried_call_is_numbered_once(outer: bool) -> None:
    model = AgentChatModel(script=[call("needle", "c1"), fail, AIMessage("1962 [4](id=2).")])
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    references = ReferencesMiddleware(style=TextReferenceStyle())
    middleware = [references, retry] if outer else [retry, references]
    agent = create_agent(model, tools=[retriever_tool()], middleware=middleware)
    message = final(agent)
    assert message.content == "1962 [1].\n\n- [1] https://history.example"
    assert [r["number"] for r in message.response_metadata["references"]] == [1]


class Place(BaseModel):
    city: str
    note: str


def test_structured_output_by_a_tool_strategy_is_not_rewritten() -> None:
    reply = AIMessage(
        "",
        tool_calls=[
            {"name": "Place", "args": {"city": "Seattle", "note": "see [1](id=1)"}, "id": "s1"}
        ],
    )
    model = AgentChatModel(script=[call("needle", "c1"), reply])
    agent = create_agent(
        model,
        tools=[retriever_tool()],
        response_format=ToolStrategy(Place),
        middleware=[ReferencesMiddleware(style=TextReferenceStyle())],
    )
    state = agent.invoke({"messages": [HumanMessage("q")]})
    assert state["structured_response"] == Place(city="Seattle", note="see [1](id=1)")


def test_structured_output_as_text_goes_to_the_model_unwrapped_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = json.dumps({"city": "Seattle", "note": "see [1](id=1)"})
    model = AgentChatModel(script=[call("needle", "c1"), AIMessage(text)])
    agent = create_agent(
        model,
        tools=[retriever_tool()],
        response_format=ProviderStrategy(Place),
        middleware=[ReferencesMiddleware(style=TextReferenceStyle())],
    )
    with caplog.at_level(logging.WARNING, logger="langchain_references.middleware"):
        state = agent.invoke({"messages": [HumanMessage("q")]})
    assert caplog.records == []  # not rewritten on purpose: no warning about the order
    assert state["structured_response"] == Place(city="Seattle", note="see [1](id=1)")
    assert state["messages"][-1].content == text


def test_a_model_wrapped_already_is_not_wrapped_twice() -> None:
    model = AgentChatModel(script=[call("needle", "c1"), AIMessage("Seattle [4](id=1).")])
    wrapped = manage_references(model, style=TextReferenceStyle())
    agent = create_agent(
        wrapped,
        tools=[retriever_tool()],
        middleware=[ReferencesMiddleware(style=TextReferenceStyle())],
    )
    assert final(agent).content == "Seattle [1].\n\n- [1] https://needle.example"
    assert isinstance(wrapped, ReferencedChatModel)


def test_the_options_are_checked_when_the_middleware_is_made() -> None:
    with pytest.raises(TypeError, match="style must be a ReferenceStyle, not str"):
        ReferencesMiddleware(style="text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mark_unsupported=True needs a verifier"):
        ReferencesMiddleware(mark_unsupported=True)
    with pytest.raises(ValueError, match="unknown marker dialect"):
        ReferencesMiddleware(markers=("nope",))


async def test_the_async_agent_keeps_the_ids_in_the_state() -> None:
    model = AgentChatModel(
        script=[
            call("rain", "c1"),
            AIMessage("Rain [1](id=1)."),
            call("needle", "c2"),
            AIMessage("Seattle [1](id=2), rain [2](id=1)."),
        ]
    )
    agent = create_agent(
        model,
        tools=[search_tool()],
        middleware=[ReferencesMiddleware(style=TextReferenceStyle())],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    await agent.ainvoke({"messages": [HumanMessage("a")]}, config)
    state = await agent.ainvoke({"messages": [HumanMessage("b")]}, config)
    assert state["messages"][-1].content == (
        "Seattle [1], rain [2].\n\n- [1] https://needle.example\n- [2] https://rain.example"
    )
    ids = (await agent.aget_state(config)).values[REFERENCE_IDS_KEY]
    assert ids["next_id"] == 1 + len(RAIN) + 2


def _conversation_script(n: int) -> list[AIMessage]:
    # conversation n searches rain then needle, and cites both in its second answer
    return [
        call("rain", f"r{n}"),
        AIMessage(f"Rain {n} [1](id=1)."),
        call("needle", f"n{n}"),
        AIMessage(f"Seattle {n} [1](id=2), rain [2](id=1)."),
    ]


def _expected(n: int) -> str:
    return f"Seattle {n} [1], rain [2].\n\n- [1] https://needle.example\n- [2] https://rain.example"


def test_one_middleware_serves_many_conversations_at_once_in_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    shared = ReferencesMiddleware(style=TextReferenceStyle())
    saver = InMemorySaver()

    def converse(n: int) -> tuple[str, dict[str, Any]]:
        model = AgentChatModel(script=_conversation_script(n))
        agent = create_agent(model, tools=[search_tool()], middleware=[shared], checkpointer=saver)
        config = {"configurable": {"thread_id": f"user-{n}"}}
        agent.invoke({"messages": [HumanMessage("a")]}, config)
        last = agent.invoke({"messages": [HumanMessage("b")]}, config)["messages"][-1]
        return last.content, agent.get_state(config).values[REFERENCE_IDS_KEY]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(converse, range(16)))
    assert [content for content, _ in results] == [_expected(n) for n in range(16)]
    assert all(ids["next_id"] == 1 + len(RAIN) + 2 for _, ids in results)  # no ids shared


async def test_one_middleware_serves_many_conversations_at_once_in_asyncio() -> None:
    import asyncio

    shared = ReferencesMiddleware(style=TextReferenceStyle())
    saver = InMemorySaver()

    async def converse(n: int) -> str:
        model = AgentChatModel(script=_conversation_script(n))
        agent = create_agent(model, tools=[search_tool()], middleware=[shared], checkpointer=saver)
        config = {"configurable": {"thread_id": f"user-{n}"}}
        await agent.ainvoke({"messages": [HumanMessage("a")]}, config)
        state = await agent.ainvoke({"messages": [HumanMessage("b")]}, config)
        return str(state["messages"][-1].content)

    answers = await asyncio.gather(*(converse(n) for n in range(16)))
    assert answers == [_expected(n) for n in range(16)]


def test_the_middlewares_output_version_overrides_the_models_own() -> None:
    model = AgentChatModel(script=list(TWO_CALLS), output_version="v0")
    middleware = ReferencesMiddleware(style=TextReferenceStyle(), output_version="v1")
    agent = create_agent(model, tools=[retriever_tool()], middleware=[middleware])
    (block,) = final(agent).content
    assert isinstance(block, dict)
    assert (block["type"], block["text"]) == ("text", TWO_CALLS_TEXT)
    assert [a["url"] for a in block["annotations"]] == [
        "https://needle.example",
        "https://needle.example",
        "https://history.example",
        "https://tower.example",
    ]


def id_request(reference_ids: dict[str, Any] | None) -> ModelRequest[Any]:
    tool_message = ToolMessage("t", artifact=RAIN, tool_call_id="c1", id="m1")
    state: dict[str, Any] = {"messages": [tool_message]}
    if reference_ids is not None:
        state[REFERENCE_IDS_KEY] = reference_ids
    return ModelRequest(model=AgentChatModel(), messages=[tool_message], state=state)


def test_a_call_that_gives_no_new_ids_does_not_update_the_state() -> None:
    middleware = ReferencesMiddleware()
    response = ModelResponse(result=[AIMessage("Rain.", response_metadata={"references": []})])
    known = {"first": {"m1": 1}, "next_id": 2}
    request = id_request(known)
    _, ids = middleware.prepare(request)
    assert ids == ConversationIds({"m1": 1}, 2)
    assert middleware.respond(request, response, ids) is response
    grown = middleware.respond(id_request(None), response, ids)
    assert isinstance(grown, ExtendedModelResponse)
    assert grown.model_response is response
    assert grown.command is not None
    assert grown.command.update == {REFERENCE_IDS_KEY: known}


def test_the_prepared_model_takes_the_dict_input_under_the_documents_key() -> None:
    model = AgentChatModel(script=[AIMessage("Seattle [4](id=1).")])
    middleware = ReferencesMiddleware(documents_key="docs", style=TextReferenceStyle())
    prepared, _ = middleware.prepare(ModelRequest(model=model, messages=[], state={"messages": []}))
    answer = prepared.model.invoke({"docs": NEEDLE, "input": [HumanMessage("q")]})
    assert answer.content == "Seattle [1].\n\n- [1] https://needle.example"


def test_the_prepared_model_takes_the_dict_input_under_documents_by_default() -> None:
    model = AgentChatModel(script=[AIMessage("Seattle [4](id=1).")])
    middleware = ReferencesMiddleware(style=TextReferenceStyle())
    prepared, _ = middleware.prepare(ModelRequest(model=model, messages=[], state={"messages": []}))
    answer = prepared.model.invoke({"documents": NEEDLE, "input": [HumanMessage("q")]})
    assert answer.content == "Seattle [1].\n\n- [1] https://needle.example"


@pytest.mark.parametrize("native", ["auto", None])
def test_the_middleware_reads_the_providers_own_citations_unless_told_not_to(
    native: str | None,
) -> None:
    from tests.unit_tests.native import _anthropic_streams as anthropic
    from tests.unit_tests.native.test_manager_native import _split, expected_text

    scenario = anthropic.SCENARIOS["web_search"]
    model = anthropic.fake_chat_anthropic(scenario, anthropic.Recorder())
    middleware = ReferencesMiddleware(style=TextReferenceStyle(), native=native)
    agent = create_agent(model, tools=[], middleware=[middleware])
    final = agent.invoke({"messages": anthropic.request_input(scenario)})["messages"][-1]
    want, keys = expected_text(anthropic.expected_pieces("web_search"), [])
    if native == "auto":
        assert _split(final.text)[0] == want
        assert [r["source"] for r in final.response_metadata["references"]] == keys
    else:
        assert final.response_metadata["references"] == []  # not read, not numbered
        assert _split(final.text)[0] != want


def test_a_model_wrapped_already_is_given_the_conversations_ids() -> None:
    from langchain_references.conversation import ConversationIds

    wrapped = manage_references(AgentChatModel(script=[]), style=TextReferenceStyle())
    state = {"messages": [], REFERENCE_IDS_KEY: {"first": {"m1": 3}, "next_id": 5}}
    middleware = ReferencesMiddleware(style=TextReferenceStyle())
    prepared, ids = middleware.prepare(ModelRequest(model=wrapped, messages=[], state=state))
    assert isinstance(prepared.model, ReferencedChatModel)
    assert prepared.model.ids == ConversationIds({"m1": 3}, 5) == ids
    assert prepared.model.wrapped is wrapped.wrapped
