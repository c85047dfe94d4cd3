from __future__ import annotations

import logging
import re

import pytest
from langchain_core.documents import Document

from langchain_references import MarkdownReferenceStyle, TextReferenceStyle
from langchain_references.core import rewriter as rewriter_module
from langchain_references.core.deeplinks import QuoteFinder
from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import ReferenceStyle


def docs(*sources: str | None) -> list[Document]:
    return [
        Document(f"doc {i}", metadata={} if s is None else {"source": s})
        for i, s in enumerate(sources, start=1)
    ]


def run(text: str, documents: list[Document], style: ReferenceStyle | None = None) -> str:
    rewriter = ReferenceRewriter(documents, style or TextReferenceStyle())
    return rewriter.feed(text) + rewriter.finish()


def test_numbers_follow_first_use_and_ignore_the_written_number() -> None:
    out = run("a [9](id=3) b [9](id=1) c [1](id=3)", docs("u1", "u2", "u3"))
    assert out == "a [1] b [2] c [1]\n\n- [1] u3\n- [2] u1"


def test_same_source_shares_a_number_and_lists_the_first_cited_chunk() -> None:
    d = docs("u", "v", "u")
    d[2].metadata["title"] = "third chunk"
    rewriter = ReferenceRewriter(d, TextReferenceStyle())
    out = rewriter.feed("x [1](id=3) y [2](id=1) z [3](id=2)") + rewriter.finish()
    assert out == "x [1] y [1] z [2]\n\n- [1] third chunk (u)\n- [2] v"
    assert [(r.number, r.source, r.positions) for r in rewriter.references] == [
        (1, "u", [3, 1]),
        (2, "v", [2]),
    ]


def test_documents_without_source_are_never_merged() -> None:
    out = run("[1](id=1)[1](id=2)[1](id=1)", docs(None, None))
    assert out == "[1][2][1]\n\n- [1] Document 1\n- [2] Document 2"


def test_out_of_range_ids_are_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_references"):
        out = run("a [1](id=0) b [1](id=3) c [1](id=2)", docs("u1", "u2"))
    assert out == "a b c [1]\n\n- [1] u2"  # a dropped citation leaves no double blank
    assert sum("not in 1..2" in r.getMessage() for r in caplog.records) == 2


def test_unused_documents_are_not_listed() -> None:
    assert run("only [1](id=2)", docs("u1", "u2", "u3")).endswith("- [1] u2")


class DropOdd(TextReferenceStyle):
    """Refuses documents whose source ends with an odd digit."""

    def format_reference(self, ref: int, media: Document) -> str | None:
        if int(str(media.metadata["source"])[-1]) % 2:
            return None
        return super().format_reference(ref, media)


def test_none_from_format_reference_takes_no_number() -> None:
    out = run("[1](id=1) [1](id=2) [1](id=3) [1](id=4)", docs("u1", "u2", "u3", "u4"), DropOdd())
    assert out == " [1] [2]\n\n- [1] u2\n- [2] u4"


def test_feed_after_finish_is_an_error() -> None:
    rewriter = ReferenceRewriter(docs("u"), TextReferenceStyle())
    rewriter.finish()
    with pytest.raises(
        RuntimeError, match=r"^ReferenceRewriter\.feed\(\) called after finish\(\)$"
    ):
        rewriter.feed("[1](id=1)")
    for plain in ("plain text", "", "【no citation"):  # the fast path refuses too
        with pytest.raises(RuntimeError, match=r"called after finish\(\)$"):
            rewriter.feed(plain)
    with pytest.raises(RuntimeError, match=r"^ReferenceRewriter\.finish\(\) called twice$"):
        rewriter.finish()
    with pytest.raises(
        RuntimeError, match=r"^ReferenceRewriter\.cite\(\) called after finish\(\)$"
    ):
        rewriter.cite(Document("d", metadata={"source": "u2"}))


def test_deep_links_quote_per_citing_sentence_under_one_number() -> None:
    """The same chunk cited from two sentences: two quotes, one number, one list entry."""
    chunk = Document(
        "The tower opened in 1962. Its deck turns once every 47 minutes.",
        metadata={"source": "https://t.org"},
    )
    rewriter = ReferenceRewriter([chunk], MarkdownReferenceStyle(deep_links=True))
    answer = (
        "It turns every 47 minutes [1](id=1). It opened in 1962 [2](id=1). "
        "Again, 47 minutes [3](id=1)."
    )
    pieces = re.split(r"(?<= )", answer)  # streamed word by word, spaces kept
    out = "".join(rewriter.feed(piece) for piece in pieces) + rewriter.finish()
    links = re.findall(r"\[\[(\d)\]\(([^)]*)\)\]", out)
    assert [number for number, _ in links] == ["1", "1", "1"]
    assert "text=Its%20deck" in links[0][1]
    assert "text=The%20tower" in links[1][1]
    assert links[2][1] == links[0][1]  # the same quote again: the same marker
    assert len(rewriter.references) == 1


def test_deep_links_read_the_citing_sentence_from_its_first_character() -> None:
    """Only the first word tells the two passages apart: the quote follows it."""
    chunk = Document(
        "Lyon has a large old opera house today. Paris has a large old opera house today.",
        metadata={"source": "https://t.org"},
    )
    for first, expected in (("Paris", "text=Paris%20has"), ("Lyon", "text=Lyon%20has")):
        rewriter = ReferenceRewriter([chunk], MarkdownReferenceStyle(deep_links=True))
        out = rewriter.feed(f"{first} has a large old opera house today [1](id=1).")
        out += rewriter.finish()
        (link,) = re.findall(r"\[\[1\]\(([^)]*)\)\]", out)
        assert expected in link, link


def test_feed_events_after_finish_is_an_error() -> None:
    rewriter = ReferenceRewriter(docs("u"), TextReferenceStyle())
    rewriter.finish()
    with pytest.raises(
        RuntimeError, match=r"^ReferenceRewriter\.feed_events\(\) called after finish\(\)$"
    ):
        rewriter.feed_events(["text"])


class CountingDeep(MarkdownReferenceStyle):
    """A deep-link style that records each inline citation it is asked to format."""

    def __init__(self) -> None:
        super().__init__(deep_links=True)
        self.calls: list[int] = []

    def format_reference(self, ref: int, media: Document) -> str | None:
        self.calls.append(ref)
        return super().format_reference(ref, media)


def test_deep_links_build_one_quote_finder_per_chunk_and_format_a_quote_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each cited chunk's sentences are prepared once; the same quote again reuses its marker."""
    built: list[str] = []

    class Recording(QuoteFinder):
        def __init__(self, chunk_text: str) -> None:
            built.append(chunk_text)
            super().__init__(chunk_text)

    monkeypatch.setattr(rewriter_module, "QuoteFinder", Recording)
    chunks = [
        Document(
            "The tower opened in 1962. Its deck turns once every 47 minutes.",
            metadata={"source": "https://t.org"},
        ),
        Document(
            "The fair drew ten million visitors in six months.",
            metadata={"source": "https://f.org"},
        ),
    ]
    style = CountingDeep()
    rewriter = ReferenceRewriter(chunks, style)
    out = rewriter.feed(
        "It turns every 47 minutes [1](id=1). The fair drew ten million [2](id=2). "
        "Again, 47 minutes [3](id=1). It opened in 1962 [4](id=1)."
    )
    links = re.findall(r"\[\[(\d)\]\(([^)]*)\)\]", out)
    assert [number for number, _ in links] == ["1", "2", "1", "1"]
    assert links[2][1] == links[0][1]  # the same quote: the first marker again
    assert "text=Its%20deck" in links[0][1]
    assert "text=The%20tower" in links[3][1]
    assert built == [chunks[0].page_content, chunks[1].page_content]
    assert style.calls == [1, 2, 1]  # the repeated quote was not formatted again


class Text(str):
    """A str subclass, as some providers stream."""


def test_plain_text_comes_back_as_the_very_object_in_every_dialect() -> None:
    """Text that cannot start a citation of any dialect, nor code, goes round the parser
    untouched (once the answer's first line has begun: before, a fence may open)."""
    rewriter = ReferenceRewriter(docs("u"), TextReferenceStyle(), markers=("id", "source"))
    assert rewriter.feed("So,") == "So,"
    piece = Text(" plain words, no marker")
    assert rewriter.feed(piece) is piece
    assert rewriter.feed("then 【1†source】") == "then [1]"
    assert rewriter.finish() == "\n\n- [1] u"


def test_parse_gives_no_event_for_empty_text_and_the_text_itself_for_plain_text() -> None:
    rewriter = ReferenceRewriter(docs("u"), TextReferenceStyle())
    assert rewriter.feed("So,") == "So,"  # the answer's first line has begun
    assert rewriter.parse("") == []
    assert rewriter.parse(" plain words") == [" plain words"]


def test_feed_events_drops_or_flags_a_lone_citation_of_the_given_documents() -> None:
    for drop, flag, expected in [
        ({1}, (), "Paris."),
        ((), {1}, "Paris [1] (unsupported)."),
        ({2}, {1}, "Paris [1] (unsupported)."),
        ({1}, {2}, "Paris."),
    ]:
        rewriter = ReferenceRewriter(docs("u", "v"), TextReferenceStyle())
        head = rewriter.feed_events(["Paris "])
        (citation,) = rewriter.parse("[1](id=1)")
        out = head + rewriter.feed_events([citation], drop=drop, flag=flag)
        assert out + rewriter.feed_events(["."]) == expected


def test_spans_after_a_flagged_citation_count_the_flag() -> None:
    rewriter = ReferenceRewriter(docs("u", "v"), TextReferenceStyle(), track_spans=True)
    events = rewriter.parse("Paris [1](id=1) and Lyon [1](id=2)")
    text = rewriter.feed_events(events, flag={1}) + rewriter.finish()
    assert text == "Paris [1] (unsupported) and Lyon [2]\n\n- [1] u\n- [2] v"
    assert [(span.start, span.end, text[span.start : span.end]) for span in rewriter.spans] == [
        (6, 9, "[1]"),
        (33, 36, "[2]"),
    ]
