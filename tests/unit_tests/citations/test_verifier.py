from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_references.citations import (
    AnswerRecord,
    CitationRecordError,
    aevaluate_answers,
    evaluate_answers,
    load_answer_records,
)
from langchain_references.citations.evaluation import parse_answer_record
from langchain_references.citations.sentences import split_cited_sentences
from langchain_references.citations.verifier import CitationVerifier
from langchain_references.judges import Judge, Judgement, Label, LLMJudge
from tests.unit_tests.fakes import ScriptedChatModel

_STOP = {"is", "the", "a", "and", "in", "of"}


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP}


class CoverageJudge(Judge):
    """Entails iff every content word of the statement is in the passage; contradicts on
    ``not <word>``; raises on passages containing ``BOOM``. Records every pair judged."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.batches = 0
        self._lock = threading.Lock()

    def batch(self, inputs: Any, config: Any = None, **kwargs: Any) -> list[Judgement]:
        self.batches += 1
        return super().batch(inputs, config, **kwargs)

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self._lock:
            self.calls.append((statement, passage))
        if "BOOM" in passage:
            raise RuntimeError("judge exploded")
        needed, have = words(statement), words(passage)
        if any(f"not {w}" in passage.lower() for w in needed):
            return Judgement(label=Label.CONTRADICTS, confidence=0.8)
        if needed <= have:
            return Judgement(label=Label.ENTAILS, confidence=0.9)
        return Judgement(label=Label.UNKNOWN, confidence=0.7)


DOCS = {
    1: "Seattle is rainy.",
    2: "Seattle is large.",
    3: "Portland is sunny.",
    4: "Seattle is rainy and large.",
    5: "Seattle is not rainy, it is large.",
    6: "BOOM",
}


def verdict_of(answer: str, judge: Judge | None = None, **kwargs: Any) -> Any:
    (sentence,) = split_cited_sentences(answer)
    return CitationVerifier(judge or CoverageJudge(), **kwargs).verify(sentence, DOCS)


def test_single_citation_that_fully_supports() -> None:
    v = verdict_of("Seattle is rainy and large [1](id=4).")
    assert v.verification_worthy
    assert v.supported is True
    (c,) = v.citations
    assert (c.doc_id, c.precise, c.alone.label if c.alone else None) == (4, True, Label.ENTAILS)
    assert v.joint is None


def test_two_partial_citations_support_together_and_both_are_needed() -> None:
    judge = CoverageJudge()
    v = verdict_of("Seattle is rainy and large [1](id=1)[2](id=2).", judge)
    assert v.supported is True
    assert v.joint is not None
    assert v.joint.label is Label.ENTAILS
    assert [(c.doc_id, c.precise, c.needed) for c in v.citations] == [
        (1, True, True),
        (2, True, True),
    ]
    # Two singles and the concatenation; leave-one-out sets of size 1 reuse the singles.
    assert len(judge.calls) == 3
    assert ("Seattle is rainy and large.", "Seattle is rainy.\n\nSeattle is large.") in judge.calls


def test_redundant_citation_is_imprecise() -> None:
    judge = CoverageJudge()
    v = verdict_of("Seattle is rainy and large [1](id=1)[2](id=2)[3](id=3).", judge)
    assert v.supported is True
    by_id = {c.doc_id: c for c in v.citations}
    assert by_id[1].precise
    assert by_id[2].precise
    assert not by_id[3].precise
    assert by_id[3].needed is False
    assert "redundant" in by_id[3].reason
    # Singles (3) + joint (1) + leave-one-out of 1, 2 and 3 (sets of two).
    assert len(judge.calls) == 7
    assert judge.batches == 2


def test_a_full_citation_makes_partial_ones_redundant() -> None:
    v = verdict_of("Seattle is rainy and large [1](id=1)[2](id=4).")
    by_id = {c.doc_id: c for c in v.citations}
    assert by_id[4].precise
    assert "fully" in by_id[4].reason
    assert not by_id[1].precise
    assert by_id[1].needed is False


def test_unsupported_sentence_all_citations_imprecise() -> None:
    v = verdict_of("Seattle is rainy and large [1](id=1)[2](id=3).")
    assert v.supported is False
    assert [c.precise for c in v.citations] == [False, False]


def test_contradicting_and_failed_judgements() -> None:
    v = verdict_of("The city of Seattle is rainy [1](id=5)[2](id=6).")
    assert v.supported is False
    by_id = {c.doc_id: c for c in v.citations}
    assert by_id[5].contradicts
    assert by_id[5].reason == "contradicts the sentence"
    assert by_id[6].alone is not None
    assert not by_id[6].alone.ok
    assert "judge failed" in by_id[6].reason
    assert v.failed_judgements == 2  # document 6 alone and the concatenation


def test_missing_document_and_uncited_sentence() -> None:
    v = verdict_of("Seattle is rainy and large [1](id=4)[2](id=99).")
    assert v.supported is True
    assert v.missing_doc_ids == (99,)
    by_id = {c.doc_id: c for c in v.citations}
    assert by_id[4].precise
    assert not by_id[99].precise
    assert by_id[99].alone is None
    assert "no document" in by_id[99].reason

    uncited = verdict_of("Seattle is rainy and large.")
    assert uncited.supported is False
    assert uncited.citations == ()


def test_unworthy_sentences_are_not_judged() -> None:
    judge = CoverageJudge()
    v = verdict_of("Seattle? [1](id=4)", judge)
    assert not v.verification_worthy
    assert v.supported is None
    assert judge.calls == []
    forced = verdict_of("Seattle? [1](id=4)", judge, is_worthy=lambda s: True)
    assert forced.supported is True


def test_documents_and_strings_both_work_as_passages() -> None:
    (sentence,) = split_cited_sentences("The city of Seattle is rainy [1](id=1).")
    verifier = CitationVerifier(CoverageJudge())
    from_doc = verifier.verify(sentence, {1: Document(page_content="Seattle: a rainy city.")})
    assert from_doc.supported is True
    with pytest.raises(TypeError):
        verifier.verify(sentence, {1: 42})  # type: ignore[dict-item]


async def test_async_path_matches_sync() -> None:
    answer = (
        "Seattle is rainy and large [1](id=1)[2](id=2)[3](id=3). "
        "The city of Seattle is rainy [4](id=5)."
    )
    sentences = split_cited_sentences(answer)
    verifier = CitationVerifier(CoverageJudge(), max_concurrency=2)
    sync = verifier.verify_many([(s, DOCS) for s in sentences])
    async_ = await verifier.averify_many([(s, DOCS) for s in sentences])
    assert sync == async_
    assert await verifier.averify(sentences[0], DOCS) == sync[0]


def test_identical_pairs_are_judged_once_across_sentences() -> None:
    judge = CoverageJudge()
    sentences = split_cited_sentences(
        "The city of Seattle is rainy [1](id=1). The city of Seattle is rainy [2](id=1)."
    )
    CitationVerifier(judge).verify_many([(s, DOCS) for s in sentences])
    assert judge.calls == [("The city of Seattle is rainy.", "Seattle is rainy.")]


def test_any_runnable_judge_and_exceptions_become_failures() -> None:
    def decide(pair: Any) -> Judgement:
        if "large" in pair["passage"]:
            raise ValueError("cannot judge")
        return Judgement(label=Label.ENTAILS, confidence=1.0)

    (sentence,) = split_cited_sentences("Seattle is a city [1](id=1)[2](id=2).")
    v = CitationVerifier(RunnableLambda(decide)).verify(sentence, DOCS)
    by_id = {c.doc_id: c for c in v.citations}
    assert by_id[1].precise
    assert by_id[2].alone is not None
    assert "cannot judge" in (by_id[2].alone.error or "")
    with pytest.raises(TypeError, match="judge must be a Runnable judge, not function"):
        CitationVerifier(decide)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrency"):
        CitationVerifier(RunnableLambda(decide), max_concurrency=0)


RECORDS: list[dict[str, Any]] = [
    {
        "question": "Tell me about Seattle.",
        "answer": "Seattle is rainy and large [1](id=1)[2](id=2)[3](id=3). "
        "Seattle has many coffee shops. Thanks!",
        "documents": [
            {"page_content": "Seattle is rainy.", "metadata": {"source": "a", "title": "A"}},
            {"text": "Seattle is large."},
            {"page_content": "Portland is sunny."},
        ],
    },
    {
        "answer": "Portland is sunny and dry [1](id=1). Portland is a sunny city [2](id=1).",
        "documents": [{"page_content": "Portland is a sunny city."}],
    },
    {"answer": 42, "documents": []},
]


def check_report(report: Any) -> None:
    first, second = report.answers
    # Answer 0: 2 worthy sentences (the "Thanks!" is not), 1 supported; citations 1, 2 precise.
    assert (first.n_worthy, first.n_supported) == (2, 1)
    assert (first.n_citations, first.n_precise) == (3, 2)
    assert first.citation_recall == 0.5
    assert first.citation_precision == pytest.approx(2 / 3)
    assert [s.sentence.text for s in first.unsupported_sentences] == [
        "Seattle has many coffee shops."
    ]
    assert [(s.sentence.index, c.doc_id) for s, c in first.unsupported_citations] == [(0, 3)]
    # Answer 1: "sunny and dry" is not supported by "Portland is a sunny city."
    assert (second.n_worthy, second.n_supported, second.n_citations, second.n_precise) == (
        2,
        1,
        2,
        1,
    )
    assert report.citation_recall == pytest.approx(2 / 4)
    assert report.citation_precision == pytest.approx(3 / 5)
    assert report.macro_recall == pytest.approx(0.5)
    assert report.macro_precision == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert len(report.errors) == 1
    assert "answer" in str(report.errors[0])
    data = json.loads(json.dumps(report.to_dict()))
    assert data["num_answers"] == 2
    assert data["answers"][0]["unsupported_citations"][0]["doc_id"] == 3


def test_evaluate_answers() -> None:
    check_report(evaluate_answers(RECORDS, CoverageJudge()))


async def test_aevaluate_answers() -> None:
    check_report(await aevaluate_answers(RECORDS, CitationVerifier(CoverageJudge())))


def test_answer_without_worthy_sentences_has_undefined_recall() -> None:
    report = evaluate_answers([{"answer": "Hi! Thanks.", "documents": []}], CoverageJudge())
    (answer,) = report.answers
    assert answer.citation_recall is None
    assert answer.citation_precision is None
    assert report.citation_recall is None
    assert report.macro_recall is None


@pytest.mark.parametrize(
    ("record", "field", "message"),
    [
        ([], None, "record is not a JSON object"),
        ({"documents": []}, "answer", "answer: required field is missing"),
        ({"answer": "x"}, "documents", "documents: required field is missing"),
        ({"answer": "x", "documents": [], "question": 3}, "question", "question: must be a string"),
        ({"answer": "x", "documents": {}}, "documents", "documents: must be a list"),
        ({"answer": "x", "documents": ["text"]}, "documents[0]", "must be a JSON object"),
        (
            {"answer": "x", "documents": [{"text": "t"}, {"text": "u"}, {"metadata": {}}]},
            "documents[2].page_content",
            "documents[2].page_content: required field is missing (or give 'text')",
        ),
        (
            {"answer": "x", "documents": [{"text": "t", "metadata": []}]},
            "documents[0].metadata",
            "must be a JSON object",
        ),
        (
            {"answer": "x", "documents": [{"text": "t", "page_content": "u"}]},
            "documents[0].text",
            "not both",
        ),
        (
            {"answer": "x", "documets": [{"text": "t"}]},
            "documets",
            "documets: unknown field (did you mean 'documents'?); "
            "documents: required field is missing",
        ),
        (
            {"answer": "x", "documents": [{"page_contnet": "t"}]},
            "documents[0].page_contnet",
            "unknown field (did you mean 'page_content'?)",
        ),
        ({"answer": "x", "documents": [], "score": 1}, "score", "score: unknown field"),
    ],
)
def test_parse_answer_record_errors(record: Any, field: str | None, message: str) -> None:
    with pytest.raises(CitationRecordError, match=re.escape(message)) as info:
        parse_answer_record(record, location="f.jsonl:2")
    assert info.value.location == "f.jsonl:2"
    assert info.value.field == field
    assert str(info.value).startswith("f.jsonl:2: ")


def test_a_record_without_documents_is_not_an_answer_without_citations(tmp_path: Path) -> None:
    """Problem 3: a missing or misspelt ``documents`` used to give recall 0 silently."""
    path = tmp_path / "answers.jsonl"
    lines = [
        {"answer": "Seattle is rainy and large [1](id=1)."},
        {"answer": "Seattle is rainy and large [1](id=1).", "document": [{"text": "Rainy."}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    loaded = load_answer_records(path)
    assert loaded.records == []
    assert [(e.location, e.field) for e in loaded.errors] == [
        (f"{path}:1", "documents"),
        (f"{path}:2", "document"),
    ]
    assert "did you mean 'documents'?" in str(loaded.errors[1])


_TEXT = st.text(max_size=20)
_DOCUMENTS = st.lists(
    st.fixed_dictionaries(
        {"page_content": _TEXT},
        optional={"metadata": st.dictionaries(st.text(max_size=5), _TEXT, max_size=2)},
    ),
    max_size=4,
)


@given(
    answer=_TEXT,
    documents=_DOCUMENTS,
    question=st.none() | _TEXT,
    key=st.text(min_size=1, max_size=12),
)
def test_records_follow_the_schema(
    answer: str, documents: list[dict[str, Any]], question: str | None, key: str
) -> None:
    """A record with the documented keys parses as given; any other key is rejected, by name."""
    record: dict[str, Any] = {"answer": answer, "documents": documents, "question": question}
    parsed = parse_answer_record(record, location="a.jsonl:7")
    assert parsed.answer == answer
    assert parsed.question == question
    assert [d.page_content for d in parsed.documents] == [d["page_content"] for d in documents]
    assert [d.metadata for d in parsed.documents] == [d.get("metadata", {}) for d in documents]
    assume(key not in record)
    with pytest.raises(CitationRecordError) as info:
        parse_answer_record({**record, key: 1}, location="a.jsonl:7")
    assert info.value.field == key
    assert info.value.location == "a.jsonl:7"


def test_load_answer_records(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(
        json.dumps(RECORDS[0])
        + "\n{not json\n"
        + json.dumps(RECORDS[2])
        + "\n"
        + json.dumps(RECORDS[1])
        + "\n",
        encoding="utf-8",
    )
    loaded = load_answer_records(path)
    records, errors = loaded.records, loaded.errors
    assert [type(r) for r in records] == [AnswerRecord, AnswerRecord]
    assert records[0].question == "Tell me about Seattle."
    assert records[0].documents[0].metadata == {"source": "a", "title": "A"}
    assert records[0].passages_by_id[2].page_content == "Seattle is large."
    assert records[1].location == f"{path}:4"
    assert len(errors) == 2
    with pytest.raises(CitationRecordError):
        load_answer_records(path, strict=True)
    bad = tmp_path / "bad.json"
    bad.write_text("{oops", encoding="utf-8")
    with pytest.raises(CitationRecordError, match="invalid JSON"):
        load_answer_records(bad)


async def test_llm_judge_native_async_path() -> None:
    def reply(messages: Any) -> AIMessage:
        label = (
            "entails" if "rainy and large" in messages[1].text.split("<passage>")[1] else "unknown"
        )
        args = {"label": label, "confidence": 0.9, "rationale": "scripted"}
        return AIMessage(
            content="",
            tool_calls=[{"name": "JudgeReply", "args": args, "id": "1", "type": "tool_call"}],
        )

    model = ScriptedChatModel(script=[reply] * 3)
    (sentence,) = split_cited_sentences("Seattle is rainy and large [1](id=4)[2](id=3).")
    verdict = await CitationVerifier(LLMJudge(model, retry_wait=False)).averify(sentence, DOCS)
    assert verdict.supported is True
    assert [(c.doc_id, c.precise) for c in verdict.citations] == [(4, True), (3, False)]
    assert len(model.calls) == 3  # two documents alone and their concatenation
    assert all(
        "<statement>\nSeattle is rainy and large.\n</statement>" in m[1].text for m in model.calls
    )
