"""The live citation check reads the run's dialect: one parse feeds the rewriter and the check."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references import TextReferenceStyle, manage_references
from langchain_references.citations.sentences import CitedSentence
from langchain_references.citations.verifier import CitationVerdict, SentenceVerdict
from tests.unit_tests.fakes import StreamingChatModel, text_chunks

DOCS = [
    Document("Paris is the capital of France.", metadata={"source": "https://fr.example"}),
    Document("Seattle is a city in Washington.", metadata={"source": "https://wa.example"}),
]

#: The same answer in each dialect: the first sentence is supported, the second is not.
FIRST = "Paris is the capital of France"
SECOND = "Seattle is the capital of France"
ANSWERS = {
    "id": f"{FIRST} [1](id=1). {SECOND} [1](id=2).",
    "source": f"{FIRST} 【1†source】. {SECOND} 【2】.",
    "assistants": f"{FIRST} 【1:0†source】. {SECOND} 【2:3†x】.",
    "bracket": f"{FIRST} [1]. {SECOND} [2].",
}
MARKERS = {
    "id": ("id",),
    "source": ("source",),
    "assistants": ("source",),
    "bracket": ("bracket",),
}
RENDERED = (
    "Paris is the capital of France [1]. Seattle is the capital of France [2].\n\n"
    "- [1] https://fr.example\n- [2] https://wa.example"
)


class ScriptedChecker:
    """Supported when every cited document contains the sentence; records what it was shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, tuple[int, ...]]] = []
        self._lock = threading.Lock()

    def verify(
        self,
        sentence: CitedSentence,
        passages_by_id: Mapping[int, Document],
        *,
        config: RunnableConfig | None = None,
    ) -> SentenceVerdict:
        with self._lock:
            self.seen.append((sentence.text, sentence.doc_ids))
        citations = tuple(
            CitationVerdict(
                doc_id=i,
                precise=sentence.text in passages_by_id[i].page_content,
                alone=None,
                needed=None,
                reason="scripted",
            )
            for i in sentence.doc_ids
        )
        supported = bool(citations) and all(c.precise for c in citations)
        return SentenceVerdict(
            sentence=sentence, verification_worthy=True, supported=supported, citations=citations
        )

    async def averify(
        self,
        sentence: CitedSentence,
        passages_by_id: Mapping[int, Document],
        *,
        config: RunnableConfig | None = None,
    ) -> SentenceVerdict:
        await asyncio.sleep(0)
        return self.verify(sentence, passages_by_id, config=config)


EXPECTED_SEEN = [
    ("Paris is the capital of France.", (1,)),
    ("Seattle is the capital of France.", (2,)),
]


def assert_check(check: dict[str, Any]) -> None:
    assert check["num_verification_worthy"] == 2
    assert check["citation_recall"] == pytest.approx(0.5)
    assert check["citation_precision"] == pytest.approx(0.5)
    assert [s["doc_ids"] for s in check["sentences"]] == [[1], [2]]
    assert check["unsupported"] == [
        {"sentence": "Seattle is the capital of France.", "numbers": [2], "supported": False}
    ]


def wrapped(dialect: str, checker: ScriptedChecker, *, streamed: bool) -> Any:
    answer = ANSWERS[dialect]
    model: Any = (
        StreamingChatModel(chunks=text_chunks(list(answer)))  # split at every character
        if streamed
        else RunnableLambda(lambda _: answer)
    )
    return manage_references(
        model, style=TextReferenceStyle(), verifier=checker, markers=MARKERS[dialect]
    )


def merged(chunks: list[Any]) -> Any:
    out = chunks[0]
    for chunk in chunks[1:]:
        out = out + chunk
    return out


@pytest.mark.parametrize("dialect", sorted(ANSWERS))
def test_a_streamed_answer_is_checked_in_its_dialect(dialect: str) -> None:
    checker = ScriptedChecker()
    chunks = list(
        wrapped(dialect, checker, streamed=True).stream({"documents": DOCS, "input": "q"})
    )
    message = merged(chunks)
    assert message.content == RENDERED
    assert_check(message.response_metadata["citation_check"])
    assert sorted(checker.seen) == EXPECTED_SEEN


@pytest.mark.parametrize("dialect", sorted(ANSWERS))
def test_an_invoked_answer_is_checked_in_its_dialect(dialect: str) -> None:
    checker = ScriptedChecker()
    runnable = wrapped(dialect, checker, streamed=False)
    events: list[dict[str, Any]] = []

    async def run() -> str:
        out: str = ""
        async for event in runnable.astream_events({"documents": DOCS}, version="v2"):
            if event["event"] == "on_custom_event" and event["name"] == "references":
                events.append(event["data"])
            if event["event"] == "on_chain_end" and not event["parent_ids"]:
                out = event["data"]["output"]
        return out

    assert runnable.invoke({"documents": DOCS}) == RENDERED
    assert asyncio.run(run()) == RENDERED
    (data,) = events
    assert_check(data["citation_check"])
    assert checker.seen == EXPECTED_SEEN * 2


@pytest.mark.parametrize("dialect", sorted(ANSWERS))
def test_an_async_stream_is_checked_in_its_dialect(dialect: str) -> None:
    checker = ScriptedChecker()
    runnable = wrapped(dialect, checker, streamed=True)

    async def run() -> list[Any]:
        inp = {"documents": DOCS, "input": "q"}
        return [merged([c async for c in runnable.astream(inp)]), await runnable.ainvoke(inp)]

    for message in asyncio.run(run()):
        assert message.content == RENDERED
        assert_check(message.response_metadata["citation_check"])
    assert sorted(checker.seen) == sorted(EXPECTED_SEEN * 2)


@pytest.mark.parametrize("dialect", sorted(ANSWERS))
def test_mark_unsupported_names_only_the_unsupported_sentence(dialect: str) -> None:
    runnable = manage_references(
        RunnableLambda(lambda _: ANSWERS[dialect]),
        style=TextReferenceStyle(),
        verifier=ScriptedChecker(),
        markers=MARKERS[dialect],
        mark_unsupported=True,
    )
    assert runnable.invoke({"documents": DOCS}) == (
        RENDERED + '\n\nCitation check:\n- "Seattle is the capital of France." [2] (not '
        "supported by its citations)"
    )
