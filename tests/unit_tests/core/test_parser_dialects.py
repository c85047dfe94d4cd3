"""Citation marker dialects of the parser: ``id`` and ``source`` (default), ``bracket``."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_references import TextReferenceStyle
from langchain_references.core._parser import (
    DEFAULT_MARKERS,
    MARKER_DIALECTS,
    MAX_CITATION_LENGTH,
    Citation,
    CitationParser,
    Event,
)
from langchain_references.core.rewriter import ReferenceRewriter
from tests.unit_tests.core.test_parser import citations, normalize, raw, split_texts

Markers = tuple[str, ...]

#: Every non-empty set of dialects.
DIALECT_SETS: list[Markers] = [
    combo
    for size in range(1, len(MARKER_DIALECTS) + 1)
    for combo in itertools.combinations(MARKER_DIALECTS, size)
]


def parse(pieces: list[str], markers: Markers) -> list[Event]:
    parser = CitationParser(markers=markers)
    events: list[Event] = []
    for piece in pieces:
        events.extend(parser.feed(piece))
        assert len(parser.pending) <= parser.max_citation_length
        assert not parser.pending or parser.pending[0] in parser.starts
    events.extend(parser.close())
    assert parser.pending == ""
    return events


# ---------------------------------------------------------------- the option


def test_the_constants_name_the_dialects_and_the_default() -> None:
    assert MARKER_DIALECTS == ("id", "source", "bracket")
    assert DEFAULT_MARKERS == ("id", "source")
    parser = CitationParser()
    assert parser.markers == frozenset({"id", "source"})
    assert parser.starts == "[【"
    assert parser.max_citation_length == MAX_CITATION_LENGTH == len("【】") + 64


@pytest.mark.parametrize(
    ("markers", "starts", "longest"),
    [
        (("id",), "[", len("[](id=)") + 2 * 9),
        (("source",), "【", len("【】") + 64),
        (("bracket",), "[", 2 + 16 * 9 + 15 * 2),
        (("source", "id"), "[【", len("【】") + 64),
        (frozenset({"bracket", "source", "id"}), "[【", 2 + 16 * 9 + 15 * 2),
    ],
)
def test_markers_choose_the_start_characters_and_the_buffer_bound(
    markers: Markers, starts: str, longest: int
) -> None:
    parser = CitationParser(markers=markers)
    assert parser.markers == frozenset(markers)
    assert parser.starts == starts
    assert parser.max_citation_length == longest


def test_a_single_name_is_one_dialect() -> None:
    assert CitationParser(markers="source").markers == frozenset({"source"})


@pytest.mark.parametrize("markers", [("id", "footnote"), ("ID",), "sources", ()])
def test_unknown_or_missing_dialects_are_refused_naming_the_valid_ones(
    markers: Markers | str,
) -> None:
    with pytest.raises(ValueError, match="'id', 'source', 'bracket'"):
        CitationParser(markers=markers)
    with pytest.raises(ValueError, match="'id', 'source', 'bracket'"):
        ReferenceRewriter([], TextReferenceStyle(), markers=markers)


@pytest.mark.parametrize(
    ("markers", "what"),
    [
        (("id", "footnote", "ID"), "unknown marker dialect(s) ['ID', 'footnote']"),
        ((), "no dialect"),
    ],
)
def test_an_unknown_dialect_or_none_is_named_in_the_error(markers: Markers, what: str) -> None:
    message = f"{what}: markers must name some of ('id', 'source', 'bracket')"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CitationParser(markers=markers)


# ---------------------------------------------------------------- exact events


@pytest.mark.parametrize(
    ("markers", "text", "expected"),
    [
        (
            ("source",),
            "Seattle 【2†source】【1】 is wet 【12†L1-L5】.",
            [
                "Seattle ",
                Citation("2", 2, "【2†source】"),
                Citation("1", 1, "【1】"),
                " is wet ",
                Citation("12", 12, "【12†L1-L5】"),
                ".",
            ],
        ),
        (("source",), "【3†】", [Citation("3", 3, "【3†】")]),
        (
            # OpenAI Assistants / Azure file search: document 4, sub-index ignored.
            ("source",),
            "Rain【4:0†source】 sun 【12:345†notes.pdf】【7:1】.",
            [
                "Rain",
                Citation("4", 4, "【4:0†source】"),
                " sun ",
                Citation("12", 12, "【12:345†notes.pdf】"),
                Citation("7", 7, "【7:1】"),
                ".",
            ],
        ),
        (
            DEFAULT_MARKERS,
            "a [1](id=2) b 【3:0†source】 c 【4】 [5]",
            [
                "a ",
                Citation("1", 2, "[1](id=2)"),
                " b ",
                Citation("3", 3, "【3:0†source】"),
                " c ",
                Citation("4", 4, "【4】"),
                " [5]",
            ],
        ),
        (("source",), "【07†a [b] (c)】", [Citation("07", 7, "【07†a [b] (c)】")]),
        (("source",), "【1†" + "x" * 62 + "】", [Citation("1", 1, "【1†" + "x" * 62 + "】")]),
        (("source",), "【【1】", ["【", Citation("1", 1, "【1】")]),
        (
            ("bracket",),
            "Rain [1] and sun [2, 3][4,5] end [6]",
            [
                "Rain ",
                Citation("1", 1, "[1]"),
                " and sun ",
                Citation("2", 2, "[2, 3]"),
                Citation("3", 3, ""),
                Citation("4", 4, "[4,5]"),
                Citation("5", 5, ""),
                " end ",
                Citation("6", 6, "[6]"),
            ],
        ),
        (("bracket",), "[[1]]", ["[", Citation("1", 1, "[1]"), "]"]),
        (
            ("bracket",),
            "[" + ", ".join(map(str, range(1, 17))) + "]",
            [
                Citation("1", 1, "[" + ", ".join(map(str, range(1, 17))) + "]"),
                *(Citation(str(i), i, "") for i in range(2, 17)),
            ],
        ),
        (
            ("id", "bracket"),
            "x [1](id=2) y [1] z [3](id=4)[5]",
            [
                "x ",
                Citation("1", 2, "[1](id=2)"),
                " y ",
                Citation("1", 1, "[1]"),
                " z ",
                Citation("3", 4, "[3](id=4)"),
                Citation("5", 5, "[5]"),
            ],
        ),
        (("id", "bracket"), "[NUMBER](id=3)", [Citation("NUMBER", 3, "[NUMBER](id=3)")]),
        (
            ("id", "source", "bracket"),
            "a [1](id=2)【3†source】[4, 5].",
            [
                "a ",
                Citation("1", 2, "[1](id=2)"),
                Citation("3", 3, "【3†source】"),
                Citation("4", 4, "[4, 5]"),
                Citation("5", 5, ""),
                ".",
            ],
        ),
        (
            # A "【" note may hold a "[": the leftmost marker wins.
            ("id", "source"),
            "【1†see [2](id=3)】 [4](id=5)",
            [
                Citation("1", 1, "【1†see [2](id=3)】"),
                " ",
                Citation("4", 5, "[4](id=5)"),
            ],
        ),
        (
            # An unterminated "【" note gives way to the citations it holds at the end.
            ("id", "source"),
            "【1†see [2](id=3)",
            ["【1†see ", Citation("2", 3, "[2](id=3)")],
        ),
    ],
)
def test_citations_of_each_dialect_are_found(
    markers: Markers, text: str, expected: list[Event]
) -> None:
    assert normalize(parse([text], markers)) == expected
    assert normalize(parse(list(text), markers)) == expected


@pytest.mark.parametrize(
    ("markers", "text"),
    [
        # Not the dialects chosen.
        (("id",), "[1] and [1, 2] and 【1†source】 and 【2】"),
        (("source",), "[1](id=2) and [1] and [1, 2]"),
        (("bracket",), "[1](id=2) and 【1†source】"),
        # Not markers at all.
        (("source",), "【】 【x】 【†source】 【NUMBER†source】 【 1】 【1 】"),
        (
            ("source",),
            "【1:†source】 【1:x†source】 【:0†source】 【1:0:0†source】 【1:1234567890】",
        ),
        (("source",), "【1:0 †source】 【1 :0】 ends with 【4:0†sou"),
        (DEFAULT_MARKERS, "[1] and [1, 2] and [x](y) and 【1:】"),
        (("source",), "【注意】 Chinese brackets 【重要】"),
        (("source",), "【1†two\nlines】"),
        (("source",), "【1234567890】"),  # more digits than any real document list
        (("source",), "【1†" + "x" * 63 + "】"),  # 65 characters between the brackets
        (("source",), "【1†a【2"),  # unterminated at close
        (("source",), "ends with 【"),
        (("source",), "ends with 【12†sou"),
        (("source", "bracket"), "】1【 and 】【 and 【1"),
        (("bracket",), "[a] [] [1,] [,1] [1,,2] [1 ,2] [1,  2] [1.5] [-1] [١]"),
        (("bracket",), "[" + ", ".join(map(str, range(1, 18))) + "]"),  # 17 ids
        (("bracket",), "[1234567890]"),
        (("bracket",), "[1](http://example.org) and [1, 2](x)"),
        (("bracket",), "See [the docs](https://x.org) and [1](https://y.org)."),
        (("bracket",), "ends with [1, 2,"),
        (("bracket",), "[1](id=2)"),
        (("id", "bracket"), "[1](id=abc) [1](id=) [1](http://x)"),
        (("id", "bracket"), "[1](id=1, 2) [1, 2](id=3) [1](ID=1)"),
        (("id", "bracket"), "ends mid citation [12](id=4"),
        (("id", "bracket"), "ends with [1]("),
        (("id", "source", "bracket"), "[[[[ 【【【 ]]]] 】】 (((("),
        (("id", "source", "bracket"), "unicode: café ☕ 東京 [x] 【x】 †"),
    ],
)
def test_non_citations_pass_through_verbatim(markers: Markers, text: str) -> None:
    for pieces in ([text], list(text)):
        events = parse(pieces, markers)
        assert citations(events) == []
        assert "".join(e for e in events if isinstance(e, str)) == text


def test_an_id_citation_with_brackets_too_is_one_citation_decided_on_the_next_char() -> None:
    parser = CitationParser(markers=("id", "bracket"))
    assert parser.feed("see [1]") == ["see "]
    assert parser.pending == "[1]"  # "[1]" or the start of "[1](id=..."
    assert parser.feed("(") == []
    assert parser.feed("id=2)") == [Citation("1", 2, "[1](id=2)")]
    assert parser.feed("[1]") == []
    assert parser.feed(".") == [Citation("1", 1, "[1]"), "."]
    assert parser.feed("[1]") == []
    assert parser.feed("(http://x)") == ["[1](http://x)"]
    assert parser.close() == []


def test_a_bracket_at_the_end_of_the_stream_is_a_citation() -> None:
    parser = CitationParser(markers=("bracket",))
    assert parser.feed("end [2, 3]") == ["end "]
    assert parser.close() == [Citation("2", 2, "[2, 3]"), Citation("3", 3, "")]
    assert parser.close() == []


def test_a_bracket_followed_by_a_parenthesis_is_text_without_the_id_dialect() -> None:
    parser = CitationParser(markers=("bracket",))
    assert parser.feed("a [1]") == ["a "]
    assert parser.feed("(") == ["[1]("]
    assert parser.pending == ""


def test_source_notes_are_bounded() -> None:
    parser = CitationParser(markers=("source",))
    assert parser.feed("【1†" + "x" * 62) == []
    assert len(parser.pending) == 65
    assert parser.feed("x") == ["【1†" + "x" * 63]  # 65 characters inside: not a marker
    assert parser.pending == ""


def test_the_id_dialect_alone_keeps_its_behavior() -> None:
    parser = CitationParser(markers=("id",))
    assert parser.feed("[1] 【2】 [3](id=4)") == ["[1] 【2】 ", Citation("3", 4, "[3](id=4)")]


# ---------------------------------------------------------------- properties

alphabet = st.sampled_from(list("[]()id=NUMBER0123456789 ,:ab\n.é【】†L-x"))
fragments = st.one_of(
    st.text(alphabet, max_size=12),
    st.sampled_from(
        [
            "[1](id=2)",
            "[NUMBER](id=7)",
            "[3](id=",
            "](id=1)",
            "[x](y)",
            "[1]",
            "[1, 2]",
            "[3,4,",
            "[1](http://x)",
            "【2†source】",
            "【3】",
            "【12†L1-L5】",
            "【4:0†source】",
            "【4:",
            ":0†source】",
            "【4†",
            "†source】",
            "【1†" + "x" * 60,
            "[" + ", ".join(map(str, range(10, 26))),
        ]
    ),
)
documents_text = st.lists(fragments, max_size=30).map("".join)


def splits() -> st.SearchStrategy[tuple[str, list[str]]]:
    return split_texts(documents_text)


@pytest.mark.parametrize("markers", DIALECT_SETS)
@settings(max_examples=150, deadline=None)
@given(case=splits())
def test_split_invariance(markers: Markers, case: tuple[str, list[str]]) -> None:
    text, pieces = case
    whole = normalize(parse([text], markers))  # parse() also checks the buffer bound
    assert normalize(parse(pieces, markers)) == whole
    assert normalize(parse(list(text), markers)) == whole


@pytest.mark.parametrize("markers", DIALECT_SETS)
@settings(max_examples=150, deadline=None)
@given(case=splits())
def test_events_render_back_to_the_input(markers: Markers, case: tuple[str, list[str]]) -> None:
    text, pieces = case
    assert raw(parse(pieces, markers)) == text


@pytest.mark.parametrize("markers", [DEFAULT_MARKERS, ("id",)])
@settings(max_examples=300, deadline=None)
@given(case=splits())
def test_the_general_scanner_agrees_with_the_id_fast_path(
    markers: Markers, case: tuple[str, list[str]]
) -> None:
    _, pieces = case
    fast = CitationParser(markers=markers)
    general = CitationParser(markers=markers)
    general._other = True  # the path of the other dialects, on the default ones
    for piece in pieces:
        assert general.feed(piece) == fast.feed(piece)
        assert general.pending == fast.pending
    assert general.close() == fast.close()


# ---------------------------------------------------------------- the rewriter


def documents() -> list[Document]:
    return [
        Document(f"doc {i}", metadata={"source": f"https://e.org/{s}"})
        for i, s in enumerate("abca", start=1)
    ]


def rewrite(pieces: list[str], markers: Markers) -> str:
    rewriter = ReferenceRewriter(documents(), TextReferenceStyle(), markers=markers)
    return "".join(rewriter.feed(p) for p in pieces) + rewriter.finish()


def test_the_rewriter_renumbers_source_markers_like_id_markers() -> None:
    source = ["Rain 【", "2†source】 here", "【3】. Again ", "【4†L1-L5】【2", "†source】."]
    ids = ["Rain [", "1](id=2) here", "[7](id=3). Again ", "[1](id=4)[9](id=2", ")."]
    expected = "Rain [1] here[2]. Again [3][1].\n\n- [1] https://e.org/b\n- [2] https://e.org/c\n"
    expected += "- [3] https://e.org/a"
    assert rewrite(ids, DEFAULT_MARKERS) == expected
    assert rewrite(source, ("source",)) == expected
    assert rewrite(["".join(source)], ("source",)) == expected


def test_the_rewriter_renumbers_each_id_of_a_bracket_list() -> None:
    out = rewrite(["x [2, 3] y [", "1](id=2) z [1](https://q.org)"], ("id", "bracket"))
    assert out == (
        "x [1][2] y [1] z [1](https://q.org)\n\n- [1] https://e.org/b\n- [2] https://e.org/c"
    )


def test_the_rewriter_reads_source_markers_by_default_and_leaves_brackets_alone() -> None:
    expected = "a [1] [1] [2]\n\n- [1] https://e.org/b\n- [2] https://e.org/c"
    assert rewrite(["a 【2†source】 [1] 【3:0†source】"], DEFAULT_MARKERS) == expected
    assert rewrite(list("a 【2†source】 [1] 【3:0†source】"), DEFAULT_MARKERS) == expected
    assert rewrite(["a 【2†source】 [1]"], ("id",)) == "a 【2†source】 [1]"
