"""Judges named by a spec: what ``--judge`` and the evidence service's ``judge`` setting take.

* ``heuristic`` — the offline heuristic with the MiniLM embeddings (:func:`offline_judge`;
  rough, not an NLI model);
* ``heuristic-lexical`` — the offline heuristic without embeddings;
* ``llm:PROVIDER:MODEL`` — an :class:`~langchain_references.judges.LLMJudge` on the chat model
  ``PROVIDER:MODEL`` (a ``langchain.chat_models.init_chat_model`` name, e.g.
  ``llm:openai:gpt-4o-mini``);
* ``nli:MODEL`` — a :class:`~langchain_references.judges.CrossEncoderNLIJudge` (the ``nli``
  extra) on a local model folder or ``.onnx`` file with its ``tokenizer.json`` and
  ``config.json``, or on a Hugging Face Hub repository ``ORG/NAME[@REVISION]`` (downloaded
  when online); see :func:`~langchain_references.judges.nli.load_nli_judge`. Its verdicts are
  named after the model.

:func:`parse_judge_spec` reads a spec without loading anything (the one parser of specs: the
command line and the service both use it); :func:`judge_from_spec` builds the judge, loading
the chat model of an LLM judge with the caller's loader (the command line checks the
provider's API key first, the service reports a missing package its own way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from langchain_references.errors import LangchainReferencesError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langchain_references.judges.heuristic import HeuristicJudge
    from langchain_references.judges.llm import LLMJudge
    from langchain_references.judges.nli import CrossEncoderNLIJudge

__all__ = [
    "JUDGE_SPECS",
    "LLM_PREFIX",
    "NLI_PREFIX",
    "JudgeSpec",
    "JudgeSpecError",
    "SpecKind",
    "judge_from_spec",
    "llm_of_spec",
    "parse_judge_spec",
    "portable_judge_spec",
]

#: The specs of the offline judges, and the forms of an LLM judge's and an NLI judge's.
JUDGE_SPECS: Final = ("heuristic", "heuristic-lexical", "llm:PROVIDER:MODEL", "nli:MODEL")
#: What starts the spec of an LLM judge.
LLM_PREFIX: Final = "llm:"
#: What starts the spec of an NLI judge.
NLI_PREFIX: Final = "nli:"

SpecKind: TypeAlias = Literal["heuristic", "heuristic-lexical", "llm", "nli"]
"""What a spec names: one of the offline heuristics, an LLM judge or an NLI judge."""


class JudgeSpecError(LangchainReferencesError, ValueError):
    """A judge spec that names no judge (the message says which specs exist)."""


@dataclass(frozen=True)
class JudgeSpec:
    """A judge spec, read (:func:`parse_judge_spec`).

    Attributes:
        kind: ``heuristic``, ``heuristic-lexical``, ``llm`` or ``nli``.
        model: ``PROVIDER:MODEL`` of an LLM judge, the model (path or Hub id) of an NLI
            judge, ``None`` for a heuristic.
    """

    kind: SpecKind
    model: str | None = None


def parse_judge_spec(spec: str) -> JudgeSpec:
    """Read a judge spec, without loading anything.

    Args:
        spec: ``heuristic``, ``heuristic-lexical``, ``llm:PROVIDER:MODEL`` or ``nli:MODEL``.

    Returns:
        What it names.

    Raises:
        JudgeSpecError: If the spec is none of those (or its model is blank).

    Examples:
        >>> parse_judge_spec("nli:models/tiny-nli")
        JudgeSpec(kind='nli', model='models/tiny-nli')
    """
    if spec == "heuristic":
        return JudgeSpec("heuristic")
    if spec == "heuristic-lexical":
        return JudgeSpec("heuristic-lexical")
    for prefix, kind in ((LLM_PREFIX, "llm"), (NLI_PREFIX, "nli")):
        model = spec.removeprefix(prefix)
        if spec.startswith(prefix) and model.strip():
            return JudgeSpec(kind, model)  # type: ignore[arg-type]
    *first, last = (f"'{s}'" for s in JUDGE_SPECS)
    raise JudgeSpecError(f"must be {', '.join(first)} or {last}, got {spec!r}")


def portable_judge_spec(spec: str) -> str:
    """The spec as another process reads it (the service's workers): local paths made absolute.

    Args:
        spec: A judge spec (:func:`parse_judge_spec`).

    Returns:
        ``nli:/ABSOLUTE/PATH`` for an NLI model on disk given by a relative path, the spec
        unchanged otherwise (a Hub id, an LLM judge, a heuristic, an absolute path).

    Raises:
        JudgeSpecError: If the spec names no judge.
    """
    parsed = parse_judge_spec(spec)
    if parsed.kind != "nli" or parsed.model is None:
        return spec
    from langchain_references.judges.nli import is_hub_id

    if is_hub_id(parsed.model):
        return spec
    return NLI_PREFIX + str(Path(parsed.model).expanduser().absolute())


def llm_of_spec(spec: str) -> str | None:
    """The chat model of a judge spec, without loading anything.

    Args:
        spec: A judge spec (:func:`parse_judge_spec`).

    Returns:
        ``PROVIDER:MODEL`` for an LLM judge, ``None`` for any other.

    Raises:
        JudgeSpecError: If the spec names no judge.
    """
    parsed = parse_judge_spec(spec)
    return parsed.model if parsed.kind == "llm" else None


def judge_from_spec(
    spec: str, *, load_model: Callable[[str], BaseChatModel]
) -> tuple[HeuristicJudge | LLMJudge | CrossEncoderNLIJudge, BaseChatModel | None]:
    """Build the judge a spec names.

    Args:
        spec: ``heuristic``, ``heuristic-lexical``, ``llm:PROVIDER:MODEL`` or ``nli:MODEL``.
        load_model: Loads ``PROVIDER:MODEL`` (an LLM judge's chat model).

    Returns:
        The judge and, for an LLM judge, its chat model.

    Raises:
        JudgeSpecError: If the spec names no judge.
        NLIModelError: If the model of ``nli:MODEL`` cannot be found, downloaded or loaded.
        MissingDependencyError: If ``nli:MODEL`` needs a package of the ``nli`` extra.
    """
    parsed = parse_judge_spec(spec)
    if parsed.model is None:
        from langchain_references.judges.offline import offline_judge

        return offline_judge(use_embeddings=parsed.kind == "heuristic"), None
    if parsed.kind == "nli":
        from langchain_references.judges.nli import load_nli_judge

        return load_nli_judge(parsed.model), None
    from langchain_references.judges.llm import LLMJudge

    model = load_model(parsed.model)
    return LLMJudge(model), model
