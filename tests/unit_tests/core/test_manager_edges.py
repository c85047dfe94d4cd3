"""Edges of the manager's streaming decisions: chunk positions, chunk types, inner configs."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManager
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, ChatMessageChunk, HumanMessage
from langchain_core.runnables import RunnableLambda

from langchain_references import TextReferenceStyle, manage_references
from langchain_references.citations.verifier import CitationVerifier
from langchain_references.manager import (
    NOSTREAM_TAG,
    ReferencedRunnable,
    _Relay,
    _streams_to_langgraph,
)
from tests.unit_tests.core.test_driver_parity import (
    ANSWER,
    DOCS,
    INPUT,
    NOTES,
    WordsJudge,
    chat_script,
    cut,
    generator_of,
)
from tests.unit_tests.fakes import StreamingChatModel


def test_only_the_closing_chunk_is_marked_last() -> None:
    script = chat_script()
    assert [c.chunk_position for c in script].count("last") == 1
    chunks = list(manage_references(generator_of(script)).stream(INPUT))
    positions = [c.chunk_position for c in chunks]
    assert positions == [None] * (len(chunks) - 1) + ["last"]
    assert chunks[-1].text.startswith("\n\n- **1** [Needle]")  # the reference list


def test_message_chunks_of_any_type_stream() -> None:
    answer = "Seattle lies on Puget Sound [1](id=2)."
    pieces = [ChatMessageChunk(role="assistant", content=p) for p in cut(answer, 6)]
    assert not hasattr(pieces[0], "chunk_position")
    chunks = list(manage_references(generator_of(pieces)).stream(INPUT))
    text = "".join(c.text for c in chunks)
    assert text == (
        "Seattle lies on Puget Sound <sup>[[1](https://s.org/city)]</sup>.\n\n"
        "- **1** [https://s.org/city](https://s.org/city)"
    )


def test_a_runnable_that_does_not_output_text_is_named_with_the_fix() -> None:
    wrapped: Any = manage_references(RunnableLambda(lambda _: 42))
    with pytest.raises(TypeError) as raised:
        wrapped.invoke(INPUT)
    assert str(raised.value) == (
        "manage_references() needs a runnable that outputs text (str, messages or message "
        "chunks), got int. Put output parsers after it."
    )


def test_the_relay_keeps_the_callers_tags_and_adds_its_own() -> None:
    on = _Relay(active=True)
    assert on.inner_config({"tags": ["mine", "yours"], "metadata": {"k": 1}}) == {
        "tags": ["mine", "yours", NOSTREAM_TAG],
        "metadata": {"k": 1},
    }
    assert on.inner_config({}) == {"tags": [NOSTREAM_TAG]}
    off = _Relay(active=False)
    config: Any = {"tags": ["mine"]}
    assert off.inner_config(config) is config


def test_ai_chunks_keep_their_type() -> None:
    chunks = list(manage_references(generator_of(chat_script())).stream(INPUT))
    assert all(isinstance(c, AIMessageChunk) for c in chunks)


class _Tap(BaseCallbackHandler):
    """A streaming handler, as LangGraph's messages stream and astream_events attach."""

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        return output

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        return output


def test_the_relay_is_on_only_in_a_langgraph_node_whose_graph_streams_tokens() -> None:
    node = {"langgraph_checkpoint_ns": "agent:1"}
    streaming = CallbackManager(handlers=[_Tap()])
    quiet = CallbackManager(handlers=[BaseCallbackHandler()])
    cases: list[tuple[dict[str, Any], bool]] = [
        ({"metadata": node, "callbacks": streaming}, True),
        ({"metadata": {}, "callbacks": streaming}, False),  # astream_events outside a graph
        ({"callbacks": streaming}, False),
        ({"metadata": node, "callbacks": quiet}, False),  # a graph run that does not stream
        ({"metadata": node}, False),
        ({"metadata": node, "callbacks": [_Tap()]}, False),  # handlers, not a manager
    ]
    assert [_streams_to_langgraph(config) for config, _ in cases] == [on for _, on in cases]  # type: ignore[arg-type]


@pytest.mark.parametrize("question", ["Tell me more.", [HumanMessage("Tell me more.")]])
def test_a_bare_model_called_like_a_model_answers_with_its_own_citations(question: Any) -> None:
    model = StreamingChatModel(chunks=chat_script()).with_config(tags=["bare"])
    # native citations read (the default): the model's own citations, nothing to look up
    assert manage_references(model).invoke(question).text.startswith("The deck turns")
    with pytest.raises(TypeError) as raised:
        manage_references(model, native=None).invoke(question)
    assert str(raised.value) == (
        "manage_references() input must be a dict holding 'documents', "
        f"got {type(question).__name__}"
    )
    # a dict without documents: the model input under "input", the model's own citations
    assert manage_references(model).invoke({"input": question}).text.startswith("The deck turns")


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ("a page", "input['documents'] must be a list of Documents, got str"),
        ([DOCS[0], {"page_content": "x"}], "input['documents'][1] is dict, not a Document"),
    ],
)
def test_documents_that_are_not_a_list_of_documents_are_named(documents: Any, message: str) -> None:
    wrapped = manage_references(generator_of(["Hi."]))
    with pytest.raises(TypeError) as raised:
        wrapped.invoke({"documents": documents, "input": "q"})
    assert str(raised.value) == message


def test_a_whole_message_without_citations_is_returned_without_an_empty_block() -> None:
    blocks = [{"type": "text", "text": "No sources here."}]
    wrapped = manage_references(RunnableLambda(lambda _: AIMessage(content=list(blocks))))
    assert wrapped.invoke(INPUT).content == blocks


def test_the_unsupported_claims_are_appended_only_when_asked() -> None:
    options: dict[str, Any] = {"verifier": CitationVerifier(WordsJudge())}
    plain = manage_references(generator_of(cut(ANSWER, 5)), **options)
    marked = manage_references(generator_of(cut(ANSWER, 5)), mark_unsupported=True, **options)
    note = NOTES["markdown"]
    plain_text = "".join(plain.stream(INPUT))
    assert note not in plain_text
    assert "".join(marked.stream(INPUT)) == plain_text + note


def test_no_chunk_is_marked_last_when_the_wrapped_stream_marked_none() -> None:
    pieces = [AIMessageChunk(content=p, id="run-1") for p in cut(ANSWER, 9)]
    chunks = list(manage_references(generator_of(pieces)).stream(INPUT))
    assert [c.chunk_position for c in chunks] == [None] * len(chunks)
    assert chunks[-1].text.startswith("\n\n- **1** [Needle]")


def test_the_closing_chunk_has_no_id_when_no_chunk_had_one() -> None:
    pieces = [AIMessageChunk(content=p) for p in cut(ANSWER, 9)]
    assert {p.id for p in pieces} == {None}
    chunks = list(manage_references(generator_of(pieces)).stream(INPUT))
    assert chunks[-1].text.startswith("\n\n- **1** [Needle]")
    assert chunks[-1].id is None


@pytest.mark.parametrize("version", [None, "v0", "v1"])
def test_every_output_version_langchain_knows_is_accepted(version: str | None) -> None:
    wrapped = manage_references(RunnableLambda(lambda _: "x"), output_version=version)
    assert wrapped.output_version == version


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"output_version": "V0"},
            ValueError,
            "output_version must be None, 'v0' or 'v1', not 'V0'",
        ),
        ({"style": "markdown"}, TypeError, "style must be a ReferenceStyle, not str"),
        (
            {"verifier": 3},
            TypeError,
            "verifier must have verify() and averify() (e.g. a CitationVerifier), not int",
        ),
        ({"mark_unsupported": True}, ValueError, "mark_unsupported=True needs a verifier"),
        (
            {"on_unsupported": "hide"},
            ValueError,
            "on_unsupported must be one of ['keep', 'flag', 'drop'], not 'hide'",
        ),
        ({"on_unsupported": "drop"}, ValueError, "on_unsupported='drop' needs a verifier"),
    ],
)
def test_a_wrong_option_is_named_with_what_was_given(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        manage_references(RunnableLambda(lambda _: "x"), **options)
    assert str(caught.value) == message


def test_something_that_is_not_a_runnable_is_named() -> None:
    with pytest.raises(TypeError) as caught:
        manage_references(len)  # type: ignore[arg-type]
    assert (
        str(caught.value) == "manage_references() takes a Runnable, not builtin_function_or_method"
    )


@pytest.mark.parametrize(("own", "asked", "expected"), [(None, "v1", "v1"), ("v1", None, "v1")])
def test_a_wrapped_chat_model_takes_the_asked_output_version_else_its_own(
    own: str | None, asked: str | None, expected: str
) -> None:
    model = StreamingChatModel(
        chunks=[AIMessageChunk(content="Paris [1](id=1).")], output_version=own
    )
    wrapped = manage_references(model, output_version=asked)
    assert wrapped.output_version == expected
    docs = [Document("Paris is in France.", metadata={"source": "https://fr.example"})]
    content = wrapped.invoke({"input": "Where is Paris?", "documents": docs}).content
    assert [block["type"] for block in content] == ["text"]
    assert [a["url"] for a in content[0]["annotations"]] == ["https://fr.example"]


def test_a_wrapper_built_directly_reads_the_documents_key_by_default() -> None:
    wrapped = ReferencedRunnable(
        RunnableLambda(lambda _: "Paris [7](id=1)."), style=TextReferenceStyle()
    )
    documents = [Document("p", metadata={"source": "https://fr.example"})]
    assert wrapped.invoke({"documents": documents}) == "Paris [1].\n\n- [1] https://fr.example"
