"""A run with a citation check: provider citations and held sentences, in every mode.

With ``on_unsupported="keep"`` the check sees the text but nothing waits for it; with
``"flag"`` or ``"drop"`` the session holds each sentence (text, ``[n](id=k)`` citations and
the provider's own citations) until its verdict, then renders it. The style shows each
marker's quote, so a provider citation that lost its ``cited_text`` on the way shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import RunnableConfig, RunnableGenerator, RunnableLambda

from langchain_references import TextReferenceStyle, manage_references
from langchain_references.citations.sentences import CitedSentence
from langchain_references.citations.verifier import SentenceVerdict
from langchain_references.core.styles import QUOTE_KEY
from langchain_references.manager import OnUnsupported
from tests.unit_tests.citations.test_dialect_checks import ScriptedChecker, merged
from tests.unit_tests.fakes import StreamingChatModel

DOCS = [
    Document("Paris is the capital of France.", metadata={"source": "https://fr.example"}),
    Document("Seattle is a city in Washington.", metadata={"source": "https://wa.example"}),
    Document("It rains in Seattle.", metadata={"source": "https://rain.example"}),
]


class Quoting(TextReferenceStyle):
    """``[n]`` followed by the quote the citation carries, if any (deep links on)."""

    deep_links = True

    def format_reference(self, ref: int, media: Document) -> str | None:
        quote = media.metadata.get(QUOTE_KEY)
        return f"[{ref}]" + (f"<{quote}>" if quote else "")


#: Sentence 2 is unsupported by document 2, cited once inside it and once after its end
#: (a citation between a sentence end and the next text belongs to the sentence that ended);
#: the provider cites "Clouds" after "rainy". Sentence 3 is supported and ends the answer
#: with its citation.
ANSWER = (
    "Paris is the capital of France [1](id=1). Seattle is the capital of France [1](id=2) "
    "and rainy. [1](id=2)It rains in Seattle [1](id=3)"
)
PROVIDER = {
    "type": "citation",
    "url": "https://clouds.example",
    "title": "Clouds",
    "end_index": ANSWER.index(" and rainy") + len(" and rainy"),
    "cited_text": "Clouds bring rain.",
}
Q1 = "<Paris is the capital of France.>"
Q2 = "<Seattle is a city in Washington.>"
Q3 = "<It rains in Seattle.>"
CLOUDS = "<Clouds bring rain.>"
EXPECTED = {
    "keep": f"Paris is the capital of France [1]{Q1}. Seattle is the capital of France [2]{Q2} "
    f"and rainy[3]{CLOUDS}. [2]{Q2}It rains in Seattle [4]{Q3}\n\n"
    "- [1] https://fr.example\n- [2] https://wa.example\n- [3] Clouds (https://clouds.example)\n"
    "- [4] https://rain.example",
    "flag": f"Paris is the capital of France [1]{Q1}. Seattle is the capital of France [2]{Q2} "
    f"(unsupported) and rainy[3]{CLOUDS}. [2]{Q2} (unsupported)It rains in Seattle [4]{Q3}\n\n"
    "- [1] https://fr.example\n- [2] https://wa.example\n- [3] Clouds (https://clouds.example)\n"
    "- [4] https://rain.example",
    "drop": f"Paris is the capital of France [1]{Q1}. Seattle is the capital of France and "
    f"rainy[2]{CLOUDS}. It rains in Seattle [3]{Q3}\n\n"
    "- [1] https://fr.example\n- [2] Clouds (https://clouds.example)\n- [3] https://rain.example",
}


def provider_chunks(cut: int) -> list[AIMessageChunk]:
    """The answer as v1 text blocks of ``cut`` characters, the provider's citation last."""
    chunks = [
        AIMessageChunk(content=[{"type": "text", "text": ANSWER[i : i + cut], "index": 0}])
        for i in range(0, len(ANSWER), cut)
    ]
    chunks.append(
        AIMessageChunk(
            content=[{"type": "text", "text": "", "annotations": [PROVIDER], "index": 0}]
        )
    )
    return chunks


def provider_chat(cut: int) -> StreamingChatModel:
    """A chat model streaming :func:`provider_chunks` (its last chunk closes the answer)."""
    return StreamingChatModel(chunks=provider_chunks(cut))


def checked(answerer: Any, mode: OnUnsupported, **options: Any) -> Any:
    return manage_references(answerer, verifier=ScriptedChecker(), on_unsupported=mode, **options)


@pytest.mark.parametrize("cut", [1, 7, len(ANSWER)])
@pytest.mark.parametrize("mode", ["keep", "flag", "drop"])
def test_a_provider_citation_in_a_checked_run_keeps_its_quote_place_and_number(
    mode: OnUnsupported, cut: int
) -> None:
    runnable = checked(provider_chat(cut), mode, style=Quoting(), native="v1")
    streamed = merged(list(runnable.stream({"documents": DOCS, "input": "q"})))
    assert streamed.text == EXPECTED[mode]


@pytest.mark.parametrize("mode", ["keep", "flag", "drop"])
def test_text_a_provider_adapter_holds_until_the_stream_ends_is_written_in_a_checked_run(
    mode: OnUnsupported,
) -> None:
    # no chunk says the answer is over: the adapter holds the open block until the end
    chunks = provider_chunks(7)

    def source(_inputs: Iterator[Any]) -> Iterator[AIMessageChunk]:
        yield from chunks

    runnable = checked(RunnableGenerator(source), mode, style=Quoting(), native="v1")
    streamed = merged(list(runnable.stream({"documents": DOCS})))
    assert streamed.text == EXPECTED[mode]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("flag", "Paris is the capital of France [1]. So [2] (unsupported) it is."),
        ("drop", "Paris is the capital of France [1]. So it is."),
    ],
)
def test_a_citation_a_few_characters_into_a_sentence_gets_that_sentences_verdict(
    mode: OnUnsupported, expected: str
) -> None:
    # the held text is cut at the sentence end, ". " | "So ": the citation after "So" (which
    # starts closer to that end than its own length) waits for sentence 2's verdict
    answer = "Paris is the capital of France [1](id=1). So [1](id=2) it is."
    runnable = checked(RunnableLambda(lambda _: answer), mode, style=TextReferenceStyle())
    listed = "\n\n- [1] https://fr.example" + (
        "\n- [2] https://wa.example" if mode == "flag" else ""
    )
    assert runnable.invoke({"documents": DOCS}) == expected + listed


@pytest.mark.parametrize("mode", ["keep", "flag", "drop"])
def test_text_the_parser_still_holds_at_the_end_of_a_checked_run_is_written(
    mode: OnUnsupported,
) -> None:
    answer = "Paris is the capital of France [1](id=1). More in [2"
    runnable = checked(RunnableLambda(lambda _: answer), mode, style=TextReferenceStyle())
    assert runnable.invoke({"documents": DOCS}) == (
        "Paris is the capital of France [1]. More in [2\n\n- [1] https://fr.example"
    )


class Gated(ScriptedChecker):
    """Judges "Seattle" sentences only once the gate opens; the others at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def averify(
        self,
        sentence: CitedSentence,
        passages_by_id: Mapping[int, Document],
        *,
        config: RunnableConfig | None = None,
    ) -> SentenceVerdict:
        if "Seattle" in sentence.text:
            await self.gate.wait()
        return self.verify(sentence, passages_by_id, config=config)


def test_the_sentences_judged_so_far_are_released_while_a_later_one_waits() -> None:
    checker = Gated()
    first = "Paris is the capital of France [1](id=1). Seattle is the capital of France [1](id=2)."

    async def source(_inputs: AsyncIterator[Any]) -> AsyncIterator[str]:
        yield first
        for _ in range(10):  # the verification of sentence 1 runs; sentence 2's waits
            await asyncio.sleep(0)
        yield " Done"
        checker.gate.set()

    async def run() -> list[str]:
        runnable = manage_references(
            RunnableGenerator(source),
            style=TextReferenceStyle(),
            verifier=checker,
            on_unsupported="flag",
        )
        return [out async for out in runnable.astream({"documents": DOCS})]

    assert asyncio.run(run()) == [
        "Paris is the capital of France [1].",
        " Seattle is the capital of France [2] (unsupported). Done\n\n"
        "- [1] https://fr.example\n- [2] https://wa.example",
    ]


@pytest.mark.parametrize("mode", ["flag", "drop"])
def test_an_answer_of_blanks_in_no_sentence_is_written_as_it_is(mode: OnUnsupported) -> None:
    runnable = checked(RunnableLambda(lambda _: " \n "), mode, style=TextReferenceStyle())
    assert runnable.invoke({"documents": DOCS}) == " \n "
