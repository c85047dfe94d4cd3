"""A judge that runs an ONNX cross-encoder NLI model with onnxruntime (no torch).

The model reads ``(premise, hypothesis) = (passage, statement)`` and outputs one logit per NLI
class; the softmax gives the probabilities and the arg-max the label. The label order comes
from the model's ``config.json`` (``id2label``), e.g. ``{0: "contradiction", 1: "entailment",
2: "neutral"}`` for ``cross-encoder/nli-deberta-v3-xsmall``.

Needs the ``nli`` extra (``onnxruntime``, ``tokenizers``, ``numpy``; ``huggingface-hub`` for
:meth:`CrossEncoderNLIJudge.from_pretrained`). No weights ship with this package: either pass
local files or let :meth:`~CrossEncoderNLIJudge.from_pretrained` download them from the
Hugging Face Hub (only when you call it, never at import).

:func:`load_nli_judge` loads the model a ``nli:MODEL`` judge spec names
(:mod:`~langchain_references.judges.spec`): a local folder (``model.onnx`` or
``onnx/model.onnx`` beside ``tokenizer.json`` and ``config.json``, the layout of the Hub's
cross-encoder repositories), a local ``.onnx`` file (its ``tokenizer.json`` and ``config.json``
in its folder or the folder above), or a Hub repository ``ORG/NAME[@REVISION]`` (downloaded,
or taken from the Hugging Face cache). What cannot be loaded (no such file, no network, a
missing package) raises one typed error with a one-line message.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from langchain_references._optional import require
from langchain_references.errors import LangchainReferencesError
from langchain_references.judges.base import Judge, JudgeInfo, JudgeInput, Judgement, Label

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

__all__ = [
    "CrossEncoderNLIJudge",
    "NLIModelError",
    "is_hub_id",
    "label_from_name",
    "load_nli_judge",
    "local_nli_files",
    "read_id2label",
]

logger = logging.getLogger(__name__)

DEFAULT_REPO = "cross-encoder/nli-deberta-v3-xsmall"
_PAD_TOKENS = ("[PAD]", "<pad>", "<|pad|>")
_INT_TYPES = {"tensor(int64)": "int64", "tensor(int32)": "int32"}
#: Where a model folder holds its ONNX graph by default (the Hub's cross-encoders: the second).
DEFAULT_ONNX_FILES = ("model.onnx", "onnx/model.onnx")
#: A Hugging Face Hub repository id, ``NAME`` or ``ORG/NAME``, with an optional ``@REVISION``.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[A-Za-z0-9][\w.-]*)?(?:@[\w./-]+)?")


class NLIModelError(LangchainReferencesError, ValueError):
    """An NLI model that cannot be loaded: no such file, an incomplete folder, no network.

    The message is one line naming the model and what is missing.
    """


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def label_from_name(name: str) -> Label:
    """Map an NLI class name (``entailment``, ``CONTRADICTION``, ``neutral``...) to a Label.

    Args:
        name: A class name from a model config's ``id2label``.

    Returns:
        The label.

    Raises:
        ValueError: If the name is not recognised (pass ``label_map`` to the judge then).
    """
    lowered = name.strip().lower()
    if lowered.startswith("not") or lowered.startswith("non"):
        return Label.UNKNOWN
    if "entail" in lowered:
        return Label.ENTAILS
    if "contradict" in lowered:
        return Label.CONTRADICTS
    if "neutral" in lowered:
        return Label.UNKNOWN
    raise ValueError(f"unrecognised NLI label {name!r}; pass label_map")


def read_id2label(config_path: str | Path) -> dict[int, str]:
    """Read ``id2label`` from a Hugging Face ``config.json``.

    Args:
        config_path: Path of the config file.

    Returns:
        Class index to class name.

    Raises:
        ValueError: If the file has no usable ``id2label``.
    """
    with Path(config_path).open(encoding="utf-8") as fh:
        config = json.load(fh)
    raw = config.get("id2label") if isinstance(config, dict) else None
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{config_path} has no id2label")
    try:
        return {int(k): str(v) for k, v in raw.items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{config_path}: bad id2label keys: {exc}") from exc


def _import_runtime() -> tuple[Any, Any, Any]:
    feature = "CrossEncoderNLIJudge"
    return (
        require("numpy", "nli", feature=feature),
        require("onnxruntime", "nli", feature=feature),
        require("tokenizers", "nli", feature=feature),
    )


class CrossEncoderNLIJudge(Judge):
    """Judge with an ONNX cross-encoder NLI model (e.g. ``cross-encoder/nli-deberta-v3-xsmall``).

    Args:
        model_path: Path of the ``.onnx`` model. Its inputs must be among ``input_ids``,
            ``attention_mask`` and ``token_type_ids``; its first output the logits
            ``[batch, n_classes]``.
        tokenizer_path: Path of the Hugging Face ``tokenizer.json``.
        id2label: Class index to class name; or give ``config_path``.
        config_path: A ``config.json`` to read ``id2label`` from.
        label_map: Class name to :class:`Label`, for names :func:`label_from_name` does not
            know.
        max_length: Maximum tokens per pair; longer pairs are truncated (longest side first,
            usually the passage).
        batch_size: Pairs per model call in ``batch``.
        providers: onnxruntime execution providers (default CPU).
        raise_errors: Re-raise errors instead of recording them in ``Judgement.error``.

    Attributes:
        model_name: The model's name in :meth:`info`: the ``.onnx`` file's name, the Hub
            repository (``@revision``) for a judge loaded by :meth:`from_pretrained`, the
            folder's name for one loaded by :func:`load_nli_judge`.
        model_sha256: The SHA-256 of the ``.onnx`` file: with :attr:`model_name`, what
            identifies the judge in run caches (two models of one name do not share
            judgements).

    Raises:
        ValueError: If the labels, model inputs/outputs or tokenizer do not fit together.
    """

    judge_kind = "nli"

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path,
        *,
        id2label: Mapping[int, str] | None = None,
        config_path: str | Path | None = None,
        label_map: Mapping[str, Label] | None = None,
        max_length: int = 512,
        batch_size: int = 16,
        providers: Sequence[str] = ("CPUExecutionProvider",),
        raise_errors: bool = False,
    ) -> None:
        numpy, onnxruntime, tokenizers = _import_runtime()
        self._np = numpy
        if max_length < 4:
            raise ValueError(f"max_length must be >= 4, got {max_length}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.max_length = max_length
        self.batch_size = batch_size
        self.raise_errors = raise_errors
        self.model_name = Path(model_path).name
        self.model_sha256 = _sha256(Path(model_path))

        if id2label is None:
            if config_path is None:
                raise ValueError("give id2label or config_path (the model's config.json)")
            id2label = read_id2label(config_path)
        if sorted(id2label) != list(range(len(id2label))):
            raise ValueError(f"id2label keys must be 0..n-1, got {sorted(id2label)}")
        names = [id2label[i] for i in range(len(id2label))]
        mapping = dict(label_map or {})
        self.class_names = names
        self.class_labels = [mapping[n] if n in mapping else label_from_name(n) for n in names]
        if not {Label.ENTAILS, Label.CONTRADICTS} <= set(self.class_labels):
            raise ValueError(f"id2label {names} lacks an entailment or a contradiction class")

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=list(providers)
        )
        self._inputs: dict[str, str] = {}
        for node in self._session.get_inputs():
            if node.name not in ("input_ids", "attention_mask", "token_type_ids"):
                raise ValueError(f"unsupported model input {node.name!r}")
            if node.type not in _INT_TYPES:
                raise ValueError(f"model input {node.name!r} has type {node.type}")
            self._inputs[node.name] = _INT_TYPES[node.type]
        if "input_ids" not in self._inputs:
            raise ValueError("the model has no input_ids input")
        output = self._session.get_outputs()[0]
        self._output = output.name
        width = output.shape[-1] if output.shape else None
        if isinstance(width, int) and width != len(names):
            raise ValueError(f"the model outputs {width} logits but id2label has {len(names)}")

        self._tokenizer = self._load_tokenizer(tokenizers, tokenizer_path)

    def _load_tokenizer(self, tokenizers: Any, path: str | Path) -> Tokenizer:
        try:
            tokenizer: Tokenizer = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception on a malformed file
            raise ValueError(f"cannot read the tokenizer {path}: {exc}") from exc
        tokenizer.enable_truncation(max_length=self.max_length, strategy="longest_first")
        padding = tokenizer.padding
        if padding is not None:
            tokenizer.enable_padding(pad_id=padding["pad_id"], pad_token=padding["pad_token"])
            return tokenizer
        for token in _PAD_TOKENS:
            pad_id = tokenizer.token_to_id(token)
            if pad_id is not None:
                tokenizer.enable_padding(pad_id=pad_id, pad_token=token)
                return tokenizer
        raise ValueError(f"the tokenizer has no padding token among {_PAD_TOKENS}")

    @classmethod
    def from_pretrained(
        cls,
        repo_id: str = DEFAULT_REPO,
        *,
        revision: str | None = None,
        onnx_file: str = "onnx/model.onnx",
        tokenizer_file: str = "tokenizer.json",
        config_file: str = "config.json",
        cache_dir: str | Path | None = None,
        **kwargs: Any,
    ) -> CrossEncoderNLIJudge:
        """Download a cross-encoder from the Hugging Face Hub (network access) and load it.

        Args:
            repo_id: Hub repository, e.g. ``cross-encoder/nli-deberta-v3-xsmall``.
            revision: Commit or branch; pin a commit for reproducible results.
            onnx_file: Path of the ONNX model in the repository (e.g. the smaller
                ``onnx/model_qint8_avx512_vnni.onnx``).
            tokenizer_file: Path of ``tokenizer.json`` in the repository.
            config_file: Path of ``config.json`` (for ``id2label``).
            cache_dir: huggingface_hub cache directory.
            **kwargs: Passed to the constructor (``max_length``, ``batch_size``...).

        Returns:
            The judge.

        Raises:
            MissingDependencyError: If huggingface-hub is not installed (``nli`` extra).
        """
        hub = require("huggingface_hub", "nli", feature="CrossEncoderNLIJudge.from_pretrained")

        def fetch(filename: str) -> str:
            path: str = hub.hf_hub_download(
                repo_id, filename, revision=revision, cache_dir=cache_dir
            )
            return path

        logger.info("loading %s (%s) from the Hugging Face Hub", repo_id, onnx_file)
        judge = cls(
            fetch(onnx_file),
            fetch(tokenizer_file),
            config_path=fetch(config_file),
            **kwargs,
        )
        judge.model_name = repo_id if revision is None else f"{repo_id}@{revision}"
        return judge

    def info(self) -> JudgeInfo:
        """Kind ``nli`` and the model (:attr:`model_name`).

        Returns:
            E.g. ``JudgeInfo(kind="nli", model="cross-encoder/nli-deberta-v3-xsmall", ...)``.
        """
        return JudgeInfo.of("nli", model=self.model_name)

    # ------------------------------------------------------------------------ inference

    def predict_proba(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float64]:
        """Class probabilities of (statement, passage) pairs, in ``id2label`` order.

        Args:
            pairs: ``(statement, passage)`` tuples (at most one model call: chunk them
                yourself, or use ``batch``).

        Returns:
            Array ``[len(pairs), n_classes]`` of softmax probabilities.

        Raises:
            ValueError: If the model output does not have one logit per class.
        """
        np_ = self._np
        if not pairs:
            return np_.zeros((0, len(self.class_names)), dtype=np_.float64)  # type: ignore[no-any-return]
        encodings = self._tokenizer.encode_batch([(p, s) for s, p in pairs])
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feeds = {
            name: np_.asarray(columns[name], dtype=dtype) for name, dtype in self._inputs.items()
        }
        (logits,) = self._session.run([self._output], feeds)
        logits = np_.asarray(logits, dtype=np_.float64)
        if logits.shape != (len(pairs), len(self.class_names)):
            raise ValueError(
                f"model output has shape {logits.shape}, expected "
                f"{(len(pairs), len(self.class_names))}"
            )
        shifted = np_.exp(logits - logits.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]

    def _to_judgement(self, probs: Sequence[float]) -> Judgement:
        # UNKNOWN first: an exact tie goes to the conservative label.
        per_label = dict.fromkeys((Label.UNKNOWN, Label.ENTAILS, Label.CONTRADICTS), 0.0)
        for label, p in zip(self.class_labels, probs, strict=True):
            per_label[label] += float(p)
        label = max(per_label, key=lambda k: per_label[k])
        rationale = "NLI model probabilities: " + ", ".join(
            f"{name} {float(p):.3f}" for name, p in zip(self.class_names, probs, strict=True)
        )
        return Judgement(
            label=label,
            confidence=min(1.0, per_label[label]),
            rationale=rationale,
            probabilities={k: min(1.0, v) for k, v in per_label.items()},
        )

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return self._to_judgement(list(self.predict_proba([(statement, passage)])[0]))

    def _judge_batch(
        self, items: Sequence[JudgeInput], *, config: RunnableConfig
    ) -> list[Judgement]:
        probs = self.predict_proba([(item.statement, item.passage) for item in items])
        return [self._to_judgement(list(row)) for row in probs]


# ------------------------------------------------------------------------ loading by name


def local_nli_files(path: str | Path) -> tuple[Path, Path, Path, str]:
    """The files of a local NLI model, and its name.

    Args:
        path: A model folder (``model.onnx`` or ``onnx/model.onnx``, or its one ``.onnx``
            file, with ``tokenizer.json`` and ``config.json``) or an ``.onnx`` file (its
            ``tokenizer.json`` and ``config.json`` in its folder or the folder above, as in
            the Hub's ``onnx/`` layout).

    Returns:
        ``(onnx, tokenizer, config, name)``: the name is the model folder's (the one holding
        ``config.json``), followed by ``/`` and the ``.onnx`` file's path in it when that is
        not the folder's default (:data:`DEFAULT_ONNX_FILES`).

    Raises:
        NLIModelError: If there is no such file or folder, or a file is missing.
    """
    given = Path(path).expanduser()
    if given.is_dir():
        root = given
        defaults = [root / name for name in DEFAULT_ONNX_FILES if (root / name).is_file()]
        found = defaults or sorted([*root.glob("*.onnx"), *root.glob("onnx/*.onnx")])
        if not found:
            raise NLIModelError(f"{path}: no .onnx model in this folder (nor in onnx/)")
        if len(found) > 1 and not defaults:
            names = ", ".join(p.relative_to(root).as_posix() for p in found)
            raise NLIModelError(f"{path}: several .onnx models ({names}): name the file")
        onnx_file = found[0]
    elif given.is_file():
        if given.suffix != ".onnx":
            raise NLIModelError(f"{path}: not an .onnx file nor a model folder")
        onnx_file = given
        parents = [given.parent, given.parent.parent]
        root = next((p for p in parents if (p / "config.json").is_file()), given.parent)
    else:
        raise NLIModelError(f"{path}: no such model folder or .onnx file")
    files = []
    for name, what in (("tokenizer.json", "tokenizer"), ("config.json", "config, id2label")):
        file = root / name
        if not file.is_file():
            raise NLIModelError(f"{path}: no {name} (the model's {what}) in {root}")
        files.append(file)
    tokenizer, config = files
    model_name = root.resolve().name or str(root)
    relative = onnx_file.relative_to(root).as_posix()
    if relative not in DEFAULT_ONNX_FILES:
        model_name = f"{model_name}/{relative}"
    return onnx_file, tokenizer, config, model_name


def is_hub_id(model: str) -> bool:
    """Whether ``model`` is read as a Hub repository: it is no local path and looks like one.

    Args:
        model: What follows ``nli:`` in a judge spec.

    Returns:
        True for ``ORG/NAME[@REVISION]`` (or ``NAME``) that is not an existing file or
        folder and does not end in ``.onnx``.
    """
    if Path(model).expanduser().exists() or model.endswith(".onnx"):
        return False
    return _HUB_ID.fullmatch(model) is not None


def load_nli_judge(model: str, **kwargs: Any) -> CrossEncoderNLIJudge:
    """Load the NLI judge of ``nli:MODEL``: a local folder or ``.onnx`` file, or a Hub id.

    Args:
        model: A local model folder or ``.onnx`` file (:func:`local_nli_files`), or a Hugging
            Face Hub repository ``ORG/NAME[@REVISION]`` (:meth:`~CrossEncoderNLIJudge.
            from_pretrained`: downloaded, or taken from the cache; ``HF_HUB_OFFLINE=1`` uses
            the cache only).
        **kwargs: Passed to the judge (``max_length``, ``batch_size``...).

    Returns:
        The judge, named after the model (:attr:`CrossEncoderNLIJudge.model_name`).

    Raises:
        MissingDependencyError: If a package of the ``nli`` extra is missing.
        NLIModelError: If the model cannot be found, downloaded or loaded (one line).
    """
    _import_runtime()  # a missing package is named first, whatever the model
    if is_hub_id(model):
        repo, _, revision = model.partition("@")
        try:
            return CrossEncoderNLIJudge.from_pretrained(repo, revision=revision or None, **kwargs)
        except (OSError, ValueError, RuntimeError) as exc:
            reason = _first_line(exc)
            raise NLIModelError(
                f"{model}: no such local folder or .onnx file, and the Hugging Face Hub did not "
                f"give it (offline, or no such repository): {reason}"
            ) from exc
    onnx_file, tokenizer, config, name = local_nli_files(model)
    try:
        judge = CrossEncoderNLIJudge(onnx_file, tokenizer, config_path=config, **kwargs)
    except (OSError, ValueError, RuntimeError) as exc:
        raise NLIModelError(f"{model}: cannot load the model: {_first_line(exc)}") from exc
    judge.model_name = name
    return judge


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
