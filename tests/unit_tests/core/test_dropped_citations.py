"""Issue 18, point 8: dropped citations, citations without documents, missing documents.

* A dropped citation (unknown document, or a style that formats it as None or "") leaves no
  stray blank before punctuation (``Paris is in France . Lyon``), whatever the token cuts.
* An answer citing documents in a run that has none logs one warning naming the fix.
* Citations of a document that is not in the list and has no source id reuse one number.
"""

from __future__ import annotations

import logging
import re
import tracemalloc
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from langchain_references import (
    EmptyReferenceStyle,
    MarkdownReferenceStyle,
    TextReferenceStyle,
    manage_references,
)
from langchain_references.core.numbering import ABSENT_DOCUMENT, SourceNumbering
from langchain_references.core.rewriter import MAX_HELD_BLANKS, NO_DOCUMENTS_FIX, ReferenceRewriter
from langchain_references.core.styles import ReferenceStyle
from tests.unit_tests.fakes import StreamingChatModel, text_chunks

DOCS = [
    Document("Paris is the capital of France.", metadata={"source": "https://fr.example"}),
    Document("Lyon is a city of France.", metadata={"source": "https://lyon.example"}),
]


class DropSecond(TextReferenceStyle):
    """Formats the second document's citations as None (dropped, no number)."""

    def format_reference(self, ref: int, media: Document) -> str | None:
        if media.metadata.get("source") == "https://lyon.example":
            return None
        return super().format_reference(ref, media)


def rewrite(pieces: list[str], style: ReferenceStyle | None = None, docs: Any = DOCS) -> str:
    rewriter = ReferenceRewriter(docs, style or TextReferenceStyle())
    return "".join(rewriter.feed(piece) for piece in pieces) + rewriter.finish()


# -- no stray blank -----------------------------------------------------------------------------


def test_a_dropped_citation_leaves_no_blank_before_punctuation() -> None:
    out = rewrite(["Paris is in France [1](id=9). Lyon too"])
    assert out == "Paris is in France. Lyon too"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Paris is in France [1](id=9). Lyon too", "Paris is in France. Lyon too"),
        ("In France [1](id=9), Lyon [2](id=1)!", "In France, Lyon [1]!"),
        ("France [1](id=9) [2](id=8).", "France."),
        ("France [1](id=9) and Lyon", "France and Lyon"),
        ("France [1](id=9)", "France"),
        ("France [1](id=1) [2](id=9).", "France [1]."),
        ("France [1](id=9) [2](id=1).", "France [1]."),
        ("France\t[1](id=9)\u00a0!", "France\u00a0!"),
        ("France [1](id=9)Lyon", "France Lyon"),  # a word follows: one blank stays
        ("France [1](id=9)\nLyon", "France\nLyon"),
        ("France [1](id=1).", "France [1]."),  # a kept citation keeps its blank
        ("France  ", "France  "),  # the answer's own trailing blanks are kept
        ("(France [1](id=9))", "(France)"),
    ],
)
def test_dropped_citations_in_context(answer: str, expected: str) -> None:
    out = rewrite([answer])
    list_start = out.find("\n\n- [")
    assert (out if list_start < 0 else out[:list_start]) == expected


def test_a_citation_the_style_drops_leaves_no_blank_either() -> None:
    assert rewrite(["Paris [1](id=1), Lyon [2](id=2)."], DropSecond()) == (
        "Paris [1], Lyon.\n\n- [1] https://fr.example"
    )
    assert rewrite(["Paris [1](id=1), Lyon [2](id=2)."], EmptyReferenceStyle()) == ("Paris, Lyon.")


def test_a_provider_citation_that_is_dropped_leaves_no_blank() -> None:
    class DropAll(TextReferenceStyle):
        def format_reference(self, ref: int, media: Document) -> str | None:
            return None

    rewriter = ReferenceRewriter(DOCS, DropAll())
    out = rewriter.feed("Paris is in France ")
    out += rewriter.cite(Document("x", metadata={"source": "https://x.example"}))
    out += rewriter.feed(". Lyon") + rewriter.finish()
    assert out == "Paris is in France. Lyon"


def test_the_held_blanks_are_bounded() -> None:
    rewriter = ReferenceRewriter(DOCS, TextReferenceStyle())
    out = rewriter.feed("x" + " " * 100_000)
    assert out == "x" + " " * (100_000 - MAX_HELD_BLANKS)  # only the last blanks wait
    out += rewriter.feed(" " * 1000)
    assert len(out) == 1 + 101_000 - MAX_HELD_BLANKS
    assert rewriter.feed("y") == " " * MAX_HELD_BLANKS + "y"


def test_spans_point_at_the_markers_after_held_blanks() -> None:
    rewriter = ReferenceRewriter(DOCS, TextReferenceStyle(), track_spans=True)
    pieces = ["Paris ", "[1](id=", "1) and ", "[2](id=9)", " Lyon ", "[3](id=2)", "."]
    out = "".join(rewriter.feed(piece) for piece in pieces)
    assert out == "Paris [1] and Lyon [2]."
    assert [out[s.start : s.end] for s in rewriter.spans] == ["[1]", "[2]"]


# Pieces an answer is made of: words, blanks, punctuation, kept, dropped and partial citations.
TOKENS = st.sampled_from(
    [
        "Paris",
        " is",
        "in",
        " ",
        "  ",
        "\t",
        "\u00a0",
        "\n",
        ".",
        ",",
        "!",
        ")",
        "[1](id=1)",
        "[2](id=2)",
        "[3](id=9)",
        "[4](id=0)",
        "[",
        "[5](id",
        "(",
    ]
)


@st.composite
def answers_and_cuts(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = "".join(draw(st.lists(TOKENS, max_size=40)))
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in pairwise(bounds)]


STYLES = [TextReferenceStyle, DropSecond, EmptyReferenceStyle, MarkdownReferenceStyle]


@settings(max_examples=300, deadline=None)
@given(answers_and_cuts(), st.sampled_from(STYLES), st.booleans())
def test_the_output_is_the_same_however_the_answer_is_split(
    case: tuple[str, list[str]], style_class: type[ReferenceStyle], spans: bool
) -> None:
    text, pieces = case
    whole = ReferenceRewriter(DOCS, style_class(), track_spans=spans)
    expected = whole.feed(text) + whole.finish()
    split = ReferenceRewriter(DOCS, style_class(), track_spans=spans)
    assert "".join(split.feed(piece) for piece in pieces) + split.finish() == expected
    by_char = ReferenceRewriter(DOCS, style_class(), track_spans=spans)
    assert "".join(by_char.feed(c) for c in text) + by_char.finish() == expected
    assert split.spans == whole.spans == by_char.spans
    # no blank before punctuation that the answer did not have itself
    assume(not re.search(rf"[ \t\u00a0]{{{MAX_HELD_BLANKS + 1}}}", text))
    if not re.search(r"[ \t\u00a0][.,!)]", text):
        assert not re.search(r"[ \t\u00a0][.,!)]", expected)


# -- citing without documents ---------------------------------------------------------------------


def _fix_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "content_and_artifact" in r.getMessage()
    ]


def test_a_run_without_documents_warns_once_with_the_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rewriter = ReferenceRewriter([], TextReferenceStyle())
    with caplog.at_level(logging.WARNING, logger="langchain_references"):
        out = rewriter.feed("Paris [1](id=1) and Lyon [2](id=2). " * 500) + rewriter.finish()
    assert "[1]" not in out
    assert len(caplog.records) == 1
    (message,) = _fix_warnings(caplog)
    assert message == (
        "Dropped citation [1](id=1) and any other: the answer cites documents but this run "
        f"has none. To keep them, {NO_DOCUMENTS_FIX}."
    )


def test_a_bare_chat_model_without_documents_warns_once_per_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pieces = ["Paris is in France [1](", "id=1). Lyon [2](id=2) ", "too [1](id=1)."]
    model = manage_references(
        StreamingChatModel(chunks=text_chunks(pieces)), style=TextReferenceStyle()
    )
    with caplog.at_level(logging.WARNING, logger="langchain_references"):
        message = model.invoke([HumanMessage("Where is Paris?")])
    assert message.text == "Paris is in France. Lyon too."
    assert len(_fix_warnings(caplog)) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="langchain_references"):
        "".join(chunk.text for chunk in model.stream([HumanMessage("Again")]))
    assert len(_fix_warnings(caplog)) == 1  # one per run


def test_unknown_ids_warn_once_each(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_references"):
        rewrite(["a [1](id=9) " * 100 + "b [1](id=7) " * 100])
    assert [r.getMessage() for r in caplog.records] == [
        "Dropped citation [1](id=9): document id 9 is not in 1..2",
        "Dropped citation [1](id=7): document id 7 is not in 1..2",
    ]
    assert _fix_warnings(caplog) == []


def test_a_dropped_citation_takes_blanks_but_not_a_line_break_before_it() -> None:
    assert rewrite(["Paris is in France \t[1](id=9)."]) == "Paris is in France."
    assert rewrite(["Paris is in France\n[1](id=9)."]) == "Paris is in France\n."
    assert rewrite(["Paris is in France\n", "[1](id=9)."]) == "Paris is in France\n."


def test_a_citation_of_an_absent_last_document_is_named_as_gone_not_out_of_range(
    caplog: pytest.LogCaptureFixture,
) -> None:
    documents = [DOCS[0], ABSENT_DOCUMENT]  # id 2, the last, was summarized away
    with caplog.at_level(logging.WARNING, logger="langchain_references"):
        out = rewrite(["Paris [1](id=1) and Lyon [1](id=2) or [1](id=3)."], docs=documents)
    assert out == "Paris [1] and Lyon or.\n\n- [1] https://fr.example"
    assert [r.getMessage() for r in caplog.records] == [
        "Dropped citation [1](id=2): document id 2 is no longer in the conversation",
        "Dropped citation [1](id=3): document id 3 is not in 1..2",
    ]


# -- a missing document keeps one number -----------------------------------------------------------


def _cite_missing(count: int) -> tuple[str, ReferenceRewriter]:
    rewriter = ReferenceRewriter(DOCS, MarkdownReferenceStyle(deep_links=True))
    parts = []
    for _ in range(count):
        # a provider's citation of a document that is not in the list, rebuilt each time
        missing = Document("The cited passage.", metadata={"source": None, "provider": "x"})
        parts.append(rewriter.cite(missing, quote="The cited passage."))
    return "".join(parts), rewriter


def test_citations_of_a_missing_document_reuse_one_number() -> None:
    out, rewriter = _cite_missing(10_000)
    assert out == "<sup>[1]</sup>" * 10_000
    assert len(rewriter.references) == 1
    assert rewriter.finish() == "\n\n- **1** Document 1"


class _Scanned(list[Document]):
    """A documents list that counts the scans of it (each ``for`` over it)."""

    def __init__(self, documents: list[Document]) -> None:
        super().__init__(documents)
        self.scans = 0

    def __iter__(self) -> Iterator[Document]:
        self.scans += 1
        return super().__iter__()


def test_citations_of_a_missing_document_take_constant_work_each() -> None:
    """Each citation costs a look-up: the documents are scanned once, nothing grows per citation.

    (A scan of the documents list, or of every earlier citation, per citation made 10,000
    provider citations quadratic.) Counted, not timed: memory the rewriter keeps and scans of
    the documents list.
    """
    documents = _Scanned(list(DOCS))
    rewriter = ReferenceRewriter(documents, MarkdownReferenceStyle(deep_links=True))
    tracemalloc.start()
    try:
        kept_before = tracemalloc.get_traced_memory()[0]
        for _ in range(10_000):
            missing = Document("The cited passage.", metadata={"source": None, "provider": "x"})
            rewriter.cite(missing, quote="The cited passage.")
        kept = tracemalloc.get_traced_memory()[0] - kept_before
    finally:
        tracemalloc.stop()
    assert documents.scans == 1
    assert kept < 64_000  # one citation's worth of state, not 10,000 (at >= 100 bytes each)


def test_equal_unsourced_documents_share_a_number_and_different_ones_do_not() -> None:
    numbering = SourceNumbering(DOCS, TextReferenceStyle())
    markers = [
        numbering.cite_document(Document("a", metadata={"page": 1})),
        numbering.cite_document(Document("b", metadata={"page": 1})),
        numbering.cite_document(Document("a", metadata={"page": 1})),
        numbering.cite_document(Document("a", metadata={"page": 2})),
        numbering.cite_document(DOCS[1]),  # a listed document is cited at its position
        numbering.cite_document(Document("a", metadata={"page": 1, "tags": ["x"]})),
    ]
    assert markers == ["[1]", "[2]", "[1]", "[3]", "[4]", "[5]"]
    assert numbering.references[3].positions == [2]


def test_provider_citations_of_a_missing_document_reuse_one_number() -> None:
    """Anthropic citations pointing past the documents list: one reference, not one each."""
    blocks: list[str | dict[Any, Any]] = []
    for i in range(200):
        blocks.append(
            {
                "type": "text",
                "text": f"Claim {i}",
                "citations": [
                    {
                        "type": "char_location",
                        "document_index": 5,
                        "cited_text": "The cited passage of document six.",
                        "start_char_index": 0,
                        "end_char_index": 34,
                    }
                ],
            }
        )
    message = AIMessage(content=blocks, response_metadata={"model_provider": "anthropic"})
    chain = manage_references(RunnableLambda(lambda _: message), style=TextReferenceStyle())
    out = chain.invoke({"documents": DOCS})
    answer, listing = out.text.split("\n\n")
    assert answer.count("[1]") == 200
    assert "[2]" not in answer
    assert listing == "- [1] Document 1"
    assert len(out.response_metadata["references"]) == 1
