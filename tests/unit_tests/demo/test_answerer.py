"""ExtractiveAnswerer: an offline chat model that answers with cited sentences."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from pydantic import ValidationError

from langchain_references import format_documents
from langchain_references.demo import answerer as answerer_module
from langchain_references.demo.answerer import (
    NOT_FOUND_ANSWER,
    ExtractiveAnswerer,
    lexical_scores,
    parse_prompt,
    split_sentences,
    states_asked_quantity,
)
from langchain_references.services.embeddings import MiniLMEmbeddings

CITATION = re.compile(r" \[(\d+)\]\(id=(\d+)\)")

BEES = (
    "A forager bee performs a waggle dance to show where flowers are. The colony keeps one queen."
)
MOON = (
    "The Moon orbits Earth at about 384,400 kilometers. "
    "Apollo 11 astronauts walked on the Moon in 1969."
)
PYTHON = (
    "Guido van Rossum created the Python programming language. "
    "Python 3.0 was released in December 2008."
)


def _prompt(question: str, *texts: str) -> list[Any]:
    documents = [Document(page_content=t) for t in texts]
    return [
        SystemMessage("Answer from the documents.\n" + format_documents(documents)),
        HumanMessage(question),
    ]


def _cited(answer: str) -> list[tuple[str, int, int]]:
    """(sentence before the citation, label, document id) for each citation."""
    result = []
    start = 0
    for match in CITATION.finditer(answer):
        sentence = answer[start : match.start()].strip()
        result.append((sentence, int(match.group(1)), int(match.group(2))))
        start = match.end() + 1  # skip the punctuation after the citation
    return result


def _assert_faithful(answer: str, texts: tuple[str, ...]) -> list[int]:
    """Every cited sentence comes from the cited document; return the cited ids."""
    cited = _cited(answer)
    for sentence, _label, doc_id in cited:
        assert 1 <= doc_id <= len(texts)
        assert sentence in texts[doc_id - 1], (sentence, doc_id)
    return [doc_id for _, _, doc_id in cited]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


class RecordingEmbeddings(Embeddings):
    """Bag-of-words vectors over a fixed vocabulary; records which methods ran."""

    VOCABULARY = ("moon", "bee", "flowers", "python", "queen", "apollo", "language", "dance")

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _vector(self, text: str) -> list[float]:
        lowered = text.lower()
        return [float(lowered.count(word)) for word in self.VOCABULARY]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append("embed_documents")
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls.append("embed_query")
        return self._vector(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append("aembed_documents")
        return [self._vector(t) for t in texts]

    async def aembed_query(self, text: str) -> list[float]:
        self.calls.append("aembed_query")
        return self._vector(text)


# -- prompt contract -----------------------------------------------------------------------


def test_parse_prompt_reads_documents_and_question() -> None:
    parsed = parse_prompt(_prompt("  When did Apollo 11\nland? ", BEES, MOON))
    assert parsed.question == "When did Apollo 11 land?"
    assert [(d.id, d.text) for d in parsed.documents] == [(1, BEES), (2, MOON)]


def test_parse_prompt_question_line_and_documents_in_the_human_message() -> None:
    human = HumanMessage(
        'Context:\n<document id="7">\nBees dance.\n</document>\n'
        "Answer briefly.\nQuestion: Why do bees dance?\n"
    )
    parsed = parse_prompt([SystemMessage("<document id=7>example</document>"), human])
    assert parsed.question == "Why do bees dance?"
    assert [(d.id, d.text) for d in parsed.documents] == [(7, "Bees dance.")]


def test_parse_prompt_rejects_prompts_without_a_question() -> None:
    with pytest.raises(ValueError, match="no human message"):
        parse_prompt([SystemMessage("<document id=1>x</document>")])
    with pytest.raises(ValueError, match="no question"):
        parse_prompt([HumanMessage("<document id=1>x</document>\n  ")])


def test_split_sentences_handles_abbreviations() -> None:
    text = "Dr. Smith met Mr. Jones at 5 p.m. on Mt. Rainier.  They   talked.\nThen left!"
    assert split_sentences(text) == [
        "Dr. Smith met Mr. Jones at 5 p.m. on Mt. Rainier.",
        "They talked.",
        "Then left!",
    ]
    assert split_sentences("   ") == []


def test_lexical_scores_need_a_shared_content_word() -> None:
    sentences = ["The queen lays eggs.", "It is what it is.", "Eggs and queen and eggs."]
    scores = lexical_scores("What does the queen do?", sentences)
    assert scores[1] == 0.0
    assert scores[0] > 0.0
    assert scores[2] > 0.0
    assert lexical_scores("what is it?", sentences) == [0.0, 0.0, 0.0]


@settings(max_examples=50, deadline=None)
@given(
    question=st.text(max_size=40),
    sentences=st.lists(st.text(max_size=60), max_size=6),
)
def test_lexical_scores_are_non_negative_and_zero_without_overlap(
    question: str, sentences: list[str]
) -> None:
    scores = lexical_scores(question, sentences)
    assert len(scores) == len(sentences)
    words = set(re.findall(r"\w+", question.casefold()))
    for sentence, score in zip(sentences, scores, strict=True):
        assert score >= 0.0
        if not words & set(re.findall(r"\w+", sentence.casefold())):
            assert score == 0.0


# -- answers -------------------------------------------------------------------------------


def test_lexical_answer_cites_the_right_document() -> None:
    texts = (BEES, MOON, PYTHON)
    answer = ExtractiveAnswerer().invoke(_prompt("When did Apollo 11 land on the Moon?", *texts))
    assert isinstance(answer, AIMessage)
    ids = _assert_faithful(answer.text, texts)
    assert ids[0] == 2
    assert set(ids) == {2}
    assert "Apollo 11 astronauts walked on the Moon in 1969 [1](id=2)." in answer.text


def test_semantic_answer_cites_the_right_document(minilm: MiniLMEmbeddings) -> None:
    texts = (BEES, MOON, PYTHON)
    # No content word in common with the answer sentence: only the embeddings can find it.
    model = ExtractiveAnswerer(embeddings=minilm, max_sentences=1)
    answer = model.invoke(_prompt("Who invented this coding language?", *texts)).text
    assert _assert_faithful(answer, texts) == [3]
    assert answer == "Guido van Rossum created the Python programming language [1](id=3)."


def test_labels_number_documents_by_first_citation() -> None:
    texts = (BEES, MOON, PYTHON)
    model = ExtractiveAnswerer(max_sentences=4, relative_threshold=0.0)
    answer = model.invoke(
        _prompt("Python language released, Moon Apollo 1969, Python 3.0?", *texts)
    ).text
    cited = _cited(answer)
    assert len(cited) >= 3
    _assert_faithful(answer, texts)
    labels: dict[int, int] = {}
    for _, label, doc_id in cited:
        assert labels.setdefault(doc_id, len(labels) + 1) == label
    assert {doc_id for _, _, doc_id in cited} == {2, 3}


def test_answer_is_ordered_by_relevance_and_capped() -> None:
    texts = (MOON, "The Moon is bright. The Moon Moon Moon shines.")
    model = ExtractiveAnswerer(max_sentences=2, relative_threshold=0.0)
    answer = model.invoke(_prompt("moon", *texts)).text
    cited = _cited(answer)
    assert len(cited) == 2
    scores = lexical_scores("moon", [s for s, _, _ in cited])
    assert scores == sorted(scores, reverse=True)


def test_duplicate_sentences_are_cited_once() -> None:
    texts = ("Bees make honey from nectar.", "Bees make honey from nectar. Bees sting.")
    answer = (
        ExtractiveAnswerer(relative_threshold=0.0)
        .invoke(_prompt("How do bees make honey?", *texts))
        .text
    )
    assert answer.count("Bees make honey from nectar") == 1
    assert answer.startswith("Bees make honey from nectar [1](id=1).")


@pytest.mark.parametrize("use_embeddings", [False, True])
def test_unrelated_question_gets_the_fixed_answer(
    use_embeddings: bool, minilm: MiniLMEmbeddings
) -> None:
    model = ExtractiveAnswerer(embeddings=minilm if use_embeddings else None)
    answer = model.invoke(_prompt("What currency does Japan use?", BEES, PYTHON)).text
    assert answer == NOT_FOUND_ANSWER


def test_no_documents_gets_the_fixed_answer() -> None:
    answer = ExtractiveAnswerer().invoke([HumanMessage("When did Apollo 11 land?")])
    assert answer.text == NOT_FOUND_ANSWER


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(ValidationError):
        ExtractiveAnswerer(max_sentences=0)
    with pytest.raises(ValidationError):
        ExtractiveAnswerer(relative_threshold=1.5)


def test_stop_sequences_cut_the_answer() -> None:
    messages = _prompt("When did Apollo 11 land on the Moon?", BEES, MOON)
    model = ExtractiveAnswerer()
    full = model.invoke(messages).text
    assert model.invoke(messages, stop=["1969"]).text == full[: full.index("1969")]
    streamed = "".join(c.text for c in model.stream(messages, stop=["](id"]))
    assert streamed == full[: full.index("](id")]


# -- streaming -----------------------------------------------------------------------------


def _chunks(model: ExtractiveAnswerer, messages: list[Any]) -> list[AIMessageChunk]:
    return list(model.stream(messages))


def test_stream_joins_to_invoke_word_by_word() -> None:
    texts = (BEES, MOON, PYTHON)
    messages = _prompt("Python language released, Moon Apollo 1969, Python 3.0?", *texts)
    model = ExtractiveAnswerer(max_sentences=4, relative_threshold=0.0)
    chunks = _chunks(model, messages)
    pieces = [c.text for c in chunks]
    text = "".join(pieces)
    assert text == model.invoke(messages).text
    assert len(pieces) > len(text.split())  # words, and citations in several pieces
    assert all(p.strip() for p in pieces)
    assert all(not p[1:].count(" ") for p in pieces if not p.startswith(" [")), pieces
    # Some citations are split across chunks, deterministically.
    assert any(p.endswith("](") for p in pieces)
    assert any(p == " [" for p in pieces)
    assert pieces == [c.text for c in _chunks(model, messages)]
    assert chunks[-1].chunk_position == "last"


def test_tokens_reach_callbacks() -> None:
    class Collect(BaseCallbackHandler):
        def __init__(self) -> None:
            self.tokens: list[str] = []

        def on_llm_new_token(self, token: str | list[str | dict[str, Any]], **kwargs: Any) -> None:
            assert isinstance(token, str)
            self.tokens.append(token)

    handler = Collect()
    messages = _prompt("When did Apollo 11 land on the Moon?", BEES, MOON)
    model = ExtractiveAnswerer()
    text = "".join(c.text for c in model.stream(messages, config={"callbacks": [handler]}))
    assert "".join(handler.tokens) == text


async def test_async_stream_equals_sync_stream(minilm: MiniLMEmbeddings) -> None:
    messages = _prompt("How do bees show where flowers are?", BEES, MOON, PYTHON)
    for model in (ExtractiveAnswerer(), ExtractiveAnswerer(embeddings=minilm)):
        sync_pieces = [c.text for c in model.stream(messages)]
        async_pieces = [c.text async for c in model.astream(messages)]
        assert async_pieces == sync_pieces
        assert (await model.ainvoke(messages)).text == "".join(sync_pieces)
        assert "[1](id=1)" in "".join(sync_pieces)


async def test_async_path_uses_async_embeddings() -> None:
    embeddings = RecordingEmbeddings()
    model = ExtractiveAnswerer(embeddings=embeddings)
    messages = _prompt("queen bee", BEES, MOON)
    async_text = "".join([c.text async for c in model.astream(messages)])
    assert embeddings.calls == ["aembed_query", "aembed_documents"]
    embeddings.calls.clear()
    assert (await model.ainvoke(messages)).text == async_text
    assert embeddings.calls == ["aembed_query", "aembed_documents"]
    embeddings.calls.clear()
    assert model.invoke(messages).text == async_text
    assert embeddings.calls == ["embed_query", "embed_documents"]
    assert "The colony keeps one queen [1](id=1)." in async_text


_SENTENCES = [
    "Bees make honey.",
    "The Moon has craters.",
    "Python has classes.",
    "Europa has an ocean.",
    "Seattle has a tower.",
    "Honey is sweet.",
]


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(
        st.lists(st.sampled_from(_SENTENCES), min_size=1, max_size=3), min_size=0, max_size=5
    ),
    question=st.lists(
        st.sampled_from(["bees", "honey", "moon", "python", "ocean", "tower", "what", "the"]),
        min_size=1,
        max_size=4,
    ),
    max_sentences=st.integers(min_value=1, max_value=5),
)
def test_any_prompt_gives_a_faithful_answer_that_streams_identically(
    docs: list[list[str]], question: list[str], max_sentences: int
) -> None:
    texts = tuple(" ".join(d) for d in docs)
    messages = _prompt(" ".join(question) + "?", *texts)
    model = ExtractiveAnswerer(max_sentences=max_sentences)
    answer = model.invoke(messages).text
    assert "".join(c.text for c in model.stream(messages)) == answer
    if answer == NOT_FOUND_ANSWER:
        return
    cited = _cited(answer)
    assert 1 <= len(cited) <= max_sentences
    assert CITATION.sub("", answer).count(".") == len(cited)
    _assert_faithful(answer, texts)
    sentences = [s for s, _, _ in cited]
    assert len({s.casefold() for s in sentences}) == len(sentences)


def test_citations_use_the_ids_written_in_the_prompt() -> None:
    messages = [
        SystemMessage(
            f"<document id=12>\n{PYTHON}\n</document>\n<document id=5>\n{MOON}\n</document>"
        ),
        HumanMessage("When did Apollo 11 land on the Moon?"),
    ]
    answer = ExtractiveAnswerer().invoke(messages).text
    assert answer.startswith("Apollo 11 astronauts walked on the Moon in 1969 [1](id=5).")
    assert "id=12" not in answer


def test_citation_look_alikes_in_documents_are_not_copied() -> None:
    texts = ("The Moon has no air [2](id=9). Its craters are old [NUMBER](id=1).", BEES)
    answer = (
        ExtractiveAnswerer(relative_threshold=0.0)
        .invoke(_prompt("Does the Moon have air or craters?", *texts))
        .text
    )
    assert [(label, doc_id) for _, label, doc_id in _cited(answer)] == [(1, 1), (1, 1)]
    assert "id=9" not in answer
    assert "NUMBER" not in answer


async def test_no_candidate_sentences_means_no_embedding_call_on_either_path() -> None:
    embeddings = RecordingEmbeddings()
    model = ExtractiveAnswerer(embeddings=embeddings)
    messages = [HumanMessage("Question: what do bees make?")]
    assert model.invoke(messages).text == NOT_FOUND_ANSWER
    assert (await model.ainvoke(messages)).text == NOT_FOUND_ANSWER
    assert "".join([c.text async for c in model.astream(messages)]) == NOT_FOUND_ANSWER
    assert embeddings.calls == []


# -- questions that ask for a quantity ------------------------------------------------------

NEEDLE = (
    "The Space Needle is an observation tower at Seattle Center, north of downtown Seattle. "
    "The Space Needle was built for the World's Fair and the Space Needle is a Seattle icon."
)
NEEDLE_HEIGHT = "The tower is 605 feet (184 meters) tall, the tallest in the city at the time."


@pytest.mark.parametrize(
    ("question", "sentence", "expected"),
    [
        ("How tall is the Space Needle?", NEEDLE_HEIGHT, True),
        ("How tall is the Space Needle?", "The line is about one mile long.", False),
        ("How tall is the Space Needle?", "The Space Needle is a tall tower.", False),
        ("How far is the Moon?", "It orbits at a distance of 384,400 kilometers.", True),
        ("How long does the ride take?", "A trip takes roughly two minutes.", True),
        ("How many eggs does a queen lay?", "The queen lays more than 1,500 eggs a day.", True),
        ("How many eggs does a queen lay?", "The queen lays eggs.", False),
        ("How old is the Moon?", "It formed about 4.5 billion years ago.", True),
        ("When did the market open?", "It opened on August 17, 1907.", True),
        ("When did the market open?", "It opened to farmers.", False),
        ("What year was Python 3 released?", "Python 3.0 came out in December 2008.", True),
        ("Who created Python?", "Guido van Rossum created it in 1991.", None),
    ],
)
def test_states_asked_quantity(question: str, sentence: str, expected: bool | None) -> None:
    assert states_asked_quantity(question, sentence) is expected


@pytest.mark.parametrize("use_embeddings", [False, True])
def test_a_sentence_stating_the_asked_quantity_beats_one_naming_the_subject(
    use_embeddings: bool, minilm: MiniLMEmbeddings
) -> None:
    texts = (NEEDLE, NEEDLE_HEIGHT)
    model = ExtractiveAnswerer(embeddings=minilm if use_embeddings else None)
    answer = model.invoke(_prompt("How tall is the Space Needle?", *texts)).text
    ids = _assert_faithful(answer, texts)
    assert ids[0] == 2, answer
    assert answer.startswith("The tower is 605 feet (184 meters) tall")


def test_a_quantity_in_an_irrelevant_sentence_does_not_win() -> None:
    texts = (NEEDLE, "Bees fly 3 miles high. Bees dance.")
    answer = ExtractiveAnswerer().invoke(_prompt("How tall is the Space Needle?", *texts)).text
    assert _assert_faithful(answer, texts) == [1] * len(_cited(answer))


# -- bounded work, off the event loop --------------------------------------------------------

HONEY = "Bees make honey. "  # 17 characters


def _recording_splitter(monkeypatch: pytest.MonkeyPatch, *, split: bool) -> list[tuple[int, bool]]:
    """Record ``(characters given, called on a running event loop)`` per splitter call."""
    calls: list[tuple[int, bool]] = []

    def recording(text: str) -> list[str]:
        calls.append((len(text), _on_loop()))
        return split_sentences(text) if split else []

    monkeypatch.setattr(answerer_module, "split_sentences", recording)
    return calls


@pytest.mark.parametrize(
    ("repeats", "read"),
    [(10, 169), (100, 1_699), (588, 9_995), (1_000, 10_000), (100_000, 10_000)],
)
def test_the_answerer_reads_a_bounded_head_of_each_document(
    monkeypatch: pytest.MonkeyPatch, repeats: int, read: int
) -> None:
    calls = _recording_splitter(monkeypatch, split=False)
    ExtractiveAnswerer().invoke(_prompt("What do bees make?", HONEY * repeats))
    # the document stripped is 17 * repeats - 1 characters; past 10,000 it is cut at the
    # last blank up to the limit (588 sentences and "Bees", then a blank), whatever its size
    assert calls == [(read, False)]


def test_the_answerer_reads_at_most_max_prompt_chars_in_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _recording_splitter(monkeypatch, split=False)
    texts = [HONEY * 12_000] * 12  # 12 documents of 204,000 characters
    ExtractiveAnswerer().invoke(_prompt("What do bees make?", *texts))
    # 10 heads of 10,000 characters, then nothing is left for the last two documents
    assert [length for length, _ in calls] == [10_000] * 10
    model = ExtractiveAnswerer(max_document_chars=100, max_prompt_chars=250)
    calls.clear()
    model.invoke(_prompt("What do bees make?", *texts))
    # 100 characters end in "honey." (cut at the blank before "honey"), twice; then the 62
    # left end in "make h" (cut at the blank before "h"); the last 2 are "Be" (no blank)
    assert [length for length, _ in calls] == [94, 94, 60, 2]


async def test_the_async_paths_split_and_score_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _recording_splitter(monkeypatch, split=True)
    scored: list[bool] = []

    def recording_scores(question: str, sentences: Any) -> list[float]:
        scored.append(_on_loop())
        return lexical_scores(question, sentences)

    monkeypatch.setattr(answerer_module, "lexical_scores", recording_scores)
    messages = _prompt("What do bees make?", HONEY * 3, MOON)
    model = ExtractiveAnswerer()
    assert (await model.ainvoke(messages)).text == "Bees make honey [1](id=1)."
    assert "".join([c.text async for c in model.astream(messages)]) == (
        "Bees make honey [1](id=1)."
    )
    assert calls == [(50, False), (99, False)] * 2
    assert scored == [False, False]


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
