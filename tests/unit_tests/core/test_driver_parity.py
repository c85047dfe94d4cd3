"""Driver parity (issue 20, point 6): every style, deep links on and off, every calling mode.

``manage_references`` has one per-chunk step (``_Session.step``) and thin drivers around it:
``ReferencedRunnable._run`` / ``_arun`` (dict input) and ``ReferencedChatModel._stream`` /
``_astream`` (messages input). A step skipped by one driver alone (a deep-link record, a chunk
kind, the citation check) used to pass every test while that driver's output was wrong, e.g.
``astream`` deep-linking the wrong sentence of a document.

Each test here runs one wrapped runnable through invoke, stream (joined), batch, ainvoke,
astream (joined) and abatch, and compares every mode with one expected outcome (text,
``response_metadata`` references and citation check, v1 citation annotations, the
``"references"`` event payloads) that is pinned in this file: a bug shared by every mode fails
as well as a bug of one driver. The answer cites one document from sentences that quote
different passages of it, so deep links depend on every chunk of the answer having gone through
the step (and v1 annotation offsets on every character of it).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import reduce
from itertools import pairwise
from operator import add, itemgetter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import Runnable, RunnableConfig, RunnableGenerator, RunnableLambda

from langchain_references import (
    REFERENCES_EVENT,
    EmptyReferenceStyle,
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferencedChatModel,
    ReferenceStyle,
    TextReferenceStyle,
    manage_references,
)
from langchain_references.citations.sentences import split_cited_sentences
from langchain_references.citations.streaming import citation_report
from langchain_references.citations.verifier import CitationVerifier
from langchain_references.core.styles import UnsupportedClaim
from langchain_references.judges import Judge, Judgement, Label
from tests.unit_tests.fakes import AgentChatModel, StreamingChatModel, text_chunks

# -- the answer ------------------------------------------------------------------------------

NEEDLE_URL = "https://t.org/needle"
CITY_URL = "https://s.org/city"
DOCS = [
    Document(
        "The tower opened in 1962. Its deck turns once every 47 minutes.",
        metadata={"source": NEEDLE_URL, "title": "Needle"},
    ),
    Document(
        "Seattle lies on Puget Sound. Rain falls on many winter days.",
        metadata={"source": CITY_URL},
    ),
    Document("The observation deck stands 160 m high.", metadata={"source": NEEDLE_URL}),
]
# Document 1 is cited from three sentences, and its quote depends on the citing sentence (the
# first and last citations quote its second sentence, the second its first); document 2 is
# cited first for its second sentence. Documents 1 and 3 share a source: one number.
ANSWER = (
    "The deck turns every 47 minutes [1](id=1). It opened in 1962 [2](id=1). "
    "Rain falls on winter days [3](id=2). Seattle lies on Puget Sound [4](id=2). "
    "The observation deck stands 160 m high [5](id=3). Its deck still turns today [6](id=1)."
)
QUESTION = "Tell me about the Space Needle."
INPUT = {"documents": DOCS, "input": QUESTION}


def cut(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (markers arrive split across pieces)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


WORDS = re.split(r"(?<= )", ANSWER)  # word by word, spaces kept

# -- what every mode must give (pinned, not computed by the library) --------------------------

Q_DECK = "Its%20deck%20turns%20once%20every%2047%20minutes."
Q_TOWER = "The%20tower%20opened%20in%201962."
Q_RAIN = "Rain%20falls%20on%20many%20winter%20days."
Q_SOUND = "Seattle%20lies%20on%20Puget%20Sound."
Q_HEIGHT = "The%20observation%20deck%20stands%20160%20m%20high."
SENTENCES = (
    "The deck turns every 47 minutes ",
    ". It opened in 1962 ",
    ". Rain falls on winter days ",
    ". Seattle lies on Puget Sound ",
    ". The observation deck stands 160 m high ",
    ". Its deck still turns today ",
    ".",
)
# (number, url, quote) of each of the six citations, in order
CITED = (
    (1, NEEDLE_URL, Q_DECK),
    (1, NEEDLE_URL, Q_TOWER),
    (2, CITY_URL, Q_RAIN),
    (2, CITY_URL, Q_SOUND),
    (1, NEEDLE_URL, Q_HEIGHT),
    (1, NEEDLE_URL, Q_DECK),
)


def answer_with(markers: list[str], tail: str) -> str:
    """The answer's sentences with the given citation markers, then ``tail``."""
    parts = [SENTENCES[0]]
    for marker, sentence in zip(markers, SENTENCES[1:], strict=True):
        parts += [marker, sentence]
    return "".join(parts) + tail


MARKDOWN_LIST = f"\n\n- **1** [Needle]({NEEDLE_URL})\n- **2** [{CITY_URL}]({CITY_URL})"
HTML_LIST = (
    f'\n\n<ol><li><a href="{NEEDLE_URL}">Needle</a></li>'
    f'<li><a href="{CITY_URL}">{CITY_URL}</a></li></ol>'
)
TEXT_LIST = f"\n\n- [1] Needle ({NEEDLE_URL})\n- [2] {CITY_URL}"
# The six rendered markers of each style, in answer order.
MARKERS: dict[str, list[str]] = {
    "markdown, deep links": [f"<sup>[[{n}]({url}#:~:text={q})]</sup>" for n, url, q in CITED],
    "markdown, flat links": [f"<sup>[[{n}]({url})]</sup>" for n, url, _ in CITED],
    "html, deep links": [f'<sup><a href="{url}#:~:text={q}">{n}</a></sup>' for n, url, q in CITED],
    "html, flat links": [f'<sup><a href="{url}">{n}</a></sup>' for n, url, _ in CITED],
    # deep links on a style that shows no link: the rewriter still records the text
    "text, deep links": [f"[{n}]" for n, _, _ in CITED],
    "text": [f"[{n}]" for n, _, _ in CITED],
    "empty, deep links": [""] * 6,
    "empty": [""] * 6,
}
LISTS = {"markdown": MARKDOWN_LIST, "html": HTML_LIST, "text": TEXT_LIST}
# A citation written as nothing takes the blank before it away (not "minutes .").
EMPTY_TEXT = (
    "The deck turns every 47 minutes. It opened in 1962. Rain falls on winter days. Seattle "
    "lies on Puget Sound. The observation deck stands 160 m high. Its deck still turns today."
)
EXPECTED_TEXT: dict[str, str] = {
    name: EMPTY_TEXT
    if name.startswith("empty")
    else answer_with(markers, LISTS[name.split(",")[0]])
    for name, markers in MARKERS.items()
}
STYLES: dict[str, Callable[[], ReferenceStyle]] = {
    # deep_links is always given: the defaults are not what these tests are about
    "markdown, deep links": lambda: MarkdownReferenceStyle(deep_links=True),
    "markdown, flat links": lambda: MarkdownReferenceStyle(deep_links=False),
    "html, deep links": lambda: HTMLReferenceStyle(deep_links=True),
    "html, flat links": lambda: HTMLReferenceStyle(deep_links=False),
    "text, deep links": lambda: TextReferenceStyle(deep_links=True),
    "text": lambda: TextReferenceStyle(deep_links=False),
    "empty, deep links": lambda: EmptyReferenceStyle(deep_links=True),
    "empty": lambda: EmptyReferenceStyle(deep_links=False),
}
EXPECTED_REFERENCES = [
    {"number": 1, "source": NEEDLE_URL, "title": "Needle", "positions": [1, 3]},
    {"number": 2, "source": CITY_URL, "title": None, "positions": [2]},
]
EXPECTED_DOCUMENTS = [(1, DOCS[0]), (2, DOCS[1])]


def test_the_pinned_texts_are_what_the_styles_write() -> None:
    """The pins themselves: the literal strings below, and deep links quoting as intended."""
    assert EXPECTED_TEXT["text"] == (
        "The deck turns every 47 minutes [1]. It opened in 1962 [1]. Rain falls on winter "
        "days [2]. Seattle lies on Puget Sound [2]. The observation deck stands 160 m high "
        "[1]. Its deck still turns today [1].\n\n- [1] Needle (https://t.org/needle)\n"
        "- [2] https://s.org/city"
    )
    assert EXPECTED_TEXT["empty"] == EXPECTED_TEXT["empty, deep links"] == EMPTY_TEXT
    assert EXPECTED_TEXT["markdown, deep links"].startswith(
        "The deck turns every 47 minutes <sup>[[1](https://t.org/needle#:~:text=Its%20deck%20"
        "turns%20once%20every%2047%20minutes.)]</sup>. It opened in 1962 <sup>[[1]("
        "https://t.org/needle#:~:text=The%20tower%20opened%20in%201962.)]</sup>. Rain falls "
        "on winter days <sup>[[2](https://s.org/city#:~:text=Rain%20falls%20on%20many%20"
        "winter%20days.)]</sup>."
    )
    assert EXPECTED_TEXT["html, flat links"] == (
        'The deck turns every 47 minutes <sup><a href="https://t.org/needle">1</a></sup>. It '
        'opened in 1962 <sup><a href="https://t.org/needle">1</a></sup>. Rain falls on winter '
        'days <sup><a href="https://s.org/city">2</a></sup>. Seattle lies on Puget Sound <sup>'
        '<a href="https://s.org/city">2</a></sup>. The observation deck stands 160 m high <sup>'
        '<a href="https://t.org/needle">1</a></sup>. Its deck still turns today <sup><a href='
        '"https://t.org/needle">1</a></sup>.\n\n<ol><li><a href="https://t.org/needle">Needle'
        '</a></li><li><a href="https://s.org/city">https://s.org/city</a></li></ol>'
    )


# -- running every mode ------------------------------------------------------------------------


class Events(BaseCallbackHandler):
    """Keeps the data of every ``"references"`` custom event of the runs it is given to."""

    def __init__(self) -> None:
        self.payloads: list[Any] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == REFERENCES_EVENT:
            self.payloads.append(data)


@dataclass(frozen=True)
class Outcome:
    """What one run gave: its text, metadata references, v1 annotations and events."""

    text: str
    metadata: dict[str, Any] | None  # None for a str output (no metadata to carry them)
    annotations: tuple[Any, ...] | None  # (marker, url, title, cited_text); None for a str
    events: tuple[Any, ...]


METADATA_KEYS = ("references", "citation_check")


def text_of(output: Any) -> str:
    if isinstance(output, str):
        return output
    content = output.content
    if isinstance(content, str):
        return content
    return "".join(b if isinstance(b, str) else b.get("text", "") for b in content)


def annotations_of(message: BaseMessage) -> tuple[Any, ...]:
    """The v1 citation annotations of a message, read back through ``content_blocks``."""
    text = text_of(message)
    return tuple(
        (text[a["start_index"] : a["end_index"]], a.get("url"), a.get("title"), a["cited_text"])
        for block in message.content_blocks
        if block["type"] == "text"
        for a in block.get("annotations", ())
        if a["type"] == "citation"
    )


def outcome_of(output: Any, events: Events) -> Outcome:
    if not isinstance(output, BaseMessage):
        return Outcome(text_of(output), None, None, tuple(events.payloads))
    metadata = {k: v for k, v in output.response_metadata.items() if k in METADATA_KEYS}
    return Outcome(text_of(output), metadata, annotations_of(output), tuple(events.payloads))


def joined(chunks: list[Any]) -> Any:
    """The chunks of a stream added up, as ``invoke`` would return them."""
    assert chunks, "the stream yielded nothing"
    return reduce(add, chunks)


def config_of(events: Events) -> RunnableConfig:
    return {"callbacks": [events]}


def every_mode(runnable: Runnable[Any, Any], input: Any) -> dict[str, Outcome]:
    """Run ``input`` through the six calling modes (batches of two runs), one outcome a run."""
    results: dict[str, Outcome] = {}

    events = Events()
    results["invoke"] = outcome_of(runnable.invoke(input, config_of(events)), events)
    events = Events()
    chunks = list(runnable.stream(input, config_of(events)))
    results["stream"] = outcome_of(joined(chunks), events)
    batch_events = [Events(), Events()]
    outputs = runnable.batch([input, input], [config_of(e) for e in batch_events])
    for i, (output, events) in enumerate(zip(outputs, batch_events, strict=True)):
        results[f"batch[{i}]"] = outcome_of(output, events)

    async def run_async() -> None:
        events = Events()
        results["ainvoke"] = outcome_of(await runnable.ainvoke(input, config_of(events)), events)
        events = Events()
        chunks = [c async for c in runnable.astream(input, config_of(events))]
        results["astream"] = outcome_of(joined(chunks), events)
        batch_events = [Events(), Events()]
        outputs = await runnable.abatch([input, input], [config_of(e) for e in batch_events])
        for i, (output, events) in enumerate(zip(outputs, batch_events, strict=True)):
            results[f"abatch[{i}]"] = outcome_of(output, events)

    asyncio.run(run_async())
    return results


def assert_every_mode_gives(results: dict[str, Outcome], expected: Outcome) -> None:
    """Every mode's outcome is the expected one; the message names the modes that differ.

    Args:
        results: The outcome of each mode.
        expected: The outcome every mode must give.
    """
    wrong = {mode: got for mode, got in results.items() if got != expected}
    if wrong:
        mode, got = next(iter(wrong.items()))
        fields = [
            f
            for f in ("text", "metadata", "annotations", "events")
            if getattr(got, f) != getattr(expected, f)
        ]
        pytest.fail(
            f"modes {sorted(wrong)} differ from the expected outcome (agreeing: "
            f"{sorted(set(results) - set(wrong))}); {mode} differs in {fields}:\n"
            + "\n".join(
                f"  {f}: {getattr(got, f)!r}\n  want: {getattr(expected, f)!r}" for f in fields
            )
        )


def expected_outcome(
    style_name: str,
    *,
    message: bool,
    check: dict[str, Any] | None = None,
    note: str = "",
    v1: bool = False,
) -> Outcome:
    payload: dict[str, Any] = {"references": EXPECTED_REFERENCES, "documents": EXPECTED_DOCUMENTS}
    metadata: dict[str, Any] = {"references": EXPECTED_REFERENCES}
    if check is not None:
        payload["citation_check"] = check
        metadata["citation_check"] = check
    text = EXPECTED_TEXT[style_name] + note
    if not message:
        return Outcome(text, None, None, (payload,))
    annotations = expected_annotations(style_name) if v1 else ()
    return Outcome(text, metadata, annotations, (payload,))


CITED_POSITIONS = (1, 1, 2, 2, 3, 1)  # the document each of the six citations cites


def expected_annotations(style_name: str) -> tuple[Any, ...]:
    """The v1 annotations: each rendered marker, its url, title and the cited chunk."""
    return tuple(
        (marker, doc.metadata["source"], doc.metadata.get("title"), doc.page_content)
        for marker, doc in zip(
            MARKERS[style_name], (DOCS[p - 1] for p in CITED_POSITIONS), strict=True
        )
        if marker  # a citation written as nothing has no span
    )


# -- the wrapped runnables ----------------------------------------------------------------------


def generator_of(chunks: list[Any]) -> Runnable[Any, Any]:
    """A runnable streaming the given chunks on both paths (its invoke joins them)."""

    def gen(_: Iterator[Any]) -> Iterator[Any]:
        yield from chunks

    async def agen(_: AsyncIterator[Any]) -> AsyncIterator[Any]:
        for chunk in chunks:
            yield chunk

    return RunnableGenerator(gen, agen)


USAGE = {"input_tokens": 10, "output_tokens": 40, "total_tokens": 50}


def chat_script(size: int = 7) -> list[AIMessageChunk]:
    """A provider's stream: text chunks, the last one with usage and ``chunk_position``."""
    chunks = text_chunks(cut(ANSWER, size), id="run-1")
    chunks[-1] = AIMessageChunk(
        content=chunks[-1].content, usage_metadata=USAGE, chunk_position="last"
    )
    return chunks


def list_content_script(size: int = 9) -> list[AIMessageChunk]:
    """Content blocks, as Anthropic streams them."""
    return [
        AIMessageChunk(content=[{"type": "text", "text": piece, "index": 0}])
        for piece in cut(ANSWER, size)
    ]


# name -> (factory of the wrapped runnable, whether its output is a message)
SOURCES: dict[str, tuple[Callable[[], Runnable[Any, Any]], bool]] = {
    "str stream, 3-char pieces": (lambda: generator_of(cut(ANSWER, 3)), False),
    "str stream, word pieces": (lambda: generator_of(WORDS), False),
    "chain ending in a str parser": (
        lambda: (
            RunnableLambda(itemgetter("input"))
            | StreamingChatModel(chunks=text_chunks(cut(ANSWER, 4)))
            | StrOutputParser()
        ),
        False,
    ),
    "chain ending in a chat model": (
        lambda: RunnableLambda(itemgetter("input")) | StreamingChatModel(chunks=chat_script()),
        True,
    ),
    # manage_references() over a chat model: a ReferencedChatModel, here given the dict input
    "chat model, dict input": (lambda: StreamingChatModel(chunks=chat_script(5)), True),
    "list-content chunks": (lambda: generator_of(list_content_script()), True),
}


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("style_name", list(STYLES))
def test_every_mode_gives_the_pinned_answer(style_name: str, source: str) -> None:
    factory, message = SOURCES[source]
    wrapped = manage_references(factory(), style=STYLES[style_name]())
    assert_every_mode_gives(
        every_mode(wrapped, INPUT), expected_outcome(style_name, message=message)
    )


# -- ReferencedChatModel with messages input (documents from tool messages) --------------------


def conversation() -> list[BaseMessage]:
    """Two tool calls whose artifacts hold the documents: ids 1, 2 then 3, as in ``DOCS``."""
    calls = [
        AIMessage("", tool_calls=[{"name": "search", "args": {"query": q}, "id": i}])
        for q, i in (("needle", "c1"), ("height", "c2"))
    ]
    return [
        HumanMessage(QUESTION),
        calls[0],
        ToolMessage("two documents", artifact=DOCS[:2], tool_call_id="c1"),
        calls[1],
        ToolMessage("one document", artifact=DOCS[2:], tool_call_id="c2"),
    ]


MODES_RUN = 8  # invoke, stream, batch (2), ainvoke, astream, abatch (2)
CHAT_MODELS: dict[str, Callable[[], Any]] = {
    "streaming chat model": lambda: StreamingChatModel(chunks=chat_script()),
    "list-content chat model": lambda: StreamingChatModel(chunks=list_content_script()),
    "agent chat model": lambda: AgentChatModel(script=[AIMessage(ANSWER)] * MODES_RUN, cut=6),
}
# Called at the top level, ReferencedChatModel.stream() / astream() send no "references"
# event (BaseChatModel.stream gives _stream no run manager, and outside a run there is no
# parent run to send it from): see test_the_chat_model_streams_send_the_references_event.
# Every style with one chat model; two styles (deep links on, off) with the others.
CHAT_CASES = [(style, "streaming chat model") for style in STYLES] + [
    (style, model)
    for model in ("list-content chat model", "agent chat model")
    for style in ("markdown, deep links", "text")
]


@pytest.mark.parametrize(("style_name", "model"), CHAT_CASES)
def test_the_chat_model_gives_the_pinned_answer_to_a_conversation(
    style_name: str, model: str
) -> None:
    wrapped = manage_references(CHAT_MODELS[model](), style=STYLES[style_name]())
    assert isinstance(wrapped, ReferencedChatModel)
    assert_every_mode_gives(
        every_mode(wrapped, conversation()),
        expected_outcome(style_name, message=True),
    )


def test_the_chat_model_streams_send_the_references_event() -> None:
    wrapped = manage_references(
        StreamingChatModel(chunks=chat_script()), style=TextReferenceStyle()
    )
    results = every_mode(wrapped, conversation())
    expected = expected_outcome("text", message=True).events
    streams = ("stream", "astream")
    assert {mode: results[mode].events for mode in streams} == dict.fromkeys(streams, expected)


# -- output_version="v1": the closing block's annotations locate every marker -----------------

V1_STYLES = ["markdown, deep links", "html, flat links", "text", "empty, deep links"]
V1_SOURCES = ["conversation", "chat model, dict input", "chain ending in a chat model"]


@pytest.mark.parametrize("source", V1_SOURCES)
@pytest.mark.parametrize("style_name", V1_STYLES)
def test_every_mode_annotates_v1_output_alike(style_name: str, source: str) -> None:
    """The annotations' offsets count every character the step let through, in every mode."""
    style = STYLES[style_name]()
    if source == "conversation":
        model = StreamingChatModel(chunks=chat_script())
        wrapped: Any = manage_references(model, style=style, output_version="v1")
        input: Any = conversation()
    else:
        factory, _ = SOURCES[source]
        wrapped, input = manage_references(factory(), style=style, output_version="v1"), INPUT
    assert_every_mode_gives(
        every_mode(wrapped, input),
        expected_outcome(style_name, message=True, v1=True),
    )


def test_the_pinned_v1_annotations() -> None:
    assert expected_annotations("text") == (
        ("[1]", NEEDLE_URL, "Needle", DOCS[0].page_content),
        ("[1]", NEEDLE_URL, "Needle", DOCS[0].page_content),
        ("[2]", CITY_URL, None, DOCS[1].page_content),
        ("[2]", CITY_URL, None, DOCS[1].page_content),
        ("[1]", NEEDLE_URL, None, DOCS[2].page_content),
        ("[1]", NEEDLE_URL, "Needle", DOCS[0].page_content),
    )
    assert expected_annotations("empty") == ()


# -- with the citation check (the drivers collect it) -----------------------------------------

_WORD_RE = re.compile(r"\w{3,}")


class WordsJudge(Judge):
    """Entails when every word of three letters or more of the statement is in the passage."""

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        words = set(_WORD_RE.findall(statement.lower()))
        if words <= set(_WORD_RE.findall(passage.lower())):
            return Judgement(label=Label.ENTAILS, confidence=1.0, rationale="all words")
        return Judgement(label=Label.UNKNOWN, confidence=0.5, rationale="missing words")


def expected_check() -> tuple[dict[str, Any], list[UnsupportedClaim]]:
    """The citation check of the answer, computed once without any driver."""
    verifier = CitationVerifier(WordsJudge())
    passages = dict(enumerate(DOCS, start=1))
    verdicts = [verifier.verify(s, passages) for s in split_cited_sentences(ANSWER)]
    return citation_report(verdicts, {1: 1, 2: 2, 3: 1})  # position -> reference number


EXPECTED_CHECK, UNSUPPORTED = expected_check()
NOTES = {  # what mark_unsupported appends, per style (pinned)
    "markdown": "\n\n**Citation check**\n\n- Its deck still turns today. **1** *(not supported "
    "by its citations)*",
    "html": '\n\n<aside class="citation-check"><p>Citation check</p><ul><li>Its deck still '
    "turns today.<sup>1</sup> <em>(not supported by its citations)</em></li></ul></aside>",
    "text": '\n\nCitation check:\n- "Its deck still turns today." [1] (not supported by its '
    "citations)",
    "empty": "",
}


@pytest.mark.parametrize("style_name", list(STYLES))
def test_the_pinned_check_is_what_the_verifier_and_the_styles_give(style_name: str) -> None:
    # only the last sentence ("still", "today") is unsupported by its citation
    assert EXPECTED_CHECK["unsupported"] == [
        {"sentence": "Its deck still turns today.", "numbers": [1], "supported": False}
    ]
    assert EXPECTED_CHECK["num_verification_worthy"] == 6
    note = STYLES[style_name]().format_citation_check(UNSUPPORTED)
    assert note == NOTES[style_name.split(",")[0]]


CHECKED_SOURCES = ["str stream, 3-char pieces", "chat model, dict input", "conversation"]
# One style of each kind: the note differs by kind, deep links do not touch the check.
CHECKED_STYLES = ["markdown, deep links", "html, flat links", "text", "empty, deep links"]


@pytest.mark.parametrize("source", CHECKED_SOURCES)
@pytest.mark.parametrize("style_name", CHECKED_STYLES)
def test_every_mode_collects_the_citation_check(style_name: str, source: str) -> None:
    options: dict[str, Any] = {
        "style": STYLES[style_name](),
        "verifier": CitationVerifier(WordsJudge()),
        "mark_unsupported": True,
    }
    if source == "conversation":
        wrapped: Any = manage_references(StreamingChatModel(chunks=chat_script()), **options)
        input: Any = conversation()
        message = True
    else:
        factory, message = SOURCES[source]
        wrapped, input = manage_references(factory(), **options), INPUT
    note = NOTES[style_name.split(",")[0]]
    assert_every_mode_gives(
        every_mode(wrapped, input),
        expected_outcome(style_name, message=message, check=EXPECTED_CHECK, note=note),
    )


# -- any chunking: the sync and async streams give the pinned deep-linked answer ---------------


def pieces_at(cuts: set[int]) -> list[str]:
    bounds = [0, *sorted(cuts), len(ANSWER)]
    return [ANSWER[a:b] for a, b in pairwise(bounds)]


def streams(wrapped: Runnable[Any, Any], input: Any) -> tuple[Any, Any]:
    async def run() -> Any:
        return joined([c async for c in wrapped.astream(input)])

    return joined(list(wrapped.stream(input))), asyncio.run(run())


CUTS = st.sets(st.integers(1, len(ANSWER) - 1), max_size=60)
FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(cuts=CUTS, as_messages=st.booleans())
def test_any_chunking_streams_the_pinned_deep_links(cuts: set[int], as_messages: bool) -> None:
    pieces: list[Any] = pieces_at(cuts)
    if as_messages:
        pieces = [AIMessageChunk(content=p) for p in pieces]
    wrapped = manage_references(generator_of(pieces), style=STYLES["markdown, deep links"]())
    for output in streams(wrapped, INPUT):
        assert text_of(output) == EXPECTED_TEXT["markdown, deep links"]


@FAST
@given(cuts=CUTS)
def test_any_chunking_of_a_chat_answer_streams_the_pinned_deep_links(cuts: set[int]) -> None:
    chunks = [AIMessageChunk(content=p) for p in pieces_at(cuts)]
    wrapped = manage_references(
        StreamingChatModel(chunks=chunks), style=STYLES["html, deep links"]()
    )
    for output in streams(wrapped, conversation()):
        assert text_of(output) == EXPECTED_TEXT["html, deep links"]
        assert output.response_metadata["references"] == EXPECTED_REFERENCES
