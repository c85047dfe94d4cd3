"""Reciprocal-rank fusion, the BM25 tokeniser and the BM25 index (``retrieval``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_references.services.retrieval import (
    RRF_K,
    TOKENIZER,
    BM25Index,
    LexicalIndexError,
    check_retrieval,
    lexical_tokens,
    reciprocal_rank_fusion,
)

# ------------------------------------------------------------------ fusion


def test_fusion_scores_each_item_by_its_ranks() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "d", "a"]])
    assert fused == [
        ("a", 1 / 61 + 1 / 63),
        ("c", 1 / 63 + 1 / 61),
        ("b", 1 / 62),
        ("d", 1 / 62),
    ]
    assert RRF_K == 60


def test_fusion_ties_follow_the_rank_by_rank_reading() -> None:
    # a (rank 1 of the first list) and c (rank 1 of the second) tie: a is met first;
    # b (rank 2, first list) and d (rank 2, second list) tie: b first
    assert [item for item, _ in reciprocal_rank_fusion([["a", "b"], ["c", "d"]])] == [
        "a",
        "c",
        "b",
        "d",
    ]
    assert [item for item, _ in reciprocal_rank_fusion([["c", "d"], ["a", "b"]])] == [
        "c",
        "a",
        "d",
        "b",
    ]


def test_fusion_with_a_small_k_rewards_the_top_ranks() -> None:
    fused = reciprocal_rank_fusion([["x", "y", "z"], ["z", "y", "x"], ["y"]], k=1)
    assert fused == [
        ("y", 1 / 3 + 1 / 3 + 1 / 2),
        ("x", 1 / 2 + 1 / 4),
        ("z", 1 / 4 + 1 / 2),
    ]


def test_fusion_of_one_ranking_keeps_its_order_and_drops_repeats() -> None:
    fused = reciprocal_rank_fusion([[3, 1, 3, 2]], k=10)
    assert fused == [(3, 1 / 11), (1, 1 / 12), (2, 1 / 14)]


def test_fusion_of_nothing_is_empty_and_k_must_be_positive() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ValueError, match="k must be positive"):
        reciprocal_rank_fusion([["a"]], k=0)


def test_check_retrieval() -> None:
    assert [check_retrieval(m) for m in ("dense", "bm25", "hybrid")] == ["dense", "bm25", "hybrid"]
    with pytest.raises(ValueError, match="retrieval must be one of dense, bm25, hybrid"):
        check_retrieval("sparse")


# ------------------------------------------------------------------ tokens


def test_tokens_are_casefolded_words_without_stop_words() -> None:
    assert lexical_tokens("The Ice-sheets are MELTING, aren't they? CO2 at 2 °C") == [
        "ice",
        "sheets",
        "melting",
        "aren",
        "co2",
    ]


# ------------------------------------------------------------------ BM25

TEXTS = {
    "cat": "The cat sat on the mat.",
    "dog": "A dog sat on a log.",
    "both": "Cats and dogs are pets; a cat is not a dog.",
    "none": "Sea ice declined.",
}


def test_bm25_ranks_by_score_and_leaves_out_zero_scores() -> None:
    index = BM25Index.build(list(TEXTS), TEXTS.values())
    top = index.top("cat sat", 10)
    assert [i for i, _ in top] == ["cat", "dog", "both"]
    assert top[0][1] > top[1][1] > top[2][1] > 0
    assert [i for i, _ in index.top("cat sat", 1)] == ["cat"]
    assert index.top("zebra", 5) == []
    assert index.top("the of", 5) == []  # stop words only
    assert len(index) == 4


def test_bm25_equal_scores_keep_index_order() -> None:
    index = BM25Index.build(["p", "q", "r"], ["melting ice", "melting ice", "melting ice"])
    assert [i for i, _ in index.top("ice", 2)] == ["p", "q"]
    assert [i for i, _ in index.top("ice", 3)] == ["p", "q", "r"]


def test_bm25_saved_and_loaded_ranks_the_same(tmp_path: Path) -> None:
    index = BM25Index.build(list(TEXTS), TEXTS.values())
    index.save(tmp_path / "bm25")
    meta = json.loads((tmp_path / "bm25" / "lr_bm25.json").read_text())
    assert meta == {"tokenizer": TOKENIZER, "entries": 4}
    for mmap in (False, True):
        loaded = BM25Index.load(tmp_path / "bm25", mmap=mmap)
        assert loaded.ids == index.ids
        assert loaded.top("cat sat dog", 10) == index.top("cat sat dog", 10)


def test_an_empty_bm25_index_saves_and_finds_nothing(tmp_path: Path) -> None:
    index = BM25Index.build([], [])
    index.save(tmp_path / "empty")
    assert BM25Index.load(tmp_path / "empty").top("cat", 3) == []


def test_bm25_load_refuses_a_missing_or_foreign_index(tmp_path: Path) -> None:
    with pytest.raises(LexicalIndexError, match="no complete BM25 index"):
        BM25Index.load(tmp_path / "nothing")
    BM25Index.build(["a"], ["cat"]).save(tmp_path / "old")
    (tmp_path / "old" / "lr_bm25.json").write_text(json.dumps({"tokenizer": "x", "entries": 1}))
    with pytest.raises(LexicalIndexError, match="made with tokenizer 'x'"):
        BM25Index.load(tmp_path / "old")


def test_bm25_build_needs_one_id_per_text() -> None:
    with pytest.raises(ValueError, match="2 ids for 1 texts"):
        BM25Index.build(["a", "b"], ["cat"])
