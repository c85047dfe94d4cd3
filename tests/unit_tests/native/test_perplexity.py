"""The Perplexity adapter: ``[k]`` markers through ``citations``/``search_results``."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from langchain_references.native._markers import UnsupportedMessageError, coalesce
from langchain_references.native.base import NativeCitation, Piece
from langchain_references.native.perplexity import PerplexityAdapter
from tests.unit_tests.native import _perplexity_streams as streams

ANSWERS = sorted(streams.ANSWERS)


def run(messages: Iterable[BaseMessage]) -> list[Piece]:
    adapter = PerplexityAdapter()
    pieces: list[Piece] = []
    for message in messages:
        pieces.extend(adapter.feed(message))
    return coalesce([*pieces, *adapter.finish()])


def rechunk(text: str, cuts: list[int], kwargs: Mapping[str, object]) -> list[AIMessageChunk]:
    """``text`` split at ``cuts``; the source lists on the first chunk, as the integration."""
    bounds = [0, *sorted({min(max(c, 0), len(text)) for c in cuts}), len(text)]
    chunks = [AIMessageChunk(content=text[a:b]) for a, b in itertools.pairwise(bounds)]
    chunks[0] = AIMessageChunk(content=chunks[0].content, additional_kwargs=dict(kwargs))
    return chunks


@pytest.mark.parametrize("answer", ANSWERS)
def test_invoke(answer: str) -> None:
    message = streams.invoke_message(answer)
    assert PerplexityAdapter.matches(message)
    assert run([message]) == streams.expected_pieces(answer)


@pytest.mark.parametrize("answer", ANSWERS)
def test_stream(answer: str) -> None:
    chunks = streams.stream_chunks(answer)
    assert PerplexityAdapter.matches(chunks[0])
    assert "citations" not in chunks[1].additional_kwargs  # first chunk only
    assert run(chunks) == streams.expected_pieces(answer)


@pytest.mark.parametrize("answer", ANSWERS)
async def test_astream(answer: str) -> None:
    chunks = [chunk async for chunk in streams.chat_model(answer).astream("How tall?")]
    assert run(chunks) == streams.expected_pieces(answer)


def test_stream_pieces_come_early() -> None:
    """Text streams: only a possible marker prefix is held back."""
    adapter = PerplexityAdapter()
    chunks = streams.stream_chunks("plain")
    assert adapter.feed(chunks[0]) == ["The Eiffel Tower is 330 "]
    assert adapter.feed(chunks[1]) == ["metres tall"]  # "[1" held


def test_hostile_title_and_url_are_kept_verbatim() -> None:
    citations = [p for p in run([streams.invoke_message("plain")]) if not isinstance(p, str)]
    hostile = citations[-1]
    assert hostile.title == '<script>alert("t")</script> & "Tour" <b>'
    assert hostile.url == streams.CITATIONS[2]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_chunking_does_not_change_the_result(data: st.DataObject) -> None:
    answer = data.draw(st.sampled_from(ANSWERS))
    message = streams.invoke_message(answer)
    text = message.text
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=len(text)))
    chunks = rechunk(text, cuts, message.additional_kwargs)
    assert run(chunks) == streams.expected_pieces(answer)


_MARKUP = st.text(alphabet="ab [](1234)x\n", max_size=40)


@settings(max_examples=200, deadline=None)
@given(_MARKUP, st.lists(st.integers(0, 40), max_size=10), st.integers(0, 3))
def test_any_text_is_split_invariant(text: str, cuts: list[int], sources: int) -> None:
    kwargs: dict[str, object] = {"citations": [f"https://s{i}.org/" for i in range(sources)]}
    whole = run([AIMessage(content=text, additional_kwargs=kwargs)])
    assert run(rechunk(text, cuts, kwargs)) == whole
    # Nothing but markers is removed, and every citation is one of the sources.
    kept = "".join(p for p in whole if isinstance(p, str))
    assert len(kept) <= len(text)
    assert all(
        p.url in kwargs["citations"]  # type: ignore[operator]
        for p in whole
        if isinstance(p, NativeCitation)
    )


def _cite(url: str) -> NativeCitation:
    return NativeCitation(provider="perplexity", source=url, url=url)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a[1]b", ["a", _cite("https://x.org/"), "b"]),
        ("a[1][2]", ["a", _cite("https://x.org/"), _cite("https://y.org/")]),
        ("a[3]b[12]", ["ab"]),  # beyond the list: dropped
        ("a[1](id=2)", ["a[1](id=2)"]),  # followed by "(": not a Perplexity marker
        ("a[1](https://z.org)", ["a[1](https://z.org)"]),
        ("a[0] [x] [] [12345]", ["a[0] [x] [] [12345]"]),
        ("tail [", ["tail ["]),
        ("tail [2", ["tail [2"]),
    ],
)
def test_markers(text: str, expected: list[Piece]) -> None:
    kwargs = {"citations": ["https://x.org/", "https://y.org/"]}
    assert run(rechunk(text, list(range(len(text))), kwargs)) == expected


def test_without_sources_brackets_stay_text() -> None:
    assert run([AIMessage(content="x[1] y[2]", additional_kwargs={"citations": []})]) == [
        "x[1] y[2]"
    ]
    assert run([AIMessage(content="x[1]")]) == ["x[1]"]


def test_sources_arriving_late_resolve_held_markers() -> None:
    """Responses-API shape: the search results come on a chunk of their own."""
    adapter = PerplexityAdapter()
    assert adapter.feed(AIMessageChunk(content="Fact[1] and")) == ["Fact"]
    assert adapter.feed(AIMessageChunk(content=" more.")) == []
    results = [{"title": "T", "url": "https://t.org/a?utm_term=x"}]
    late = adapter.feed(AIMessageChunk(content="", additional_kwargs={"search_results": results}))
    assert late == [
        NativeCitation(
            provider="perplexity",
            source="https://t.org/a",
            url="https://t.org/a?utm_term=x",
            title="T",
        ),
        " and more.",
    ]
    assert adapter.finish() == []


def test_title_is_found_by_url_when_lists_differ() -> None:
    kwargs = {
        "citations": ["https://a.org/", "https://b.org/"],
        "search_results": [{"title": "B", "url": "https://b.org/"}],
    }
    pieces = run([AIMessage(content="x[2] y[1]", additional_kwargs=kwargs)])
    titles = [p.title for p in pieces if isinstance(p, NativeCitation)]
    assert titles == ["B", None]


def test_matches() -> None:
    assert PerplexityAdapter.matches(AIMessage("x", response_metadata={"model_name": "sonar"}))
    assert PerplexityAdapter.matches(
        AIMessage("x", response_metadata={"model_provider": "perplexity"})
    )
    assert not PerplexityAdapter.matches(AIMessage("x"))
    assert not PerplexityAdapter.matches(
        AIMessage("x", additional_kwargs={"citations": [{"start": 0, "sources": []}]})
    )


def test_rejects_non_messages() -> None:
    with pytest.raises(UnsupportedMessageError):
        PerplexityAdapter().feed("text")
