"""CrossEncoderNLIJudge plumbing, with a tiny ONNX model and tokenizer built here (offline)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")

from onnx import TensorProto, helper  # noqa: E402

from langchain_references.judges import CrossEncoderNLIJudge, Label  # noqa: E402
from langchain_references.judges.nli import label_from_name  # noqa: E402

VOCAB = {
    "[PAD]": 0,
    "[CLS]": 1,
    "[SEP]": 2,
    "[UNK]": 3,
    "yes": 4,
    "no": 5,
    "maybe": 6,
    "ice": 7,
    "melts": 8,
}
# One row per token: its contribution to the logits (contradiction, entailment, neutral).
EMBED = np.zeros((len(VOCAB), 3), dtype=np.float32)
EMBED[VOCAB["yes"]] = [0.0, 6.0, 0.0]
EMBED[VOCAB["no"]] = [6.0, 0.0, 0.0]
EMBED[VOCAB["maybe"]] = [0.0, 0.0, 6.0]
EMBED[VOCAB["ice"]] = [0.5, 0.0, 0.0]
EMBED[VOCAB["melts"]] = [0.0, 0.5, 0.0]
EMBED[VOCAB["[CLS]"]] = [0.1, 0.0, 0.2]
TYPES = np.array([[0.0, 0.0, 0.0], [0.3, -0.2, 0.1]], dtype=np.float32)
WEIGHTS = np.array([[1.0, 0.0, 0.0], [0.0, 1.5, 0.0], [0.0, 0.0, 0.5]], dtype=np.float32)
ID2LABEL = {0: "contradiction", 1: "entailment", 2: "neutral"}


def build_model(path: Path, *, with_types: bool) -> Path:
    """logits = masked mean over tokens of (EMBED[ids] + TYPES[type_ids]) @ WEIGHTS."""
    ints = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
    ]
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["tok"])]
    summed = "tok"
    if with_types:
        ints.append(
            helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"])
        )
        nodes += [
            helper.make_node("Gather", ["types", "token_type_ids"], ["typ"]),
            helper.make_node("Add", ["tok", "typ"], ["x"]),
        ]
        summed = "x"
    nodes += [
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axis_last"], ["m3"]),
        helper.make_node("Mul", [summed, "m3"], ["xm"]),
        helper.make_node("ReduceSum", ["xm", "axis_seq"], ["total"], keepdims=0),
        helper.make_node("ReduceSum", ["m3", "axis_seq"], ["count"], keepdims=0),
        helper.make_node("Div", ["total", "count"], ["mean"]),
        helper.make_node("MatMul", ["mean", "weights"], ["logits"]),
    ]
    inits = [
        helper.make_tensor("embed", TensorProto.FLOAT, EMBED.shape, EMBED.flatten().tolist()),
        helper.make_tensor("weights", TensorProto.FLOAT, WEIGHTS.shape, WEIGHTS.flatten().tolist()),
        helper.make_tensor("axis_last", TensorProto.INT64, [1], [-1]),
        helper.make_tensor("axis_seq", TensorProto.INT64, [1], [1]),
    ]
    if with_types:
        inits.append(
            helper.make_tensor("types", TensorProto.FLOAT, TYPES.shape, TYPES.flatten().tolist())
        )
    graph = helper.make_graph(
        nodes,
        "tiny-nli",
        ints,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def build_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)],
    )
    tok.save(str(path))
    return path


def expected_probs(premise: Sequence[str], hypothesis: Sequence[str], *, with_types: bool):  # type: ignore[no-untyped-def]
    """Reference computation from the token sequence, independent of the judge."""
    ids = [1, *(VOCAB[w] for w in premise), 2, *(VOCAB[w] for w in hypothesis), 2]
    types = [0] * (len(premise) + 2) + [1] * (len(hypothesis) + 1)
    x = EMBED[ids] + (TYPES[types] if with_types else 0.0)
    logits = x.mean(axis=0) @ WEIGHTS
    e = np.exp(logits - logits.max())
    return e / e.sum()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-nli")
    config = root / "config.json"
    config.write_text(json.dumps({"id2label": {str(k): v for k, v in ID2LABEL.items()}}))
    return {
        "typed": build_model(root / "typed.onnx", with_types=True),
        "untyped": build_model(root / "untyped.onnx", with_types=False),
        "tokenizer": build_tokenizer(root / "tokenizer.json"),
        "config": config,
    }


@pytest.fixture
def judge(files: dict[str, Path]) -> CrossEncoderNLIJudge:
    return CrossEncoderNLIJudge(files["typed"], files["tokenizer"], config_path=files["config"])


@pytest.mark.parametrize("with_types", [True, False])
def test_probabilities_and_labels_match_reference(files: dict[str, Path], with_types: bool) -> None:
    judge = CrossEncoderNLIJudge(
        files["typed" if with_types else "untyped"], files["tokenizer"], id2label=ID2LABEL
    )
    cases = [
        ("ice melts", "yes yes", Label.ENTAILS),
        ("ice melts", "no no", Label.CONTRADICTS),
        ("ice", "maybe maybe maybe", Label.UNKNOWN),
    ]
    for statement, passage, label in cases:
        want = expected_probs(passage.split(), statement.split(), with_types=with_types)
        got = judge.predict_proba([(statement, passage)])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5)
        j = judge.invoke({"statement": statement, "passage": passage})
        assert j.label is label
        assert j.confidence == pytest.approx(want.max(), rel=1e-5)
        assert j.probabilities is not None
        assert j.probabilities[Label.CONTRADICTS] == pytest.approx(want[0], rel=1e-5)
        assert j.probabilities[Label.ENTAILS] == pytest.approx(want[1], rel=1e-5)
        assert j.probabilities[Label.UNKNOWN] == pytest.approx(want[2], rel=1e-5)
        assert "entailment" in j.rationale


def test_premise_is_the_passage(judge: CrossEncoderNLIJudge) -> None:
    # Token types differ between premise (0) and hypothesis (1): with sides of different
    # lengths, the order is observable.
    got = judge.predict_proba([("yes", "no no no")])[0]
    np.testing.assert_allclose(got, expected_probs(["no"] * 3, ["yes"], with_types=True), rtol=1e-5)
    swapped = expected_probs(["yes"], ["no"] * 3, with_types=True)
    assert not np.allclose(got, swapped)


def test_label_order_follows_id2label(files: dict[str, Path]) -> None:
    # Same logits, other class order: the label of the largest logit changes with it.
    other = {0: "ENTAILMENT", 1: "neutral", 2: "Contradiction"}
    judge = CrossEncoderNLIJudge(files["typed"], files["tokenizer"], id2label=other)
    assert judge.class_labels == [Label.ENTAILS, Label.UNKNOWN, Label.CONTRADICTS]
    assert judge.judge("ice", "yes yes").label is Label.UNKNOWN  # logit 1 = "neutral" now
    assert judge.judge("ice", "no no").label is Label.ENTAILS  # logit 0 = "ENTAILMENT" now
    custom = CrossEncoderNLIJudge(
        files["typed"],
        files["tokenizer"],
        id2label={0: "REFUTED", 1: "SUPPORTED", 2: "NEI"},
        label_map={"REFUTED": Label.CONTRADICTS, "SUPPORTED": Label.ENTAILS, "NEI": Label.UNKNOWN},
    )
    assert custom.judge("ice", "yes yes").label is Label.ENTAILS


def test_batch_matches_single_calls_despite_padding(files: dict[str, Path]) -> None:
    calls: list[int] = []

    class Spy(CrossEncoderNLIJudge):
        def predict_proba(self, pairs):  # type: ignore[no-untyped-def]
            calls.append(len(pairs))
            return super().predict_proba(pairs)

    judge = Spy(files["typed"], files["tokenizer"], id2label=ID2LABEL, batch_size=2)
    pairs = [
        ("ice", "yes"),
        ("ice melts", "no no no maybe maybe"),
        ("melts", ""),
        ("ice", "maybe"),
        ("ice melts melts", "yes no"),
        ("ice", "no"),
    ]
    out = judge.batch([{"statement": s, "passage": p} for s, p in pairs])
    assert calls == [2, 2, 1]  # blank passage skipped, chunks of batch_size
    assert out[2].label is Label.UNKNOWN
    for (s, p), j in zip(pairs, out, strict=True):
        if p:
            want = expected_probs(p.split(), s.split(), with_types=True)
            assert j.probabilities is not None
            assert j.probabilities[Label.ENTAILS] == pytest.approx(want[1], rel=1e-5)


async def test_abatch(judge: CrossEncoderNLIJudge) -> None:
    out = await judge.abatch(
        [{"statement": "ice", "passage": "yes"}, {"statement": "a", "passage": "no"}]
    )
    assert [j.label for j in out] == [Label.ENTAILS, Label.CONTRADICTS]


def test_truncation(files: dict[str, Path]) -> None:
    judge = CrossEncoderNLIJudge(
        files["typed"], files["tokenizer"], id2label=ID2LABEL, max_length=6
    )
    # 6 tokens: [CLS] no no [SEP] yes [SEP]; the long passage is cut, the statement kept.
    got = judge.predict_proba([("yes", "no no no no no no no no maybe maybe")])[0]
    np.testing.assert_allclose(
        got, expected_probs(["no", "no"], ["yes"], with_types=True), rtol=1e-5
    )
    untruncated = expected_probs(["no"] * 8 + ["maybe"] * 2, ["yes"], with_types=True)
    assert not np.allclose(got, untruncated)


def test_invalid_configurations(files: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="id2label or config_path"):
        CrossEncoderNLIJudge(files["typed"], files["tokenizer"])
    with pytest.raises(ValueError, match="unrecognised NLI label"):
        CrossEncoderNLIJudge(files["typed"], files["tokenizer"], id2label={0: "a", 1: "b", 2: "c"})
    with pytest.raises(ValueError, match=r"0\.\.n-1"):
        CrossEncoderNLIJudge(
            files["typed"], files["tokenizer"], id2label={1: "entailment", 2: "contradiction"}
        )
    with pytest.raises(ValueError, match="lacks"):
        CrossEncoderNLIJudge(
            files["typed"],
            files["tokenizer"],
            id2label={0: "entailment", 1: "neutral", 2: "neutral"},
        )
    bad = tmp_path / "config.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="no id2label"):
        CrossEncoderNLIJudge(files["typed"], files["tokenizer"], config_path=bad)
    with pytest.raises(ValueError, match="max_length"):
        CrossEncoderNLIJudge(files["typed"], files["tokenizer"], id2label=ID2LABEL, max_length=1)


def test_wrong_output_width(files: dict[str, Path]) -> None:
    two = {0: "contradiction", 1: "entailment"}
    with pytest.raises(ValueError, match="outputs 3 logits but id2label has 2"):
        CrossEncoderNLIJudge(files["typed"], files["tokenizer"], id2label=two)

    # A model whose output width is only known at run time: the mismatch is recorded.
    class TwoLogits:
        def __init__(self, session: Any) -> None:
            self.session = session

        def run(self, names: list[str], feeds: dict[str, Any]) -> list[Any]:
            (logits,) = self.session.run(names, feeds)
            return [logits[:, :2]]

    judge = CrossEncoderNLIJudge(files["typed"], files["tokenizer"], id2label=ID2LABEL)
    judge._session = TwoLogits(judge._session)
    j = judge.judge("ice", "yes")
    assert j.error is not None
    assert "shape" in j.error


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("entailment", Label.ENTAILS),
        ("CONTRADICTION", Label.CONTRADICTS),
        ("neutral", Label.UNKNOWN),
        ("not_entailment", Label.UNKNOWN),
        ("non-entailment", Label.UNKNOWN),
    ],
)
def test_label_from_name(name: str, label: Label) -> None:
    assert label_from_name(name) is label


def test_the_judge_names_its_model_file(judge: CrossEncoderNLIJudge) -> None:
    info = judge.info()
    assert (info.kind, info.model) == ("nli", "typed.onnx")
    assert info.description == "a cross-encoder NLI model"


def test_a_judge_from_the_hub_is_named_after_its_repository(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_references.judges import nli

    local = {
        "onnx/model.onnx": files["typed"],
        "tokenizer.json": files["tokenizer"],
        "config.json": files["config"],
    }

    class Hub:
        @staticmethod
        def hf_hub_download(repo_id: str, filename: str, **kwargs: Any) -> str:
            return str(local[filename])

    real_require = nli.require

    def require(module: str, *args: Any, **kwargs: Any) -> Any:
        return Hub if module == "huggingface_hub" else real_require(module, *args, **kwargs)

    monkeypatch.setattr(nli, "require", require)
    judge = CrossEncoderNLIJudge.from_pretrained("org/tiny-nli", revision="abc123")
    assert judge.info().model == "org/tiny-nli@abc123"
    assert CrossEncoderNLIJudge.from_pretrained("org/tiny-nli").info().model == "org/tiny-nli"
