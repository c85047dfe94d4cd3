"""Ranking: the entries of one granularity that best match each query, in a retrieval mode.

A search ranks the entries of one granularity in the index's
:data:`~langchain_references.services.retrieval.Retrieval` mode: ``dense`` (the cosine), ``bm25``
(:class:`~langchain_references.services.retrieval.BM25Index`, one per granularity) or ``hybrid``
(the
default: the first :data:`FUSION_DEPTH` of each, fused by
:func:`~langchain_references.services.retrieval.reciprocal_rank_fusion`); :func:`depth` decides how
deep each ranking goes, once. The dense ranking (:func:`nearest`) asks Chroma for the nearest
entries of *both* granularities, as many as needed to hold the ``k`` nearest of the wanted one
(from the share of each granularity), rather than a query filtered on the granularity:
Chroma's filtered query scans the filter's matches (about 80 times slower at 100k entries); a
filtered query is the fallback when the unfiltered ones come back short.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from langchain_references.server.index.records import GRANULARITIES, Granularity, granularity_of
from langchain_references.services.retrieval import Retrieval, reciprocal_rank_fusion

__all__ = ["FUSION_DEPTH", "Nearest", "check_query", "depth", "fuse", "nearest"]

#: Hybrid search fuses the first this-many entries of the dense and of the BM25 ranking.
FUSION_DEPTH: Final = 20
# The unfiltered dense query asks for this many more entries than the share of the wanted
# granularity predicts (and at least 10 more), doubling while it comes back short, up to
# _OVERSAMPLE_CAP entries; then a filtered query answers.
_OVERSAMPLE: Final = 1.25
_OVERSAMPLE_CAP: Final = 2048

#: Each query's nearest entries, nearest first: ``(entry id, cosine distance)``.
Nearest: TypeAlias = list[list[tuple[str, float]]]


def check_query(granularity: str, k: int) -> None:
    """Refuse a granularity that is not one, or a ``k`` that is not a positive integer.

    Args:
        granularity: The granularity asked for.
        k: How many hits asked for.

    Raises:
        ValueError: If either is invalid.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def depth(retrieval: Retrieval, k: int) -> int:
    """How deep the rankings of a search go: ``k``, or at least :data:`FUSION_DEPTH` (hybrid).

    Decided once for both rankings: a hybrid search fuses the first :data:`FUSION_DEPTH` (or
    ``k``, if more) of each.

    Args:
        retrieval: The mode.
        k: How many hits the search returns.

    Returns:
        The depth of the dense and of the BM25 ranking.
    """
    return max(k, FUSION_DEPTH) if retrieval == "hybrid" else k


def nearest(
    query: Callable[[Sequence[Sequence[float]], int, dict[str, Any] | None], Nearest],
    sizes: Mapping[Granularity, int],
    vectors: Sequence[Sequence[float]],
    granularity: Granularity,
    n: int,
) -> Nearest:
    """The ``n`` nearest entries of ``granularity`` for each vector, nearest first.

    Unfiltered queries, oversampled by the granularity's share and doubled while short;
    a filtered query for the vectors still short at :data:`_OVERSAMPLE_CAP`.

    Args:
        query: Chroma's query: ``(vectors, n, where)`` to each vector's ``n`` nearest entries.
        sizes: How many entries of each granularity the generation holds.
        vectors: The queries' vectors.
        granularity: The granularity wanted.
        n: How many entries per vector.

    Returns:
        Each vector's nearest entries of ``granularity``.
    """
    total, wanted = sum(sizes.values()), sizes[granularity]
    n = min(n, wanted)
    if n == 0:
        return [[] for _ in vectors]
    ask = min(total, max(n + 10, math.ceil(n * total / wanted * _OVERSAMPLE)))
    found: dict[int, list[tuple[str, float]]] = {}
    todo = list(range(len(vectors)))
    while todo and ask <= max(_OVERSAMPLE_CAP, n):
        nearest_per_query = query([vectors[i] for i in todo], ask, None)
        short = []
        for i, near in zip(todo, nearest_per_query, strict=True):
            mine = [pair for pair in near if granularity_of(pair[0]) == granularity]
            if len(mine) >= n or ask >= total:
                found[i] = mine[:n]
            else:
                short.append(i)
        todo, ask = short, min(total, ask * 2)
    if todo:
        filtered = query([vectors[i] for i in todo], n, {"granularity": granularity})
        found.update(zip(todo, filtered, strict=True))
    return [found[i] for i in range(len(vectors))]


def fuse(
    retrieval: Retrieval, dense: Nearest, lexical: Sequence[list[str]] | None, k: int
) -> list[list[str]]:
    """Each query's ranked entry ids in the mode: the dense ones, the BM25 ones, or both fused.

    Args:
        retrieval: The mode.
        dense: Each query's dense ranking (empty lists in ``bm25`` mode).
        lexical: Each query's BM25 ranking (``None`` in ``dense`` mode).
        k: How many hits a query returns.

    Returns:
        Each query's entry ids, best first.
    """
    if retrieval == "dense" or lexical is None:
        return [[entry_id for entry_id, _ in near] for near in dense]
    if retrieval == "bm25":
        return list(lexical)
    return [
        [e for e, _ in reciprocal_rank_fusion([[e for e, _ in d], b])][:k]
        for d, b in zip(dense, lexical, strict=True)
    ]
