"""Which message contents count as text when ``native="auto"`` decides a run has no adapter."""

from __future__ import annotations

from typing import Any

import pytest

from langchain_references.native.stream import _has_text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", False),
        ("a", True),
        ([], False),
        ([""], False),
        (["a"], True),
        ([{"type": "text", "text": "a"}], True),
        ([{"type": "output_text", "text": "a"}], True),
        ([{"type": "text", "text": ""}], False),
        ([{"type": "text"}], False),
        ([{"type": "image", "text": "a"}], False),
        ([{"text": "a"}], False),
        ([{"type": "tool_use", "id": "t1"}, {"type": "text", "text": "b"}], True),
        ([{"type": "tool_use", "id": "t1"}, ""], False),
    ],
)
def test_has_text(content: str | list[Any], expected: bool) -> None:
    assert _has_text(content) is expected
