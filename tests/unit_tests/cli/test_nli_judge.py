"""``--judge nli:MODEL`` in every command that judges: the verdicts name the model; what fails.

Runs the tiny cross-encoders built in ``tests/unit_tests/_tiny_nli.py`` (offline, random fixed
weights): ``tiny-nli`` (the tokens decide) and ``tiny-nli-entails`` (entails every pair).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from langchain_references.cli import main
from tests.unit_tests._tiny_nli import (
    NAME,
    entailing_nli,
    reference_probabilities,
    tiny_nli,
)

__all__ = ["entailing_nli", "tiny_nli"]

NLI = {"kind": "nli", "model": NAME, "description": "a cross-encoder NLI model"}
JUDGE_LINE = f"Judge: nli ({NAME}) — a cross-encoder NLI model"
STATEMENT = "The Moon orbits the Earth."
SMALL = ("--max-results", "5", "--k", "5")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_factcheck_names_the_model_in_the_report(tiny_nli: Path) -> None:
    code, out, err = run(
        "factcheck", STATEMENT, "--search", "demo", *SMALL, "--style", "text",
        "--judge", f"nli:{tiny_nli}",
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[:3] == [
        f"Fact check: {STATEMENT}",
        "Verdict: NOT ENOUGH EVIDENCE (score +0.00 < 0.30)",
        JUDGE_LINE,
    ]
    assert f"judge: nli ({NAME}) — a cross-encoder NLI model\n" in err
    assert "HeuristicJudge" not in err  # no heuristic notice for a model


def test_factcheck_verdicts_come_from_the_model(entailing_nli: Path) -> None:
    code, out, err = run(
        "factcheck", STATEMENT, "--search", "demo", *SMALL, "--json", "-q",
        "--judge", f"nli:{entailing_nli / 'onnx' / 'model.onnx'}",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["judge"] == {**NLI, "model": f"{NAME}-entails"}
    assert data["verdict"] == "supported"
    assert len(data["supporting"]) == 5
    assert data["contradicting"] == []
    for evidence in data["supporting"]:
        want = reference_probabilities(entailing_nli, STATEMENT, evidence["text"])
        assert evidence["label"] == "entails"
        assert evidence["confidence"] == pytest.approx(want[1], rel=1e-6)
        assert evidence["rationale"] == (
            f"NLI model probabilities: contradiction {want[0]:.3f}, entailment {want[1]:.3f}, "
            f"neutral {want[2]:.3f}"
        )


ANSWER = {
    "question": "Moon?",
    "answer": "The Moon orbits the Earth once every 27 days [1](id=1). "
    "Tokyo is the capital of Japan [2](id=2).",
    "documents": [
        {"page_content": "The Moon orbits the Earth once every 27 days."},
        {"page_content": "Seattle gets a lot of rain every year, more than Boston."},
    ],
}


def test_citations_names_the_model_and_judges_with_it(tiny_nli: Path, tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(ANSWER) + "\n", encoding="utf-8")
    code, out, err = run("citations", "--input", str(path), "--judge", f"nli:{tiny_nli}")
    assert code == 0, err
    assert out.count("Judge: ") == 1
    assert JUDGE_LINE in out.splitlines()

    code, out, err = run(
        "citations", "--input", str(path), "--judge", f"nli:{tiny_nli}", "--json", "--no-cache"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["judge"] == NLI
    labels = ["contradicts", "entails", "unknown"]
    sentences = data["answers"][0]["sentences"]
    assert [s["text"] for s in sentences] == [
        "The Moon orbits the Earth once every 27 days.",
        "Tokyo is the capital of Japan.",
    ]
    for sentence, document in zip(sentences, ANSWER["documents"], strict=True):
        assert sentence["judge"] == NLI
        (citation,) = sentence["citations"]
        want = reference_probabilities(tiny_nli, sentence["text"], document["page_content"])
        assert citation["label"] == labels[want.index(max(want))]
        assert citation["confidence"] == pytest.approx(max(want), rel=1e-6)


def test_factuality_names_the_model(tiny_nli: Path, shared_data: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    code, out, err = run(
        "factuality", "--input", str(shared_data / "factreasoner_flaherty_wikipedia.json"),
        "--graph-version", "1", "--judge", f"nli:{tiny_nli}", "--output", str(output), "-q",
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[:2] == ["FactReasoner FR1, 1 record(s)", JUDGE_LINE]
    data = json.loads(output.read_text(encoding="utf-8"))
    assert data["judge"] == NLI
    assert data["model_name"] == NAME  # FactReasoner's field: the model


# --------------------------------------------------------------------------- what fails


INPUTS = {
    "citations": ANSWER,
    "factuality": {
        "input": "Moon?",
        "output": STATEMENT,
        "atoms": [{"id": "a0", "text": STATEMENT}],
    },
}


@pytest.mark.parametrize("command", ["factcheck", "citations", "factuality"])
def test_a_missing_model_is_one_line_and_status_2(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-model"
    args = [STATEMENT, "--search", "demo"]
    if command in INPUTS:
        path = tmp_path / "input.jsonl"
        path.write_text(json.dumps(INPUTS[command]) + "\n", encoding="utf-8")
        args = ["--input", str(path)]
    code, out, err = run(command, *args, "--judge", f"nli:{missing}")
    assert (code, out) == (2, "")
    assert err == f"error: --judge nli:{missing}: no such model folder or .onnx file\n"


def test_a_hub_id_offline_is_one_line_and_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("huggingface_hub")
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    code, out, err = run("factcheck", STATEMENT, "--search", "demo", "--judge", "nli:org/x-nli")
    assert (code, out) == (2, "")
    assert err.startswith(
        "error: --judge nli:org/x-nli: no such local folder or .onnx file, and the Hugging Face "
        "Hub did not give it (offline, or no such repository): "
    )
    assert err.count("\n") == 1


def test_a_missing_extra_is_one_line_and_status_2(
    tiny_nli: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    code, out, err = run("factcheck", STATEMENT, "--search", "demo", "--judge", "nli:org/x-nli")
    assert (code, out) == (2, "")
    assert err.startswith(
        "error: --judge nli:org/x-nli: CrossEncoderNLIJudge.from_pretrained needs the optional "
        "package 'huggingface_hub' (extra [nli]): pip install"
    )
    assert err.count("\n") == 1
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # a local model needs it too
    code, out, err = run("factcheck", STATEMENT, "--search", "demo", "--judge", f"nli:{tiny_nli}")
    assert (code, out) == (2, "")
    assert err.startswith(
        f"error: --judge nli:{tiny_nli}: CrossEncoderNLIJudge needs the optional package "
        "'onnxruntime' (extra [nli])"
    )
    assert err.count("\n") == 1
