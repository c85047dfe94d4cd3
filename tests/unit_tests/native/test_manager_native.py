"""``manage_references(native=...)``: every provider's citations in one numbering and style.

Each provider's recorded answers (built through the provider integrations' own conversion
code, see the ``_*_streams`` modules) run through the references runnable in the three modes
(invoke, stream, astream); the expected text is computed here independently from the adapter
pieces the adapter tests pin, with the numbering rule written out: first use, one number per
source, ``[n](id=k)`` citations and provider citations sharing it.
"""

from __future__ import annotations

import html.parser
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_references import manage_references
from langchain_references.core.styles import HTMLReferenceStyle, TextReferenceStyle
from langchain_references.native import Piece, UnknownAdapterError
from tests.unit_tests.native import (
    _anthropic_streams,
    _cohere_streams,
    _gemini_streams,
    _openai_streams,
    _perplexity_streams,
    _v1_streams,
)

DOCS = [
    Document(f"Passage {i}.", metadata={"source": f"https://docs.example/{i}", "title": f"Doc {i}"})
    for i in range(3)
]

# (id, chunks, whole message, expected pieces, documents)
Case = tuple[
    str, Callable[[], list[AIMessageChunk]], Callable[[], AIMessage], list[Piece], list[Document]
]


def _cases() -> list[Case]:
    cases: list[Case] = []
    for name in _anthropic_streams.SCENARIOS:
        cases.append(
            (
                f"anthropic-{name}",
                lambda n=name: _anthropic_streams.scenario_chunks(n),
                lambda n=name: _anthropic_streams.scenario_message(n),
                _anthropic_streams.expected_pieces(name),
                DOCS,
            )
        )
    for name in _openai_streams.SCENARIOS:
        cases.append(
            (
                f"openai-{name}",
                lambda n=name: _openai_streams.scenario_chunks(n),
                lambda n=name: _openai_streams.scenario_message(n),
                _openai_streams.expected_pieces(name),
                DOCS,
            )
        )
    for answer in ("plain", "mixed"):
        cases.append(
            (
                f"perplexity-{answer}",
                lambda a=answer: _perplexity_streams.stream_chunks(a),
                lambda a=answer: _perplexity_streams.invoke_message(a),
                _perplexity_streams.expected_pieces(answer),
                DOCS,
            )
        )
        cases.append(
            (
                f"gemini-{answer}",
                lambda a=answer: _gemini_streams.stream_chunks(a),
                lambda a=answer: _gemini_streams.invoke_message(a),
                _gemini_streams.expected_pieces(answer),
                DOCS,
            )
        )
    for answer in ("openai", "blocks", "mixed"):
        cases.append(
            (
                f"v1-{answer}",
                lambda a=answer: _v1_streams.stream_chunks(a),
                lambda a=answer: _v1_streams.invoke_message(a),
                _v1_streams.expected_pieces(answer),
                DOCS,
            )
        )
    return cases


CASES = _cases()
IDS = [case[0] for case in CASES]


class Recorded(Runnable[Any, Any]):
    """Replays a provider's recorded output: the chunks when streamed, the message invoked."""

    def __init__(self, chunks: list[AIMessageChunk], message: AIMessage) -> None:
        self.chunks = chunks
        self.message = message

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.message

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        yield from self.chunks

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        for chunk in self.chunks:
            yield chunk


_OWN = re.compile(r"\[(\d+)\]\(id=(\d+)\)")


def expected_text(pieces: Sequence[Piece], documents: Sequence[Document]) -> tuple[str, list[Any]]:
    """The answer as the Text style writes it, and the source keys in number order."""
    keys: list[Any] = []

    def number(key: Any) -> str:
        if key not in keys:
            keys.append(key)
        return f"[{keys.index(key) + 1}]"

    def own(match: re.Match[str]) -> str:
        k = int(match.group(2))
        if not 1 <= k <= len(documents):
            return ""
        return number(documents[k - 1].metadata.get("source") or ("position", k))

    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(_OWN.sub(own, piece))
        elif piece.document_index is not None and piece.document_index < len(documents):
            doc = documents[piece.document_index]
            out.append(number(doc.metadata.get("source") or ("position", piece.document_index + 1)))
        else:
            out.append(number(piece.source or piece.url))
    return "".join(out), keys


def text_of(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        block if isinstance(block, str) else block.get("text", "")
        for block in content
        if isinstance(block, str) or block.get("type") == "text"
    )


def _split(answer: str) -> tuple[str, str]:
    body, sep, listing = answer.partition("\n\n- [1] ")
    return body, sep + listing


def _check(
    output: str, final: BaseMessage | None, pieces: list[Piece], docs: list[Document]
) -> None:
    text, keys = expected_text(pieces, docs)
    body, listing = _split(output)
    assert body == text
    assert len(re.findall(r"^- \[\d+\] ", listing.strip(), re.M)) == len(keys)
    if final is not None:
        refs = final.response_metadata["references"]
        assert [ref["number"] for ref in refs] == list(range(1, len(keys) + 1))
        assert [ref["source"] for ref in refs] == [
            key if isinstance(key, str) else None for key in keys
        ]


@pytest.mark.parametrize(("name", "chunks", "message", "pieces", "docs"), CASES, ids=IDS)
def test_invoke(
    name: str, chunks: Any, message: Any, pieces: list[Piece], docs: list[Document]
) -> None:
    chain = manage_references(Recorded(chunks(), message()), style=TextReferenceStyle())
    out = chain.invoke({"documents": docs})
    assert isinstance(out, AIMessage)
    _check(text_of(out.content), out, pieces, docs)


@pytest.mark.parametrize(("name", "chunks", "message", "pieces", "docs"), CASES, ids=IDS)
def test_stream(
    name: str, chunks: Any, message: Any, pieces: list[Piece], docs: list[Document]
) -> None:
    chain = manage_references(Recorded(chunks(), message()), style=TextReferenceStyle())
    outs = list(chain.stream({"documents": docs}))
    merged = outs[0]
    for out in outs[1:]:
        merged = merged + out
    assert text_of(merged.content) == "".join(text_of(out.content) for out in outs)
    _check(text_of(merged.content), outs[-1], pieces, docs)


@pytest.mark.parametrize(("name", "chunks", "message", "pieces", "docs"), CASES, ids=IDS)
async def test_astream(
    name: str, chunks: Any, message: Any, pieces: list[Piece], docs: list[Document]
) -> None:
    chain = manage_references(Recorded(chunks(), message()), style=TextReferenceStyle())
    outs = [out async for out in chain.astream({"documents": docs})]
    _check("".join(text_of(out.content) for out in outs), outs[-1], pieces, docs)


def test_one_number_per_source_across_native_and_own_citations() -> None:
    """Provider citations of documents[1] and of doc 0's URL share numbers with [n](id=k)."""
    message = AIMessage(
        content=[
            {
                "type": "text",
                "text": "A",
                "citations": [
                    {
                        "type": "char_location",
                        "document_index": 1,
                        "cited_text": "Passage 1.",
                        "start_char_index": 0,
                        "end_char_index": 10,
                        "document_title": "Doc 1",
                    }
                ],
            },
            {"type": "text", "text": " B [9](id=2) C [9](id=1) D"},
            {
                "type": "text",
                "text": " E",
                "citations": [
                    {
                        "type": "web_search_result_location",
                        "title": "Doc 0",
                        "url": "https://docs.example/0?utm_source=x",
                        "cited_text": "Passage 0.",
                        "encrypted_index": "x",
                    }
                ],
            },
        ],
        response_metadata={"model_provider": "anthropic"},
    )
    out = manage_references(Recorded([], message), style=TextReferenceStyle()).invoke(
        {"documents": DOCS}
    )
    body, _listing = _split(out.text)
    assert body == "A[1] B [1] C [2] D E[2]"
    assert [ref["source"] for ref in out.response_metadata["references"]] == [
        "https://docs.example/1",
        "https://docs.example/0",
    ]
    assert [ref["positions"] for ref in out.response_metadata["references"]] == [[2], [1]]


@pytest.mark.parametrize("answer", ["plain"])
def test_bare_chat_model_needs_no_documents(answer: str) -> None:
    """A real ChatPerplexity / ChatGoogleGenerativeAI, wrapped bare, called with a string."""
    for model, pieces in (
        (_perplexity_streams.chat_model(answer), _perplexity_streams.expected_pieces(answer)),
        (_gemini_streams.chat_model(answer), _gemini_streams.expected_pieces(answer)),
    ):
        chain = manage_references(model, style=TextReferenceStyle())
        out = chain.invoke("Question?")
        _check(text_of(out.content), out, pieces, [])
        streamed = "".join(text_of(chunk.content) for chunk in chain.stream("Question?"))
        assert _split(streamed)[0] == expected_text(pieces, [])[0]


async def test_bare_chat_model_astream() -> None:
    chain = manage_references(_gemini_streams.chat_model("plain"), style=TextReferenceStyle())
    outs = [chunk async for chunk in chain.astream("Question?")]
    text = "".join(text_of(chunk.content) for chunk in outs)
    assert _split(text)[0] == expected_text(_gemini_streams.expected_pieces("plain"), [])[0]


def test_native_none_leaves_provider_markup_alone() -> None:
    message = _perplexity_streams.invoke_message("plain")
    chain = manage_references(Recorded([], message), style=TextReferenceStyle(), native=None)
    out = chain.invoke({"documents": DOCS})
    assert text_of(out.content) == text_of(message.content)  # nothing cited: no list either
    assert out.response_metadata["references"] == []


def test_unknown_adapter_is_refused_at_construction() -> None:
    with pytest.raises(UnknownAdapterError, match="perplexity"):
        manage_references(Recorded([], AIMessage("x")), native="bing")  # type: ignore[arg-type]


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


@pytest.mark.parametrize(
    "make",
    [
        lambda: (
            _anthropic_streams.scenario_chunks("hostile"),
            _anthropic_streams.scenario_message("hostile"),
        ),
        lambda: (
            _openai_streams.scenario_chunks("hostile"),
            _openai_streams.scenario_message("hostile"),
        ),
        lambda: (
            _perplexity_streams.stream_chunks("plain"),
            _perplexity_streams.invoke_message("plain"),
        ),
        lambda: (_gemini_streams.stream_chunks("plain"), _gemini_streams.invoke_message("plain")),
    ],
    ids=["anthropic", "openai", "perplexity", "gemini"],
)
def test_hostile_titles_and_urls_in_html(make: Callable[[], tuple[Any, Any]]) -> None:
    chunks, message = make()
    chain = manage_references(Recorded(chunks, message), style=HTMLReferenceStyle())
    for out in (
        text_of(chain.invoke({"documents": DOCS}).content),
        "".join(text_of(c.content) for c in chain.stream({"documents": DOCS})),
    ):
        # Our markup: the inline markers and the list (the model's own text is not ours).
        ours = re.findall(r"<sup>.*?</sup>|<ol>.*?</ol>", out, re.S)
        assert ours
        parser = _Tags()
        parser.feed("".join(ours))
        for tag, attrs in parser.tags:
            assert tag in {"sup", "a", "ol", "li"}, (tag, out)
            for key, value in attrs:
                assert key == "href", (key, out)
                assert value is not None
                assert value.startswith(("http://", "https://")), value


@pytest.mark.parametrize("answer", ["plain", "mixed"])
def test_cohere_invoke_with_documents(answer: str) -> None:
    """Cohere's document citations map to the run's documents (shared numbering)."""
    docs = _cohere_streams.DOCUMENTS
    chain = manage_references(
        Recorded([], _cohere_streams.invoke_message(answer)), style=TextReferenceStyle()
    )
    out = chain.invoke({"documents": docs})
    _check(text_of(out.content), out, _cohere_streams.expected_pieces(answer), docs)


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_cohere_stream_has_no_citations_and_passes_through(mode: str) -> None:
    """langchain-cohere drops citation events when streaming: the text passes unchanged."""
    docs = _cohere_streams.DOCUMENTS
    chain = manage_references(
        Recorded(_cohere_streams.stream_chunks("plain"), AIMessage("")),
        style=TextReferenceStyle(),
        native="cohere",
    )
    if mode == "stream":
        outs = list(chain.stream({"documents": docs}))
    else:
        outs = [out async for out in chain.astream({"documents": docs})]
    text = "".join(text_of(out.content) for out in outs)
    assert text == expected_text(_cohere_streams.expected_pieces("plain", streamed=True), docs)[0]


def test_a_providers_cited_text_becomes_the_deep_link_of_its_citation() -> None:
    """With deep links on, each provider citation links to the passage the provider quoted."""
    from langchain_references.core.deeplinks import deep_link
    from langchain_references.core.styles import MarkdownReferenceStyle

    pieces = _anthropic_streams.expected_pieces("web_search")
    quoted = [p for p in pieces if not isinstance(p, str) and p.url and p.cited_text]
    assert len(quoted) >= 2
    chain = manage_references(
        Recorded(_anthropic_streams.scenario_chunks("web_search"), AIMessage("")),
        style=MarkdownReferenceStyle(deep_links=True),
    )
    out = "".join(text_of(chunk.content) for chunk in chain.stream({"documents": []}))
    links = re.findall(r"<sup>\[\[\d+\]\(([^)]+)\)\]</sup>", out)
    fragments = [link.partition("#")[2] for link in links]
    assert fragments[: len(quoted)] == [
        deep_link("https://x.example/", quote=piece.cited_text).partition("#")[2]
        for piece in quoted
    ]
    assert all("#:~:text=" in link for link in links)
