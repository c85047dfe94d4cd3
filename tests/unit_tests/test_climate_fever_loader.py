from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from climate_fever import (
    CLAIM_LABELS,
    PAIR_LABELS,
    ConfusionMatrix,
    GoldLabelJudge,
    evaluate,
    load_climate_fever,
    split_claims,
)
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig

from langchain_references.factcheck.verdict import WeightedVoteAggregator
from langchain_references.judges import Judge, Judgement, Label

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "climate-fever-dev.jsonl"


def claim(cid: str, label: str, evidence_labels: list[str]) -> dict[str, Any]:
    return {
        "claim_id": cid,
        "claim": f"claim {cid}",
        "claim_label": label,
        "evidences": [
            {
                "evidence_id": f"{cid}:{i}",
                "evidence_label": ev,
                "article": "A",
                "evidence": f"evidence {cid} {i}",
                "entropy": 0.0,
                "votes": [ev, None],
            }
            for i, ev in enumerate(evidence_labels)
        ],
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    return path


ROWS = [
    claim("1", "SUPPORTS", ["SUPPORTS", "NOT_ENOUGH_INFO"]),
    claim("2", "REFUTES", ["NOT_ENOUGH_INFO", "REFUTES"]),
    claim("3", "DISPUTED", ["SUPPORTS", "REFUTES"]),
    claim("4", "NOT_ENOUGH_INFO", ["NOT_ENOUGH_INFO", "NOT_ENOUGH_INFO"]),
    claim("5", "SUPPORTS", ["SUPPORTS", "SUPPORTS"]),
]


def test_confusion_matrix_metrics_by_hand() -> None:
    gold = ["a", "a", "a", "b", "b", "c"]
    pred = ["a", "b", "a", "b", "c", "c"]
    cm = ConfusionMatrix.from_pairs(gold, pred, ["a", "b", "c"])
    assert cm.counts == ((2, 1, 0), (0, 1, 1), (0, 0, 1))
    assert cm.total == 6
    assert cm.accuracy == pytest.approx(4 / 6)
    assert cm.precision("a") == 1.0
    assert cm.recall("a") == pytest.approx(2 / 3)
    assert cm.f1("a") == pytest.approx(0.8)
    assert cm.f1("b") == pytest.approx(0.5)
    assert cm.f1("c") == pytest.approx(2 / 3)
    assert cm.macro_f1 == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    table = cm.to_markdown()
    assert "| a | 2 | 1 | 0 | 0.667 | 0.800 |" in table
    assert "| precision | 1.000 | 0.500 | 0.500 | | |" in table


def test_confusion_matrix_ignores_absent_classes_in_macro_f1() -> None:
    cm = ConfusionMatrix.from_pairs(["a", "a"], ["a", "a"], ["a", "b"])
    assert cm.macro_f1 == 1.0
    assert ConfusionMatrix.from_pairs([], [], ["a"]).accuracy == 0.0


def test_confusion_matrix_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="not in"):
        ConfusionMatrix.from_pairs(["a"], ["z"], ["a"])
    with pytest.raises(ValueError, match="2 gold labels but 1 predictions"):
        ConfusionMatrix.from_pairs(["a", "a"], ["a"], ["a"])
    with pytest.raises(ValueError, match="duplicate"):
        ConfusionMatrix.from_pairs([], [], ["a", "a"])


labels = st.sampled_from(["x", "y", "z"])


@given(st.lists(st.tuples(labels, labels), max_size=40))
def test_confusion_matrix_invariants(pairs: list[tuple[str, str]]) -> None:
    gold = [g for g, _ in pairs]
    pred = [p for _, p in pairs]
    cm = ConfusionMatrix.from_pairs(gold, pred, ["x", "y", "z"])
    assert cm.total == len(pairs)
    assert cm.accuracy == (sum(g == p for g, p in pairs) / len(pairs) if pairs else 0.0)
    assert 0.0 <= cm.macro_f1 <= 1.0
    perfect = ConfusionMatrix.from_pairs(gold, gold, ["x", "y", "z"])
    assert perfect.accuracy == (1.0 if pairs else 0.0)
    assert perfect.macro_f1 == (1.0 if pairs else 0.0)


def test_load_and_split(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cf.jsonl", ROWS)
    claims = load_climate_fever(path)
    assert [c.claim_id for c in claims] == ["1", "2", "3", "4", "5"]
    assert claims[2].evidences[1].evidence_label == "REFUTES"
    assert [c.claim_id for c in load_climate_fever(path, limit=2)] == ["1", "2"]
    assert [c.claim_id for c in split_claims(claims, "first")] == ["1", "2", "3"]
    assert [c.claim_id for c in split_claims(claims, "second")] == ["4", "5"]
    assert len(split_claims(claims, "all")) == 5
    with pytest.raises(ValueError, match="split"):
        split_claims(claims, "third")  # type: ignore[arg-type]


def test_load_reports_the_bad_line(tmp_path: Path) -> None:
    bad = dict(ROWS[0], claim_label="TRUE")
    path = write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], bad])
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        load_climate_fever(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match=":1"):
        load_climate_fever(path)


def test_gold_judge_with_presence_rule_recovers_claim_labels(tmp_path: Path) -> None:
    claims = load_climate_fever(write_jsonl(tmp_path / "cf.jsonl", ROWS))
    report = evaluate(
        GoldLabelJudge(claims), claims, WeightedVoteAggregator(disputed_threshold=0.5)
    )
    assert report.pairs.accuracy == 1.0
    assert report.claims.accuracy == 1.0
    assert report.failed_judgements == 0
    assert report.pairs.labels == PAIR_LABELS
    # an oracle, and named as one wherever its verdicts go
    assert (GoldLabelJudge(claims).info().kind, GoldLabelJudge(claims).info().model) == (
        "gold",
        None,
    )
    assert report.claims.labels == CLAIM_LABELS
    # Without a disputed verdict the disputed claim is mis-labelled; reuse the judgements.
    again = evaluate(
        GoldLabelJudge([]), claims, WeightedVoteAggregator(), judgements=report.judgements
    )
    assert again.claims.accuracy == pytest.approx(4 / 5)
    assert again.claims.counts[CLAIM_LABELS.index("DISPUTED")][0] == 1  # predicted SUPPORTS
    with pytest.raises(ValueError, match="do not match"):
        evaluate(GoldLabelJudge([]), claims, WeightedVoteAggregator(), judgements=[])


class AlwaysJudge(Judge):
    def __init__(self, label: Label, fail_on: str = "") -> None:
        self.label = label
        self.fail_on = fail_on

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        if self.fail_on and passage.endswith(self.fail_on):
            raise TimeoutError("slow")
        return Judgement(label=self.label, confidence=1.0)


def test_evaluate_counts_failures_as_unknown(tmp_path: Path) -> None:
    claims = load_climate_fever(write_jsonl(tmp_path / "cf.jsonl", ROWS))
    report = evaluate(AlwaysJudge(Label.ENTAILS, fail_on=" 1"), claims, WeightedVoteAggregator())
    assert report.failed_judgements == 5
    unknown = PAIR_LABELS.index("unknown")
    assert sum(row[unknown] for row in report.pairs.counts) == 5
    # Every claim has an entailing evidence at rank 0 -> all SUPPORTS.
    supports = CLAIM_LABELS.index("SUPPORTS")
    assert [row[supports] for row in report.claims.counts] == [2, 1, 1, 1]


@pytest.mark.skipif(not DATA.is_file(), reason="shared Climate-FEVER data not found")
def test_real_dev_file_loads_with_documented_counts() -> None:
    claims = load_climate_fever(DATA)
    assert len(claims) == 768
    assert sum(len(c.evidences) for c in claims) == 3840
    report = evaluate(
        GoldLabelJudge(claims), claims, WeightedVoteAggregator(disputed_threshold=0.5)
    )
    assert report.claims.accuracy == 1.0
    diluted = evaluate(
        GoldLabelJudge(claims),
        claims,
        WeightedVoteAggregator(count_unknown=True, disputed_threshold=0.5),
        judgements=report.judgements,
    )
    assert diluted.claims.accuracy < 0.9
