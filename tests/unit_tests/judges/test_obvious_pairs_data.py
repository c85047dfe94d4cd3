"""The labelled obvious pairs (``data/obvious_pairs.jsonl``) are well formed.

The set measures the offline judge on the obvious cases of issue 34
(``benchmarks/eval_obvious_pairs.py``): each pair has a kind, a gold label, a split and its
source, ids are unique, and every kind has pairs of both splits.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

DATA = Path(__file__).parent / "data" / "obvious_pairs.jsonl"


def test_the_obvious_pairs_are_well_formed() -> None:
    pairs = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    assert len(pairs) >= 150
    assert len({p["id"] for p in pairs}) == len(pairs)
    for pair in pairs:
        assert set(pair) == {"id", "kind", "statement", "passage", "label", "split", "source"}
        assert pair["kind"] == pair["id"].rsplit("-", 1)[0], pair["id"]  # ids name their kind
        assert pair["label"] in {"entails", "contradicts", "unknown"}, pair["id"]
        assert pair["split"] in {"dev", "heldout"}, pair["id"]
        assert all(pair[key].strip() for key in ("statement", "passage", "source")), pair["id"]
    kinds = {p["kind"] for p in pairs}
    assert len(kinds) >= 11  # swaps, comparatives, years... (benchmarks/eval_obvious_pairs.py)
    splits = Counter((p["kind"], p["split"]) for p in pairs)
    assert all(splits[(kind, "dev")] and splits[(kind, "heldout")] for kind in kinds)
    labels = Counter(p["label"] for p in pairs)
    assert min(labels.values()) >= 30  # each label well represented
