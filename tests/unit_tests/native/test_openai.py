"""The OpenAI Responses adapter, fed with chunks made by ``langchain-openai`` from SDK objects."""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Sequence
from functools import reduce

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.utils import message_chunk_to_message
from langchain_openai import ChatOpenAI
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from pydantic import SecretStr

from langchain_references.errors import LangchainReferencesError
from langchain_references.native._markers import (
    MARKER_RUN_RE,
    Cut,
    MarkerStripper,
    UnsupportedMessageError,
    apply_cuts,
    coalesce,
)
from langchain_references.native.base import NativeCitation, Piece
from langchain_references.native.openai import (
    OpenAIAdapter,
    citation_from_openai,
    resolve_annotations,
)
from tests.unit_tests.native import _anthropic_streams
from tests.unit_tests.native._anthropic_streams import Recorder
from tests.unit_tests.native._openai_streams import (
    SCENARIOS,
    PartPlan,
    fake_chat_openai,
    invoke_message,
    stream_chunks,
    stream_events,
)

NAMES = sorted(SCENARIOS)
VERSIONS = [None, "responses/v1", "v0"]


def run(messages: Sequence[BaseMessage]) -> list[Piece]:
    adapter = OpenAIAdapter()
    pieces: list[Piece] = []
    for message in messages:
        pieces.extend(adapter.feed(message))
    pieces.extend(adapter.finish())
    return coalesce(pieces)


def cite(source: str) -> NativeCitation:
    return NativeCitation(provider="test", source=source)


# --- invoke --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", NAMES)
def test_invoke_message_gives_the_expected_pieces(name: str, version: str | None) -> None:
    message = invoke_message(SCENARIOS[name], version)
    assert isinstance(message.content, list)
    assert run([message]) == list(SCENARIOS[name].expected)


def test_invoke_feeds_everything_at_once() -> None:
    adapter = OpenAIAdapter()
    pieces = adapter.feed(invoke_message(SCENARIOS["file_search"]))
    assert pieces == list(SCENARIOS["file_search"].expected)
    assert adapter.finish() == []


@pytest.mark.parametrize("name", NAMES)
def test_aggregated_stream_message_gives_the_same_pieces(name: str) -> None:
    chunks = stream_chunks(stream_events(SCENARIOS[name]))
    merged = message_chunk_to_message(reduce(operator.add, chunks))
    assert isinstance(merged, AIMessage)
    assert run([merged]) == list(SCENARIOS[name].expected)


# --- stream ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", NAMES)
def test_stream_chunks_give_the_expected_pieces(name: str, version: str | None) -> None:
    chunks = stream_chunks(stream_events(SCENARIOS[name]), version)
    assert any(
        isinstance(block, dict) and "annotations" in block and "text" not in block
        for chunk in chunks
        for block in chunk.content
    ), "the stream must carry annotation chunks"
    assert run(chunks) == list(SCENARIOS[name].expected)


def test_the_part_is_released_when_its_text_is_done() -> None:
    """Held until ``response.output_text.done``; not later (not at ``response.completed``)."""
    chunks = stream_chunks(stream_events(SCENARIOS["web_search"]))
    done = next(
        position
        for position, chunk in enumerate(chunks)
        if any(isinstance(b, dict) and "id" in b and b.get("type") == "text" for b in chunk.content)
    )
    adapter = OpenAIAdapter()
    released = [adapter.feed(chunk) for chunk in chunks]
    assert all(not pieces for pieces in released[:done])
    assert coalesce(released[done]) == list(SCENARIOS["web_search"].expected)
    assert all(not pieces for pieces in released[done + 1 :])
    assert adapter.finish() == []


def test_v0_part_is_released_by_the_final_chunk() -> None:
    """``v0`` drops the part's ``id`` on the done chunk; the final chunk still closes it."""
    chunks = stream_chunks(stream_events(SCENARIOS["web_search"]), "v0")
    adapter = OpenAIAdapter()
    released = [adapter.feed(chunk) for chunk in chunks]
    assert chunks[-1].chunk_position == "last"
    assert coalesce(released[-1]) == list(SCENARIOS["web_search"].expected)


@st.composite
def part_plans(draw: st.DrawFn, part: ResponseOutputText) -> PartPlan:
    text = part.text
    cuts = sorted(draw(st.sets(st.integers(1, len(text) - 1), max_size=12)))
    bounds = [0, *cuts, len(text)]
    deltas = tuple(text[a:b] for a, b in itertools.pairwise(bounds))
    count = len(part.annotations)
    delays = draw(st.lists(st.integers(0, 4), min_size=count, max_size=count))
    return PartPlan(deltas=deltas, delays=tuple(delays))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NAMES), version=st.sampled_from(VERSIONS), data=st.data())
def test_chunking_does_not_change_the_result(
    name: str, version: str | None, data: st.DataObject
) -> None:
    """Any split of the text deltas, annotations any time after their text: same pieces."""
    scenario = SCENARIOS[name]
    plans = {
        id(part): data.draw(part_plans(part))
        for item in scenario.output
        if isinstance(item, ResponseOutputMessage)
        for part in item.content
        if isinstance(part, ResponseOutputText)
    }
    chunks = stream_chunks(stream_events(scenario, lambda part: plans[id(part)]), version)
    assert run(chunks) == list(scenario.expected)
    cut = data.draw(st.integers(1, len(chunks)))
    merged = [reduce(operator.add, chunks[:cut]), *chunks[cut:]]
    assert run(merged) == list(scenario.expected)


# --- the real ChatOpenAI over an in-memory transport: invoke, stream, astream ---------------


@pytest.mark.parametrize("name", NAMES)
def test_chat_openai_invoke(name: str) -> None:
    scenario = SCENARIOS[name]
    recorder = Recorder()
    message = fake_chat_openai(scenario, recorder).invoke("Answer with sources.")
    assert recorder.bodies[0].get("stream") is not True
    assert OpenAIAdapter.matches(message)
    assert run([message]) == list(scenario.expected)


@pytest.mark.parametrize("name", NAMES)
def test_chat_openai_stream(name: str) -> None:
    scenario = SCENARIOS[name]
    recorder = Recorder()
    chunks = list(fake_chat_openai(scenario, recorder).stream("Answer with sources."))
    assert recorder.bodies[0]["stream"] is True
    assert "input" in recorder.bodies[0]  # the Responses API, not Chat Completions
    assert all(OpenAIAdapter.matches(chunk) for chunk in chunks)
    assert run(chunks) == list(scenario.expected)


@pytest.mark.parametrize("name", NAMES)
async def test_chat_openai_astream(name: str) -> None:
    scenario = SCENARIOS[name]
    llm = fake_chat_openai(scenario, Recorder(), output_version="v0")
    adapter = OpenAIAdapter()
    pieces: list[Piece] = []
    async for chunk in llm.astream("Answer with sources."):
        pieces.extend(adapter.feed(chunk))
    pieces.extend(adapter.finish())
    assert coalesce(pieces) == list(scenario.expected)


# --- placement rules --------------------------------------------------------------------


def _url(start: int, end: int, url: str = "https://a.org/") -> dict[str, object]:
    return {
        "type": "url_citation",
        "url": url,
        "title": "A",
        "start_index": start,
        "end_index": end,
    }


def test_span_that_is_not_a_link_is_kept_and_the_citation_goes_after_it() -> None:
    text = "Paris is the capital of France."
    pieces = resolve_annotations(text, [_url(0, 5)])
    assert pieces[0] == "Paris"
    assert isinstance(pieces[1], NativeCitation)
    assert pieces[2] == " is the capital of France."


def test_two_sources_on_one_link_keep_their_order() -> None:
    link = "([a.org](https://a.org/))"
    text = f"Fact {link}."
    start, end = text.index(link), text.index(link) + len(link)
    pieces = resolve_annotations(
        text, [_url(start, end, "https://a.org/"), _url(start, end, "https://b.org/")]
    )
    assert [p if isinstance(p, str) else p.url for p in pieces] == [
        "Fact ",
        "https://a.org/",
        "https://b.org/",
        ".",
    ]


def test_out_of_range_indices_are_clamped() -> None:
    pieces = resolve_annotations("Short ([x](https://x.org)).", [_url(6, 999)])
    assert pieces[0] == "Short "
    assert isinstance(pieces[1], NativeCitation)
    assert len(pieces) == 2


def test_url_citation_covering_a_private_use_run_replaces_it() -> None:
    text = "Rain is likely tomorrow \ue200cite\ue202turn0search3\ue201."
    start = text.index("\ue200")
    pieces = resolve_annotations(text, [_url(start, text.index("\ue201") + 1)])
    assert pieces[0] == "Rain is likely tomorrow "
    assert isinstance(pieces[1], NativeCitation)
    assert pieces[2] == "."


def test_unresolved_markers_are_dropped_with_the_space_before_them() -> None:
    text = "One 【3:2†notes.txt】. Two \ue200cite\ue202turn1news4\ue202turn1news5\ue201!"
    assert resolve_annotations(text, []) == ["One. Two!"]


def test_other_private_use_runs_are_not_citations() -> None:
    text = 'Ask \ue200entity\ue202["people","Ada Lovelace"]\ue201 about it.'
    assert resolve_annotations(text, []) == [text]


def test_file_path_annotation_is_not_a_citation() -> None:
    annotation = {"type": "file_path", "file_id": "cfile_1", "index": 3}
    assert citation_from_openai(annotation) is None
    assert resolve_annotations("Chart saved.", [annotation]) == ["Chart saved."]


def test_container_file_citation_replaces_its_span() -> None:
    text = "See the table (data.csv)."
    annotation = {
        "type": "container_file_citation",
        "container_id": "cntr_1",
        "file_id": "cfile_9",
        "filename": "data.csv",
        "start_index": text.index("("),
        "end_index": text.index(")") + 1,
    }
    pieces = resolve_annotations(text, [annotation])
    assert pieces[0] == "See the table "
    assert pieces[1] == NativeCitation(provider="openai", source="cfile_9", title="data.csv")
    assert pieces[2] == "."


def test_raw_sdk_file_citation_index_is_read_too() -> None:
    """Dicts straight from the SDK keep ``index``; LangChain renames it ``file_index``."""
    raw = {"type": "file_citation", "file_id": "file-1", "filename": "a.pdf", "index": 4}
    assert resolve_annotations("Done here.", [raw])[:2] == [
        "Done",
        NativeCitation(provider="openai", source="file-1", title="a.pdf"),
    ]


def test_hostile_titles_and_urls_are_kept_verbatim() -> None:
    pieces = run([invoke_message(SCENARIOS["hostile"])])
    citations = [p for p in pieces if isinstance(p, NativeCitation)]
    assert citations[0].title == '</a><img src=x onerror="alert(document.cookie)">'
    assert (
        citations[0].url == 'https://evil.example/a?q="><script>alert(1)</script>&utm_medium=x#frag'
    )
    assert citations[1].url == "javascript:alert(document.domain)"
    assert [p for p in pieces if isinstance(p, str)] == ["Read <this> & that ", " <br/> done."]


# --- cuts and markers (the shared helpers) ------------------------------------------------


@st.composite
def texts_and_cuts(draw: st.DrawFn) -> tuple[str, list[Cut]]:
    text = draw(st.text(alphabet="ab ,.", max_size=30))
    cuts = []
    for number in range(draw(st.integers(0, 5))):
        start = draw(st.integers(-2, len(text) + 2))
        end = draw(st.integers(start, len(text) + 3))
        cuts.append(Cut(start, end, [cite(str(number))]))
    return text, cuts


@given(texts_and_cuts())
def test_apply_cuts_keeps_every_citation_and_only_uncut_text(case: tuple[str, list[Cut]]) -> None:
    text, cuts = case
    pieces = apply_cuts(text, cuts)
    citations = [p for p in pieces if isinstance(p, NativeCitation)]
    assert sorted(c.source or "" for c in citations) == sorted(str(n) for n in range(len(cuts)))
    removed: set[int] = set()
    for cut in cuts:
        removed.update(range(max(cut.start, 0), min(cut.end, len(text))))
    kept = "".join(ch for position, ch in enumerate(text) if position not in removed)
    assert "".join(p for p in pieces if isinstance(p, str)) == kept
    assert all(p != "" for p in pieces)
    assert not any(isinstance(a, str) and isinstance(b, str) for a, b in itertools.pairwise(pieces))


MARKERS = [
    "【4:0†source】",
    "【12†doc.pdf】",
    "\ue200cite\ue202turn0search0\ue201",
    "\ue200filecite\ue202f1\ue202f2\ue201",
]
NEAR_MISSES = [
    "【",
    "】",
    "†",
    "\ue200",
    "\ue201",
    "\ue202",
    "\ue200cite",
    "【1:2†x\n】",
    "\n",
    " ",
    "\t",
]


@st.composite
def marked_texts(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(
            st.one_of(
                st.sampled_from(MARKERS), st.sampled_from(NEAR_MISSES), st.text("ab.", max_size=4)
            ),
            max_size=14,
        )
    )
    return "".join(parts)


def _whole_strip(text: str) -> str:
    return "".join(
        p
        for p in apply_cuts(
            text, [Cut(m.start(), m.end(), marker=True) for m in MARKER_RUN_RE.finditer(text)]
        )
        if isinstance(p, str)
    )


@settings(max_examples=200)
@given(text=marked_texts(), data=st.data())
def test_marker_stripper_is_split_invariant(text: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    fragments = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=False)]
    stripper = MarkerStripper()
    out = "".join(stripper.feed(fragment) for fragment in fragments) + stripper.close()
    assert out == _whole_strip(text)


def test_marker_stripper_holds_only_a_possible_marker() -> None:
    stripper = MarkerStripper()
    assert stripper.feed("Plain text, ") == "Plain text,"
    assert stripper.feed("more【not a marker\n") == " more【not a marker\n"
    assert stripper.feed("x" * 500) == "x" * 500


# --- Chat Completions string content ----------------------------------------------------


def _chat_chunks(fragments: list[str]) -> list[AIMessageChunk]:
    llm = ChatOpenAI(model="gpt-4o-search-preview", api_key=SecretStr("sk-test"))
    chunks = []
    for number, fragment in enumerate(fragments):
        raw = ChatCompletionChunk(
            id="chatcmpl-1",
            object="chat.completion.chunk",
            created=1763884800,
            model="gpt-4o-search-preview",
            choices=[
                Choice(
                    index=0,
                    delta=ChoiceDelta(role="assistant", content=fragment),
                    finish_reason="stop" if number == len(fragments) - 1 else None,
                )
            ],
        )
        generation = llm._convert_chunk_to_generation_chunk(raw.model_dump(), AIMessageChunk, {})
        assert generation is not None
        assert isinstance(generation.message, AIMessageChunk)
        chunks.append(generation.message)
    return chunks


def test_chat_completions_strings_stream_with_markers_removed() -> None:
    fragments = ["The office opens at 9 am ", "【4:0", "†handbook.pdf】", ". Parking is free", "."]
    chunks = _chat_chunks(fragments)
    assert all(OpenAIAdapter.matches(chunk) for chunk in chunks)
    adapter = OpenAIAdapter()
    released = [adapter.feed(chunk) for chunk in chunks]
    assert released[0] == ["The office opens at 9 am"]
    assert released[1] == []
    assert coalesce([p for r in released for p in r] + adapter.finish()) == [
        "The office opens at 9 am. Parking is free."
    ]


# --- matching and errors ----------------------------------------------------------------


def test_matches() -> None:
    assert OpenAIAdapter.matches(invoke_message(SCENARIOS["web_search"]))
    shape_only = AIMessage(content=invoke_message(SCENARIOS["web_search"]).content)
    assert shape_only.response_metadata == {}
    assert OpenAIAdapter.matches(shape_only)
    assert not OpenAIAdapter.matches(AIMessage(content="hello"))
    assert not OpenAIAdapter.matches(_anthropic_streams.scenario_message("web_search"))
    v1 = AIMessage(
        content=[
            {
                "type": "text",
                "text": "x",
                "annotations": [{"type": "citation", "url": "https://a.org"}],
            }
        ],
        response_metadata={"model_provider": "openai", "output_version": "v1"},
    )
    assert not OpenAIAdapter.matches(v1)


def test_feeding_something_else_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedMessageError) as caught:
        OpenAIAdapter().feed("text")
    assert isinstance(caught.value, LangchainReferencesError)


def test_finish_releases_a_part_cut_short() -> None:
    chunks = stream_chunks(stream_events(SCENARIOS["mixed"]))
    text_chunks = [
        chunk
        for chunk in chunks
        if any(
            isinstance(b, dict) and b.get("type") == "text" and "id" not in b for b in chunk.content
        )
    ]
    adapter = OpenAIAdapter()
    assert all(adapter.feed(chunk) == [] for chunk in text_chunks)
    assert adapter.finish() == list(SCENARIOS["mixed"].expected)
    assert adapter.finish() == []


def test_no_marker_characters_leak_into_any_scenario() -> None:
    for name in NAMES:
        text = "".join(p for p in SCENARIOS[name].expected if isinstance(p, str))
        assert not re.search("[【】\ue200-\ue2ff]", text)
