"""The schemas, configurable fields and run name of manage_references() tell the truth."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import (
    ConfigurableField,
    RunnableLambda,
    RunnablePassthrough,
)

from langchain_references import (
    LangchainReferencesError,
    MissingDocumentsError,
    ReferencedRunnable,
    TextReferenceStyle,
    format_documents,
    manage_references,
)
from tests.unit_tests.fakes import RunCollector

DOCS = [
    Document("The Space Needle is in Seattle.", metadata={"source": "https://s.org"}),
    Document("It opened in 1962.", metadata={"source": "https://h.org"}),
]
ANSWER = "It is in Seattle [1](id=1)."
EXPECTED = "It is in Seattle [1].\n\n- [1] https://s.org"
OTHER = "It opened in 1962 [1](id=2)."
OTHER_EXPECTED = "It opened in 1962 [1].\n\n- [1] https://h.org"

PROMPT = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{question}")])


def rag_chain(*answers: str) -> Any:
    model = FakeListChatModel(responses=list(answers) or [ANSWER])
    return (
        RunnablePassthrough.assign(context=lambda x: format_documents(x["documents"]))
        | PROMPT
        | model
    )


def properties(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema["properties"])


# -- the input schema ------------------------------------------------------------------------


def test_input_schema_of_a_chain_has_the_documents_and_the_prompt_variables() -> None:
    wrapped = manage_references(rag_chain())
    schema = wrapped.get_input_jsonschema()
    props = properties(schema)
    assert set(props) == {"documents", "question"}  # "context" is made by the chain
    assert props["documents"]["type"] == "array"
    assert props["documents"]["items"] == {"$ref": "#/$defs/Document"}
    assert "page_content" in schema["$defs"]["Document"]["properties"]
    assert props["question"]["type"] == "string"
    assert set(schema["required"]) == {"documents", "question"}
    assert wrapped.get_input_schema().model_json_schema() == schema


def test_input_schema_of_a_bare_prompt_chain_keeps_every_variable() -> None:
    wrapped = manage_references(PROMPT | FakeListChatModel(responses=[ANSWER]))
    assert set(properties(wrapped.get_input_jsonschema())) == {"documents", "context", "question"}


def test_input_schema_of_a_bare_llm_has_the_input_key() -> None:
    model = FakeListLLM(responses=[ANSWER])
    wrapped = manage_references(model, documents_key="docs")
    schema = wrapped.get_input_jsonschema()
    props = properties(schema)
    assert set(props) == {"docs", "input"}
    assert set(schema["required"]) == {"docs", "input"}
    # the "input" key takes what the model takes: a string, a prompt value or messages
    assert props["input"]["anyOf"] == model.get_input_jsonschema()["anyOf"]
    kinds = {option.get("type") for option in props["input"]["anyOf"]}
    assert {"string", "array"} <= kinds


def test_input_schema_of_a_chat_model_is_the_chat_models() -> None:
    # the wrapper of a chat model is a chat model (agents call it with messages); its dict
    # input {"docs": [...], "input": ...} is served too, outside the schema
    model = FakeListChatModel(responses=[ANSWER])
    wrapped = manage_references(model, documents_key="docs", style=TextReferenceStyle())
    assert wrapped.get_input_jsonschema()["anyOf"] == model.get_input_jsonschema()["anyOf"]
    docs = [Document("x", metadata={"source": "https://s.org"})]
    assert wrapped.invoke({"docs": docs, "input": "q"}).content == EXPECTED


def test_input_schema_keeps_the_required_and_default_fields_of_a_pydantic_v1_schema() -> None:
    from pydantic import v1

    class Question(v1.BaseModel):  # tools and older runnables may still declare v1 inputs
        question: str
        k: int = 4
        lang: str | None = None

    class Answerer(RunnableLambda[Any, str]):
        def get_input_schema(self, config: Any = None) -> Any:
            return Question

    schema = manage_references(Answerer(lambda _: ANSWER)).get_input_jsonschema()
    props = properties(schema)
    assert set(props) == {"documents", "question", "k", "lang"}
    assert (props["k"]["default"], props["lang"]["default"]) == (4, None)
    assert "default" not in props["question"]
    assert set(schema["required"]) == {"documents", "question"}


def test_input_schema_validates_the_documents() -> None:
    schema = manage_references(RunnableLambda(lambda _: "x")).get_input_schema()
    assert set(schema.model_fields) == {"documents"}
    schema.model_validate({"documents": DOCS})
    with pytest.raises(ValueError, match="documents"):
        schema.model_validate({})


def test_a_private_looking_documents_key_is_still_declared() -> None:
    schema = manage_references(RunnableLambda(lambda _: "x"), documents_key="_docs")
    assert set(properties(schema.get_input_jsonschema())) == {"_docs"}
    schema.get_input_schema().model_validate({"_docs": DOCS})


def test_input_schema_title_follows_the_run_name() -> None:
    wrapped = manage_references(rag_chain(), name="my_rag")
    title = wrapped.get_input_jsonschema()["title"]
    assert title == wrapped.get_name("Input")
    assert title.startswith("my_rag")


# -- the output schema -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "runnable",
    [
        FakeListChatModel(responses=[ANSWER]),
        FakeListLLM(responses=[ANSWER]),
        PROMPT | FakeListLLM(responses=[ANSWER]),
    ],
)
def test_output_schema_is_the_wrapped_runnables(runnable: Any) -> None:
    wrapped = manage_references(runnable)
    assert wrapped.get_output_jsonschema() == runnable.get_output_jsonschema()


def test_output_schema_of_a_string_chain_is_a_string() -> None:
    wrapped = manage_references(PROMPT | FakeListLLM(responses=[ANSWER]))
    assert wrapped.get_output_jsonschema()["type"] == "string"


# -- configurable fields ---------------------------------------------------------------------


def test_config_specs_are_the_wrapped_runnables() -> None:
    model = FakeListChatModel(responses=[ANSWER]).configurable_fields(
        responses=ConfigurableField(id="answers", name="Answers")
    )
    wrapped = manage_references(model)
    assert [spec.id for spec in wrapped.config_specs] == ["answers"]
    configurable = wrapped.config_schema().model_json_schema()["$defs"]["Configurable"]
    assert "answers" in configurable["properties"]


def test_a_configurable_field_of_a_bare_model_works_through_the_wrapper() -> None:
    model = FakeListChatModel(responses=[ANSWER]).configurable_fields(
        responses=ConfigurableField(id="answers")
    )
    wrapped = manage_references(model, style=TextReferenceStyle())
    inp = {"documents": DOCS, "input": "q"}  # a configurable model is still a bare model
    assert wrapped.invoke(inp).content == EXPECTED
    other = wrapped.with_config(configurable={"answers": [OTHER]})
    assert other.invoke(inp).content == OTHER_EXPECTED
    streamed = list(other.stream(inp))
    assert "".join(str(c.content) for c in streamed) == OTHER_EXPECTED

    async def run() -> list[Any]:
        return [await other.ainvoke(inp), [c async for c in other.astream(inp)]]

    invoked, astreamed = asyncio.run(run())
    assert invoked.content == OTHER_EXPECTED
    assert "".join(str(c.content) for c in astreamed) == OTHER_EXPECTED


def test_configurable_alternatives_inside_a_chain_work_through_the_wrapper() -> None:
    model = FakeListChatModel(responses=[ANSWER]).configurable_alternatives(
        ConfigurableField(id="llm"),
        default_key="first",
        second=FakeListChatModel(responses=[OTHER]),
    )
    chain = RunnablePassthrough.assign(context=lambda x: "ctx") | PROMPT | model
    wrapped = manage_references(chain, style=TextReferenceStyle())
    assert [spec.id for spec in wrapped.config_specs] == ["llm"]
    inp = {"documents": DOCS, "question": "q"}
    assert wrapped.invoke(inp).content == EXPECTED
    second = wrapped.with_config(configurable={"llm": "second"})
    assert second.invoke(inp).content == OTHER_EXPECTED
    assert wrapped.invoke(inp, {"configurable": {"llm": "second"}}).content == OTHER_EXPECTED


# -- the run name ----------------------------------------------------------------------------


def test_name_sets_the_run_name() -> None:
    wrapped = manage_references(rag_chain(ANSWER, ANSWER), name="my_rag")
    assert wrapped.get_name() == "my_rag"
    tracer = RunCollector()
    inp = {"documents": DOCS, "question": "q"}
    wrapped.invoke(inp, {"callbacks": [tracer]})
    list(wrapped.stream(inp, {"callbacks": [tracer]}))
    assert [run.name for run in tracer.runs] == ["my_rag", "my_rag"]


def test_name_appears_in_astream_events() -> None:
    wrapped = manage_references(
        RunnableLambda(lambda _: ANSWER), name="my_rag", style=TextReferenceStyle()
    )

    async def run() -> list[Any]:
        return [e async for e in wrapped.astream_events({"documents": DOCS}, version="v2")]

    events = asyncio.run(run())
    assert events[0]["event"] == "on_chain_start"
    assert events[0]["name"] == "my_rag"
    assert events[-1]["event"] == "on_chain_end"
    assert events[-1]["name"] == "my_rag"
    assert events[-1]["data"]["output"] == EXPECTED


def test_default_name_and_the_constructor() -> None:
    model = FakeListChatModel(responses=[ANSWER])
    assert manage_references(model).get_name() == "ManageReferences[FakeListChatModel]"
    assert ReferencedRunnable(model, name="direct").get_name() == "direct"


# -- errors ----------------------------------------------------------------------------------


def test_missing_documents_error_is_both_a_package_error_and_a_key_error() -> None:
    assert issubclass(MissingDocumentsError, LangchainReferencesError)
    assert issubclass(MissingDocumentsError, KeyError)
    wrapped = manage_references(FakeListChatModel(responses=[ANSWER]))
    with pytest.raises(LangchainReferencesError, match="'input'"):
        wrapped.invoke({"documents": DOCS})
