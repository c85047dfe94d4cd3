"""Cosine similarity of embedding vectors (pure Python, exact summation)."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["cosine", "cosines", "top_cosines"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the cosine similarity of two vectors, clipped to [-1, 1] (0 for a zero vector).

    Raises:
        ValueError: If the vectors differ in length.
    """
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return max(-1.0, min(1.0, dot / norm)) if norm > 0 else 0.0


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """Return the cosine similarity of ``query`` with each of ``vectors``."""
    return [cosine(query, vector) for vector in vectors]


def top_cosines(
    query: Sequence[float], vectors: Sequence[Sequence[float]], k: int
) -> list[tuple[int, float]]:
    """Return the ``k`` vectors most similar to ``query``: ``(position, cosine)`` pairs.

    Most similar first; equal cosines (the same vector twice) in position order. The cosines
    are :func:`cosine`'s, exact, so equal vectors always tie.

    Raises:
        ValueError: If a vector's length differs from the query's.
    """
    similarities = cosines(query, vectors)
    order = sorted(range(len(vectors)), key=lambda i: (-similarities[i], i))
    return [(i, similarities[i]) for i in order[: max(0, k)]]
