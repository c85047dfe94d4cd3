"""A chat model whose citations are managed: the wrapper agents and LangGraph nodes take.

:func:`~langchain_references.manage_references` over a chat model returns a
:class:`ReferencedChatModel`. It *is* a chat model, so ``create_agent(model=...)`` and any code
that calls ``bind_tools``, ``with_structured_output``, ``bind`` or ``with_config`` take it
unchanged, and LangGraph's ``stream_mode="messages"`` streams its rewritten tokens.

In a conversation, the documents are the :class:`~langchain_core.documents.Document` lists in
the ``artifact`` of its ``ToolMessage`` s (``create_retriever_tool(...,
response_format="content_and_artifact")``, or any ``content_and_artifact`` tool), in whatever
form a checkpointed history gives them back (see :mod:`langchain_references.conversation`).
Each document gets an id unique in the conversation, numbered across tool calls and turns in
conversation order, and the model is shown each such tool result as ``<document id=N>`` blocks
(:func:`~langchain_references.format_documents`) under the citation instruction. The answer's
``[n](id=k)`` citations are then rewritten while it streams, exactly as by
:class:`~langchain_references.ReferencedRunnable` (the same per-chunk step), and the wrapped
model's own tokens carry LangGraph's ``nostream`` tag so that a UI never sees the raw markers.

Called with the dict input of :class:`~langchain_references.ReferencedRunnable`
(``{"documents": [...], "input": messages}``), it behaves exactly as that runnable does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    BaseCallbackManager,
    CallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import (
    generate_from_stream,
)
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.utils.pydantic import TypeBaseModel
from pydantic import ConfigDict, model_validator
from typing_extensions import override

from langchain_references.conversation import ConversationIds, number_conversation
from langchain_references.core.prompting import FORMAT_REFERENCES
from langchain_references.manager import (
    MODEL_INPUT_KEY,
    NOSTREAM_TAG,
    ReferencedRunnable,
    _Session,
    _Steps,
)

__all__ = ["ReferencedChatModel", "conversation_documents"]


def conversation_documents(
    messages: Sequence[BaseMessage], *, instruction: str | None = FORMAT_REFERENCES
) -> tuple[list[BaseMessage], list[Document]]:
    """Number the documents of a conversation's tool results and show them to the model so.

    Args:
        messages: The conversation.
        instruction: The citation instruction put before each tool result's documents, or
            None for none.

    Returns:
        The conversation as the model is shown it (each tool message whose artifact holds
        documents has them as ``<document id=N>`` blocks, ids unique in the conversation),
        and the documents in id order (id ``k`` at position ``k``). See
        :func:`~langchain_references.conversation.number_conversation`, which this calls
        without earlier ids.

    Examples:
        >>> from langchain_core.messages import HumanMessage, ToolMessage
        >>> docs = [Document("Paris is in France.")]
        >>> tool = ToolMessage("Paris is in France.", artifact=docs, tool_call_id="1")
        >>> shown, documents = conversation_documents([HumanMessage("Hi"), tool, tool])
        >>> print(shown[2].content.splitlines()[-3:])
        ['<document id=2>', 'Paris is in France.', '</document>']
    """
    shown, documents, _ = number_conversation(messages, instruction=instruction)
    return shown, documents


class ReferencedChatModel(BaseChatModel):
    """A chat model whose ``[n](id=k)`` citations become real, numbered references.

    Build it with :func:`~langchain_references.manage_references` on a chat model. See the
    module documentation for where the documents come from. Each answer numbers its sources
    from 1 by first use, one number per source; the final chunk carries the reference list
    and ``response_metadata["references"]``, and the ``"references"`` custom event is sent,
    as for :class:`~langchain_references.ReferencedRunnable`.

    Attributes:
        wrapped: The chat model that writes the answers.
        references: The citation options (style, verifier, native citations, marker
            dialects) and the runnable that serves the dict input.
        bound: The wrapped model with tools or arguments bound (``bind_tools``), if any.
        model_name: The wrapped model's name (read by ``create_agent``).
        ids: The document ids given on earlier calls of the conversation, which its tool
            results keep (:class:`~langchain_references.ReferencesMiddleware` sets them from
            the agent's state); None: ids follow the documents of the messages given.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    wrapped: BaseChatModel
    references: ReferencedRunnable
    bound: Runnable[Any, Any] | None = None
    model_name: str | None = None
    ids: ConversationIds | None = None

    @model_validator(mode="before")
    @classmethod
    def _copy_identity(cls, values: Any) -> Any:
        """Take the wrapped model's name and profile unless given."""
        if isinstance(values, dict) and isinstance(values.get("wrapped"), BaseChatModel):
            wrapped = values["wrapped"]
            if values.get("model_name") is None:
                for name in ("model_name", "model", "model_id"):
                    if isinstance(value := getattr(wrapped, name, None), str):
                        values = {**values, "model_name": value}
                        break
            if values.get("profile") is None and wrapped.profile is not None:
                values = {**values, "profile": wrapped.profile}
            if values.get("output_version") is None:
                values = {**values, "output_version": wrapped.output_version}
        return values

    @property
    def _llm_type(self) -> str:
        return f"references-{self.wrapped._llm_type}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"wrapped": self.wrapped._identifying_params, "style": type(self.references.style)}

    @override
    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        return self.references.get_name(suffix, name=name or self.name)

    @override
    def get_output_schema(self, config: RunnableConfig | None = None) -> TypeBaseModel:
        """The wrapped model's output schema: the wrapper keeps the output type."""
        return self.wrapped.get_output_schema(config)

    # -- what the agent calls ----------------------------------------------------------------

    @override
    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools to the wrapped model; the result still manages citations.

        Args:
            tools: The tools, as the wrapped model's ``bind_tools`` takes them.
            tool_choice: As the wrapped model's ``bind_tools`` takes it.
            **kwargs: Passed to the wrapped model's ``bind_tools``.

        Returns:
            A copy of this wrapper over the wrapped model with the tools bound.
        """
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.model_copy(update={"bound": self.wrapped.bind_tools(tools, **kwargs)})

    def _model(self) -> Runnable[Any, Any]:
        return self.bound if self.bound is not None else self.wrapped

    # -- the dict input of ReferencedRunnable ------------------------------------------------

    @override
    def invoke(
        self,
        input: LanguageModelInput | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        if isinstance(input, Mapping):
            result: AIMessage = self._dict_runnable().invoke(input, config, **kwargs)
            return result
        return super().invoke(input, config, stop=stop, **kwargs)

    @override
    async def ainvoke(
        self,
        input: LanguageModelInput | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        if isinstance(input, Mapping):
            result: AIMessage = await self._dict_runnable().ainvoke(input, config, **kwargs)
            return result
        return await super().ainvoke(input, config, stop=stop, **kwargs)

    @override
    def stream(
        self,
        input: LanguageModelInput | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        if isinstance(input, Mapping):
            return self._dict_runnable().stream(input, config, **kwargs)
        runnable, request = self._conversation(input, stop, kwargs)
        return runnable.stream(request, config)

    @override
    def astream(
        self,
        input: LanguageModelInput | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        if isinstance(input, Mapping):
            return self._dict_runnable().astream(input, config, **kwargs)
        runnable, request = self._conversation(input, stop, kwargs)
        return runnable.astream(request, config)

    def _conversation(
        self, input: LanguageModelInput, stop: list[str] | None, kwargs: dict[str, Any]
    ) -> tuple[ReferencedRunnable, dict[str, Any]]:
        """The runnable and dict input that stream a conversation's answer.

        ``stream`` / ``astream`` run as :class:`ReferencedRunnable` does, on the conversation
        shown to the model: a chain run of their own, so that the wrapped model's run, the
        citation check and the ``"references"`` event belong to the caller's run (a chat
        model's ``_stream`` is given no run manager to attach them to).
        """
        shown, documents = self._number(self._convert_input(input).to_messages())
        model = self._model()
        if stop is not None or kwargs:
            model = model.bind(**({"stop": stop} if stop is not None else {}), **kwargs)
        runnable = self._runnable_over(model)
        return runnable, {self.references.documents_key: documents, MODEL_INPUT_KEY: shown}

    def _number(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[Document]]:
        """The conversation shown to the model and its documents by id (see :attr:`ids`)."""
        numbered = number_conversation(messages, instruction=self._instruction(), ids=self.ids)
        return numbered.shown, numbered.documents

    def _instruction(self) -> str | None:
        """The citation instruction shown with the documents (for the ``[n](id=k)`` dialect)."""
        return FORMAT_REFERENCES if "id" in self.references.markers else None

    def _dict_runnable(self) -> ReferencedRunnable:
        """The runnable that takes ``{"documents": [...], "input": ...}``, tools bound."""
        return self._runnable_over(self._model())

    def _runnable_over(self, model: Runnable[Any, Any]) -> ReferencedRunnable:
        """:attr:`references` over ``model``, with this wrapper's ``output_version``."""
        return self.references.with_bound(model, output_version=self.output_version)

    # -- the chat model ----------------------------------------------------------------------

    def _open(
        self,
        messages: list[BaseMessage],
        run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None,
        *,
        use_async: bool,
    ) -> tuple[_Session, list[BaseMessage], RunnableConfig]:
        """Open one answer: its session, the conversation shown to the model, its config."""
        shown, documents = self._number(messages)
        if run_manager is not None:
            config: RunnableConfig = {"callbacks": _child(run_manager)}
        else:  # BaseChatModel.stream() gives no run manager: the caller's config, tagged
            ambient = ensure_config()
            config = {**ambient, "tags": [*ambient.get("tags", []), NOSTREAM_TAG]}
        session = self.references.open_session(
            documents, config, use_async=use_async, output_version=self.output_version
        )
        return session, shown, config

    def _run(
        self,
        messages: list[BaseMessage],
        run_manager: CallbackManagerForLLMRun | None,
        *,
        streaming: bool,
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Drive one answer: the wrapped model's output through the step, then the closing.

        Args:
            messages: The conversation.
            run_manager: This run's manager, if the caller gave one.
            streaming: Stream the wrapped model (else invoke it: one whole message).
            **kwargs: Passed to the wrapped model (``stop`` included).

        Yields:
            What the step yields, then the closing output.
        """
        session, shown, config = self._open(messages, run_manager, use_async=False)
        model = self._model()
        source = (
            model.stream(shown, config, **kwargs)
            if streaming
            else _once(model, shown, config, kwargs)
        )
        try:
            steps = _Steps(session)
            for chunk in source:
                if out := steps[chunk.__class__](chunk):
                    yield out
            closing = session.close()
        finally:
            session.cancel()
        yield from closing
        if _in_a_run(config):
            session.report(config)

    async def _arun(
        self,
        messages: list[BaseMessage],
        run_manager: AsyncCallbackManagerForLLMRun | None,
        *,
        streaming: bool,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Async :meth:`_run`."""
        session, shown, config = self._open(messages, run_manager, use_async=True)
        model = self._model()
        source = (
            model.astream(shown, config, **kwargs)
            if streaming
            else _aonce(model, shown, config, kwargs)
        )
        try:
            steps = _Steps(session)
            async for chunk in source:
                if out := steps[chunk.__class__](chunk):
                    yield out
            closing = await session.aclose()
        finally:
            session.cancel()
        for out in closing:
            yield out
        if _in_a_run(config):
            await session.areport(config)

    @override
    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for out in self._run(messages, run_manager, streaming=True, stop=stop, **kwargs):
            yield _generation(out)

    @override
    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for out in self._arun(messages, run_manager, streaming=True, stop=stop, **kwargs):
            yield _generation(out)

    @override
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        outputs = self._run(messages, run_manager, streaming=False, stop=stop, **kwargs)
        return _result(list(outputs))

    @override
    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        outputs = self._arun(messages, run_manager, streaming=False, stop=stop, **kwargs)
        return _result([out async for out in outputs])


def _once(
    model: Runnable[Any, Any], shown: list[BaseMessage], config: RunnableConfig, kwargs: Any
) -> Iterator[Any]:
    """The wrapped model's whole answer, as a stream of one output."""
    yield model.invoke(shown, config, **kwargs)


async def _aonce(
    model: Runnable[Any, Any], shown: list[BaseMessage], config: RunnableConfig, kwargs: Any
) -> AsyncIterator[Any]:
    """Async :func:`_once`."""
    yield await model.ainvoke(shown, config, **kwargs)


def _result(outputs: list[Any]) -> ChatResult:
    """The chat result of an invoked answer: the closed whole message (or chunks, added up)."""
    whole = [out for out in outputs if isinstance(out, BaseMessage)]
    if len(whole) == 1 and not isinstance(whole[0], AIMessageChunk):
        return ChatResult(generations=[ChatGeneration(message=whole[0])])
    return generate_from_stream(iter([_generation(out) for out in outputs]))


def _in_a_run(config: RunnableConfig) -> bool:
    """Whether a custom event sent with ``config`` has a run to belong to."""
    callbacks = config.get("callbacks")
    return isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None


def _child(
    run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun,
) -> CallbackManager | AsyncCallbackManager:
    """The callback manager of the wrapped model's run: a child of this run.

    It is tagged not to stream, as a chain run's ``get_child(tag)`` would do (an LLM run
    manager has no ``get_child``).
    """
    manager_class = (
        AsyncCallbackManager
        if isinstance(run_manager, AsyncCallbackManagerForLLMRun)
        else CallbackManager
    )
    manager = manager_class(handlers=[], parent_run_id=run_manager.run_id)
    manager.set_handlers(run_manager.inheritable_handlers)
    manager.add_tags(run_manager.inheritable_tags)
    manager.add_metadata(run_manager.inheritable_metadata)
    manager.add_tags([NOSTREAM_TAG], inherit=False)
    return manager


def _generation(out: Any) -> ChatGenerationChunk:
    """The chat chunk of one output of the step (text of a closing tail made a chunk)."""
    if isinstance(out, AIMessageChunk):
        return ChatGenerationChunk(message=out)
    if isinstance(out, str):
        return ChatGenerationChunk(message=AIMessageChunk(content=out))
    # a whole message (a model that does not stream): its content and metadata, as a chunk
    return ChatGenerationChunk(
        message=AIMessageChunk(
            content=out.content,
            id=out.id,
            response_metadata=out.response_metadata,
            tool_calls=getattr(out, "tool_calls", []),
            usage_metadata=getattr(out, "usage_metadata", None),
        )
    )
