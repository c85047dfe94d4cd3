"""Small scripted models for the core tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult


class ScriptedChatModel(BaseChatModel):
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
