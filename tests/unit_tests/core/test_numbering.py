"""The numbering registry shared by the rewriter, the fact-check report and the article API."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

import langchain_references
from langchain_references.core import numbering as numbering_module
from langchain_references.core import rewriter as rewriter_module
from langchain_references.core.numbering import ABSENT_DOCUMENT, SourceNumbering, UsedReference
from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import (
    QUOTE_KEY,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
)
from langchain_references.factcheck import report
from langchain_references.factcheck.result import Evidence, FactCheckResult
from langchain_references.factcheck.verdict import Verdict
from langchain_references.judges import Label
from langchain_references.server import article


def docs(*sources: str | None) -> list[Document]:
    return [
        Document(f"Chunk {i}. Second sentence of chunk {i}.", metadata={"source": s})
        if s is not None
        else Document(f"Chunk {i}.")
        for i, s in enumerate(sources, start=1)
    ]


def summary(refs: list[UsedReference]) -> list[tuple[int, str | None, list[int]]]:
    return [(ref.number, ref.source, ref.positions) for ref in refs]


def test_numbers_follow_first_use() -> None:
    numbering = SourceNumbering(docs("u1", "u2", "u3"), TextReferenceStyle())
    assert [numbering.cite(p) for p in (3, 1, 3, 2)] == ["[1]", "[2]", "[1]", "[3]"]
    assert summary(numbering.references) == [(1, "u3", [3]), (2, "u1", [1]), (3, "u2", [2])]
    assert [numbering.number(p) for p in (1, 2, 3)] == [2, 3, 1]


def test_same_source_shares_a_number_positions_in_first_citation_order() -> None:
    d = docs("u", "v", "u", "u")
    numbering = SourceNumbering(d, TextReferenceStyle())
    cited = [numbering.cite(p) for p in (3, 2, 1, 4, 3, 1)]
    assert cited == ["[1]", "[2]", "[1]", "[1]", "[1]", "[1]"]
    assert summary(numbering.references) == [(1, "u", [3, 1, 4]), (2, "v", [2])]
    assert numbering.references[0].document is d[2]  # the first cited chunk is listed
    assert numbering.format_references() == "\n\n- [1] u\n- [2] v"


def test_documents_without_source_are_distinct_sources() -> None:
    d = docs(None, None, "u")
    numbering = SourceNumbering(d, TextReferenceStyle())
    assert [numbering.cite(p) for p in (2, 1, 2, 3)] == ["[1]", "[2]", "[1]", "[3]"]
    assert summary(numbering.references) == [(1, None, [2]), (2, None, [1]), (3, "u", [3])]


def test_documents_outside_the_list() -> None:
    d = docs("u", None)
    numbering = SourceNumbering(d, TextReferenceStyle())
    outside = Document("provider's own, no source")
    assert numbering.cite_document(outside) == "[1]"
    assert numbering.cite_document(Document("same source", metadata={"source": "u"})) == "[2]"
    assert numbering.cite(1) == "[2]"  # the listed chunk joins its source's number
    assert numbering.cite_document(outside) == "[1]"  # the same object: the same source
    assert numbering.cite_document(Document("another, no source")) == "[3]"
    assert numbering.cite_document(d[1]) == "[4]"  # a listed document is cited at its position
    assert summary(numbering.references) == [
        (1, None, []),
        (2, "u", [1]),
        (3, None, []),
        (4, None, [2]),
    ]


class DropOdd(TextReferenceStyle):
    """Refuses documents whose source ends with an odd digit."""

    def format_reference(self, ref: int, media: Document) -> str | None:
        if int(str(media.metadata["source"])[-1]) % 2:
            return None
        return super().format_reference(ref, media)


def test_a_citation_formatted_as_none_records_nothing() -> None:
    numbering = SourceNumbering(docs("u1", "u2", "u3", "u4"), DropOdd())
    assert [numbering.cite(p) for p in (1, 2, 3, 4, 1)] == ["", "[1]", "", "[2]", ""]
    assert summary(numbering.references) == [(1, "u2", [2]), (2, "u4", [4])]
    assert numbering.number(1) is None
    assert numbering.number(3) is None
    assert numbering.cite_document(Document("x", metadata={"source": "u9"})) == ""
    assert len(numbering.references) == 2


def test_positions_outside_the_list_are_errors() -> None:
    numbering = SourceNumbering(docs("u"), TextReferenceStyle())
    for position in (0, -1, 2):
        with pytest.raises(IndexError):
            numbering.cite(position)
    assert numbering.references == []
    assert numbering.format_references() == ""


def test_a_quote_reaches_deep_link_styles_only() -> None:
    d = docs("https://a.org/x")
    quote = "Second sentence of chunk 1."
    deep = SourceNumbering(d, MarkdownReferenceStyle(deep_links=True))
    assert deep.cite(1, quote=quote) == (
        "<sup>[[1](https://a.org/x#:~:text=Second%20sentence%20of%20chunk%201.)]</sup>"
    )
    assert deep.cite(1) == "<sup>[[1](https://a.org/x)]</sup>"
    # a quote of two words could match anywhere on the page: no text fragment
    assert deep.cite(1, quote="Chunk 1.") == "<sup>[[1](https://a.org/x)]</sup>"
    assert QUOTE_KEY not in deep.references[0].document.metadata  # the listed document is as given
    for flat_style in (MarkdownReferenceStyle(deep_links=False), MarkdownReferenceStyle()):
        flat = SourceNumbering(d, flat_style)
        assert flat.cite(1, quote=quote) == "<sup>[[1](https://a.org/x)]</sup>"


def test_the_rewriter_numbers_through_the_same_registry() -> None:
    d = docs("u", "v", None, "u", None)
    style = TextReferenceStyle()
    rewriter = ReferenceRewriter(d, style)
    assert isinstance(rewriter.numbering, SourceNumbering)
    outside = Document("native", metadata={"source": "w"})
    streamed = [
        rewriter.feed("a [9](id=4)"),
        rewriter.feed(" b [1](id=3)"),
        rewriter.cite(outside),
        rewriter.feed(" c [2](id=1) d [NUMBER](id=5) e [1](id=2) f [7](id=3)"),
    ]
    tail = rewriter.finish()

    direct = SourceNumbering(d, style)
    markers = [direct.cite(p) for p in (4, 3)]
    markers.append(direct.cite_document(outside))
    markers += [direct.cite(p) for p in (1, 5, 2, 3)]

    assert "".join(streamed) == "a {} b {}{} c {} d {} e {} f {}".format(*markers)
    assert [r.to_dict() for r in rewriter.references] == [r.to_dict() for r in direct.references]
    assert rewriter.references == rewriter.numbering.references
    assert tail == direct.format_references()
    assert summary(direct.references) == [
        (1, "u", [4, 1]),
        (2, None, [3]),
        (3, "w", []),
        (4, None, [5]),
        (5, "v", [2]),
    ]


def test_deep_link_numbering_matches_the_rewriter() -> None:
    d = docs("https://a.org/x", "https://b.org/y", "https://a.org/x")
    rewriter = ReferenceRewriter(d, MarkdownReferenceStyle(deep_links=True))
    out = rewriter.feed("[1](id=3)[1](id=2)[1](id=1)")
    numbering = SourceNumbering(d, MarkdownReferenceStyle(deep_links=True))
    # With no citing sentence, a deep link quotes the chunk's first sentence long enough.
    quotes = [f"Second sentence of chunk {i}." for i in (3, 2, 1)]
    assert "#:~:text=Second%20sentence%20of%20chunk%203." in out
    assert out == "".join(
        numbering.cite(p, quote=q) for p, q in zip((3, 2, 1), quotes, strict=True)
    )
    assert summary(rewriter.references) == summary(numbering.references)


def evidence(text: str, url: str, label: Label = Label.ENTAILS) -> Evidence:
    return Evidence(
        text=text,
        url=url,
        title=f"Title of {url}",
        rank=0,
        relevance_rank=0,
        similarity=0.5,
        label=label,
        confidence=0.9,
    )


@pytest.mark.parametrize(
    "style",
    [TextReferenceStyle(), MarkdownReferenceStyle(), MarkdownReferenceStyle(deep_links=False)],
)
def test_report_and_article_number_like_the_registry(style: ReferenceStyle) -> None:
    items = [
        evidence("The Moon orbits at 384,400 km. Far.", "https://e.org/moon"),
        evidence("Europa orbits Jupiter.", "https://e.org/europa"),
        evidence("The Moon is a satellite.", "https://e.org/moon"),
        evidence("No page.", "", Label.CONTRADICTS),
    ]
    citations, listing = report._cite(items, style)
    numbers = [int(c.split("[")[-1].split("]")[0]) for c in citations]
    assert numbers == [1, 2, 1, 3]
    assert "https://e.org/europa" in listing

    result = FactCheckResult(
        statement="The Moon is near",
        verdict=Verdict.SUPPORTED,
        confidence=0.75,
        score=0.75,
        supporting=items[:3],
        contradicting=items[3:],
    )
    passages, references, _ = article.cite_evidence(result, style)
    assert [p["number"] for p in passages] == [1, 2, 1, 3]
    assert [(r["number"], r["source"], r["positions"]) for r in references] == [
        (1, "https://e.org/moon", [1, 3]),
        (2, "https://e.org/europa", [2]),
        (3, None, [4]),
    ]


@pytest.mark.parametrize("module", [report, article])
def test_no_markers_are_written_to_be_parsed_back(module: object) -> None:
    source = Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8")
    assert "](id=" not in source
    assert "ReferenceRewriter" not in source
    assert "SourceNumbering" in source


def test_used_reference_is_one_class_everywhere() -> None:
    assert rewriter_module.UsedReference is numbering_module.UsedReference
    assert langchain_references.UsedReference is numbering_module.UsedReference


def test_equal_chunks_without_a_source_at_two_positions_are_two_sources() -> None:
    """A listed document without a source id is its own source: keyed by position, not content.

    Two retrieved chunks with the same text and no source are two documents the reader cannot
    tell apart but the model was shown twice: each keeps its own number.
    """
    same = [Document("Same text."), Document("Same text.")]
    numbering = SourceNumbering(same, TextReferenceStyle())
    assert [numbering.cite(2), numbering.cite(1), numbering.cite(2)] == ["[1]", "[2]", "[1]"]
    assert [(ref.number, ref.positions) for ref in numbering.references] == [(1, [2]), (2, [1])]


def test_an_absent_document_is_not_citable() -> None:
    docs = [ABSENT_DOCUMENT, Document("b", metadata={"source": "https://b"})]
    numbering = SourceNumbering(docs, TextReferenceStyle())
    assert [numbering.has(0), numbering.has(1), numbering.has(2), numbering.has(3)] == [
        False,
        False,
        True,
        False,
    ]
    with pytest.raises(IndexError, match=r"^position 1 is not in 1\.\.2$"):
        numbering.cite(1)
    assert numbering.cite(2) == "[1]"


def test_equal_unsourced_documents_share_a_number_whatever_their_metadata_order() -> None:
    """A provider rebuilds an unsourced document per citation: its metadata keys may come in
    any order, and metadata values may repeat; the same document keeps its number."""
    numbering = SourceNumbering([], TextReferenceStyle())
    first = Document("Same text.", metadata={"page": "1", "line": "1"})
    again = Document("Same text.", metadata={"line": "1", "page": "1"})
    other = Document("Same text.", metadata={"page": "2", "line": "1"})
    assert [numbering.cite_document(d) for d in (first, again, other)] == ["[1]", "[1]", "[2]"]


def test_unsourced_documents_with_keys_of_mixed_types_are_numbered() -> None:
    numbering = SourceNumbering([], TextReferenceStyle())
    mixed = {1: "one", "a": "x"}
    first = Document("Text.", metadata=mixed)
    again = Document("Text.", metadata=dict(reversed(mixed.items())))
    assert [numbering.cite_document(first), numbering.cite_document(again)] == ["[1]", "[1]"]


def test_a_document_listed_twice_is_cited_at_its_first_position() -> None:
    same = Document("Twice listed.", metadata={"source": "u"})
    numbering = SourceNumbering([same, same], TextReferenceStyle())
    assert numbering.cite_document(same) == "[1]"
    assert summary(numbering.references) == [(1, "u", [1])]
    assert [numbering.number(1), numbering.number(2)] == [1, None]


def test_a_document_cited_after_the_list_changed_is_cited_at_its_new_position() -> None:
    a, b, c = docs("a", "b", "c")
    listed = [b, a]
    numbering = SourceNumbering(listed, TextReferenceStyle())
    assert numbering.cite_document(a) == "[1]"  # at position 2
    listed[:] = [a, c]  # a moved to position 1, b gone
    assert numbering.cite_document(a) == "[1]"
    assert numbering.cite_document(b) == "[2]"  # no longer listed: cited from outside
    assert summary(numbering.references) == [(1, "a", [2, 1]), (2, "b", [])]
    assert [numbering.number(1), numbering.number(2)] == [1, 1]


def test_a_document_still_at_its_position_keeps_it_when_the_list_changed() -> None:
    x, a = docs("x", "a")
    listed = [x, a]
    numbering = SourceNumbering(listed, TextReferenceStyle())
    assert numbering.cite_document(a) == "[1]"
    listed[0] = a  # a listed twice now: cited again where it was
    assert numbering.cite_document(a) == "[1]"
    assert summary(numbering.references) == [(1, "a", [2])]
