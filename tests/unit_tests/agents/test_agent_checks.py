"""Live citation checks inside ``create_agent``: the wrapper and the middleware, every dialect.

The model is scripted and the judge is a plain containment test, so the check's figures are
exact: the answer's first sentence is in the document it cites, the second is not.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from langchain_references import ReferencesMiddleware, TextReferenceStyle, manage_references
from langchain_references.citations.verifier import CitationVerifier
from tests.unit_tests.agents.test_agents import call, retriever_tool
from tests.unit_tests.agents.test_conversations import answer_tokens
from tests.unit_tests.citations.test_streaming import ContainsJudge
from tests.unit_tests.fakes import AgentChatModel

#: The same answer in each dialect: [n](id=k), 【k†source】 / 【k】, plain [k].
ANSWERS = {
    "id": "The Space Needle is in Seattle [1](id=1). The Space Needle is in Paris [2](id=2).",
    "source": "The Space Needle is in Seattle 【1†source】. The Space Needle is in Paris 【2】.",
    "bracket": "The Space Needle is in Seattle [1]. The Space Needle is in Paris [2].",
}
TEXT = (
    "The Space Needle is in Seattle [1]. The Space Needle is in Paris [2].\n\n"
    "- [1] https://needle.example\n- [2] https://history.example"
)
UNSUPPORTED = [{"sentence": "The Space Needle is in Paris.", "numbers": [2], "supported": False}]


def checked_agent(form: str, dialect: str, **options: Any) -> Any:
    model = AgentChatModel(script=[call("needle", "c1"), AIMessage(ANSWERS[dialect])])
    options = {
        "style": TextReferenceStyle(),
        "verifier": CitationVerifier(ContainsJudge()),
        "markers": (dialect,),
        **options,
    }
    if form == "wrapper":
        return create_agent(manage_references(model, **options), tools=[retriever_tool()])
    return create_agent(
        model, tools=[retriever_tool()], middleware=[ReferencesMiddleware(**options)]
    )


def assert_checked(message: Any, *, numbers: list[int] | None = None) -> None:
    check = message.response_metadata["citation_check"]
    assert (check["citation_recall"], check["citation_precision"]) == (0.5, 0.5)
    if numbers is None:
        assert check["unsupported"] == UNSUPPORTED
    else:
        assert check["unsupported"] == [{**UNSUPPORTED[0], "numbers": numbers}]
    cited = [[c["doc_id"] for c in s["citations"]] for s in check["sentences"]]
    assert cited == [[1], [2]]


DIALECTS = list(ANSWERS)
FORMS = ["wrapper", "middleware"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("form", FORMS)
def test_a_verifier_checks_each_dialect_inside_an_agent(form: str, dialect: str) -> None:
    agent = checked_agent(form, dialect)
    message = agent.invoke({"messages": [HumanMessage("q")]})["messages"][-1]
    assert message.content == TEXT
    assert_checked(message)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("form", FORMS)
def test_a_verifier_checks_each_dialect_while_the_agent_streams(form: str, dialect: str) -> None:
    agent = checked_agent(form, dialect)
    stream = agent.stream({"messages": [HumanMessage("q")]}, stream_mode="messages")
    tokens = answer_tokens(stream)
    assert "".join(t.text for t in tokens) == TEXT
    assert_checked(tokens[-1])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("form", FORMS)
async def test_a_verifier_checks_each_dialect_async(form: str, dialect: str) -> None:
    agent = checked_agent(form, dialect)
    state = await agent.ainvoke({"messages": [HumanMessage("q")]})
    assert state["messages"][-1].content == TEXT
    assert_checked(state["messages"][-1])
    agent = checked_agent(form, dialect)
    stream = agent.astream({"messages": [HumanMessage("q")]}, stream_mode="messages")
    tokens = answer_tokens([item async for item in stream])
    assert "".join(t.text for t in tokens) == TEXT
    assert_checked(tokens[-1])


#: What the reader sees of the unsupported second citation, by on_unsupported.
SEEN = {
    "keep": TEXT,
    "flag": "The Space Needle is in Seattle [1]. The Space Needle is in Paris [2] (unsupported)."
    "\n\n- [1] https://needle.example\n- [2] https://history.example",
    "drop": "The Space Needle is in Seattle [1]. The Space Needle is in Paris.\n\n"
    "- [1] https://needle.example",
}


@pytest.mark.parametrize("mode", sorted(SEEN))
@pytest.mark.parametrize("form", FORMS)
def test_on_unsupported_decides_what_the_reader_sees_inside_an_agent(form: str, mode: str) -> None:
    agent = checked_agent(form, "source", on_unsupported=mode)
    stream = agent.stream({"messages": [HumanMessage("q")]}, stream_mode="messages")
    tokens = answer_tokens(stream)
    numbers = [] if mode == "drop" else None  # a dropped citation takes no number
    assert "".join(t.text for t in tokens) == SEEN[mode]
    assert_checked(tokens[-1], numbers=numbers)
    agent = checked_agent(form, "source", on_unsupported=mode)
    message = agent.invoke({"messages": [HumanMessage("q")]})["messages"][-1]
    assert message.content == SEEN[mode]
    assert_checked(message, numbers=numbers)


def test_the_middleware_checks_on_unsupported() -> None:
    with pytest.raises(ValueError, match="on_unsupported='drop' needs a verifier"):
        ReferencesMiddleware(on_unsupported="drop")
