"""One helper for structured LLM calls with retries (the LLM judge, the atomizer, the reviser).

:class:`StructuredCall` is ``prompt | llm.with_structured_output(schema, include_raw=True)``,
retried on transient errors (:func:`default_transient_errors`: timeouts, connection errors,
rate limits, 5xx) with ``with_retry``. With ``include_raw=True`` a reply that does not
validate (no tool call, bad JSON, wrong types) is not an exception, so it is never retried:
:meth:`StructuredCall.read` turns it into a string saying why there is no reply, and each
caller decides what that becomes (a failed judgement, an ``AtomizerError``, an unrevised
chunk). Any other error propagates once the attempts are spent; a connection error that
survives them makes the next calls fail at once, for a while
(:mod:`~langchain_references.services._endpoint`: an unreachable endpoint costs one retry policy,
not one per call).

It holds no I/O of its own: callers run :attr:`StructuredCall.runnable` with ``invoke`` or
``ainvoke`` (or a batch) and read its output with :meth:`StructuredCall.read`, so the sync and
async paths share everything but the call.

Its users (:class:`StructuredCaller` subclasses) take the retry and output options as
:class:`StructuredCallOptions` keyword arguments and open their call with
:meth:`StructuredCaller._open_call`, so those options are declared and documented here only.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Generic, TypeAlias, TypedDict, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from langchain_references.services._endpoint import EndpointGuard, endpoint_name, guarded

__all__ = [
    "RetryOn",
    "StructuredCall",
    "StructuredCallOptions",
    "StructuredCaller",
    "default_transient_errors",
    "read_structured_reply",
]

SchemaT = TypeVar("SchemaT", bound=BaseModel)

RetryOn: TypeAlias = tuple[type[BaseException], ...] | Callable[[BaseException], bool]
"""Exception types to retry, or a predicate on the exception."""

_SDK_TRANSIENT: Final = (
    "APIConnectionError",
    "APITimeoutError",
    "RateLimitError",
    "InternalServerError",
)
_OPTIONAL_TRANSIENT: Final[dict[str, tuple[str, ...]]] = {
    "httpx": ("TimeoutException", "NetworkError", "RemoteProtocolError"),
    "openai": _SDK_TRANSIENT,
    "anthropic": _SDK_TRANSIENT,
}


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
    for module_name, names in _OPTIONAL_TRANSIENT.items():
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


def _describe(raw: object) -> str:
    """Say why a raw model message carries no structured reply."""
    if not isinstance(raw, BaseMessage):
        return "the model returned no message"
    invalid = getattr(raw, "invalid_tool_calls", None)
    if invalid:
        return f"invalid tool call: {invalid[0].get('error') or invalid[0].get('args')!s}"
    return f"the model answered without the tool: {str(raw.text)[:200]!r}"


def read_structured_reply(output: Any, schema: type[SchemaT]) -> SchemaT | str:
    """Read the output of ``with_structured_output(schema, include_raw=True)``.

    Args:
        output: ``{"raw", "parsed", "parsing_error"}`` (or an already parsed object).
        schema: The expected reply type.

    Returns:
        The parsed reply, or a string saying why there is none (``"malformed reply: ..."``,
        ``"no structured reply: ..."`` or ``"unexpected structured output: ..."``).
    """
    if isinstance(output, schema):
        return output
    if not isinstance(output, Mapping) or "parsed" not in output:
        return f"unexpected structured output: {type(output).__name__}"
    error = output.get("parsing_error")
    if error is not None:
        return f"malformed reply: {type(error).__name__}: {error}"
    parsed = output["parsed"]
    if parsed is None:
        return f"no structured reply: {_describe(output.get('raw'))}"
    if not isinstance(parsed, schema):
        return f"unexpected structured output: {type(parsed).__name__}"
    return parsed


class StructuredCall(Generic[SchemaT]):
    """``prompt | llm.with_structured_output(schema, include_raw=True)``, with retries.

    Args:
        llm: The chat model; ``with_structured_output(schema, include_raw=True)`` must work.
        schema: The reply schema (a pydantic model, bound as a tool).
        prompt: The prompt.
        variables: Variables the prompt must have (each caller's delimited blocks).
        retry_on: Exception types (or a predicate) to retry; defaults to
            :func:`default_transient_errors`.
        max_attempts: Attempts per call, including the first (1: no retry).
        retry_wait: Exponential back-off with jitter between attempts.
        structured_output_kwargs: Extra arguments of ``with_structured_output`` (e.g.
            ``{"method": "json_schema"}``).

    Attributes:
        schema: The reply schema.
        prompt: The prompt.
        retry_on: What is retried.
        guard: The endpoint's :class:`~langchain_references.services._endpoint.EndpointGuard`: once
        a
            connection error survives the retries, the later calls fail at once
            (:class:`~langchain_references.services._endpoint.EndpointUnreachableError`) for a
            while.
        runnable: The chain to ``invoke`` / ``ainvoke`` / ``batch``; its output goes to
            :meth:`read`.

    Raises:
        TypeError: If ``llm`` is not a chat model.
        ValueError: If ``max_attempts`` < 1 or the prompt lacks a variable.
    """

    def __init__(
        self,
        llm: BaseChatModel,
        schema: type[SchemaT],
        prompt: ChatPromptTemplate,
        *,
        variables: Iterable[str] = (),
        retry_on: RetryOn | None = None,
        max_attempts: int = 3,
        retry_wait: bool = True,
        structured_output_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(llm, BaseChatModel):
            raise TypeError(f"llm must be a BaseChatModel, not {type(llm).__name__}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        missing = set(variables) - set(prompt.input_variables)
        if missing:
            raise ValueError(f"prompt lacks the variables {sorted(missing)}")
        self.schema = schema
        self.prompt = prompt
        self.retry_on: RetryOn = retry_on if retry_on is not None else default_transient_errors()
        structured: Runnable[Any, Any] = llm.with_structured_output(
            schema, include_raw=True, **dict(structured_output_kwargs or {})
        )
        if max_attempts > 1:
            structured = structured.with_retry(
                retry_if_exception_type=self.retry_on,
                stop_after_attempt=max_attempts,
                wait_exponential_jitter=retry_wait,
            )
        self.guard = EndpointGuard(endpoint_name(llm))
        self.runnable: Runnable[dict[str, str], Any] = prompt | guarded(structured, self.guard)

    def read(self, output: Any) -> SchemaT | str:
        """Read an output of :attr:`runnable` (see :func:`read_structured_reply`).

        Args:
            output: The output.

        Returns:
            The parsed reply, or a string saying why there is none.
        """
        return read_structured_reply(output, self.schema)


class StructuredCallOptions(TypedDict, total=False):
    """The retry and output options of a :class:`StructuredCall`, as keyword arguments.

    The LLM judge, the atomizer and the reviser take them as ``**options`` and pass them on;
    an option not given keeps the default of :class:`StructuredCall`.

    Attributes:
        retry_on: Exception types (or a predicate) to retry; defaults to
            :func:`default_transient_errors`.
        max_attempts: Attempts per call, including the first (default 3; 1: no retry).
        retry_wait: Exponential back-off with jitter between attempts (default True).
        structured_output_kwargs: Extra arguments of ``with_structured_output`` (e.g.
            ``{"method": "json_schema"}`` for providers that support it).
    """

    retry_on: RetryOn | None
    max_attempts: int
    retry_wait: bool
    structured_output_kwargs: Mapping[str, Any] | None


class StructuredCaller(Generic[SchemaT]):
    """Base of the objects whose model calls are one :class:`StructuredCall`.

    Attributes:
        llm: The chat model.
        prompt: The prompt (the default one when none was given).
    """

    llm: BaseChatModel
    prompt: ChatPromptTemplate
    _call: StructuredCall[SchemaT]

    def _open_call(
        self,
        llm: BaseChatModel,
        schema: type[SchemaT],
        prompt: ChatPromptTemplate | None,
        default_prompt: ChatPromptTemplate,
        variables: Iterable[str],
        options: StructuredCallOptions,
    ) -> None:
        """Build the call and set :attr:`llm` and :attr:`prompt`.

        Args:
            llm: The chat model.
            schema: The reply schema.
            prompt: The prompt given, or None for ``default_prompt``.
            default_prompt: The caller's default prompt.
            variables: Variables the prompt must have.
            options: Retry and output options.

        Raises:
            TypeError: If ``llm`` is not a chat model.
            ValueError: If ``max_attempts`` < 1 or the prompt lacks a variable.
        """
        chosen = prompt if prompt is not None else default_prompt
        self._call = StructuredCall(llm, schema, chosen, variables=variables, **options)
        self.llm = llm
        self.prompt = self._call.prompt
