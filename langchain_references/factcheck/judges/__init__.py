"""Judges: decide whether a passage entails, contradicts or says nothing about a statement.

* :class:`LLMJudge` — any LangChain chat model, structured output, retries.
* :class:`CrossEncoderNLIJudge` — an ONNX cross-encoder NLI model (``nli`` extra; weights are
  downloaded from the Hugging Face Hub by :meth:`CrossEncoderNLIJudge.from_pretrained`).
* :class:`HeuristicJudge` — offline lexical / embedding heuristic; not an NLI model, weak.

Subclass :class:`Judge` and implement ``_judge`` to add another.
"""

from langchain_references.factcheck.judges.base import (
    Judge,
    JudgeInput,
    JudgeInputLike,
    Judgement,
    Label,
    coerce_judge_input,
)
from langchain_references.factcheck.judges.baseline import HeuristicJudge
from langchain_references.factcheck.judges.llm import JudgeReply, LLMJudge
from langchain_references.factcheck.judges.nli import CrossEncoderNLIJudge

__all__ = [
    "CrossEncoderNLIJudge",
    "HeuristicJudge",
    "Judge",
    "JudgeInput",
    "JudgeInputLike",
    "JudgeReply",
    "Judgement",
    "LLMJudge",
    "Label",
    "coerce_judge_input",
]
