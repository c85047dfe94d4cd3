"""A tiny cross-encoder NLI model built here, offline: a real tokenizer, random fixed weights.

The folder has the layout of the Hub's cross-encoder repositories: ``onnx/model.onnx``,
``tokenizer.json`` (a ``tokenizers`` WordLevel tokenizer trained on a few sentences, with the
``[CLS] premise [SEP] hypothesis [SEP]`` template and token types) and ``config.json`` (its
``id2label``). The graph: ``logits = mean over the attended tokens of (EMBED[input_ids] +
TYPES[token_type_ids]) @ WEIGHTS + BIAS``, weights drawn from a fixed seed, so the labels are
arbitrary but the same on every run; :func:`reference_probabilities` computes them again with
numpy, independently of the judge.

Import the fixtures ``tiny_nli`` (and ``entailing_nli``, a model that entails every pair) into
a test module to use them (session-scoped: built once).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

#: The folder's name: what the judge is named after (``nli (tiny-nli)``).
NAME = "tiny-nli"
ID2LABEL = {0: "contradiction", 1: "entailment", 2: "neutral"}
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
SENTENCES = [
    "The Moon orbits the Earth once every 27 days.",
    "The Moon is closer to Earth than Europa is to Jupiter.",
    "Jupiter is the largest planet in the Solar System.",
    "Seattle gets a lot of rain every year, more than Boston.",
    "Tokyo is the capital of Japan.",
    "The Space Needle is 184 metres tall.",
    "Sea ice melts in summer and coral reefs bleach.",
]
HIDDEN = 8


#: The logits' bias of the default model (small: the tokens decide).
BIAS = (0.1, -0.2, 0.3)
#: A bias that makes the model say "entailment" whatever the tokens (a model that entails).
ENTAILING = (-20.0, 20.0, -20.0)


def _weights(bias: tuple[float, float, float]) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(20240611)
    return {
        "types": rng.normal(0.0, 0.5, (2, HIDDEN)).astype(np.float32),
        "weights": rng.normal(0.0, 1.0, (HIDDEN, 3)).astype(np.float32),
        "bias": np.array(bias, dtype=np.float32),
    }


def build_tokenizer(path: Path) -> int:
    """Train and save the WordLevel tokenizer; return its vocabulary size."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=SPECIAL))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tok.save(str(path))
    return int(tok.get_vocab_size())


def build_model(path: Path, vocab_size: int, bias: tuple[float, float, float] = BIAS) -> None:
    """Write the ONNX graph (inputs ``input_ids``, ``attention_mask``, ``token_type_ids``)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    w = _weights(bias)
    embed = np.random.default_rng(7).normal(0.0, 1.0, (vocab_size, HIDDEN)).astype(np.float32)
    ints = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    nodes = [
        helper.make_node("Gather", ["embed", "input_ids"], ["tok"]),
        helper.make_node("Gather", ["types", "token_type_ids"], ["typ"]),
        helper.make_node("Add", ["tok", "typ"], ["x"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axis_last"], ["m3"]),
        helper.make_node("Mul", ["x", "m3"], ["xm"]),
        helper.make_node("ReduceSum", ["xm", "axis_seq"], ["total"], keepdims=0),
        helper.make_node("ReduceSum", ["m3", "axis_seq"], ["count"], keepdims=0),
        helper.make_node("Div", ["total", "count"], ["mean"]),
        helper.make_node("MatMul", ["mean", "weights"], ["scores"]),
        helper.make_node("Add", ["scores", "bias"], ["logits"]),
    ]

    def tensor(name: str, array: Any, kind: int = TensorProto.FLOAT) -> Any:
        return helper.make_tensor(name, kind, array.shape, array.flatten().tolist())

    inits = [
        tensor("embed", embed),
        tensor("types", w["types"]),
        tensor("weights", w["weights"]),
        tensor("bias", w["bias"]),
        tensor("axis_last", np.array([-1], dtype=np.int64), TensorProto.INT64),
        tensor("axis_seq", np.array([1], dtype=np.int64), TensorProto.INT64),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny-cross-encoder",
        ints,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def build_tiny_nli(root: Path, name: str = NAME, bias: tuple[float, float, float] = BIAS) -> Path:
    """Build the model folder ``root / name`` and return it."""
    folder = root / name
    folder.mkdir(parents=True)
    vocab_size = build_tokenizer(folder / "tokenizer.json")
    build_model(folder / "onnx" / "model.onnx", vocab_size, bias)
    config = {"architectures": ["TinyCrossEncoder"], "id2label": ID2LABEL}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def reference_probabilities(folder: Path, statement: str, passage: str) -> list[float]:
    """The model's class probabilities of (statement, passage), computed with numpy alone.

    The tokens come from the saved tokenizer (premise = passage, hypothesis = statement); the
    weights are read back from the ONNX file.
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from tokenizers import Tokenizer

    encoding = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(passage, statement)
    graph = onnx.load(str(folder / "onnx" / "model.onnx")).graph
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    x = arrays["embed"][encoding.ids] + arrays["types"][encoding.type_ids]
    logits = x.astype(np.float64).mean(axis=0) @ arrays["weights"] + arrays["bias"]
    e = np.exp(logits - logits.max())
    return [float(p) for p in e / e.sum()]


@pytest.fixture(scope="session")
def tiny_nli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model's folder (``.../tiny-nli``), built once per session."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    return build_tiny_nli(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def entailing_nli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model ``tiny-nli-entails`` whose bias makes it say "entailment" to every pair."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    root = tmp_path_factory.mktemp("models")
    return build_tiny_nli(root, f"{NAME}-entails", ENTAILING)
