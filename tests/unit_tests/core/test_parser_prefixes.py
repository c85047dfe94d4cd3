"""The held-back prefix grammar of the default dialect, checked against an independent oracle.

``_prefix_pattern()`` builds the regex that says whether text at the end of a fragment could
still grow into ``[LABEL](id=DOC)``; the module evaluates it once at import, so these tests
call the builder itself.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_references.core._parser import CITATION_RE, _prefix_pattern

_DIGITS = re.compile(r"[0-9]{1,9}")


def is_proper_prefix(text: str) -> bool:
    """Whether ``text`` is a proper prefix of a ``[LABEL](id=DOC)`` citation, by hand."""
    if not text.startswith("["):
        return False
    rest = text[1:]
    label = _DIGITS.match(rest)
    if label:
        rest = rest[label.end() :]
    elif rest.startswith("NUMBER"):
        rest = rest[len("NUMBER") :]
    else:
        return "NUMBER".startswith(rest)
    if "](id=".startswith(rest):
        return True
    if not rest.startswith("](id="):
        return False
    rest = rest[len("](id=") :]
    return rest == "" or _DIGITS.fullmatch(rest) is not None


@pytest.mark.parametrize(
    "citation", ["[1](id=2)", "[123456789](id=987654321)", "[NUMBER](id=7)", "[04](id=10)"]
)
def test_every_proper_prefix_of_a_citation_is_held_back(citation: str) -> None:
    pattern = _prefix_pattern()
    assert CITATION_RE.fullmatch(citation)
    for end in range(1, len(citation)):
        assert pattern.fullmatch(citation[:end]), citation[:end]
    assert not pattern.fullmatch(citation)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "[a",
        "[1a",
        "[1]",
        "[1](",
        "[1](i",
        "[1](id",
        "[1](id=",
        "[1](id=9",
        "[NUMBER]",
        "[NUM",
        "[N",
    ],
)
def test_prefixes_named_by_hand(text: str) -> None:
    assert (_prefix_pattern().fullmatch(text) is not None) is is_proper_prefix(text)


@pytest.mark.parametrize(
    "text",
    [
        "[1234567890",
        "[1](id=1234567890",
        "[1]x",
        "[1](x",
        "[1](id=x",
        "[NUMBEr",
        "[n",
        "[]",
        "[1](id=1)",
    ],
)
def test_what_cannot_become_a_citation_is_not_a_prefix(text: str) -> None:
    assert _prefix_pattern().fullmatch(text) is None
    assert not is_proper_prefix(text)


@given(st.text(alphabet="[]()id=NUMBER0123456789x", max_size=24))
def test_the_pattern_agrees_with_the_oracle(text: str) -> None:
    assert (_prefix_pattern().fullmatch(text) is not None) is is_proper_prefix(text)


@given(
    st.one_of(st.from_regex(r"[0-9]{1,9}", fullmatch=True), st.just("NUMBER")),
    st.from_regex(r"[0-9]{1,9}", fullmatch=True),
)
def test_generated_citations_have_every_prefix_held_back(label: str, doc: str) -> None:
    citation = f"[{label}](id={doc})"
    pattern = _prefix_pattern()
    assert all(pattern.fullmatch(citation[:end]) for end in range(1, len(citation)))
