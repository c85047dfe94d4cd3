from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from langchain_references.factuality import (
    Relation,
    build_fact_graph,
    infer_marginals,
    load_inputs,
    score_marginals,
)
from langchain_references.factuality.io import (
    FactualityFormatError,
    dump_jsonl,
    input_to_dict,
    parse_input,
    parse_result,
    result_to_dict,
)

RECORD = {
    "input": "Tell me a bio of X",
    "output": "X is a painter.",
    "topic": "X",
    "cat": 1,
    "atoms": [
        {
            "id": "a0",
            "text": "X is a painter.",
            "original": "X paints.",
            "label": "S",
            "contexts": ["c0"],
        },
        {"id": "a1", "text": "X was born in 1900.", "contexts": []},
    ],
    "contexts": [
        {
            "id": "c0",
            "title": "X",
            "text": "X is a painter.",
            "snippet": "painter",
            "link": "https://example.org/x",
        },
    ],
}


def test_reads_the_flaherty_example(shared_data: Path) -> None:
    loaded = load_inputs(shared_data / "factreasoner_flaherty_wikipedia.json")
    assert loaded.errors == []
    (record,) = loaded.records
    assert record.topic == "Lanny Flaherty"
    assert len(record.atoms) == 26
    assert len(record.contexts) == 53
    labels = [a.label for a in record.atoms]
    assert labels.count("S") == 7
    assert labels.count("NS") == 19
    assert record.extra == {"cat": ["very rare", "North America"]}
    assert record.atoms[0].contexts == ("c_a0_0", "c_a0_1", "c_a0_2")
    assert parse_input(input_to_dict(record)) == record


def test_flaherty_end_to_end_with_gold_derived_judgements(shared_data: Path) -> None:
    """Judgements that agree with the gold labels must give back the gold labels."""
    (record,) = load_inputs(shared_data / "factreasoner_flaherty_wikipedia.json").records
    relations = [
        Relation(cid, a.id, "entailment" if a.label == "S" else "contradiction", 0.9)
        for a in record.atoms
        for cid in a.contexts
    ]
    graph = build_fact_graph(record.atoms, record.contexts, relations, version="FR1")
    scores = score_marginals(
        infer_marginals(graph),
        graph.atom_ids,
        labels=record.labels,
        num_contexts=len(graph.context_ids),
    )
    no_evidence = {a.id for a in record.atoms if not a.contexts}
    gold = scores.gold
    assert gold is not None
    assert gold.true_positive + gold.true_negative == 26 - sum(
        1 for a in record.atoms if a.id in no_evidence and a.label == "S"
    )
    assert gold.false_positive == 0
    assert scores.num_uniform_atoms == len(no_evidence)
    result = result_to_dict(scores, record)
    assert result["num_atoms"] == 26
    assert result["num_contexts"] == 53
    ids = sorted(a.id for a in record.atoms)  # FactReasoner's order: a0 a1 a10 a11 ... a2
    labels = {a.id: a.label for a in record.atoms}
    assert result["references"] == "".join(f" {aid}: {labels[aid]}" for aid in ids)
    assert result["references"].startswith(" a0: S a1: S a10: S a11: S a12: NS")
    assert result["query"] == result["input"] == record.input
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize("layout", ["object", "pretty", "list", "jsonl"])
def test_accepts_object_list_and_jsonl(tmp_path: Path, layout: str) -> None:
    second = dict(RECORD, topic="Y")
    path = tmp_path / "data.json"
    if layout == "object":
        path.write_text(json.dumps(RECORD))
    elif layout == "pretty":
        path.write_text(json.dumps(RECORD, indent=2))
    elif layout == "list":
        path.write_text(json.dumps([RECORD, second], indent=1))
    else:
        with path.open("w", encoding="utf-8") as handle:
            dump_jsonl(handle, [RECORD])
        with path.open("a", encoding="utf-8") as handle:
            dump_jsonl(handle, [second])
    records = load_inputs(path).records
    assert [r.topic for r in records] == (["X"] if layout in ("object", "pretty") else ["X", "Y"])
    first = records[0]
    assert first.atoms[0].original == "X paints."
    assert first.atoms[1].original == "X was born in 1900."  # defaults to the text
    assert first.atoms[1].label is None
    assert first.contexts[0].link == "https://example.org/x"
    assert first.extra == {"cat": 1}


def test_lenient_loading_records_errors_and_keeps_going(tmp_path: Path) -> None:
    bad_ref = json.loads(json.dumps(RECORD))
    bad_ref["atoms"] = [dict(bad_ref["atoms"][0], contexts=["missing"])]
    path = tmp_path / "data.jsonl"
    path.write_text(
        "\n".join([json.dumps(RECORD), "{not json", json.dumps(bad_ref), json.dumps(RECORD)]) + "\n"
    )
    loaded = load_inputs(path, strict=False)
    assert len(loaded.records) == 2
    assert [e.location for e in loaded.errors] == [f"{path}:2", f"{path}:3"]
    assert "unknown context" in str(loaded.errors[1])
    with pytest.raises(FactualityFormatError, match=":2"):
        load_inputs(path)


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda r: r.pop("atoms"), "atoms", "atoms: required field is missing"),
        (lambda r: r.pop("output"), "output", "output: required field is missing"),
        (lambda r: r["atoms"][0].update(label="yes"), "atoms[0].label", "atoms[0].label: input"),
        (lambda r: r["atoms"][1].pop("text"), "atoms[1].text", "atoms[1].text: required"),
        (
            lambda r: r["atoms"][1].update(context=["c0"]),
            "atoms[1].context",
            "atoms[1].context: unknown field (did you mean 'contexts'?)",
        ),
        (
            lambda r: r["contexts"].append(dict(r["contexts"][0])),
            "contexts[1].id",
            "duplicate id 'c0'",
        ),
        (lambda r: r["atoms"].append(dict(r["atoms"][0])), "atoms[2].id", "duplicate atom id"),
        (
            lambda r: r["atoms"][1].update(contexts=["c0", "c9"]),
            "atoms[1].contexts[1]",
            "atoms[1].contexts[1]: refers to unknown context 'c9'",
        ),
        (lambda r: r["contexts"][0].update(title=3), "contexts[0].title", "must be a string"),
        (lambda r: r.update(topic=["X"]), "topic", "topic: must be a string"),
    ],
)
def test_parse_input_errors(mutate: object, field: str, message: str) -> None:
    record = json.loads(json.dumps(RECORD))
    mutate(record)  # type: ignore[operator]
    with pytest.raises(FactualityFormatError, match=re.escape(message)) as info:
        parse_input(record, location="data.jsonl:4")
    assert info.value.field == field
    assert info.value.location == "data.jsonl:4"
    assert str(info.value).startswith(f"data.jsonl:4: {field}: ")


def test_null_optional_fields_take_their_defaults() -> None:
    record = json.loads(json.dumps(RECORD))
    record["atoms"][0]["original"] = None
    record["contexts"][0].update(title=None, snippet=None, link=None)
    parsed = parse_input(record)
    assert parsed.atoms[0].original == parsed.atoms[0].text
    assert (parsed.contexts[0].title, parsed.contexts[0].link) == ("", "")


def test_load_inputs_reports_line_and_field(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(RECORD))
    bad["contexts"][0]["text"] = None
    deep = json.dumps(RECORD)[:-1] + ', "deep": ' + "[" * 50_000 + "]" * 50_000 + "}"
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join([json.dumps(RECORD), json.dumps(bad), deep]) + "\n")
    loaded = load_inputs(path, strict=False)
    assert len(loaded.records) == 1
    assert [(e.location, e.field) for e in loaded.errors] == [
        (f"{path}:2", "contexts[0].text"),
        (f"{path}:3", None),
    ]
    assert "nested deeper than" in str(loaded.errors[1])


def test_malformed_single_document(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "input": "x",\n  "atoms": [\n')
    with pytest.raises(FactualityFormatError, match="invalid JSON"):
        load_inputs(path, strict=False)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert load_inputs(empty).records == []


def test_result_round_trip() -> None:
    scores = score_marginals(
        {"a0": 0.8, "a1": 0.3, "a2": 0.5}, labels={"a0": "S", "a1": "S", "a2": None}, k=2
    )
    data = result_to_dict(scores)
    assert data["marginals"][0] == {"variable": "a0", "probabilities": [pytest.approx(0.2), 0.8]}
    assert data["factuality_score_per_atom"][1] == {"a1": {"score": 0.3, "support": "NS"}}
    assert data["predictions"] == " a0: S a1: NS a2: NS"
    assert data["labels"] == {"a0": "S", "a1": "NS", "a2": "NS"}
    assert data["references"] == " a0: S a1: S"  # a2 has no gold label
    assert data["true_positive"] == 1
    assert data["false_negative"] == 1
    assert parse_result(json.loads(json.dumps(data))) == scores


def test_parse_result_reads_older_factreasoner_outputs() -> None:
    old = {
        "factuality_score": 0.5,
        "num_atoms": 2,
        "num_contexts": 5,
        "num_true_atoms": 1,
        "num_false_atoms": 1,
        "num_uniform_atoms": 0,
        "entropy": 0.4,
        "avg_entropy": 0.2,
        "gold_factuality_score": 0.5,
        "gold_true_atoms": 1,
        "true_positive": 1,
        "true_negative": 1,
        "false_positive": 0,
        "false_negative": 0,
        "predictions": " a0: S a1: NS",
        "references": " a0: S a1: NS",
        "marginals": [
            {"variable": "a0", "probabilities": [0.1, 0.9]},
            {"variable": "a1", "probabilities": [0.8, 0.2]},
        ],
    }
    scores = parse_result(old)
    assert scores.predictions == {"a0": "S", "a1": "NS"}
    assert scores.probabilities == {"a0": 0.9, "a1": 0.2}
    assert scores.k == 1
    assert scores.recall_k == 1.0
    assert scores.gold is not None
    assert scores.gold.references == {"a0": "S", "a1": "NS"}
    with pytest.raises(FactualityFormatError, match="marginals"):
        parse_result(dict(old, marginals=[{"variable": "a0"}]))
    with pytest.raises(FactualityFormatError, match="num_true_atoms"):
        parse_result(dict(old, num_true_atoms="1"))
