"""Live test against OpenAI; skipped without OPENAI_API_KEY (and never run offline)."""

from __future__ import annotations

import os

import pytest
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from langchain_references import (
    FORMAT_REFERENCES,
    TextReferenceStyle,
    format_documents,
    manage_references,
)

pytestmark = [
    pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY"),
    pytest.mark.enable_socket,  # unit tests allow 127.0.0.1 only; these talk to the API
]


def test_openai_answer_is_cited() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    documents = [
        Document("The Space Needle is in Seattle.", metadata={"source": "https://a.example"}),
        Document("It was built in 1962.", metadata={"source": "https://b.example"}),
    ]
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from the documents. " + FORMAT_REFERENCES + "\n\n{context}"),
            ("human", "{question}"),
        ]
    )
    model = langchain_openai.ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    chain = manage_references(
        RunnablePassthrough.assign(context=lambda x: format_documents(x["documents"]))
        | prompt
        | model,
        style=TextReferenceStyle(),
    )
    chunks = list(chain.stream({"documents": documents, "question": "Where and when?"}))
    text = "".join(c.content for c in chunks)
    assert "(id=" not in text
    assert "- [1] https://" in text
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert merged.response_metadata["references"]
