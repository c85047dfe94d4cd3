"""The span-based adapters (Gemini, Cohere, v1) work in time linear in the answer.

Operations are counted, not timed: the characters the model-citation scan reads
(``CITATION_RE.finditer`` over the text) and the provider fields read (``field_of``). With
four times the citations (and four times the text), each count grows four times, not
sixteen: one pass over the text per answer, one read of each request document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from langchain_references.native import _spans, cohere, gemini, v1
from langchain_references.native._markers import coalesce
from langchain_references.native.base import NativeCitation, Piece


def _gemini(n: int) -> tuple[list[Piece], str]:
    sentence = "Zoë ran far. "
    size = len(sentence.encode())
    text = sentence * n
    metadata = {
        "grounding_chunks": [{"web": {"uri": f"https://a.org/{i}"}} for i in range(10)],
        "grounding_supports": [
            {
                "segment": {"start_index": i * size, "end_index": (i + 1) * size - 1},
                "grounding_chunk_indices": [i % 10],
            }
            for i in range(n)
        ],
    }
    adapter = gemini.GeminiAdapter()
    pieces = adapter.feed(AIMessage(text, response_metadata={"grounding_metadata": metadata}))
    return coalesce([*pieces, *adapter.finish()]), text


def _cohere(n: int) -> tuple[list[Piece], str]:
    sentence = "Cats nap a lot. "
    text = sentence * n
    documents = [{"id": f"doc-{i}", "data": {"text": "x"}} for i in range(n)]
    citations = [
        {
            "start": i * len(sentence),
            "end": (i + 1) * len(sentence) - 1,
            "text": sentence.strip(),
            "sources": [{"type": "document", "id": f"doc-{i}", "document": {"id": f"doc-{i}"}}],
        }
        for i in range(n)
    ]
    message = AIMessage(text, additional_kwargs={"citations": citations, "documents": documents})
    adapter = cohere.CohereAdapter()
    return coalesce([*adapter.feed(message), *adapter.finish()]), text


def _v1(n: int) -> tuple[list[Piece], str]:
    sentence = "Paris is big. "
    text = sentence * n
    annotations = [
        {
            "type": "citation",
            "url": f"https://a.org/{i % 10}",
            "start_index": i * len(sentence),
            "end_index": (i + 1) * len(sentence) - 1,
        }
        for i in range(n)
    ]
    message = AIMessage(
        content=[{"type": "text", "text": text, "annotations": annotations}],
        response_metadata={"output_version": "v1"},
    )
    adapter = v1.V1Adapter()
    return coalesce([*adapter.feed(message), *adapter.finish()]), text


class _CountingPattern:
    """``CITATION_RE`` that counts the characters its scans read."""

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.read = 0

    def finditer(self, text: str, *args: Any) -> Iterator[Any]:
        self.read += len(text)
        return self.pattern.finditer(text, *args)


def _counts(
    monkeypatch: pytest.MonkeyPatch, run: Callable[[int], tuple[list[Piece], str]], n: int
) -> tuple[int, int, int]:
    scans = _CountingPattern(_spans.CITATION_RE)
    reads = 0
    field_of = _spans.field_of

    def counting_field_of(obj: Any, name: str) -> Any:
        nonlocal reads
        reads += 1
        return field_of(obj, name)

    with monkeypatch.context() as patch:
        patch.setattr(_spans, "CITATION_RE", scans)
        for module in (_spans, gemini, cohere):
            patch.setattr(module, "field_of", counting_field_of)
        pieces, text = run(n)
    # Every citation is placed at the end of its sentence, in order.
    assert len(pieces) == 2 * n + 1
    assert "".join(p for p in pieces if isinstance(p, str)) == text
    assert all(isinstance(p, NativeCitation) for p in pieces[1::2])
    return scans.read, reads, len(text)


@pytest.mark.parametrize("run", [_gemini, _cohere, _v1], ids=["gemini", "cohere", "v1"])
def test_work_grows_linearly_with_the_citations(
    monkeypatch: pytest.MonkeyPatch, run: Callable[[int], tuple[list[Piece], str]]
) -> None:
    small_scan, small_reads, small_text = _counts(monkeypatch, run, 300)
    large_scan, large_reads, large_text = _counts(monkeypatch, run, 1_200)
    assert (small_scan, large_scan) == (small_text, large_text)  # one scan per answer
    assert large_reads <= 4 * small_reads  # a bounded number of fields per citation
