"""Live provider-native citations through ``manage_references``; each skips without its key.

Each test asks a real model a question that makes it cite (web search or grounding), streams
the answer through ``manage_references(model)`` (``native="auto"``) and checks that the
provider's citations became numbered references: inline ``[n]`` markers in the Text style, a
reference list, and ``response_metadata["references"]`` with one entry per distinct source.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk

from langchain_references import TextReferenceStyle, manage_references

pytestmark = pytest.mark.enable_socket

QUESTION = "How tall is the Eiffel Tower? Answer in one sentence and cite your source."


def _needs(variable: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not os.environ.get(variable), reason=f"needs {variable}")


def _check(model: Any, **options: Any) -> None:
    chain = manage_references(model, style=TextReferenceStyle(), **options)
    chunks = list(chain.stream(QUESTION))
    text = "".join(chunk.text for chunk in chunks if isinstance(chunk, AIMessageChunk))
    references = chunks[-1].response_metadata["references"]
    assert references, text
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", text.split("\n\n- [1]")[0])}
    assert numbers == {ref["number"] for ref in references}, text
    sources = [ref["source"] for ref in references]
    assert len(sources) == len(set(sources))
    assert all("utm_" not in (source or "") for source in sources)


@_needs("ANTHROPIC_API_KEY")
def test_anthropic_web_search() -> None:
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    model = langchain_anthropic.ChatAnthropic(
        model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")
    ).bind_tools([{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}])
    _check(model)


@_needs("OPENAI_API_KEY")
def test_openai_responses_web_search() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    model = langchain_openai.ChatOpenAI(
        model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), use_responses_api=True
    ).bind_tools([{"type": "web_search"}])
    _check(model)


@_needs("PPLX_API_KEY")
def test_perplexity() -> None:
    langchain_perplexity = pytest.importorskip("langchain_perplexity")
    _check(langchain_perplexity.ChatPerplexity(model="sonar"))


@_needs("GOOGLE_API_KEY")
def test_gemini_grounding() -> None:
    langchain_google_genai = pytest.importorskip("langchain_google_genai")
    model = langchain_google_genai.ChatGoogleGenerativeAI(
        model=os.environ.get("GEMINI_MODEL", "gemini-2.5-flash")
    ).bind_tools([{"google_search": {}}])
    _check(model)


@_needs("COHERE_API_KEY")
def test_cohere_documents_invoke() -> None:
    """Cohere cites on invoke only (langchain-cohere drops citation events when streaming)."""
    langchain_cohere = pytest.importorskip("langchain_cohere")
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    docs = [Document("The Eiffel Tower is 330 metres tall.", metadata={"source": "https://e.org"})]
    model = langchain_cohere.ChatCohere()
    answer = RunnableLambda(
        lambda inputs: model.invoke(
            QUESTION, documents=[{"id": "0", "data": {"text": docs[0].page_content}}]
        )
    )
    out = manage_references(answer, style=TextReferenceStyle(), native="cohere").invoke(
        {"documents": docs}
    )
    assert out.response_metadata["references"], out.text
