"""Reading a conversation's documents in every form its history gives them back, with ids.

Unit tests of :mod:`langchain_references.conversation` (the agent tests over real
checkpointers are in ``test_conversations.py``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_references.chat_model import conversation_documents
from langchain_references.conversation import (
    ConversationIds,
    artifact_documents,
    as_document,
    give_ids,
    number_conversation,
)
from langchain_references.core.numbering import ABSENT_DOCUMENT
from langchain_references.core.prompting import FORMAT_REFERENCES

PARIS = Document("Paris is in France.", metadata={"source": "https://paris.example"}, id="p")


def tool(artifact: Any, call_id: str = "c1", *, message_id: str | None = None) -> ToolMessage:
    return ToolMessage("tool text", artifact=artifact, tool_call_id=call_id, id=message_id)


@pytest.mark.parametrize(
    "item",
    [PARIS, PARIS.model_dump(), dumpd(PARIS)],
    ids=["document", "checkpoint-dict", "lc-constructor"],
)
def test_every_form_of_a_document_is_read_as_that_document(item: Any) -> None:
    document = as_document(item)
    assert isinstance(document, Document)
    assert (document.page_content, document.metadata, document.id) == (
        "Paris is in France.",
        {"source": "https://paris.example"},
        "p",
    )


def test_a_document_object_is_returned_as_it_is() -> None:
    assert as_document(PARIS) is PARIS


@pytest.mark.parametrize(
    "item",
    [
        "text",
        3,
        None,
        {"page_content": "no type"},
        {"type": "Other", "page_content": "x"},
        {"lc": 1, "type": "constructor", "id": ["x", "AIMessage"], "kwargs": {}},
        {"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]},
    ],
)
def test_anything_else_is_not_a_document(item: Any) -> None:
    assert as_document(item) is None


def test_a_checkpoint_dict_without_metadata_or_id_is_read() -> None:
    document = as_document({"type": "Document", "page_content": "x"})
    assert document is not None
    assert (document.page_content, document.metadata, document.id) == ("x", {}, None)


def test_artifacts_mixing_forms_keep_their_order() -> None:
    other = Document("Lyon is in France.", metadata={"source": "https://lyon.example"})
    found = artifact_documents(tool([dumpd(other), PARIS.model_dump(), PARIS]))
    assert found is not None
    assert [d.page_content for d in found] == [
        "Lyon is in France.",
        "Paris is in France.",
        "Paris is in France.",
    ]
    assert found[2] is PARIS


@pytest.mark.parametrize(
    "artifact",
    [[], (), None, "text", [PARIS, "text"], [PARIS, 3], {"count": 3}, [[PARIS]]],
    ids=["empty", "empty-tuple", "none", "str", "mixed-str", "mixed-int", "dict", "nested"],
)
def test_an_artifact_that_is_not_a_list_of_documents_is_left_alone(artifact: Any) -> None:
    message = tool(artifact)
    assert artifact_documents(message) is None
    shown, documents = conversation_documents([HumanMessage("q"), message])
    assert documents == []
    assert shown[1] is message  # shown as the tool returned it: "tool text", not documents


def test_a_tool_that_found_nothing_keeps_its_own_text() -> None:
    """An empty artifact is no documents: the tool's "No result" reaches the model as it is."""
    empty = ToolMessage("No result found.", artifact=[], tool_call_id="c1")
    found = ToolMessage("Paris.", artifact=[PARIS], tool_call_id="c2")
    shown, documents = conversation_documents([empty, found])
    assert shown[0].content == "No result found."
    assert documents == [PARIS]
    assert "<document id=1>" in shown[1].text


def test_an_invalid_document_is_skipped_with_a_warning_and_the_rest_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = {"type": "Document", "page_content": None, "metadata": {}}
    bad_metadata = {"type": "Document", "page_content": "x", "metadata": ["not", "a", "map"]}
    invalid = Document.model_construct(page_content=None, metadata={})
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        found = artifact_documents(tool([broken, PARIS, bad_metadata, invalid], "call-7"))
    assert found == [PARIS]
    assert [r.getMessage() for r in caplog.records] == [
        "Skipped item 0 of the artifact of tool call 'call-7': page_content is NoneType, not text",
        "Skipped item 2 of the artifact of tool call 'call-7': metadata is list, not a mapping",
        "Skipped item 3 of the artifact of tool call 'call-7': page_content is NoneType, not text",
    ]


def test_an_artifact_of_invalid_documents_only_is_no_documents() -> None:
    assert artifact_documents(tool([{"type": "Document", "page_content": 3}])) is None


def test_a_single_document_artifact_in_any_form_is_one_document() -> None:
    for artifact in (PARIS, PARIS.model_dump(), dumpd(PARIS)):
        found = artifact_documents(tool(artifact))
        assert found is not None
        assert [d.page_content for d in found] == ["Paris is in France."]


def test_only_tool_messages_carry_documents() -> None:
    assert artifact_documents(AIMessage("[1](id=1)")) is None


def _docs(n: int, prefix: str) -> list[Document]:
    return [Document(f"{prefix}{i}", metadata={"source": f"https://{prefix}{i}"}) for i in range(n)]


def test_without_earlier_ids_documents_are_numbered_in_order_each_time_shown() -> None:
    a, b = _docs(2, "a"), _docs(1, "b")
    messages = [tool(a, "c1", message_id="m1"), tool(b, "c2", message_id="m2")]
    given, ids = give_ids([*messages, messages[0]])
    assert given == [(1, a), (3, b), (4, a)]
    assert ids == ConversationIds({}, 6)


def test_earlier_ids_are_kept_when_messages_before_them_are_removed() -> None:
    a, b, c = _docs(2, "a"), _docs(1, "b"), _docs(2, "c")
    first = [tool(a, "c1", message_id="m1"), tool(b, "c2", message_id="m2")]
    _, ids = give_ids(first, ConversationIds())
    assert ids == ConversationIds({"m1": 1, "m2": 3}, 4)
    # "m1" summarized away, "m3" new: "m2" keeps id 3, "m3" goes on from 4
    later = [HumanMessage("summary"), first[1], tool(c, "c3", message_id="m3")]
    numbered = number_conversation(later, instruction=None, ids=ids)
    assert numbered.ids == ConversationIds({"m1": 1, "m2": 3, "m3": 4}, 6)
    assert numbered.documents == [ABSENT_DOCUMENT, ABSENT_DOCUMENT, *b, *c]
    assert numbered.shown[1].text.startswith("<document id=3>")
    assert "<document id=5>\nc1\n</document>" in numbered.shown[2].text
    assert numbered.shown[0] is later[0]


def test_a_tool_message_without_an_id_is_keyed_by_its_tool_call() -> None:
    _, ids = give_ids([tool(_docs(1, "a"), "call-9")], ConversationIds())
    assert ids.first == {"call-9": 1}


def test_the_ids_survive_the_state_round_trip_and_bad_state_reads_as_none() -> None:
    ids = ConversationIds({"m1": 1, "m2": 4}, 7)
    assert ConversationIds.from_state(ids.to_state()) == ids
    assert ConversationIds.from_state(None) == ConversationIds()
    assert ConversationIds.from_state({"first": {"m": 0, "n": "2", "o": 3}, "next_id": -1}) == (
        ConversationIds({"o": 3}, 1)
    )


def test_the_instruction_comes_before_each_tool_results_documents() -> None:
    numbered = number_conversation([tool([PARIS])], instruction="CITE")
    assert numbered.shown[0].text == ("CITE\n\n<document id=1>\nParis is in France.\n</document>")


def test_an_invalid_document_warns_when_its_tool_result_is_new_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = tool([{"type": "Document", "page_content": None}, PARIS], "c1")
    later = [HumanMessage("q"), AIMessage("", tool_calls=[]), broken]
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        first = number_conversation(later, instruction=None)
        assert len(caplog.records) == 1
        # the next call: the model answered after the tool result, which is no longer new
        again = number_conversation([*later, AIMessage("Paris [1](id=1).")], instruction=None)
    assert len(caplog.records) == 1
    assert first.documents == again.documents == [PARIS]


def test_conversation_documents_shows_the_citation_instruction_by_default() -> None:
    shown, documents = conversation_documents([tool([PARIS])])
    assert shown[0].text == (
        f"{FORMAT_REFERENCES}\n\n<document id=1>\nParis is in France.\n</document>"
    )
    assert documents == [PARIS]
    shown, _ = conversation_documents([tool([PARIS])], instruction="CITE")
    assert shown[0].text == "CITE\n\n<document id=1>\nParis is in France.\n</document>"


def test_state_without_a_mapping_of_first_ids_keeps_its_next_id() -> None:
    assert ConversationIds.from_state({"next_id": 3}) == ConversationIds({}, 3)
    assert ConversationIds.from_state({"first": ["m1"], "next_id": 4}) == ConversationIds({}, 4)


def test_state_keys_are_read_as_text() -> None:
    assert ConversationIds.from_state({"first": {7: 2}, "next_id": 3}) == ConversationIds(
        {"7": 2}, 3
    )


def test_a_serialized_document_without_kwargs_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    no_kwargs = {"lc": 1, "type": "constructor", "id": ["langchain", "Document"]}
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        found = artifact_documents(tool([no_kwargs, PARIS], "call-3"))
    assert found == [PARIS]
    assert [r.getMessage() for r in caplog.records] == [
        "Skipped item 0 of the artifact of tool call 'call-3': a serialized Document without kwargs"
    ]


def test_an_id_that_is_not_text_is_not_kept() -> None:
    document = as_document({"type": "Document", "page_content": "x", "id": 3})
    assert document is not None
    assert (document.page_content, document.id) == ("x", None)


def test_a_document_object_with_metadata_that_is_not_a_mapping_is_invalid() -> None:
    broken = Document.model_construct(page_content="x", metadata=["not", "a", "map"])
    with pytest.raises(ValueError, match=r"^metadata is list, not a mapping$"):
        as_document(broken)


def test_an_invalid_page_content_is_named_by_its_type() -> None:
    with pytest.raises(ValueError, match=r"^page_content is int, not text$"):
        as_document({"type": "Document", "page_content": 3})


def test_the_constructor_form_needs_its_lc_marker() -> None:
    kwargs = {"page_content": "x", "metadata": {}}
    assert as_document({"type": "constructor", "id": ["a", "Document"], "kwargs": kwargs}) is None
    assert as_document({"lc": 1, "type": "not_implemented", "id": ["a", "Document"]}) is None


def test_a_conversation_without_an_answer_yet_warns_for_its_first_tool_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = tool([{"type": "Document", "page_content": None}, PARIS], "c1")
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        number_conversation([broken], instruction=None)
    assert len(caplog.records) == 1


def test_only_the_tool_results_after_the_last_answer_warn(caplog: pytest.LogCaptureFixture) -> None:
    broken = tool([{"type": "Document", "page_content": None}, PARIS], "c1")
    later = tool([{"type": "Document", "page_content": None}, PARIS], "c2")
    messages = [HumanMessage("q"), broken, AIMessage("a"), HumanMessage("r"), later]
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        number_conversation(messages, instruction=None)
    assert [r.getMessage() for r in caplog.records] == [
        "Skipped item 0 of the artifact of tool call 'c2': page_content is NoneType, not text"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        number_conversation(
            [HumanMessage("q"), broken, AIMessage("a"), HumanMessage("r")], instruction=None
        )
    assert caplog.records == []


NESTED = "a nested list (its item"


@pytest.mark.parametrize(
    ("artifact", "what"),
    [
        ([[PARIS, PARIS]], f"{NESTED} 0 is a list of documents)"),
        ([PARIS, [PARIS]], f"{NESTED} 1 is a list of documents)"),
        ([[{"type": "Document", "page_content": None}]], f"{NESTED} 0 is a list of documents)"),
        ((d for d in [PARIS]), "an iterator (generator)"),
        (iter([PARIS]), "an iterator (list_iterator)"),
        (map(lambda d: d, [PARIS]), "an iterator (map)"),
    ],
    ids=["nested", "nested-later", "nested-invalid", "generator", "iterator", "map"],
)  # fmt: skip
def test_documents_in_a_form_not_read_are_named_in_a_warning(
    artifact: Any, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        assert artifact_documents(tool(artifact, "call-9")) is None
        assert artifact_documents(tool(artifact, "call-9"), warn=False) is None
    assert [r.getMessage() for r in caplog.records] == [
        f"The artifact of tool call 'call-9' is {what}: its documents are not numbered or "
        "cited; return a Document or a flat list of Documents"
    ]


@pytest.mark.parametrize(
    "artifact",
    [None, "text", b"bytes", 3, [], [["a", "b"]], [[]], [1, 2], {"key": "value"}],
    ids=["none", "str", "bytes", "int", "empty", "nested-strings", "nested-empty", "ints", "dict"],
)
def test_an_artifact_that_holds_no_documents_is_left_alone_without_a_word(
    artifact: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_references.conversation"):
        assert artifact_documents(tool(artifact)) is None
    assert caplog.records == []
