"""Citations for ``create_agent`` as middleware: ``middleware=[ReferencesMiddleware(...)]``.

:class:`ReferencesMiddleware` is LangChain 1.x's ``AgentMiddleware`` form of
:func:`~langchain_references.manage_references` over the agent's chat model. Each model call
goes to a :class:`~langchain_references.ReferencedChatModel` over the model of the request (one
step underneath, not a second implementation): the same answer, reference list,
``response_metadata["references"]``, v1 annotations, streamed tokens and citation check as
wrapping the model yourself.

What the middleware adds is memory: the document ids given in the conversation are kept in the
agent's state (the private ``reference_ids`` key, checkpointed with it), so each tool result
keeps its ids for the whole conversation, even when older messages are summarized away
(``SummarizationMiddleware``). Without it, ids follow the documents of the messages the model
is shown.

Order: middleware listed first wraps those after it, so list ``ReferencesMiddleware`` after any
middleware that replaces the model of the call (``ModelFallbackMiddleware``, a model router):
it then wraps the model actually called. Requires the ``[llm]`` extra (``langchain``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langgraph.types import Command

from langchain_references.chat_model import ReferencedChatModel
from langchain_references.citations.streaming import CitationChecker
from langchain_references.conversation import ConversationIds, give_ids
from langchain_references.core._parser import DEFAULT_MARKERS
from langchain_references.core.styles import ReferenceStyle
from langchain_references.manager import (
    REFERENCES_METADATA_KEY,
    OnUnsupported,
    ReferencedRunnable,
)
from langchain_references.native.registry import NativeOption

__all__ = ["REFERENCE_IDS_KEY", "ReferencesMiddleware", "ReferencesState"]

logger = logging.getLogger(__name__)

#: The agent state key holding the document ids given in the conversation.
REFERENCE_IDS_KEY = "reference_ids"


class ReferencesState(AgentState[Any]):
    """The agent state with the document ids of the conversation.

    The ids are private: not in the agent's input or output, but checkpointed with the state.
    """

    reference_ids: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]


def _identity(value: Any) -> Any:
    return value


class ReferencesMiddleware(AgentMiddleware[ReferencesState, Any, Any]):
    """Rewrite the citations of an agent's answers, with document ids stable in the conversation.

    ``create_agent(model, tools, middleware=[ReferencesMiddleware(style=...)])`` gives the
    answers of ``create_agent(manage_references(model, style=...), tools)``; see the module
    documentation for what it adds and where to list it. A call whose request has a
    ``response_format`` other than a ``ToolStrategy`` (structured output written as the
    answer's text) goes to the model as it is: structured output is not rewritten.

    Args:
        documents_key: As :func:`~langchain_references.manage_references` takes it (the dict
            input of the wrapped model).
        style: How citations and the reference list are written (Markdown by default).
        verifier: Check each sentence's citations while the answer streams; the report is in
            ``response_metadata["citation_check"]``.
        mark_unsupported: Append the unsupported sentences after the reference list.
        on_unsupported: What the reader sees of a citation its document does not support
            (with a verifier): ``"keep"`` it, ``"flag"`` it, or ``"drop"`` it.
        native: Read the provider's own citations too (``"auto"``, an adapter name or None).
        markers: The citation dialects the answers are written in.
        output_version: ``"v1"`` for standard content blocks with citation annotations
            (default: the model's own).

    Raises:
        TypeError: If ``style`` or ``verifier`` has the wrong type.
        ValueError: If an option's value is not one it takes.
    """

    state_schema = ReferencesState

    def __init__(
        self,
        *,
        documents_key: str = "documents",
        style: ReferenceStyle | None = None,
        verifier: CitationChecker | None = None,
        mark_unsupported: bool = False,
        on_unsupported: OnUnsupported = "keep",
        native: NativeOption | str = "auto",
        markers: Collection[str] = DEFAULT_MARKERS,
        output_version: str | None = None,
    ) -> None:
        super().__init__()
        # the options, checked now; each call wraps the request's model with them
        self.references = ReferencedRunnable(
            RunnableLambda(_identity),
            documents_key=documents_key,
            style=style,
            verifier=verifier,
            mark_unsupported=mark_unsupported,
            on_unsupported=on_unsupported,
            native=native,
            markers=markers,
            output_version=output_version,
        )
        self._warned = False

    # -- the decisions, for both drivers ---------------------------------------------------

    def prepare(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], ConversationIds]:
        """The request with its model wrapped, and the conversation's document ids after it.

        Args:
            request: The model request.

        Returns:
            The request to hand on, and the ids to keep in the state.
        """
        known = ConversationIds.from_state(request.state.get(REFERENCE_IDS_KEY))
        _, ids = give_ids(request.messages, known, warn=False)  # the model's own call warns
        response_format = request.response_format
        if response_format is not None and not isinstance(response_format, ToolStrategy):
            return request, ids  # structured output as text: not rewritten
        model = request.model
        if isinstance(model, ReferencedChatModel):  # wrapped already: give it the ids only
            return request.override(model=model.model_copy(update={"ids": known})), ids
        options: dict[str, Any] = {}
        if self.references.output_version is not None:
            options["output_version"] = self.references.output_version
        wrapped = ReferencedChatModel(
            wrapped=model, references=self.references.with_bound(model), ids=known, **options
        )
        return request.override(model=wrapped), ids

    def respond(
        self, request: ModelRequest[Any], response: ModelResponse[Any], ids: ConversationIds
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """The model's response, with the conversation's ids kept in the state if they grew.

        Args:
            request: The request the middleware was given.
            response: What the model call returned.
            ids: The ids after the call (:meth:`prepare`).

        Returns:
            The response, as an ``ExtendedModelResponse`` updating the state if needed.
        """
        self._check_rewritten(request, response)
        if ConversationIds.from_state(request.state.get(REFERENCE_IDS_KEY)) == ids:
            return response
        update = {REFERENCE_IDS_KEY: ids.to_state()}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def _check_rewritten(self, request: ModelRequest[Any], response: ModelResponse[Any]) -> None:
        """Warn once when an answer came back without its references (order of middleware)."""
        if self._warned or (
            request.response_format is not None
            and not isinstance(request.response_format, ToolStrategy)
        ):
            return
        for message in response.result:
            if isinstance(message, AIMessage) and (
                REFERENCES_METADATA_KEY not in message.response_metadata
            ):
                self._warned = True
                logger.warning(
                    "ReferencesMiddleware: an answer came back without its citations rewritten: "
                    "a middleware listed after ReferencesMiddleware replaced the model of the "
                    "call. List ReferencesMiddleware after it (e.g. after "
                    "ModelFallbackMiddleware)."
                )
                return

    # -- the drivers -------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Call the model of the request, wrapped (see the class documentation)."""
        wrapped, ids = self.prepare(request)
        return self.respond(request, handler(wrapped), ids)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        wrapped, ids = self.prepare(request)
        return self.respond(request, await handler(wrapped), ids)
