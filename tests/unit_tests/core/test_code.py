"""A marker inside Markdown code is code, not a citation (``_code``: fences and code spans)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

from langchain_references import TextReferenceStyle, manage_references
from langchain_references.citations.sentences import split_cited_sentences
from langchain_references.core._code import MAX_HELD_CODE, CodeAwareParser, MarkdownCode, Segment
from langchain_references.core._parser import MARKER_DIALECTS, Citation, CitationParser, Event
from langchain_references.core.rewriter import ReferenceRewriter
from tests.unit_tests.core.test_parser import normalize, raw, split_texts

DIALECT_SETS = [
    combo
    for size in range(1, len(MARKER_DIALECTS) + 1)
    for combo in itertools.combinations(MARKER_DIALECTS, size)
]


def segments(
    pieces: list[str], *, starts: str = "[", max_held: int = MAX_HELD_CODE
) -> list[Segment]:
    code = MarkdownCode(starts, max_held=max_held)
    out: list[Segment] = []
    for piece in pieces:
        out += code.feed(piece)
        assert len(code.held) <= max_held
    out += code.close()
    assert code.held == ""
    merged: list[Segment] = []
    for kind, text in out:
        assert text  # no empty segment
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        else:
            merged.append((kind, text))
    return merged


def parse(
    pieces: list[str], markers: tuple[str, ...] = ("id",), *, fast: bool = False
) -> list[Event]:
    """Events of a code-aware parser; ``fast`` passes each piece it can as the rewriter does."""
    parser = CodeAwareParser(markers=markers)
    events: list[Event] = []
    for piece in pieces:
        if fast and parser.quiet and not parser.special(piece):
            events.append(piece)
        else:
            events += parser.feed(piece)
    events += parser.close()
    assert parser.pending == ""
    return events


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Use `a[1]` [2]", [(False, "Use `"), (True, "a[1]`"), (False, " [2]")]),
        # a span closes on a run of as many backticks only
        ("x ``a ` [1]`` y", [(False, "x ``"), (True, "a ` [1]``"), (False, " y")]),
        # no closer on its line: the opener was text, the rest of the line prose
        ("a `b [1] c\nd", [(False, "a `"), (True, "b "), (False, "[1] c\nd")]),
        # a backtick run of three in a line is a span, not a fence
        ("x ```a[1]``` y", [(False, "x ```"), (True, "a[1]```"), (False, " y")]),
        ("a ~~~ b [1]", [(False, "a ~~~ b [1]")]),  # tildes in a line are text
        (
            "~~~\nx[1]\n```\ny[2]\n~~~\nz[3]",  # a fence closes with its own character
            [(False, "~~~"), (True, "\nx[1]\n```\ny[2]\n~~~\n"), (False, "z[3]")],
        ),
        (
            "````\na\n```\nb[1]\n````\nc[2]",  # ... and at least as many of them
            [(False, "````"), (True, "\na\n```\nb[1]\n````\n"), (False, "c[2]")],
        ),
        (
            "```\na\n``` x\nb[1]\n```\n[2]",  # a closing line has nothing else
            [(False, "```"), (True, "\na\n``` x\nb[1]\n```\n"), (False, "[2]")],
        ),
        (
            "1. Step:\n   ```py\n   a[1]\n   ```\n[2]",  # fences indented in a list item
            [(False, "1. Step:\n   ```"), (True, "py\n   a[1]\n   ```\n"), (False, "[2]")],
        ),
        (
            "```\r\na[1]\r\n```\r\n[2]",
            [(False, "```"), (True, "\r\na[1]\r\n```\r\n"), (False, "[2]")],
        ),
        ("```\na[1]", [(False, "```"), (True, "\na[1]")]),  # the answer's end closes it
        ("``\na[1]", [(False, "``\na[1]")]),  # two backticks open no fence
        ("[1] `x` [2]", [(False, "[1] `"), (True, "x`"), (False, " [2]")]),
        ("\u00a0```\nx[1]", [(False, "\u00a0```\nx[1]")]),  # a no-break space is no indent
        ("~~ ```py\nx[1]", [(False, "~~ ```"), (True, "py"), (False, "\nx[1]")]),  # begun
        ("XML [1]\nA [2]", [(False, "XML [1]\nA [2]")]),  # only ` and ~ make fences
    ],
)
def test_prose_and_code_are_told_apart(text: str, expected: list[Segment]) -> None:
    assert segments([text]) == expected
    assert segments(list(text)) == expected


def test_a_span_longer_than_the_hold_is_prose_up_to_its_closer() -> None:
    # the held "[1234567" passes 5 characters: prose; its closer ends it and opens nothing
    expected = [(False, "`[1234567` [2]")]
    assert segments(["`[1234567` [2]"], max_held=5) == expected
    assert segments(list("`[1234567` [2]"), max_held=5) == expected
    # so a later span on the line is still code, and the prose between stays prose
    text = "`[1234567` [2] `[3]` [4]\n`[5]`"
    expected = [
        (False, "`[1234567` [2] `"),
        (True, "[3]`"),
        (False, " [4]\n`"),
        (True, "[5]`"),
    ]
    assert segments([text], max_held=5) == expected
    assert segments(list(text), max_held=5) == expected
    # a longer run inside it does not close it; the line's end does
    assert segments(["`[1234567 `` [2]\n`[3]`"], max_held=5) == [
        (False, "`[1234567 `` [2]\n`"),
        (True, "[3]`"),
    ]
    # 5 characters held, the closer's included: code
    expected = [(False, "`"), (True, "[123`"), (False, " [2]")]
    assert segments(["`[123` [2]"], max_held=5) == expected
    # each span counts its own characters
    expected = [(False, "`"), (True, "[1]`"), (False, " `"), (True, "[234`"), (False, " x")]
    assert segments(["`[1]` `[234` x"], max_held=5) == expected


def test_a_span_without_a_closer_at_the_end_is_prose() -> None:
    code = MarkdownCode("[")
    assert code.feed("a `[1] x") == [(False, "a `")]
    assert code.close() == [(False, "[1] x")]  # the opener was plain text after all


def test_only_a_backtick_run_of_its_length_ends_a_span_too_long_to_hold() -> None:
    # a tilde run of the opener's length does not end it; the backtick run then does
    text = "`[1234567 ~ [2]` `[3]`"
    expected = [(False, "`[1234567 ~ [2]` `"), (True, "[3]`")]
    assert segments([text], max_held=5) == expected
    assert segments(list(text), max_held=5) == expected


def test_a_line_after_a_span_without_a_closer_reads_its_own_spans() -> None:
    text = "`[1] x\n`[2]` [3]"
    expected = [(False, "`[1] x\n`"), (True, "[2]`"), (False, " [3]")]
    assert segments([text]) == expected
    assert segments(list(text)) == expected


def test_a_span_too_long_to_hold_leaves_no_raw_marker_in_the_rest_of_its_line() -> None:
    long_span = "`[1](id=1) " + "x" * (MAX_HELD_CODE + 100) + "`"
    text = f"See {long_span} then [2](id=2) and `code [3](id=3)` end [4](id=4)"
    for size in (len(text), 7, 1):
        events = parse([text[i : i + size] for i in range(0, len(text), size)])
        cited = [e.doc_id for e in events if not isinstance(e, str)]
        assert cited == [1, 2, 4]  # [3] is code; [2] is prose, not a span swapped in
        assert raw(events) == text
        assert "`code [3](id=3)`" in "".join(e for e in events if isinstance(e, str))


def test_adjacent_segments_of_a_kind_come_joined() -> None:
    assert MarkdownCode("[").feed("So\n") == [(False, "So\n")]
    assert MarkdownCode("[").feed("So\nthen") == [(False, "So\nthen")]
    assert MarkdownCode("[").feed("```\na\n") == [(False, "```"), (True, "\na\n")]


def test_only_the_span_text_from_a_possible_citation_is_held() -> None:
    code = MarkdownCode("[")
    assert code.feed("Run `make ") == [(False, "Run `"), (True, "make ")]
    assert code.feed("a[") == [(True, "a")]
    assert code.held == "["
    assert code.feed("0]`") == []  # the closer may still be longer
    assert code.feed(" now") == [(True, "[0]`"), (False, " now")]
    assert code.held == ""


def test_flush_returns_the_held_span_text_as_code_and_the_span_goes_on() -> None:
    code = MarkdownCode("[")
    assert code.feed("`a [1]") == [(False, "`"), (True, "a ")]
    assert code.flush() == [(True, "[1]")]
    assert code.flush() == []
    assert code.feed(" [2]` [3]") == [(True, " [2]`"), (False, " [3]")]


def test_the_hold_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^max_held must be >= 1, got 0$"):
        MarkdownCode("[", max_held=0)
    code = MarkdownCode("[", max_held=1)  # the least: one character
    assert code.feed("`[") == [(False, "`")]
    assert code.held == "["


def test_without_start_characters_nothing_is_held() -> None:
    assert segments(["`a[1]"], starts="") == [(False, "`"), (True, "a[1]")]


def test_quiet_says_when_plain_text_would_pass_as_it_is() -> None:
    parser = CodeAwareParser()
    assert parser.quiet is False  # no line has begun: a fence may open
    assert parser.feed("   ") == ["   "]
    assert not parser.quiet  # blanks: still the line's start
    assert parser.feed("```\n") == ["```\n"]  # a fence opened
    assert not parser.quiet
    assert parser.feed("x = 1") == ["x = 1"]
    assert parser.quiet
    for special in ("a[1]", "x\n", "`", "~"):
        assert parser.special(special)
    assert parser.special("plain words") is None
    assert parser.feed("\n``` ") == ["\n``` "]  # this line may close the fence
    assert not parser.quiet
    assert parser.feed("  ") == ["  "]
    assert not parser.quiet
    assert parser.feed(" x") == [" x"]  # it does not: text follows the fence
    assert parser.quiet
    assert parser.feed("\n[1](id=1)") == ["\n[1](id=1)"]  # still code
    assert parser.feed("\n```\nSo ") == ["\n```\nSo "]  # the fence closed, a line began
    assert parser.quiet is True
    parser = CodeAwareParser()
    assert parser.feed("so ") == ["so "]
    assert parser.quiet is True
    assert parser.feed("more ") == ["more "]  # prose going on: the citation parser alone
    assert parser.quiet is True
    assert parser.feed("[1](i") == []
    assert parser.quiet is False
    assert parser.flush() == ["[1](i"]
    assert parser.quiet is True
    assert parser.feed("```a") == ["```a"]  # the line has begun: a span, not a fence
    assert parser.quiet  # code, but nothing to hold
    assert parser.feed("[") == []
    assert (parser.quiet, parser.pending) == (False, "[")
    parser = CodeAwareParser()
    assert parser.feed("`x``") == ["`x``"]
    assert not parser.quiet  # the run's end decides whether it closes the span
    assert parser.feed(" [1](id=1)") == [" "]
    assert not parser.quiet  # the span is still open (two backticks do not close one)
    assert parser.pending == "[1](id=1)"


# ------------------------------------------------------------------ properties

alphabet = st.sampled_from(list("`~\n\r [](id=1)2ab【†】,"))
pieces_of = st.one_of(
    st.text(alphabet, max_size=10),
    st.sampled_from(["```", "~~~", "\n```\n", "`", "``", "[1](id=2)", "【2】", "[1, 2]", "\n"]),
)
texts = st.lists(pieces_of, max_size=25).map("".join)


splits = split_texts(texts)


@settings(max_examples=400, deadline=None)
@given(splits, st.sampled_from([3, MAX_HELD_CODE]))
def test_the_segments_are_the_same_however_the_text_is_cut(
    case: tuple[str, list[str]], max_held: int
) -> None:
    text, pieces = case
    whole = segments([text], max_held=max_held)
    assert "".join(t for _, t in whole) == text
    assert segments(pieces, max_held=max_held) == whole
    assert segments(list(text), max_held=max_held) == whole


@settings(max_examples=400, deadline=None)
@given(splits, st.sampled_from(DIALECT_SETS))
def test_the_events_are_the_same_however_the_text_is_cut(
    case: tuple[str, list[str]], markers: tuple[str, ...]
) -> None:
    text, pieces = case
    whole = normalize(parse([text], markers))
    assert raw(whole) == text
    assert normalize(parse(pieces, markers)) == whole
    assert normalize(parse(pieces, markers, fast=True)) == whole  # the rewriter's fast path
    assert normalize(parse(list(text), markers, fast=True)) == whole


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces_of, max_size=25), st.sampled_from(DIALECT_SETS))
def test_text_without_backticks_or_tildes_parses_as_the_citation_parser_parses_it(
    pieces: list[str], markers: tuple[str, ...]
) -> None:
    pieces = [p.replace("`", "'").replace("~", "-") for p in pieces]
    plain = CitationParser(markers=markers)
    expected = [e for p in pieces for e in plain.feed(p)] + plain.close()
    assert normalize(parse(pieces, markers)) == normalize(expected)


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.sampled_from(DIALECT_SETS))
def test_a_marker_in_a_fenced_block_is_never_a_citation(
    before: str, inside: str, markers: tuple[str, ...]
) -> None:
    inside = inside.replace("`", "'").replace("~", "-")
    prose = before.replace("`", "'").replace("~", "-")
    events = parse([prose + "\n```python\n" + inside + "\n```\n"], markers)
    assert [e for e in events if isinstance(e, Citation)] == [
        e for e in parse([prose + "\n"], markers) if isinstance(e, Citation)
    ]


# ------------------------------------------------------------------ the parser


def test_the_parser_reads_the_dialects_it_is_given() -> None:
    parser = CodeAwareParser(markers=("source", "bracket"))
    assert [bool(parser.special(c)) for c in "【[`~\n(a"] == [True] * 5 + [False] * 2
    events = parser.feed("So 【2】 and `【1】` [3]") + parser.close()
    assert [e.doc_id for e in events if isinstance(e, Citation)] == [2, 3]
    with pytest.raises(ValueError, match="unknown marker dialect"):
        CodeAwareParser(markers=("html",))
    with pytest.raises(TypeError, match=r"^CodeAwareParser.feed\(\) takes str, not bytes$"):
        parser.feed(b"x")  # type: ignore[arg-type]


def test_a_marker_being_written_ends_where_code_begins() -> None:
    parser = CodeAwareParser()
    assert parser.feed("see [1](i") == ["see "]
    assert parser.pending == "[1](i"
    assert parser.feed("d=1)`[2](id=2)` [3](id=3)") == [
        Citation("1", 1, "[1](id=1)"),
        "`[2](id=2)` ",
        Citation("3", 3, "[3](id=3)"),
    ]
    assert parser.feed("[4](id=4)`") == [Citation("4", 4, "[4](id=4)"), "`"]
    assert parser.close() == []


def test_pending_is_the_possible_citation_then_the_held_span_text() -> None:
    parser = CodeAwareParser()
    assert parser.feed("a `b [1](id") == ["a `b "]
    assert parser.pending == "[1](id"  # held by the splitter: inside a span
    assert parser.flush() == ["[1](id"]
    assert parser.pending == ""
    assert parser.feed("=1)` [2](id=2) x") == ["=1)` ", Citation("2", 2, "[2](id=2)"), " x"]
    assert parser.feed("[3](id=3") == []
    assert parser.pending == "[3](id=3"
    assert parser.flush() == ["[3](id=3"]


# ------------------------------------------------------------------ the rewriter and the tools


def _docs(n: int) -> list[Document]:
    return [Document(f"d{i}", metadata={"source": f"https://x.org/{i}"}) for i in range(1, n + 1)]


@pytest.mark.parametrize(
    ("markers", "answer", "expected"),
    [
        (("bracket",), "Use `arr[1]` here [2].", "Use `arr[1]` here [1].\n\n- [1] https://x.org/2"),
        (
            ("bracket",),
            "Code:\n```python\nx = a[1]\n```\nsee [3].",
            "Code:\n```python\nx = a[1]\n```\nsee [1].\n\n- [1] https://x.org/3",
        ),
        (
            ("id",),
            "Write `[1](id=1)` as in [2](id=2).",
            "Write `[1](id=1)` as in [1].\n\n- [1] https://x.org/2",
        ),
        (("id",), "Only code: `[1](id=1)`", "Only code: `[1](id=1)`"),
        (("source",), "~~~\n【1】\n~~~\n【3】", "~~~\n【1】\n~~~\n[1]\n\n- [1] https://x.org/3"),
    ],
)
def test_the_rewriter_leaves_code_as_it_is_and_numbers_the_prose(
    markers: tuple[str, ...], answer: str, expected: str
) -> None:
    for pieces in ([answer], list(answer)):
        rewriter = ReferenceRewriter(_docs(3), TextReferenceStyle(), markers=markers)
        out = "".join(rewriter.feed(p) for p in pieces) + rewriter.finish()
        assert out == expected
        assert [r.number for r in rewriter.references] == list(range(1, out.count("- [") + 1))


def test_a_provider_citation_inside_a_span_keeps_the_span_text_before_it() -> None:
    rewriter = ReferenceRewriter(_docs(2), TextReferenceStyle(), markers=("bracket",))
    assert rewriter.feed("Call `f(a[") == "Call `f(a"
    assert rewriter.cite(_docs(2)[1]) == "[[1]"
    assert rewriter.feed("0])` [1]") == "0])`"  # the blank waits for what follows
    assert rewriter.finish() == " [2]\n\n- [1] https://x.org/2\n- [2] https://x.org/1"


def test_the_sentence_tracker_reads_no_citation_in_code() -> None:
    sentences = split_cited_sentences("Use `[1](id=1)` for lists [2](id=2). Then stop.")
    assert [(s.text, s.doc_ids) for s in sentences] == [
        ("Use `[1](id=1)` for lists.", (2,)),
        ("Then stop.", ()),
    ]


def test_a_streamed_answer_with_code_cites_only_its_prose() -> None:
    answer = "In Python:\n```python\nfirst = items[1]\n```\nIndexing starts at 0 [2][1]."
    model = GenericFakeChatModel(messages=iter([AIMessage(answer)] * 2))
    chain = manage_references(
        RunnableLambda(lambda x: x["question"]) | model,
        style=TextReferenceStyle(),
        markers=("bracket",),
    )
    inputs = {"documents": _docs(2), "question": "How do I index a list?"}
    streamed = "".join(chunk.content for chunk in chain.stream(inputs))
    expected = (
        "In Python:\n```python\nfirst = items[1]\n```\nIndexing starts at 0 [1][2]."
        "\n\n- [1] https://x.org/2\n- [2] https://x.org/1"
    )
    assert streamed == expected
    assert chain.invoke(inputs).content == expected


# ------------------------------------------------------------------ against CommonMark

#: Lines of an answer. ``{}`` takes a marker of its own, ``[k](id=k)`` with k unique. Left out
#: are the documented differences: indented code blocks, block quotes, backslash escapes, a
#: span going on past a line's end, and a backtick in a backtick fence's info string.
LINES = [
    "```",
    "````",
    "~~~",
    "~~~~",
    "```py",
    "~~~ text `x`",
    "  ```",
    "```  ",
    "",
    "Prose {}.",
    "A `span {}` then {}.",
    "Double ``a ` {}`` and {}.",
    "Two `a` `{}` spans",
    "Tildes ~~~ mid-line {}",
    "~~~ info {}",
    "~~~ ~",
    "  indented prose {}",
]


def _answer(kinds: list[int]) -> tuple[str, set[int]]:
    lines, k = [], 0
    for kind in kinds:
        line = LINES[kind]
        while "{}" in line:
            k += 1
            line = line.replace("{}", f"[{k}](id={k})", 1)
        lines.append(line)
    return "\n".join(lines), set(range(1, k + 1))


def _code_markers(text: str) -> set[int]:
    """The marker ids CommonMark (markdown-it-py) shows inside code (a fence's info too)."""
    from markdown_it import MarkdownIt

    code = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type in ("fence", "code_block"):
            code += (token.info, token.content)
        for child in token.children or ():
            if child.type == "code_inline":
                code.append(child.content)
    return {int(k) for content in code for k in re.findall(r"\[(\d+)\]\(id=\1\)", content)}


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, len(LINES) - 1), max_size=14))
def test_markers_in_code_are_those_commonmark_shows_as_code(kinds: list[int]) -> None:
    text, markers = _answer(kinds)
    cited = {e.doc_id for e in parse([text]) if isinstance(e, Citation)}
    assert cited == markers - _code_markers(text)
    assert {e.doc_id for e in parse(list(text)) if isinstance(e, Citation)} == cited
