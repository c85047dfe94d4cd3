"""FactReasoner's file formats end to end: Google-search inputs, the results file, baselines.

Fixtures in ``data/`` come from IBM FactReasoner (Apache-2.0; see ``data/NOTICE.md``).
"""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from langchain_references.cli import main
from langchain_references.factuality import create_factuality_evaluator, load_inputs
from langchain_references.factuality.io import (
    FactualityFormatError,
    FactualityInput,
    label_string,
    parse_result,
    result_to_dict,
)
from langchain_references.factuality.metrics import (
    GoldComparison,
    constant_baseline,
    macro_f1,
    majority_baseline,
    score_marginals,
)
from langchain_references.factuality.model import Context
from langchain_references.factuality.retrieval import InputContexts, context_premise
from langchain_references.judges import Judge, Judgement, Label

DATA = Path(__file__).parent / "data"
GOOGLE = DATA / "fr_google_apollo11.jsonl"
README_EXAMPLE = DATA / "fr_readme_output_example.txt"

#: FactReasoner's result fields, in the order its ``score()`` and runner write them.
FR_FIELDS = (
    "factuality_score_per_atom",
    "factuality_score",
    "recall_k",
    "f1_k",
    "num_atoms",
    "num_contexts",
    "num_true_atoms",
    "num_false_atoms",
    "num_uniform_atoms",
    "entropy",
    "norm_entropy",
    "avg_entropy",
    "avg_norm_entropy",
    "avg_prob",
    "avg_logprob",
    "avg_explogprob",
    "labels",
    "gold_factuality_score",
    "gold_true_atoms",
    "true_positive",
    "true_negative",
    "false_positive",
    "false_negative",
    "predictions",
    "references",
    "avg_brier",
    "input",
    "marginals",
    "topic",
    "query",
    "response",
    "elapsed_time",
    "model_name",
)


@pytest.fixture(scope="module")
def google() -> FactualityInput:
    (record,) = load_inputs(GOOGLE).records
    return record


class RecordingJudge(Judge):
    """Entails when the passage mentions the statement's key phrase; records every passage."""

    def __init__(self, record: FactualityInput) -> None:
        key_phrases = {"a0": "July 16", "a3": "21.5 k", "a4": "two separate moonwalks"}
        self.keys = {a.text: key_phrases[a.id] for a in record.atoms}
        self.passages: list[str] = []

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        self.passages.append(passage)
        if self.keys.get(statement, "\0") in passage:
            return Judgement(label=Label.ENTAILS, confidence=0.9)
        return Judgement(label=Label.UNKNOWN, confidence=0.5)


# --- contexts: text, else snippet, else title ------------------------------------------------


def test_fixture_has_the_google_search_shape(google: FactualityInput) -> None:
    assert len(google.atoms) == 3
    assert all(c.text == "" for c in google.contexts)
    assert all(c.title and c.link for c in google.contexts)
    assert [c.id for c in google.contexts if not c.snippet] == ["c_a3_4"]


def test_context_premise_follows_factreasoner() -> None:
    both = Context("c0", text="Body.", snippet="Snip.", title="T")
    assert context_premise(both) == "Snippet/Summary of Text:\n\nSnip.\n\nText:\n\nBody."
    assert context_premise(Context("c1", text="Body.", title="T")) == "Body."
    assert context_premise(Context("c2", text=" ", snippet="Snip.", title="T")) == "Snip."
    assert context_premise(Context("c3", text="", snippet="", title=" Title ")) == "Title"
    assert context_premise(Context("c4")) == ""


def test_input_contexts_use_the_snippet_when_the_text_is_empty(google: FactualityInput) -> None:
    retrieved = InputContexts().retrieve(google.atoms, google.contexts)
    by_id = {c.id: c for c in retrieved.contexts}
    original = {c.id: c for c in google.contexts}
    for cid, context in by_id.items():
        expected = original[cid].snippet or original[cid].title
        assert context.text == expected
        assert (context.title, context.snippet, context.link) == (
            original[cid].title,
            original[cid].snippet,
            original[cid].link,
        )
    assert by_id["c_a3_4"].text == "During the Apollo missions, astronauts brought back samples ..."
    trimmed = InputContexts(top_k=1).retrieve(google.atoms, google.contexts)
    assert [c.text for c in trimmed.contexts] == [
        original[a.contexts[0]].snippet for a in google.atoms
    ]


def test_the_judge_sees_the_snippets_and_the_scores_follow(google: FactualityInput) -> None:
    judge = RecordingJudge(google)
    result = create_factuality_evaluator(judge=judge, version=1).invoke(google)
    snippets = {c.snippet for c in google.contexts if c.snippet}
    assert all(any(s in p for p in judge.passages) for s in snippets)
    assert len(judge.passages) == 15
    scores = result.scores
    assert scores is not None
    assert scores.gold is not None
    # a0 and a3 are entailed by their snippets (July 16, 21.5 kg), a4 by none: all correct.
    assert scores.predictions == {"a0": "S", "a3": "S", "a4": "NS"}
    assert scores.factuality_score == pytest.approx(2 / 3)
    assert scores.gold.gold_factuality_score == pytest.approx(2 / 3)
    assert scores.gold.accuracy == 1.0


# --- the results file ------------------------------------------------------------------------


def readme_example() -> dict[str, Any]:
    """FactReasoner's README example as JSON: drop ``#`` comments and ``...`` elisions."""
    text = README_EXAMPLE.read_text(encoding="utf-8")
    text = re.sub(r"#[^\n]*", "", text)
    text = text.replace("[...]", "[]")
    text = re.sub(r",\s*\.\.\.", "", text)
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def test_readme_example_round_trips() -> None:
    example = readme_example()
    assert example["predictions"] == {"a0": "S", "a1": "NS"}
    scores = parse_result(example, location="README")
    assert scores.factuality_score == 0.75
    assert (scores.num_atoms, scores.num_contexts, scores.num_true_atoms) == (12, 48, 9)
    assert scores.predictions == {"a0": "S", "a1": "NS"}
    assert scores.probabilities == {"a0": 0.9}
    ours = json.loads(json.dumps(result_to_dict(scores, elapsed_time=45.2)))
    for key, value in example.items():
        assert key in ours, key
        if key == "predictions":  # FactReasoner's results files write the string form
            assert ours[key] == " a0: S a1: NS"
            assert ours["labels"] == value
        elif key == "marginals":  # P(false) is rebuilt as 1 - P(true)
            assert [m["variable"] for m in ours[key]] == [m["variable"] for m in value]
            for mine, theirs in zip(ours[key], value, strict=True):
                assert mine["probabilities"] == pytest.approx(theirs["probabilities"])
        elif key != "factuality_score_per_atom":
            assert type(ours[key]) is type(value), key
            assert ours[key] == value, key
    again = parse_result(ours)
    for name in ("factuality_score", "num_atoms", "num_true_atoms", "entropy", "avg_entropy"):
        assert getattr(again, name) == getattr(scores, name)
    assert again.predictions == scores.predictions
    assert again.probabilities == scores.probabilities


def test_our_output_has_every_factreasoner_field_in_order(google: FactualityInput) -> None:
    judge = RecordingJudge(google)
    result = create_factuality_evaluator(judge=judge, version=2).invoke(google)
    assert result.scores is not None
    data = result_to_dict(result.scores, google, model_name="judge-x", elapsed_time=1.5)
    assert tuple(data)[: len(FR_FIELDS)] == FR_FIELDS
    assert tuple(data)[len(FR_FIELDS) :] == ("k",)
    assert data["predictions"] == " a0: S a3: S a4: NS"
    assert data["references"] == " a0: S a3: S a4: NS"
    assert data["labels"] == {"a0": "S", "a3": "S", "a4": "NS"}
    assert data["input"] == data["query"] == google.input
    assert (data["topic"], data["response"]) == ("Apollo 11", google.output)
    assert (data["model_name"], data["elapsed_time"]) == ("judge-x", 1.5)
    assert isinstance(data["factuality_score_per_atom"], list)
    back = parse_result(json.loads(json.dumps(data, allow_nan=False)))
    assert back == result.scores
    full = result.to_dict()
    assert tuple(full)[: len(FR_FIELDS)] == FR_FIELDS


def test_unlabeled_record_writes_predictions_but_no_gold() -> None:
    scores = score_marginals({"a0": 0.9, "a1": 0.1})
    data = result_to_dict(scores)
    assert data["predictions"] == " a0: S a1: NS"
    assert "references" not in data
    assert "gold_factuality_score" not in data
    assert data["input"] is None
    assert data["model_name"] is None
    assert parse_result(json.loads(json.dumps(data))) == scores


def test_label_string_sorts_ids_as_factreasoner() -> None:
    labels = {f"a{i}": "S" if i % 2 else "NS" for i in range(12)}
    text = label_string(labels)
    assert text.startswith(" a0: NS a1: S a10: NS a11: S a2: NS")
    assert parse_result(
        {"marginals": [], "num_true_atoms": 0, "factuality_score": 0.0, "predictions": text}
    ).predictions == dict(sorted(labels.items()))


def test_parse_result_checks_label_strings() -> None:
    base = {
        "factuality_score": 1.0,
        "num_true_atoms": 1,
        "marginals": [{"variable": "a0", "probabilities": [0.2, 0.8]}],
    }
    with pytest.raises(FactualityFormatError, match="predictions"):
        parse_result(dict(base, predictions=" a0: maybe"))
    gold = dict(
        base,
        predictions=" a0: S a1: NS",
        gold_factuality_score=1.0,
        gold_true_atoms=1,
        true_positive=1,
        true_negative=0,
        false_positive=0,
        false_negative=0,
        references=" a0: S a1: None",  # FactReasoner writes None for an unlabelled atom
    )
    scores = parse_result(gold)
    assert scores.gold is not None
    assert scores.gold.references == {"a0": "S"}


def test_cli_output_is_factreasoner_results(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    out, err = io.StringIO(), io.StringIO()
    argv = ["factuality", "--input", str(GOOGLE), "--judge", "heuristic-lexical"]
    code = main([*argv, "--output", str(output)], out=out, err=err)
    assert code == 0, err.getvalue()
    (line,) = output.read_text(encoding="utf-8").splitlines()
    data = json.loads(line)
    assert tuple(data)[: len(FR_FIELDS)] == FR_FIELDS
    assert data["model_name"] == "heuristic-lexical"
    assert isinstance(data["elapsed_time"], float)
    assert data["elapsed_time"] > 0
    assert re.fullmatch(r"( a[034]: N?S){3}", data["predictions"])
    assert data["references"] == " a0: S a3: S a4: NS"
    assert data["inference"]["exact"] in (True, False)
    assert sum(data["inference"]["components"].values()) >= 1
    assert parse_result(data).num_atoms == 3


# --- baselines -----------------------------------------------------------------------------


def test_baselines_on_the_flaherty_labels() -> None:
    gold = ["S"] * 7 + ["NS"] * 19
    always_ns = constant_baseline(gold, "NS", labels=("S", "NS"))
    assert always_ns.accuracy == pytest.approx(19 / 26)  # 0.731
    assert always_ns.macro_f1 == pytest.approx((0 + 2 * 19 / (2 * 19 + 7)) / 2)
    assert majority_baseline(gold) == always_ns
    comparison = GoldComparison(
        gold_factuality_score=7 / 26,
        gold_true_atoms=7,
        true_positive=3,
        true_negative=17,
        false_positive=2,
        false_negative=4,
        avg_brier=0.2,
    )
    assert comparison.always_ns == always_ns
    assert comparison.majority == always_ns
    predicted = ["S"] * 3 + ["NS"] * 4 + ["NS"] * 17 + ["S"] * 2
    assert comparison.macro_f1 == pytest.approx(macro_f1(gold, predicted, labels=("S", "NS")))
    assert comparison.accuracy == pytest.approx(20 / 26)


def test_majority_baseline_picks_the_most_frequent_label() -> None:
    gold = ["S", "S", "NS"]
    assert majority_baseline(gold).label == "S"
    assert majority_baseline(gold).accuracy == pytest.approx(2 / 3)
    assert majority_baseline(["S", "NS"], labels=("NS", "S")).label == "NS"  # tie: first
    three = majority_baseline(["u", "u", "e", "c"], labels=("e", "c", "u"))
    assert (three.label, three.accuracy) == ("u", 0.5)
    assert three.macro_f1 == pytest.approx((2 * 2 / (2 * 2 + 2)) / 3)
    with pytest.raises(ValueError, match="at least one"):
        majority_baseline([])
    with pytest.raises(ValueError, match="predictions"):
        macro_f1(["S"], [])
    assert macro_f1([], []) == 0.0
    assert math.isclose(macro_f1(["S", "NS"], ["S", "NS"]), 1.0)
