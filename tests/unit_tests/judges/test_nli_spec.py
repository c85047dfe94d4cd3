"""``nli:MODEL`` judge specs: local folders and ``.onnx`` files, Hub ids, and what fails.

Runs the tiny cross-encoder built in ``tests/unit_tests/_tiny_nli.py`` (offline).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from langchain_references._optional import MissingDependencyError
from langchain_references.judges import CrossEncoderNLIJudge, Label
from langchain_references.judges.nli import NLIModelError, is_hub_id, local_nli_files
from langchain_references.judges.spec import (
    JudgeSpec,
    JudgeSpecError,
    judge_from_spec,
    llm_of_spec,
    parse_judge_spec,
    portable_judge_spec,
)
from tests.unit_tests._tiny_nli import NAME, reference_probabilities, tiny_nli

__all__ = ["tiny_nli"]

STATEMENT = "The Moon orbits the Earth."
PASSAGE = "The Moon orbits the Earth once every 27 days."


def test_specs_are_read_without_loading_anything() -> None:
    assert parse_judge_spec("heuristic") == JudgeSpec("heuristic")
    assert parse_judge_spec("heuristic-lexical") == JudgeSpec("heuristic-lexical")
    assert parse_judge_spec("llm:openai:gpt-4o") == JudgeSpec("llm", "openai:gpt-4o")
    assert parse_judge_spec("nli:/no/such/dir") == JudgeSpec("nli", "/no/such/dir")
    assert parse_judge_spec("nli:org/model@main") == JudgeSpec("nli", "org/model@main")
    assert llm_of_spec("nli:org/model") is None
    assert llm_of_spec("llm:openai:gpt-4o") == "openai:gpt-4o"


@pytest.mark.parametrize("spec", ["nli:", "nli:  ", "NLI:org/model", "onnx:model.onnx"])
def test_bad_nli_specs_are_refused_with_the_choices(spec: str) -> None:
    with pytest.raises(JudgeSpecError) as caught:
        parse_judge_spec(spec)
    assert str(caught.value) == (
        "must be 'heuristic', 'heuristic-lexical', 'llm:PROVIDER:MODEL' or 'nli:MODEL', "
        f"got {spec!r}"
    )


def _check_loaded(judge: object, folder: Path) -> None:
    assert isinstance(judge, CrossEncoderNLIJudge)
    info = judge.info()
    assert (info.kind, info.model) == ("nli", NAME)
    assert str(info) == f"nli ({NAME}) — a cross-encoder NLI model"
    want = reference_probabilities(folder, STATEMENT, PASSAGE)
    got = judge.judge(STATEMENT, PASSAGE)
    assert got.probabilities is not None
    assert got.probabilities[Label.CONTRADICTS] == pytest.approx(want[0], rel=1e-5)
    assert got.probabilities[Label.ENTAILS] == pytest.approx(want[1], rel=1e-5)
    assert got.probabilities[Label.UNKNOWN] == pytest.approx(want[2], rel=1e-5)
    labels = [Label.CONTRADICTS, Label.ENTAILS, Label.UNKNOWN]
    assert got.label is labels[want.index(max(want))]


def test_a_folder_spec_loads_the_model_named_after_its_folder(tiny_nli: Path) -> None:
    judge, model = judge_from_spec(f"nli:{tiny_nli}", load_model=pytest.fail)
    assert model is None
    _check_loaded(judge, tiny_nli)


def test_an_onnx_file_spec_finds_its_tokenizer_and_config_above(tiny_nli: Path) -> None:
    judge, _ = judge_from_spec(f"nli:{tiny_nli / 'onnx' / 'model.onnx'}", load_model=pytest.fail)
    _check_loaded(judge, tiny_nli)  # the same model, the same name


def test_a_relative_path_and_the_portable_spec(
    tiny_nli: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tiny_nli.parent)
    judge, _ = judge_from_spec(f"nli:{NAME}", load_model=pytest.fail)  # a folder here wins
    _check_loaded(judge, tiny_nli)
    assert portable_judge_spec(f"nli:{NAME}") == f"nli:{tiny_nli.absolute()}"
    assert portable_judge_spec("nli:org/model@v1") == "nli:org/model@v1"  # a Hub id
    assert portable_judge_spec("llm:openai:gpt-4o") == "llm:openai:gpt-4o"
    assert portable_judge_spec("heuristic") == "heuristic"


def test_a_non_default_onnx_file_is_named_with_its_path(tiny_nli: Path, tmp_path: Path) -> None:
    folder = tmp_path / "nli-deberta"
    shutil.copytree(tiny_nli, folder)
    (folder / "onnx" / "model.onnx").rename(folder / "onnx" / "model_qint8.onnx")
    onnx_file, tokenizer, config, name = local_nli_files(folder)
    assert (onnx_file, tokenizer, config) == (
        folder / "onnx" / "model_qint8.onnx",
        folder / "tokenizer.json",
        folder / "config.json",
    )
    assert name == "nli-deberta/onnx/model_qint8.onnx"
    shutil.copy(folder / "onnx" / "model_qint8.onnx", folder / "onnx" / "model_fp16.onnx")
    with pytest.raises(NLIModelError) as caught:
        local_nli_files(folder)
    assert str(caught.value) == (
        f"{folder}: several .onnx models (onnx/model_fp16.onnx, onnx/model_qint8.onnx): "
        "name the file"
    )


def test_missing_files_are_one_line(tiny_nli: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    cases = {
        str(missing): f"{missing}: no such model folder or .onnx file",
        str(
            missing / "model.onnx"
        ): f"{missing / 'model.onnx'}: no such model folder or .onnx file",
        str(tmp_path): f"{tmp_path}: no .onnx model in this folder (nor in onnx/)",
        str(tiny_nli / "config.json"): f"{tiny_nli / 'config.json'}: not an .onnx file nor a "
        "model folder",
    }
    bare = tmp_path / "bare"
    (bare / "onnx").mkdir(parents=True)
    shutil.copy(tiny_nli / "onnx" / "model.onnx", bare / "onnx" / "model.onnx")
    shutil.copy(tiny_nli / "config.json", bare / "config.json")
    cases[str(bare)] = f"{bare}: no tokenizer.json (the model's tokenizer) in {bare}"
    for model, message in cases.items():
        with pytest.raises(NLIModelError) as caught:
            judge_from_spec(f"nli:{model}", load_model=pytest.fail)
        assert str(caught.value) == message


def test_a_broken_model_is_one_line(tiny_nli: Path, tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(tiny_nli, folder)
    (folder / "config.json").write_text('{"id2label": {"0": "yes", "1": "no", "2": "maybe"}}')
    with pytest.raises(NLIModelError) as caught:
        judge_from_spec(f"nli:{folder}", load_model=pytest.fail)
    assert str(caught.value) == (
        f"{folder}: cannot load the model: unrecognised NLI label 'yes'; pass label_map"
    )
    (folder / "onnx" / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(NLIModelError, match=r"^.*broken: cannot load the model: ") as caught:
        judge_from_spec(f"nli:{folder}", load_model=pytest.fail)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("model", "hub"),
    [
        ("cross-encoder/nli-deberta-v3-xsmall", True),
        ("org/model@0123abc", True),
        ("tiny", True),
        ("./tiny", False),
        ("/abs/tiny", False),
        ("a/b/c", False),
        ("org/model.onnx", False),
    ],
)
def test_what_is_read_as_a_hub_id(model: str, hub: bool) -> None:
    assert is_hub_id(model) is hub


def test_a_hub_id_offline_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never the network, whatever the cache
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(NLIModelError) as caught:
        judge_from_spec("nli:org/tiny-nli@v1", load_model=pytest.fail)
    message = str(caught.value)
    assert message.startswith(
        "org/tiny-nli@v1: no such local folder or .onnx file, and the Hugging Face Hub did not "
        "give it (offline, or no such repository): "
    )
    assert "\n" not in message


def test_a_hub_id_without_huggingface_hub_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(MissingDependencyError) as caught:
        judge_from_spec("nli:org/tiny-nli", load_model=pytest.fail)
    assert caught.value.extra == "nli"
    assert str(caught.value).startswith(
        "CrossEncoderNLIJudge.from_pretrained needs the optional package 'huggingface_hub' "
        "(extra [nli])"
    )


def test_two_models_of_one_name_are_told_apart_by_their_weights(
    tiny_nli: Path, tmp_path: Path
) -> None:
    from langchain_references.judges.cached import judge_fingerprint

    other = tmp_path / NAME
    shutil.copytree(tiny_nli, other)
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(other / "onnx" / "model.onnx"))
    [bias] = [t for t in model.graph.initializer if t.name == "bias"]
    bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(bias) + 1.0, "bias"))
    onnx.save(model, str(other / "onnx" / "model.onnx"))
    first, _ = judge_from_spec(f"nli:{tiny_nli}", load_model=pytest.fail)
    second, _ = judge_from_spec(f"nli:{other}", load_model=pytest.fail)
    assert first.info() == second.info()
    assert judge_fingerprint(first) != judge_fingerprint(second)
    again, _ = judge_from_spec(f"nli:{tiny_nli}", load_model=pytest.fail)
    assert judge_fingerprint(again) == judge_fingerprint(first)
