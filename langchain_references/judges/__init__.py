"""Judges: decide whether a passage entails, contradicts or says nothing about a statement.

The fact-check chain, the factuality relations, the citation verifier and the streaming
citation check all take a judge: any ``Runnable[{"statement", "passage"}, Judgement]``.

* :class:`LLMJudge` — any LangChain chat model, structured output, retries.
* :class:`CrossEncoderNLIJudge` — an ONNX cross-encoder NLI model (``nli`` extra; weights are
  downloaded from the Hugging Face Hub by :meth:`CrossEncoderNLIJudge.from_pretrained`).
* :class:`HeuristicJudge` — offline lexical / embedding heuristic; not an NLI model, weak.
* :func:`offline_judge` — the default when no model is configured (the heuristic, with the
  offline MiniLM embeddings when they load).

Every judge names itself: :func:`judge_info` (``Judge.info()``) gives its :class:`JudgeInfo`
(kind ``llm`` with ``PROVIDER:MODEL``, ``nli`` with the model, ``heuristic``...), which results
and reports carry. Subclass :class:`Judge` and implement ``_judge`` to add another. The names
below are imported lazily, on first access: a judge's optional dependencies load only with the
judge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_references._optional import lazy_exports

if TYPE_CHECKING:
    from langchain_references.judges.base import (
        Judge,
        JudgeInfo,
        JudgeInput,
        JudgeInputLike,
        Judgement,
        Label,
        judge_info,
    )
    from langchain_references.judges.heuristic import HeuristicJudge
    from langchain_references.judges.llm import LLMJudge
    from langchain_references.judges.nli import CrossEncoderNLIJudge
    from langchain_references.judges.offline import offline_judge

#: Public name -> submodule that defines it.
_EXPORTS: dict[str, str] = {
    "Judge": "base",
    "JudgeInfo": "base",
    "JudgeInput": "base",
    "JudgeInputLike": "base",
    "Judgement": "base",
    "Label": "base",
    "judge_info": "base",
    "HeuristicJudge": "heuristic",
    "LLMJudge": "llm",
    "CrossEncoderNLIJudge": "nli",
    "offline_judge": "offline",
}

__all__ = [
    "CrossEncoderNLIJudge",
    "HeuristicJudge",
    "Judge",
    "JudgeInfo",
    "JudgeInput",
    "JudgeInputLike",
    "Judgement",
    "LLMJudge",
    "Label",
    "judge_info",
    "offline_judge",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
