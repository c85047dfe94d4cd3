"""A judge backed by any LangChain chat model, with structured output and retries.

The passage and the statement are untrusted: both go into delimited blocks
(:func:`~langchain_references.core.prompting.delimit`) and the system prompt tells the model
that block content is data. The reply is requested with ``llm.with_structured_output`` (a
:class:`JudgeReply` tool call); a reply that does not validate (unknown label, confidence out of
``[0, 1]``, missing field, no tool call) becomes a failed :class:`Judgement`, never an exception,
and is not retried; transient errors (timeouts, connection errors, rate limits) are retried. The
call and its reading are :class:`~langchain_references.services._structured.StructuredCall`, shared
with the factuality atomizer and reviser.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field, field_validator

from langchain_references.core.prompting import data_prompt, delimit
from langchain_references.judges.base import Judge, JudgeInfo, Judgement, Label
from langchain_references.services._endpoint import chat_model_name
from langchain_references.services._structured import (
    StructuredCaller,
    StructuredCallOptions,
    default_transient_errors,
)

__all__ = [
    "DEFAULT_JUDGE_PROMPT",
    "JudgeReply",
    "LLMJudge",
    "chat_model_name",
    "default_transient_errors",
]

logger = logging.getLogger(__name__)

_TAGS = ("statement", "passage")

_INSTRUCTIONS = (
    "You are a careful fact-checker. You get a STATEMENT in a <statement> block and a PASSAGE "
    "in a <passage> block. Assume the passage is true and decide, using only the passage and "
    "no outside knowledge, whether it:\n"
    "- entails the statement (the passage implies the statement is true),\n"
    "- contradicts the statement (the passage implies the statement is false), or\n"
    "- is unknown (the passage is unrelated or does not settle the statement)."
)
_ANSWER = (
    "Answer with the JudgeReply tool: the label, your confidence in it between 0 and 1, and a "
    "one- or two-sentence rationale."
)

#: Default prompt; its variables ``statement`` and ``passage`` receive delimited blocks.
DEFAULT_JUDGE_PROMPT = data_prompt(_INSTRUCTIONS, _ANSWER, "{statement}\n\n{passage}")


class JudgeReply(BaseModel):
    """Judgement of whether the passage entails, contradicts or says nothing about the statement."""

    label: Literal["entails", "contradicts", "unknown"] = Field(
        description="entails, contradicts or unknown"
    )
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in the label, 0 to 1")
    rationale: str = Field(description="One or two sentences explaining the label")

    @field_validator("label", mode="before")
    @classmethod
    def _normalize_label(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class LLMJudge(StructuredCaller[JudgeReply], Judge):
    """Judge with a chat model (any LangChain ``BaseChatModel`` that supports tool calling).

    Args:
        llm: The chat model. ``llm.with_structured_output(JudgeReply, include_raw=True)`` must
            work (OpenAI, Anthropic, Ollama, ... chat models do).
        prompt: A prompt with variables ``statement`` and ``passage`` (each receives a
            delimited block); defaults to :data:`DEFAULT_JUDGE_PROMPT`.
        raise_errors: Re-raise errors instead of recording them in ``Judgement.error``.
        **options: Retries and structured output
            (:class:`~langchain_references.services._structured.StructuredCallOptions`).

    Examples:
        >>> from langchain_openai import ChatOpenAI  # doctest: +SKIP
        >>> judge = LLMJudge(ChatOpenAI(model="gpt-4o-mini", temperature=0))  # doctest: +SKIP
        >>> judge.invoke({"statement": "Ice melts at 0 °C.",  # doctest: +SKIP
        ...               "passage": "Water ice melts at 0 degrees Celsius."}).label
        <Label.ENTAILS: 'entails'>
    """

    def __init__(
        self,
        llm: BaseChatModel,
        *,
        prompt: ChatPromptTemplate | None = None,
        raise_errors: bool = False,
        **options: Unpack[StructuredCallOptions],
    ) -> None:
        self._open_call(llm, JudgeReply, prompt, DEFAULT_JUDGE_PROMPT, _TAGS, options)
        self.retry_on = self._call.retry_on
        self.raise_errors = raise_errors

    judge_kind = "llm"

    def info(self) -> JudgeInfo:
        """Kind ``llm`` and the chat model's name (:func:`chat_model_name`).

        Returns:
            E.g. ``JudgeInfo(kind="llm", model="openai:gpt-4o-mini", ...)``.
        """
        return JudgeInfo.of("llm", model=chat_model_name(self.llm))

    def _inputs(self, statement: str, passage: str) -> dict[str, str]:
        return {
            "statement": delimit("statement", statement, reserved=_TAGS),
            "passage": delimit("passage", passage, reserved=_TAGS),
        }

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        output = self._call.runnable.invoke(self._inputs(statement, passage), config)
        return self._to_judgement(output)

    async def _ajudge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        output = await self._call.runnable.ainvoke(self._inputs(statement, passage), config)
        return self._to_judgement(output)

    def _to_judgement(self, output: Any) -> Judgement:
        """Turn a structured output into a Judgement (a failed one if the reply is malformed)."""
        reply = self._call.read(output)
        if isinstance(reply, str):
            logger.warning("malformed judge reply: %s", reply)
            return Judgement.failed(reply)
        return Judgement(
            label=Label(reply.label), confidence=reply.confidence, rationale=reply.rationale
        )
