"""Scripted chat models shared by the tests (no network, no randomness)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr


class StreamingChatModel(BaseChatModel):
    """Streams the given chunks as they are (content, metadata, tool-call chunks...).

    ``async_delay`` makes the async stream sleep before each chunk; ``forbid_sync`` makes the
    synchronous path fail, to prove that async callers never use it.
    """

    chunks: list[AIMessageChunk]
    async_delay: float = 0.0
    forbid_sync: bool = False
    trace: Any = None  # a shared list (typed Any so that pydantic does not copy it)
    tag: str = ""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _merged(self) -> AIMessage:
        merged = self.chunks[0]
        for chunk in self.chunks[1:]:
            merged = merged + chunk
        return AIMessage(
            **merged.model_dump(exclude={"type", "tool_call_chunks", "chunk_position"})
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.forbid_sync:
            raise RuntimeError("sync path used")
        return ChatResult(generations=[ChatGeneration(message=self._merged())])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.sleep(self.async_delay)
        return ChatResult(generations=[ChatGeneration(message=self._merged())])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        if self.forbid_sync:
            raise RuntimeError("sync path used")
        for chunk in self.chunks:
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for i, chunk in enumerate(self.chunks):
            await asyncio.sleep(self.async_delay)
            if self.trace is not None:
                self.trace.append((self.tag, i))
            yield ChatGenerationChunk(message=chunk)


def text_chunks(pieces: Sequence[str], **first: Any) -> list[AIMessageChunk]:
    """AIMessageChunks with the given contents; keyword arguments go to the first chunk."""
    return [AIMessageChunk(content=p, **(first if i == 0 else {})) for i, p in enumerate(pieces)]


class ScriptedChatModel(BaseChatModel):
    """Chat model that plays a script of replies / exceptions and supports tool calling.

    Each call pops the next step; a callable step gets the messages and builds the reply.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Any = None
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self.calls.append(list(messages))
            if not self.script:
                raise AssertionError("script exhausted")
            step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        message = step(messages) if callable(step) else step
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.bound_tools = [convert_to_openai_tool(t) for t in tools]
        self.tool_choice = tool_choice
        return self.bind(tools=self.bound_tools, tool_choice=tool_choice)


class ChatScripted(ScriptedChatModel):
    """A :class:`ScriptedChatModel` that names its model as provider packages do.

    LangChain's tracing parameters read ``ls_provider`` from the class name (``ChatScripted``:
    ``scripted``) and ``ls_model_name`` from ``model``, so an ``LLMJudge`` on it reports the
    model ``scripted:<model>``, as one on ``ChatOpenAI(model="gpt-4o-mini")`` reports
    ``openai:gpt-4o-mini``.
    """

    model: str = "scripted-judge-1"


def tool_reply(name: str, **args: Any) -> AIMessage:
    """A reply that calls the tool ``name`` with ``args`` (e.g. an LLM judge's ``JudgeReply``)."""
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": "call_1", "type": "tool_call"}]
    )


class RunCollector(BaseTracer):
    """Keeps every finished root run (with its child runs), to check names and nesting."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        self.runs.append(run)


class AgentChatModel(BaseChatModel):
    """A scripted chat model for agents: streams each scripted reply token by token.

    Each call takes the next reply of the script (an ``AIMessage``, or a callable that builds
    one from the messages it was shown) and streams its text cut every ``cut`` characters
    (so citation markers arrive split across tokens), then its tool calls as tool-call
    chunks. ``bind_tools`` records the tools and returns the model bound, as a provider
    integration does. The messages of each call are kept in ``calls``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    cut: int = 3
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "agent-scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.bound_tools = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=self.bound_tools, **kwargs)

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self.calls.append(list(messages))
            if not self.script:
                raise AssertionError("script exhausted")
            step = self.script.pop(0)
        return step(messages) if callable(step) else step

    def _chunks(self, messages: list[BaseMessage]) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages)
        text = reply.text
        for i in range(0, len(text), self.cut):
            yield ChatGenerationChunk(message=AIMessageChunk(content=text[i : i + self.cut]))
        if reply.tool_calls:
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        {
                            "name": c["name"],
                            "args": json.dumps(c["args"]),
                            "id": c["id"],
                            "index": i,
                        }
                        for i, c in enumerate(reply.tool_calls)
                    ],
                )
            )
        usage = {"input_tokens": 10, "output_tokens": len(text), "total_tokens": 10 + len(text)}
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=usage))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return generate_from_stream(self._chunks(messages))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from self._chunks(messages)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages):
            await asyncio.sleep(0)
            yield chunk


class CosineEmbeddings(Embeddings):
    """Embeds the statement as (1, 0) and every other text at a chosen cosine to it."""

    def __init__(self, statement: str, cosine: float) -> None:
        self.statement = statement
        self.other = [cosine, (1 - cosine**2) ** 0.5]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] if t == self.statement else list(self.other) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
