"""Judges named by a spec: what ``--judge`` and the evidence service's ``judge`` setting take.

* ``heuristic`` — the offline heuristic with the MiniLM embeddings (:func:`offline_judge`;
  rough, not an NLI model);
* ``heuristic-lexical`` — the offline heuristic without embeddings;
* ``llm:PROVIDER:MODEL`` — an :class:`~langchain_references.judges.LLMJudge` on the chat model
  ``PROVIDER:MODEL`` (a ``langchain.chat_models.init_chat_model`` name, e.g.
  ``llm:openai:gpt-4o-mini``).

:func:`llm_of_spec` checks a spec without loading anything; :func:`judge_from_spec` builds the
judge, loading the chat model with the caller's loader (the command line checks the provider's
API key first, the service reports a missing package its own way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from langchain_references.errors import LangchainReferencesError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langchain_references.judges.heuristic import HeuristicJudge
    from langchain_references.judges.llm import LLMJudge

__all__ = ["JUDGE_SPECS", "LLM_PREFIX", "JudgeSpecError", "judge_from_spec", "llm_of_spec"]

#: The specs of the offline judges, and the form of an LLM judge's.
JUDGE_SPECS: Final = ("heuristic", "heuristic-lexical", "llm:PROVIDER:MODEL")
#: What starts the spec of an LLM judge.
LLM_PREFIX: Final = "llm:"


class JudgeSpecError(LangchainReferencesError, ValueError):
    """A judge spec that names no judge (the message says which specs exist)."""


def llm_of_spec(spec: str) -> str | None:
    """The chat model of a judge spec, without loading anything.

    Args:
        spec: ``heuristic``, ``heuristic-lexical`` or ``llm:PROVIDER:MODEL``.

    Returns:
        ``PROVIDER:MODEL`` for an LLM judge, ``None`` for an offline one.

    Raises:
        JudgeSpecError: If the spec is none of those.
    """
    if spec in JUDGE_SPECS[:2]:
        return None
    model = spec.removeprefix(LLM_PREFIX)
    if spec.startswith(LLM_PREFIX) and model.strip():
        return model
    choices = ", ".join(f"'{s}'" for s in JUDGE_SPECS[:2])
    raise JudgeSpecError(f"must be {choices} or '{JUDGE_SPECS[2]}', got {spec!r}")


def judge_from_spec(
    spec: str, *, load_model: Callable[[str], BaseChatModel]
) -> tuple[HeuristicJudge | LLMJudge, BaseChatModel | None]:
    """Build the judge a spec names.

    Args:
        spec: ``heuristic``, ``heuristic-lexical`` or ``llm:PROVIDER:MODEL``.
        load_model: Loads ``PROVIDER:MODEL`` (an LLM judge's chat model).

    Returns:
        The judge and, for an LLM judge, its chat model.

    Raises:
        JudgeSpecError: If the spec names no judge.
    """
    model_name = llm_of_spec(spec)
    if model_name is None:
        from langchain_references.judges.offline import offline_judge

        return offline_judge(use_embeddings=spec == "heuristic"), None
    from langchain_references.judges.llm import LLMJudge

    model = load_model(model_name)
    return LLMJudge(model), model
