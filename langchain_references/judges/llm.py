"""A judge backed by any LangChain chat model, with structured output and retries.

The passage and the statement are untrusted: both go into delimited blocks
(:func:`~langchain_references.prompting.delimit`) and the system prompt tells the model
that block content is data. The reply is requested with ``llm.with_structured_output`` (a
:class:`JudgeReply` tool call); a reply that does not validate (unknown label, confidence out of
``[0, 1]``, missing field, no tool call) becomes a failed :class:`Judgement`, never an exception.
Transient errors (timeouts, connection errors, rate limits) are retried.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, Field, field_validator

from langchain_references.judges.base import Judge, Judgement, Label
from langchain_references.prompting import DATA_NOTICE, delimit

__all__ = [
    "DEFAULT_JUDGE_PROMPT",
    "JudgeReply",
    "LLMJudge",
    "default_transient_errors",
]

logger = logging.getLogger(__name__)

_TAGS = ("statement", "passage")

_SYSTEM = (
    "You are a careful fact-checker. You get a STATEMENT in a <statement> block and a PASSAGE "
    "in a <passage> block. Assume the passage is true and decide, using only the passage and "
    "no outside knowledge, whether it:\n"
    "- entails the statement (the passage implies the statement is true),\n"
    "- contradicts the statement (the passage implies the statement is false), or\n"
    "- is unknown (the passage is unrelated or does not settle the statement).\n"
    f"{DATA_NOTICE}\n"
    "Answer with the JudgeReply tool: the label, your confidence in it between 0 and 1, and a "
    "one- or two-sentence rationale."
)

#: Default prompt; its variables ``statement`` and ``passage`` receive delimited blocks.
DEFAULT_JUDGE_PROMPT = ChatPromptTemplate.from_messages(
    [("system", _SYSTEM), ("human", "{statement}\n\n{passage}")]
)


class JudgeReply(BaseModel):
    """Judgement of whether the passage entails, contradicts or says nothing about the statement."""

    label: Literal["entails", "contradicts", "unknown"] = Field(
        description="entails, contradicts or unknown"
    )
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in the label, 0 to 1")
    rationale: str = Field(description="One or two sentences explaining the label")

    @field_validator("label", mode="before")
    @classmethod
    def _normalise_label(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


def default_transient_errors() -> tuple[type[BaseException], ...]:
    """Exception types worth retrying: timeouts, connection errors, rate limits, 5xx.

    Always ``TimeoutError`` and ``ConnectionError``; plus, when the packages are installed,
    ``httpx`` timeouts / network / protocol errors and the connection, timeout, rate-limit and
    server errors of the ``openai`` and ``anthropic`` SDKs. Never ``ValueError``: a bad request
    does not get better by repeating it.

    Returns:
        The exception types.
    """
    errors: list[type[BaseException]] = [TimeoutError, ConnectionError]
    optional = {
        "httpx": ("TimeoutException", "NetworkError", "RemoteProtocolError"),
        "openai": (
            "APIConnectionError",
            "APITimeoutError",
            "RateLimitError",
            "InternalServerError",
        ),
        "anthropic": (
            "APIConnectionError",
            "APITimeoutError",
            "RateLimitError",
            "InternalServerError",
        ),
    }
    for module_name, names in optional.items():
        if importlib.util.find_spec(module_name) is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - broken install
            continue
        for name in names:
            exc_type = getattr(module, name, None)
            if isinstance(exc_type, type) and issubclass(exc_type, BaseException):
                errors.append(exc_type)
    return tuple(dict.fromkeys(e for e in errors if not issubclass(e, ValueError)))


class LLMJudge(Judge):
    """Judge with a chat model (any LangChain ``BaseChatModel`` that supports tool calling).

    Args:
        llm: The chat model. ``llm.with_structured_output(JudgeReply, include_raw=True)`` must
            work (OpenAI, Anthropic, Ollama, ... chat models do).
        prompt: A prompt with variables ``statement`` and ``passage`` (each receives a
            delimited block); defaults to :data:`DEFAULT_JUDGE_PROMPT`.
        retry_on: Exception types (or a predicate) to retry; defaults to
            :func:`default_transient_errors`.
        max_attempts: Attempts per call, including the first.
        retry_wait: Wait with exponential back-off and jitter between attempts.
        structured_output_kwargs: Extra arguments of ``with_structured_output`` (e.g.
            ``{"method": "json_schema"}`` for providers that support it).
        raise_errors: Re-raise errors instead of recording them in ``Judgement.error``.

    Example:
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
        retry_on: tuple[type[BaseException], ...] | Callable[[BaseException], bool] | None = None,
        max_attempts: int = 3,
        retry_wait: bool = True,
        structured_output_kwargs: dict[str, Any] | None = None,
        raise_errors: bool = False,
    ) -> None:
        if not isinstance(llm, BaseChatModel):
            raise TypeError(f"llm must be a BaseChatModel, not {type(llm).__name__}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.prompt = prompt if prompt is not None else DEFAULT_JUDGE_PROMPT
        missing = set(_TAGS) - set(self.prompt.input_variables)
        if missing:
            raise ValueError(f"prompt lacks the variables {sorted(missing)}")
        self.llm = llm
        self.raise_errors = raise_errors
        self.retry_on = retry_on if retry_on is not None else default_transient_errors()
        structured: Runnable[Any, Any] = llm.with_structured_output(
            JudgeReply, include_raw=True, **(structured_output_kwargs or {})
        )
        if max_attempts > 1:
            structured = structured.with_retry(
                retry_if_exception_type=self.retry_on,
                stop_after_attempt=max_attempts,
                wait_exponential_jitter=retry_wait,
            )
        self._chain: Runnable[dict[str, str], Any] = self.prompt | structured

    def _inputs(self, statement: str, passage: str) -> dict[str, str]:
        return {
            "statement": delimit("statement", statement, reserved=_TAGS),
            "passage": delimit("passage", passage, reserved=_TAGS),
        }

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return self._to_judgement(self._chain.invoke(self._inputs(statement, passage), config))

    async def _ajudge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        output = await self._chain.ainvoke(self._inputs(statement, passage), config)
        return self._to_judgement(output)

    @staticmethod
    def _to_judgement(output: Any) -> Judgement:
        """Turn ``with_structured_output(..., include_raw=True)`` output into a Judgement."""
        if isinstance(output, JudgeReply):
            reply: object = output
        elif isinstance(output, dict) and "parsed" in output:
            error = output.get("parsing_error")
            if error is not None:
                logger.warning("malformed judge reply: %s", error)
                return Judgement.failed(f"malformed reply: {type(error).__name__}: {error}")
            reply = output["parsed"]
            if reply is None:
                return Judgement.failed(f"no structured reply: {_describe(output.get('raw'))}")
        else:
            return Judgement.failed(f"unexpected structured output: {type(output).__name__}")
        if not isinstance(reply, JudgeReply):
            return Judgement.failed(f"unexpected structured output: {type(reply).__name__}")
        return Judgement(
            label=Label(reply.label), confidence=reply.confidence, rationale=reply.rationale
        )


def _describe(raw: object) -> str:
    if not isinstance(raw, BaseMessage):
        return "the model returned no message"
    invalid = getattr(raw, "invalid_tool_calls", None)
    if invalid:
        return f"invalid tool call: {invalid[0].get('error') or invalid[0].get('args')!s}"
    return f"the model answered without the tool: {str(raw.text)[:200]!r}"
