"""Fail fast on a model endpoint that cannot be reached: one line, then no more calls to it.

With an API key set but the endpoint unreachable (a wrong base URL, no network, a proxy
down), every call of a run would spend its whole retry policy (LangChain's ``with_retry`` and
the provider SDK's own retries) on the same connection error: a fact-check judging 18
passages took 40-47 s to list 18 identical failures. :class:`EndpointGuard` remembers a
connection error that survived the retries: until ``cooldown_s`` has passed, every later call
through the same guard fails at once with :class:`EndpointUnreachableError` (not retried:
it is no connection error), and one warning names the endpoint. A rate limit (429) or a
timeout does not trip it: the endpoint answers, or may.

The decisions are :meth:`EndpointGuard.before` and :meth:`EndpointGuard.after`; :func:`guarded`
wraps a runnable with them, for ``invoke`` and ``ainvoke`` alike (thin twins). One guard per
model client (a judge, an atomizer): what it holds is the health of one upstream, shared by
the calls of that client (threads and tasks), never anything of a request's.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "DEFAULT_COOLDOWN_S",
    "EndpointGuard",
    "EndpointUnreachableError",
    "chat_model_name",
    "endpoint_name",
    "guarded",
    "is_connection_error",
]

logger = logging.getLogger(__name__)

#: How long a guard keeps an unreachable endpoint's calls from being made (seconds).
DEFAULT_COOLDOWN_S: Final = 60.0
# Attributes of the provider integrations that hold the endpoint's URL, in order.
_URL_ATTRIBUTES: Final = ("openai_api_base", "anthropic_api_url", "base_url", "api_base")


class EndpointUnreachableError(LangchainReferencesError, RuntimeError):
    """A call not made: its endpoint failed to connect earlier (see :class:`EndpointGuard`)."""


def is_connection_error(error: BaseException) -> bool:
    """Whether ``error`` says the endpoint could not be reached (not a timeout or a 429).

    LangChain's provider integrations raise ``ModelConnectionError`` subclasses for it (the
    OpenAI and Anthropic ones do, over their SDKs' connection errors); a bare
    ``ConnectionError`` (refused, reset) counts too.

    Args:
        error: What a call raised, its retries spent.

    Returns:
        True for a connection error.
    """
    try:
        from langchain_core.exceptions import ModelConnectionError
    except ImportError:  # langchain-core before its model error classes
        return isinstance(error, ConnectionError)
    return isinstance(error, ModelConnectionError | ConnectionError)


def chat_model_name(llm: BaseChatModel) -> str:
    """The name of a chat model: ``PROVIDER:MODEL``, as LangChain's tracing names it.

    Read from the model's LangSmith parameters (``ls_provider``, ``ls_model_name``), which
    the provider packages fill in: ``ChatOpenAI(model="gpt-4o-mini")`` is
    ``"openai:gpt-4o-mini"``, as ``init_chat_model("openai:gpt-4o-mini")`` spells it. A model
    that names no model is named after its class.

    Args:
        llm: The chat model.

    Returns:
        Its name.
    """
    try:
        params = llm._get_ls_params()
    except Exception:  # a model whose tracing parameters fail still judges: name its class
        logger.debug("no tracing parameters for %s", type(llm).__name__, exc_info=True)
        return type(llm).__name__
    model = params.get("ls_model_name")
    if not isinstance(model, str) or not model.strip():
        return type(llm).__name__
    provider = params.get("ls_provider")
    return f"{provider}:{model}" if isinstance(provider, str) and provider.strip() else model


def endpoint_name(llm: BaseChatModel) -> str:
    """Name a chat model's endpoint for a person: ``MODEL at URL`` when the URL is known.

    Args:
        llm: The chat model (named by :func:`chat_model_name`).

    Returns:
        E.g. ``openai:gpt-4o-mini at http://127.0.0.1:9/v1`` (credentials in the URL left
        out), or ``model`` alone.
    """
    model = chat_model_name(llm)
    # the integration's own setting, else its SDK client's (which reads the environment)
    values = [getattr(llm, attribute, None) for attribute in _URL_ATTRIBUTES]
    values.append(getattr(getattr(llm, "root_client", None), "base_url", None))
    for value in values:
        text = str(value).strip() if value is not None else ""
        if text:
            parts = urllib.parse.urlsplit(text)
            host = parts.hostname or ""
            if parts.port is not None:
                host = f"{host}:{parts.port}"
            url = urllib.parse.urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
            return f"{model} at {url}"
    return model


class EndpointGuard:
    """Remembers that an endpoint could not be reached, for ``cooldown_s`` seconds.

    Args:
        endpoint: The endpoint's name, for the messages (:func:`endpoint_name`).
        cooldown_s: How long the calls are skipped after a connection error; then one call
            tries again (a service outlives an outage).
        clock: The monotonic clock (seconds).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        cooldown_s: float = DEFAULT_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not cooldown_s > 0:
            raise ValueError(f"cooldown_s must be positive, got {cooldown_s}")
        self.endpoint = endpoint
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._until = -float("inf")  # calls are skipped while the clock is before this
        self._error = ""

    def before(self) -> None:
        """Before a call: refuse it while the endpoint is known to be unreachable.

        Raises:
            EndpointUnreachableError: If a connection error came less than ``cooldown_s``
                ago.
        """
        with self._lock:
            if self._clock() < self._until:
                raise EndpointUnreachableError(
                    f"not called: {self.endpoint} could not be reached ({self._error})"
                )

    def after(self, error: BaseException) -> None:
        """After a call failed, its retries spent: a connection error opens the guard.

        Args:
            error: What the call raised.
        """
        if not is_connection_error(error):
            return
        with self._lock:
            now = self._clock()
            opened = now >= self._until
            self._until = now + self.cooldown_s
            self._error = f"{type(error).__name__}: {error}"
        if opened:
            logger.warning(
                "%s could not be reached (%s): its other calls are not made for %g s",
                self.endpoint,
                self._error,
                self.cooldown_s,
            )


def guarded(runnable: Runnable[Any, Any], guard: EndpointGuard) -> Runnable[Any, Any]:
    """``runnable`` behind ``guard``: refused while it is open, opening it on a connection error.

    Args:
        runnable: The call (retries included: the guard sees what survives them).
        guard: The endpoint's guard.

    Returns:
        The guarded runnable (sync and async).
    """

    def call(value: Any, config: RunnableConfig) -> Any:
        guard.before()
        try:
            return runnable.invoke(value, config)
        except Exception as error:
            guard.after(error)
            raise

    async def acall(value: Any, config: RunnableConfig) -> Any:
        guard.before()
        try:
            return await runnable.ainvoke(value, config)
        except Exception as error:
            guard.after(error)
            raise

    return RunnableLambda(call, afunc=acall, name="endpoint_guard")
