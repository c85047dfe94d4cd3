"""manage_references(on_unsupported=...): what the reader sees of an unsupported citation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableGenerator, RunnableLambda

from langchain_references import (
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
    manage_references,
)
from tests.unit_tests.citations.test_dialect_checks import ScriptedChecker, merged
from tests.unit_tests.fakes import StreamingChatModel, text_chunks

DOCS = [
    Document("Paris is the capital of France.", metadata={"source": "https://fr.example"}),
    Document("Seattle is a city in Washington.", metadata={"source": "https://wa.example"}),
]
#: Sentence 2 cites a document that does not support it; sentence 3 cites it rightly.
ANSWER = (
    "Paris is the capital of France [1](id=1). Seattle is the capital of France [1](id=2). "
    "Seattle is a city in Washington [7](id=2)."
)
LIST = "\n\n- [1] https://fr.example\n- [2] https://wa.example"
EXPECTED = {
    "keep": "Paris is the capital of France [1]. Seattle is the capital of France [2]. "
    "Seattle is a city in Washington [2]." + LIST,
    "flag": "Paris is the capital of France [1]. Seattle is the capital of France [2] "
    "(unsupported). Seattle is a city in Washington [2]." + LIST,
    "drop": "Paris is the capital of France [1]. Seattle is the capital of France. "
    "Seattle is a city in Washington [2]." + LIST,
}


def wrapper(answerer: Any, mode: str, **options: Any) -> Any:
    return manage_references(
        answerer,
        style=options.pop("style", TextReferenceStyle()),
        verifier=ScriptedChecker(),
        on_unsupported=mode,
        **options,
    )


def chat(answer: str = ANSWER) -> StreamingChatModel:
    return StreamingChatModel(chunks=text_chunks(list(answer)))  # split at every character


INPUT = {"documents": DOCS, "input": "q"}


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_each_mode_streamed_and_invoked_sync(mode: str) -> None:
    streamed = merged(list(wrapper(chat(), mode).stream(INPUT)))
    assert streamed.content == EXPECTED[mode]
    invoked = wrapper(RunnableLambda(lambda _: ANSWER), mode).invoke({"documents": DOCS})
    assert invoked == EXPECTED[mode]
    check = streamed.response_metadata["citation_check"]
    assert check["citation_recall"] == pytest.approx(2 / 3)
    assert check["unsupported"] == [
        {
            "sentence": "Seattle is the capital of France.",
            "numbers": [2],  # document 2 is numbered by sentence 3 in every mode
            "supported": False,
        }
    ]


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_each_mode_streamed_and_invoked_async(mode: str) -> None:
    async def run() -> list[Any]:
        runnable = wrapper(chat(), mode)
        streamed = merged([c async for c in runnable.astream(INPUT)])
        invoked = await wrapper(chat(), mode).ainvoke(INPUT)
        text = await wrapper(RunnableLambda(lambda _: ANSWER), mode).ainvoke({"documents": DOCS})
        strings = [c async for c in wrapper(RunnableLambda(lambda _: ANSWER), mode).astream(INPUT)]
        return [streamed.content, invoked.content, text, "".join(strings)]

    assert asyncio.run(run()) == [EXPECTED[mode]] * 4


def test_a_dropped_citation_numbers_nothing_and_lists_nothing() -> None:
    answer = "Seattle is the capital of France [1](id=2). Paris is the capital of France [1](id=1)."
    out = wrapper(RunnableLambda(lambda _: answer), "drop").invoke({"documents": DOCS})
    assert out == (
        "Seattle is the capital of France. Paris is the capital of France [1].\n\n"
        "- [1] https://fr.example"
    )
    streamed = merged(list(wrapper(chat(answer), "drop").stream(INPUT)))
    assert streamed.content == out
    assert streamed.response_metadata["references"] == [
        {"number": 1, "source": "https://fr.example", "title": None, "positions": [1]}
    ]
    assert streamed.response_metadata["citation_check"]["unsupported"] == [
        {"sentence": "Seattle is the capital of France.", "numbers": [], "supported": False}
    ]


@pytest.mark.parametrize(
    ("style", "flag"),
    [
        (TextReferenceStyle(), " (unsupported)"),
        (MarkdownReferenceStyle(deep_links=False), " *(unsupported)*"),
        (HTMLReferenceStyle(), ' <em class="unsupported">(unsupported)</em>'),
    ],
)
def test_the_flag_is_the_styles(style: ReferenceStyle, flag: str) -> None:
    assert style.format_unsupported() == flag
    out = wrapper(RunnableLambda(lambda _: ANSWER), "flag", style=style).invoke({"documents": DOCS})
    second = style.format_reference(2, DOCS[1])
    assert f"Seattle is the capital of France {second}{flag}." in out
    assert out.count(flag) == 1


def test_the_html_flag_is_escaped() -> None:
    class Loud(HTMLReferenceStyle):
        unsupported_label = "<b>not</b> supported"

    assert Loud().format_unsupported() == (
        ' <em class="unsupported">(&lt;b&gt;not&lt;/b&gt; supported)</em>'
    )


def test_keep_holds_nothing_back_and_flag_holds_each_sentence_until_its_verdict() -> None:
    first = "Paris is the capital of France [1](id=1). "
    rest = ["Seattle", " is the capital", " of France [1](id=2)."]

    def outputs(mode: str) -> list[tuple[str, str]]:
        trace: list[tuple[str, str]] = []

        async def source(_: AsyncIterator[Any]) -> AsyncIterator[str]:
            trace.append(("model", first))
            yield first
            for piece in rest:
                for _ in range(10):  # the verification of a finished sentence may run
                    await asyncio.sleep(0)
                trace.append(("model", piece))
                yield piece

        async def run() -> None:
            runnable = wrapper(RunnableGenerator(source), mode)
            async for out in runnable.astream({"documents": DOCS}):
                trace.append(("out", out))

        asyncio.run(run())
        return trace

    assert outputs("keep")[:2] == [("model", first), ("out", "Paris is the capital of France [1].")]
    flagged = outputs("flag")
    # sentence 1 is released once its verdict came, before the model wrote sentence 2's end
    assert flagged[:4] == [
        ("model", first),
        ("model", "Seattle"),
        ("model", " is the capital"),
        ("out", "Paris is the capital of France [1]."),
    ]
    assert "".join(text for who, text in flagged if who == "out") == (
        "Paris is the capital of France [1]. Seattle is the capital of France [2] "
        "(unsupported).\n\n- [1] https://fr.example\n- [2] https://wa.example"
    )


def test_the_option_is_checked() -> None:
    answerer = RunnableLambda(lambda _: "")
    with pytest.raises(ValueError, match=r"^on_unsupported must be one of \['keep', 'flag', "):
        manage_references(answerer, verifier=ScriptedChecker(), on_unsupported="hide")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="'hide'"):
        manage_references(answerer, verifier=ScriptedChecker(), on_unsupported="hide")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"^on_unsupported='drop' needs a verifier$"):
        manage_references(answerer, on_unsupported="drop")
    assert manage_references(answerer).on_unsupported == "keep"  # type: ignore[attr-defined]


#: An answer with a provider's own citation (a LangChain v1 ``citation`` annotation) after an
#: unsupported [n](id=k) one: the provider's citation is not checked, keeps its place in the
#: text held back with it, and takes the next number (2 once the unsupported one is dropped).
NATIVE_TEXT = (
    "Paris is the capital of France [1](id=1). Seattle is the capital of France [1](id=2). "
    "It rains in Seattle."
)
NATIVE_EXPECTED = {
    "keep": "Paris is the capital of France [1]. Seattle is the capital of France [2]. "
    "It rains in Seattle[3].\n\n- [1] https://fr.example\n- [2] https://wa.example\n"
    "- [3] Rain (https://rain.example)",
    "flag": "Paris is the capital of France [1]. Seattle is the capital of France [2] "
    "(unsupported). It rains in Seattle[3].\n\n- [1] https://fr.example\n"
    "- [2] https://wa.example\n- [3] Rain (https://rain.example)",
    "drop": "Paris is the capital of France [1]. Seattle is the capital of France. "
    "It rains in Seattle[2].\n\n- [1] https://fr.example\n- [2] Rain (https://rain.example)",
}


def native_chat(cut: int) -> StreamingChatModel:
    from langchain_core.messages import AIMessageChunk

    end = NATIVE_TEXT.index(" in Seattle.") + len(" in Seattle")
    annotation = {
        "type": "citation",
        "url": "https://rain.example",
        "title": "Rain",
        "end_index": end,
    }
    chunks = [
        AIMessageChunk(content=[{"type": "text", "text": NATIVE_TEXT[i : i + cut], "index": 0}])
        for i in range(0, len(NATIVE_TEXT), cut)
    ]
    chunks.append(
        AIMessageChunk(
            content=[{"type": "text", "text": "", "annotations": [annotation], "index": 0}]
        )
    )
    return StreamingChatModel(chunks=chunks)


@pytest.mark.parametrize("cut", [1, 5, len(NATIVE_TEXT)])
@pytest.mark.parametrize("mode", sorted(NATIVE_EXPECTED))
def test_a_provider_citation_keeps_its_place_among_held_sentences(mode: str, cut: int) -> None:
    runnable = wrapper(native_chat(cut), mode, native="v1")
    streamed = merged(list(runnable.stream(INPUT)))
    assert streamed.text == NATIVE_EXPECTED[mode]

    async def run() -> str:
        chunks = [c async for c in wrapper(native_chat(cut), mode, native="v1").astream(INPUT)]
        return str(merged(chunks).text)

    assert asyncio.run(run()) == NATIVE_EXPECTED[mode]
    unsupported = streamed.response_metadata["citation_check"]["unsupported"]
    assert unsupported[0] == {
        "sentence": "Seattle is the capital of France.",
        "numbers": [] if mode == "drop" else [2],
        "supported": False,
    }
