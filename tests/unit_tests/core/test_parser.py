from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.core._parser import MAX_CITATION_LENGTH, Citation, CitationParser, Event


def parse(pieces: list[str]) -> list[Event]:
    parser = CitationParser()
    events: list[Event] = []
    for piece in pieces:
        events.extend(parser.feed(piece))
        assert len(parser.pending) <= MAX_CITATION_LENGTH
    events.extend(parser.close())
    return events


def normalize(events: list[Event]) -> list[Event]:
    """Merge adjacent text events (fragmentation of plain text is not meaningful)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, str) and out and isinstance(out[-1], str):
            out[-1] = out[-1] + event
        elif event != "":
            out.append(event)
    return out


def raw(events: list[Event]) -> str:
    return "".join(e if isinstance(e, str) else e.raw for e in events)


def citations(events: list[Event]) -> list[Citation]:
    return [e for e in events if isinstance(e, Citation)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1](id=55)", [Citation("1", 55, "[1](id=55)")]),
        ("[NUMBER](id=3)", [Citation("NUMBER", 3, "[NUMBER](id=3)")]),
        (
            "Seattle [1](id=55)[2](id=12).",
            ["Seattle ", Citation("1", 55, "[1](id=55)"), Citation("2", 12, "[2](id=12)"), "."],
        ),
        ("[[1](id=2)", ["[", Citation("1", 2, "[1](id=2)")]),
    ],
)
def test_citations_are_found(text: str, expected: list[Event]) -> None:
    assert normalize(parse([text])) == expected
    assert normalize(parse(list(text))) == expected


@pytest.mark.parametrize(
    "text",
    [
        "See [the official documentation here](https://x.org) now",
        "[1] alone",
        "[1](id=abc)",
        "[1](id=)",
        "[1](id=1, 2)",
        "[](id=1)",
        "[number](id=1)",
        "[1](ID=1)",
        "[1] (id=1)",
        "[1](id= 1)",
        "[١](id=1)",  # Arabic-Indic digit: not ASCII
        "[1](id=1234567890)",  # more digits than any real document list
        "  leading and trailing blanks  ",
        "unicode: café ☕ 東京 [x]",
        "ends mid citation [12](id=4",
        "ends with [",
        "[[[[",
    ],
)
def test_non_citations_pass_through_verbatim(text: str) -> None:
    for pieces in ([text], list(text)):
        events = parse(pieces)
        assert citations(events) == []
        assert "".join(e for e in events if isinstance(e, str)) == text


def test_plain_text_is_emitted_as_soon_as_it_arrives() -> None:
    parser = CitationParser()
    assert parser.feed("Hello ") == ["Hello "]
    assert parser.feed("[1](i") == []
    assert parser.pending == "[1](i"
    assert parser.feed("d=2) x") == [Citation("1", 2, "[1](id=2)"), " x"]
    assert parser.feed("[not a") == ["[not a"]
    assert parser.pending == ""


def test_close_flushes_a_partial_citation_verbatim() -> None:
    parser = CitationParser()
    assert parser.feed("x [NUMB") == ["x "]
    assert parser.close() == ["[NUMB"]
    assert parser.close() == []


def test_feed_rejects_non_text() -> None:
    with pytest.raises(TypeError, match=r"^CitationParser.feed\(\) takes str, not bytes$"):
        CitationParser().feed(b"[1](id=1)")  # type: ignore[arg-type]


alphabet = st.sampled_from(list("[]()id=NUMBER0123456789 ab\n.é"))
fragments = st.one_of(
    st.text(alphabet, max_size=12),
    st.sampled_from(["[1](id=2)", "[NUMBER](id=7)", "[3](id=", "](id=1)", "[x](y)", "[1]"]),
)
documents_text = st.lists(fragments, max_size=30).map("".join)


def split_texts(texts: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, list[str]]]:
    """A text drawn from ``texts``, and the same text cut anywhere into pieces."""

    @st.composite
    def split(draw: st.DrawFn) -> tuple[str, list[str]]:
        text = draw(texts)
        cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=len(text) + 1)))
        bounds = [0, *cuts, len(text)]
        return text, [text[a:b] for a, b in itertools.pairwise(bounds)]

    return split()


def splits() -> st.SearchStrategy[tuple[str, list[str]]]:
    return split_texts(documents_text)


@settings(max_examples=400, deadline=None)
@given(splits())
def test_split_invariance(case: tuple[str, list[str]]) -> None:
    text, pieces = case
    assert normalize(parse(pieces)) == normalize(parse([text]))
    assert normalize(parse(pieces)) == normalize(parse(list(text)))


@settings(max_examples=400, deadline=None)
@given(splits())
def test_no_character_lost(case: tuple[str, list[str]]) -> None:
    text, pieces = case
    assert raw(parse(pieces)) == text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_text_without_citations_is_unchanged(text: str) -> None:
    events = parse([text[i : i + 3] for i in range(0, len(text), 3)])
    if not citations(events):
        assert "".join(e for e in events if isinstance(e, str)) == text
