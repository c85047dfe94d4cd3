"""The streaming citation check of manage_references(verifier=...)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references import (
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    TextReferenceStyle,
    manage_references,
)
from langchain_references.citations.verifier import CitationVerifier
from langchain_references.judges import Judge, Judgement, Label
from tests.unit_tests.fakes import StreamingChatModel, text_chunks

DOCS = [
    Document("Seattle is a city in Washington state.", metadata={"source": "https://wa.example"}),
    Document("Paris is the capital of France.", metadata={"source": "https://fr.example"}),
]
ANSWER = (
    "Seattle is a city in Washington state [1](id=1). "
    "Seattle is the capital of France [2](id=2). "
    "Nothing here cites any of the documents at all."
)


class ContainsJudge(Judge):
    """Entails when the passage contains the statement (minus its final period)."""

    def __init__(self, *, trace: Any = None, forbid_sync: bool = False) -> None:
        super().__init__()
        self.trace = trace
        self.forbid_sync = forbid_sync

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        if self.forbid_sync:
            raise RuntimeError("sync judge used")
        return self._decide(statement, passage)

    async def _ajudge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        if self.trace is not None:
            self.trace.append(("judge", statement))
        await asyncio.sleep(0)
        return self._decide(statement, passage)

    @staticmethod
    def _decide(statement: str, passage: str) -> Judgement:
        if statement.rstrip(".").lower() in passage.lower():
            return Judgement(label=Label.ENTAILS, confidence=1.0)
        return Judgement(label=Label.UNKNOWN, confidence=0.6)


def check_of(message: Any) -> dict[str, Any]:
    return message.response_metadata["citation_check"]


def assert_expected(check: dict[str, Any]) -> None:
    assert check["num_verification_worthy"] == 3
    assert check["citation_recall"] == pytest.approx(1 / 3)
    assert check["citation_precision"] == pytest.approx(1 / 2)
    assert check["unsupported"] == [
        {"sentence": "Seattle is the capital of France.", "numbers": [2], "supported": False},
        {
            "sentence": "Nothing here cites any of the documents at all.",
            "numbers": [],
            "supported": False,
        },
    ]


def model() -> StreamingChatModel:
    pieces = [ANSWER[i : i + 6] for i in range(0, len(ANSWER), 6)]
    return StreamingChatModel(chunks=text_chunks(pieces))


INPUT = {"documents": DOCS, "input": "q"}
#: Makes ``PASS_INPUT | model()`` a chain: a ReferencedRunnable, not the chat model wrapper.
PASS_INPUT = RunnableLambda(lambda x: x["input"])


def test_sync_stream_and_invoke_report_the_check() -> None:
    wrapped = manage_references(model(), verifier=CitationVerifier(ContainsJudge()))
    chunks = list(wrapped.stream(INPUT))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert_expected(check_of(merged))
    assert_expected(check_of(wrapped.invoke(INPUT)))
    assert "Citation check" not in merged.content  # not shown unless asked


@pytest.mark.parametrize("wrapped_kind", ["chat model", "chain"])
def test_async_paths_use_the_async_judge(wrapped_kind: str) -> None:
    judge = ContainsJudge(forbid_sync=True)
    answerer: Any = model() if wrapped_kind == "chat model" else PASS_INPUT | model()
    wrapped = manage_references(answerer, verifier=CitationVerifier(judge))

    async def run() -> list[Any]:
        streamed = [c async for c in wrapped.astream(INPUT)]
        merged = streamed[0]
        for chunk in streamed[1:]:
            merged = merged + chunk
        return [merged, await wrapped.ainvoke(INPUT)]

    for message in asyncio.run(run()):
        assert_expected(check_of(message))


def test_checks_start_while_the_answer_streams() -> None:
    trace: list[tuple[str, Any]] = []
    pieces = [ANSWER[i : i + 6] for i in range(0, len(ANSWER), 6)]
    streaming = StreamingChatModel(
        chunks=text_chunks(pieces), async_delay=0.001, trace=trace, tag="model"
    )
    wrapped = manage_references(streaming, verifier=CitationVerifier(ContainsJudge(trace=trace)))

    async def run() -> None:
        async for _ in wrapped.astream(INPUT):
            pass

    asyncio.run(run())
    first_judge = next(i for i, (who, _) in enumerate(trace) if who == "judge")
    last_model = max(i for i, (who, _) in enumerate(trace) if who == "model")
    assert first_judge < last_model


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (
            TextReferenceStyle(),
            '\n\nCitation check:\n- "Seattle is the capital of France." [2] (not supported by '
            'its citations)\n- "Nothing here cites any of the documents at all." (not '
            "supported by its citations)",
        ),
        (
            MarkdownReferenceStyle(),
            "\n\n**Citation check**\n\n- Seattle is the capital of France. **2** *(not supported "
            "by its citations)*\n- Nothing here cites any of the documents at all. *(not "
            "supported by its citations)*",
        ),
        (
            HTMLReferenceStyle(),
            '\n\n<aside class="citation-check"><p>Citation check</p><ul><li>Seattle is the '
            "capital of France.<sup>2</sup> <em>(not supported by its citations)</em></li><li>"
            "Nothing here cites any of the documents at all. <em>(not supported by its "
            "citations)</em></li></ul></aside>",
        ),
    ],
)
def test_mark_unsupported_appends_the_note_after_the_list(style: Any, expected: str) -> None:
    wrapped = manage_references(
        RunnableLambda(lambda _: ANSWER),
        style=style,
        verifier=CitationVerifier(ContainsJudge()),
        mark_unsupported=True,
    )
    text = wrapped.invoke({"documents": DOCS})
    assert text.endswith(expected)
    assert "".join(wrapped.stream({"documents": DOCS})) == text


def test_html_note_is_escaped() -> None:
    answer = "The <script>alert(1)</script> tag is dangerous in pages [1](id=1)."
    wrapped = manage_references(
        RunnableLambda(lambda _: answer),
        style=HTMLReferenceStyle(),
        verifier=CitationVerifier(ContainsJudge()),
        mark_unsupported=True,
    )
    text = wrapped.invoke({"documents": DOCS})
    note = text[text.index('<aside class="citation-check">') :]
    assert "<script>" not in note
    assert "&lt;script&gt;" in note


def test_string_outputs_get_the_check_in_the_event() -> None:
    wrapped = manage_references(
        RunnableLambda(lambda _: ANSWER), verifier=CitationVerifier(ContainsJudge())
    )

    async def run() -> list[Any]:
        return [
            e["data"]
            async for e in wrapped.astream_events({"documents": DOCS}, version="v2")
            if e["event"] == "on_custom_event" and e["name"] == "references"
        ]

    (data,) = asyncio.run(run())
    assert_expected(data["citation_check"])


def test_option_errors() -> None:
    with pytest.raises(ValueError, match="verifier"):
        manage_references(RunnableLambda(lambda _: ""), mark_unsupported=True)
    with pytest.raises(TypeError, match="verifier"):
        manage_references(RunnableLambda(lambda _: ""), verifier=object())  # type: ignore[arg-type]
