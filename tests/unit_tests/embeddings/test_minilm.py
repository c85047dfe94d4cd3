"""MiniLMEmbeddings: the real int8 all-MiniLM-L6-v2 on onnxruntime, offline."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from tokenizers import Tokenizer

from langchain_references.services.embeddings import (
    EMBEDDING_DIMENSION,
    MAX_SEQ_LENGTH,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    ChecksumMismatchError,
    EmbeddingModelError,
    MiniLMEmbeddings,
    default_model_path,
    default_tokenizer_path,
)


@pytest.fixture(scope="module")
def embeddings() -> MiniLMEmbeddings:
    return MiniLMEmbeddings(batch_size=4)


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- packaged files ------------------------------------------------------------------------


def test_packaged_tokenizer_is_the_pinned_file_with_its_notice() -> None:
    path = default_tokenizer_path()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == TOKENIZER_SHA256
    notice = (path.parent / "NOTICE").read_text(encoding="utf-8")
    assert TOKENIZER_SHA256 in notice
    assert "Apache License 2.0" in notice
    assert "Apache License" in (path.parent / "LICENSE").read_text(encoding="utf-8")


def test_installed_model_is_the_pinned_file() -> None:
    assert hashlib.sha256(default_model_path().read_bytes()).hexdigest() == MODEL_SHA256


def test_packaged_tokenizer_is_the_uncased_wordpiece_of_the_model() -> None:
    tokenizer = Tokenizer.from_file(str(default_tokenizer_path()))
    tokens = [t for t in tokenizer.encode("Hello, World!").tokens if t != "[PAD]"]
    assert tokens == ["[CLS]", "hello", ",", "world", "!", "[SEP]"]


# -- vectors -------------------------------------------------------------------------------


def test_vectors_have_384_dimensions_and_unit_norm(embeddings: MiniLMEmbeddings) -> None:
    vectors = embeddings.embed_documents(["The Moon orbits Earth.", "", "Bees make honey."])
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == EMBEDDING_DIMENSION == embeddings.dimension
        assert all(isinstance(x, float) for x in vector)
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_embeddings_are_deterministic(embeddings: MiniLMEmbeddings) -> None:
    text = "Europa hides an ocean under its ice."
    first = embeddings.embed_query(text)
    assert embeddings.embed_query(text) == first
    assert MiniLMEmbeddings().embed_query(text) == first


@pytest.mark.parametrize(
    ("anchor", "related", "unrelated"),
    [
        (
            "The Space Needle is an observation tower in Seattle.",
            "A tall tower in Seattle offers views over the city.",
            "Honeybees tell each other where flowers are by dancing.",
        ),
        (
            "Europa is an icy moon of Jupiter with an ocean below its crust.",
            "Jupiter's moon Europa may hide liquid water under the ice.",
            "Python uses indentation to delimit blocks of code.",
        ),
        (
            "How do I sort a list in Python?",
            "Use the sorted() function to order the items of a list.",
            "The market sells fresh salmon and flowers.",
        ),
    ],
)
def test_related_sentences_are_closer_than_unrelated_ones(
    embeddings: MiniLMEmbeddings, anchor: str, related: str, unrelated: str
) -> None:
    a, r, u = embeddings.embed_documents([anchor, related, unrelated])
    assert _cos(a, r) > _cos(a, u) + 0.2


def test_query_retrieves_its_paraphrase_among_distractors(embeddings: MiniLMEmbeddings) -> None:
    passages = [
        "Pike Place Market opened in 1907 above the waterfront.",
        "Karl von Frisch decoded the waggle dance of honeybees.",
        "Python 3.0 was released in December 2008.",
        "Apollo 11 landed the first people on the Moon in 1969.",
    ]
    queries = [
        "When did the public market in Seattle open?",
        "Who figured out how bees communicate?",
        "Which year did the third major version of Python come out?",
        "When did humans first walk on the lunar surface?",
    ]
    matrix = np.array(embeddings.embed_documents(passages))
    for expected, query in enumerate(queries):
        scores = matrix @ np.array(embeddings.embed_query(query))
        assert int(np.argmax(scores)) == expected, query


def test_batches_keep_input_order_and_match_single_texts(embeddings: MiniLMEmbeddings) -> None:
    # Lengths out of order and more texts than one batch (batch_size=4), so that the
    # length sort, the batching and the reordering are all exercised.
    texts = [
        "A much longer sentence about the observation deck of the Space Needle in Seattle.",
        "Bees.",
        "The Moon is tidally locked.",
        "",
        "Python 2 reached its end of life on January 1, 2020, after a long transition.",
        "Europa.",
        "Honeybee workers live about six weeks in summer.",
    ]
    batched = np.array(embeddings.embed_documents(texts))
    singles = np.array([embeddings.embed_query(t) for t in texts])
    np.testing.assert_allclose(batched, singles, atol=2e-3)
    # Each row is closest to its own text: nothing was shuffled.
    assert list(np.argmax(batched @ singles.T, axis=1)) == list(range(len(texts)))


def test_inputs_are_truncated_to_256_word_pieces(embeddings: MiniLMEmbeddings) -> None:
    long_prefix = "the cat sat on the mat . " * 60  # 7 word pieces each: 420 > 256
    a = long_prefix + "Jupiter has dozens of moons."
    b = long_prefix + "Bees make honey from nectar."
    assert embeddings.max_length == MAX_SEQ_LENGTH == 256
    assert embeddings.embed_query(a) == embeddings.embed_query(b)
    # Tails inside the 256 window (after 196 word pieces, past the file's own 128) count.
    mid_prefix = "the cat sat on the mat . " * 28
    assert embeddings.embed_query(mid_prefix + "Jupiter has dozens of moons.") != (
        embeddings.embed_query(mid_prefix + "Bees make honey from nectar.")
    )
    # A longer window sees the tails.
    wide = MiniLMEmbeddings(max_length=512)
    assert wide.embed_query(a) != wide.embed_query(b)


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_a_finite_unit_vector(text: str) -> None:
    vector = _shared().embed_query(text)
    assert len(vector) == EMBEDDING_DIMENSION
    assert np.all(np.isfinite(vector))
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


_SHARED: list[MiniLMEmbeddings] = []


def _shared() -> MiniLMEmbeddings:
    if not _SHARED:
        _SHARED.append(MiniLMEmbeddings())
    return _SHARED[0]


# -- pooling, checked exactly on a tiny ONNX model -----------------------------------------


def _linear_model(path: Path, *, width: int = EMBEDDING_DIMENSION, inputs: list[str]) -> None:
    """Write an ONNX model whose token vector is ``input_id * w + c`` (w, c fixed)."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=width).astype(np.float32)
    c = rng.normal(size=width).astype(np.float32)
    nodes = [
        helper.make_node("Cast", [inputs[0]], ["ids_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["ids_f", "axis"], ["ids_3d"]),
        helper.make_node("Mul", ["ids_3d", "w"], ["scaled"]),
        helper.make_node("Add", ["scaled", "c"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(
        nodes,
        "linear",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
            for n in inputs
        ],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", width]
            )
        ],
        initializer=[
            helper.make_tensor("w", TensorProto.FLOAT, [width], w),
            helper.make_tensor("c", TensorProto.FLOAT, [width], c),
            helper.make_tensor("axis", TensorProto.INT64, [1], [2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    np.save(path.with_suffix(".w.npy"), w)
    np.save(path.with_suffix(".c.npy"), c)


def test_mean_pooling_uses_the_attention_mask_and_normalizes(tmp_path: Path) -> None:
    path = tmp_path / "linear.onnx"
    _linear_model(path, inputs=["input_ids", "attention_mask", "token_type_ids"])
    w, c = np.load(path.with_suffix(".w.npy")), np.load(path.with_suffix(".c.npy"))
    model = MiniLMEmbeddings(model_path=path, model_sha256=None)
    texts = ["short", "a much longer text that needs padding in the batch of two"]
    tokenizer = Tokenizer.from_file(str(default_tokenizer_path()))
    vectors = model.embed_documents(texts)
    for text, vector in zip(texts, vectors, strict=True):
        encoding = tokenizer.encode(text)  # the raw file pads to 128: keep real tokens only
        ids = np.array(
            [i for i, m in zip(encoding.ids, encoding.attention_mask, strict=True) if m],
            dtype=np.float64,
        )
        expected = ids.mean() * w + c  # padding ids (0) must not enter the mean
        expected /= np.linalg.norm(expected)
        np.testing.assert_allclose(vector, expected, rtol=1e-5, atol=1e-6)


def test_a_model_with_other_inputs_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.onnx"
    _linear_model(path, inputs=["input_ids", "pixel_values"])
    model = MiniLMEmbeddings(model_path=path, model_sha256=None)
    with pytest.raises(EmbeddingModelError, match="not a BERT encoder"):
        model.embed_query("x")


def test_a_model_with_another_width_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "narrow.onnx"
    _linear_model(path, width=8, inputs=["input_ids", "attention_mask"])
    with pytest.raises(EmbeddingModelError, match="must output token vectors"):
        MiniLMEmbeddings(model_path=path, model_sha256=None).embed_query("x")


# -- integrity checks ----------------------------------------------------------------------


def test_a_model_with_another_hash_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    model = MiniLMEmbeddings(model_path=fake)
    with pytest.raises(ChecksumMismatchError) as info:
        model.embed_query("hello")
    assert info.value.expected == MODEL_SHA256
    assert info.value.actual == hashlib.sha256(b"not the model").hexdigest()
    assert info.value.path == fake
    assert not model.is_loaded


def test_a_modified_tokenizer_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "tokenizer.json"
    data = default_tokenizer_path().read_bytes()
    copy.write_bytes(data.replace(b'"[UNK]"', b'"[UNX]"', 1))
    with pytest.raises(ChecksumMismatchError, match="sha256 mismatch"):
        MiniLMEmbeddings(tokenizer_path=copy).embed_query("hello")


def test_an_unverified_tokenizer_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, embeddings: MiniLMEmbeddings
) -> None:
    copy = tmp_path / "tokenizer.json"
    shutil.copyfile(default_tokenizer_path(), copy)
    with caplog.at_level(logging.WARNING, logger="langchain_references.services.embeddings"):
        vector = MiniLMEmbeddings(tokenizer_path=copy, tokenizer_sha256=None).embed_query("hi")
    assert "sha256 check disabled" in caplog.text
    assert vector == embeddings.embed_query("hi")


def test_missing_and_broken_model_files_raise_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="file not found"):
        MiniLMEmbeddings(model_path=tmp_path / "absent.onnx").embed_query("x")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x00garbage")
    with pytest.raises(EmbeddingModelError, match="onnxruntime cannot load"):
        MiniLMEmbeddings(model_path=broken, model_sha256=None).embed_query("x")


# -- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0},
        {"batch_size": -3},
        {"batch_size": 2.5},
        {"batch_size": True},
        {"max_length": 2},
        {"max_length": 513},
        {"intra_op_num_threads": 0},
    ],
)
def test_bad_arguments_raise_value_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must be"):
        MiniLMEmbeddings(**kwargs)  # type: ignore[arg-type]


def test_bad_inputs_raise_type_error(embeddings: MiniLMEmbeddings) -> None:
    with pytest.raises(TypeError, match="single string"):
        embeddings.embed_documents("a string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        embeddings.embed_documents(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be a str"):
        embeddings.embed_query(None)  # type: ignore[arg-type]


def test_nothing_is_loaded_before_first_use() -> None:
    model = MiniLMEmbeddings()
    assert model.embed_documents([]) == []
    assert not model.is_loaded
    model.embed_query("now")
    assert model.is_loaded


def test_concurrent_first_use_loads_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[object] = []
    real = onnxruntime.InferenceSession

    def counting(*args: object, **kwargs: object) -> object:
        session = real(*args, **kwargs)
        created.append(session)
        return session

    monkeypatch.setattr(onnxruntime, "InferenceSession", counting)
    model = MiniLMEmbeddings()
    barrier = threading.Barrier(6)
    results: list[list[float]] = []
    lock = threading.Lock()

    def work() -> None:
        barrier.wait()
        vector = model.embed_query("same text")
        with lock:
            results.append(vector)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(created) == 1
    assert len(results) == 6
    assert all(r == results[0] for r in results)


# -- async ---------------------------------------------------------------------------------


async def test_async_methods_match_sync(embeddings: MiniLMEmbeddings) -> None:
    texts = ["The Moon has no air.", "Bees dance."]
    assert await embeddings.aembed_documents(texts) == embeddings.embed_documents(texts)
    assert await embeddings.aembed_query("Europa") == embeddings.embed_query("Europa")


async def test_async_embedding_does_not_block_the_event_loop(
    embeddings: MiniLMEmbeddings,
) -> None:
    texts = [f"sentence number {i} about the honeybee colony" for i in range(64)]
    task = asyncio.ensure_future(embeddings.aembed_documents(texts))
    ticks_while_pending = 0
    while not task.done():
        ticks_while_pending += 1
        await asyncio.sleep(0)
    assert ticks_while_pending > 1
    assert len(await task) == 64


def _threads(model: MiniLMEmbeddings) -> int:
    return int(model._load().session.get_session_options().intra_op_num_threads)


@pytest.mark.parametrize(
    ("environment", "given", "expected"),
    [
        ("1", None, 1),  # a Ray actor with one CPU: one thread, not one per core
        ("3", None, 3),
        ("1", 2, 2),  # an explicit count wins
        ("0", None, 0),  # not a positive count: onnxruntime's choice (0 = its default)
        ("many", None, 0),
        (None, None, 0),
    ],
)
def test_threads_follow_omp_num_threads_unless_given(
    monkeypatch: pytest.MonkeyPatch, environment: str | None, given: int | None, expected: int
) -> None:
    if environment is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", environment)
    assert _threads(MiniLMEmbeddings(intra_op_num_threads=given)) == expected
