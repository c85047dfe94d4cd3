"""The runnable that rewrites citations while a wrapped runnable streams its answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessageChunk, BaseMessage, BaseMessageChunk
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.runnables.config import ensure_config
from typing_extensions import override

from langchain_references.rewriter import ReferenceRewriter, UsedReference
from langchain_references.styles import MarkdownReferenceStyle, ReferenceStyle

__all__ = ["REFERENCES_EVENT", "MissingDocumentsError", "ReferencedRunnable", "manage_references"]

#: Name of the custom callback event that carries the cited references at the end of a run.
REFERENCES_EVENT = "references"
#: Input key holding the model input when the wrapped runnable is a bare language model.
MODEL_INPUT_KEY = "input"
#: Key of ``response_metadata`` (chat outputs) that lists the cited references.
REFERENCES_METADATA_KEY = "references"


class MissingDocumentsError(KeyError):
    """The input of :func:`manage_references` lacks the documents key."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else super().__str__()


def _merge_inputs(chunks: Iterator[Any]) -> Any:
    final: Any = None
    for chunk in chunks:
        if final is None:
            final = chunk
        else:
            try:
                final = final + chunk
            except TypeError:
                final = chunk
    return final


class _Session:
    """State of one run: the rewriter and the shape of the output being streamed."""

    __slots__ = ("has_list_content", "last_id", "rewriter", "saw_chunks")

    def __init__(self, rewriter: ReferenceRewriter) -> None:
        self.rewriter = rewriter
        self.has_list_content = False
        self.saw_chunks = False
        self.last_id: str | None = None

    def rewrite_content(self, content: str | list[Any]) -> str | list[Any]:
        feed = self.rewriter.feed
        if isinstance(content, str):
            return feed(content)
        self.has_list_content = True
        blocks: list[Any] = []
        changed = False
        for block in content:
            if isinstance(block, str):
                new_block: Any = feed(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text", "")
                new_text = feed(text) if isinstance(text, str) else text
                new_block = block if new_text is text else {**block, "text": new_text}
            else:
                new_block = block
            changed = changed or new_block is not block
            blocks.append(new_block)
        return blocks if changed else content

    def rewrite(self, chunk: Any) -> Any:
        """Rewrite one streamed chunk; return the chunk to yield (None for nothing)."""
        if isinstance(chunk, str):
            return self.rewriter.feed(chunk) or None
        if isinstance(chunk, BaseMessageChunk):
            self.saw_chunks = True
            if chunk.id:
                self.last_id = chunk.id
            content = self.rewrite_content(chunk.content)
            if content is chunk.content:
                return chunk
            return chunk.model_copy(update={"content": content})
        raise TypeError(
            "manage_references() needs a runnable that outputs text (str or message "
            f"chunks), got {type(chunk).__name__}. Put output parsers after it."
        )

    def finish_message(self, message: BaseMessage) -> BaseMessage:
        """Rewrite a whole (non-streamed) message and append the reference list."""
        content = self.rewrite_content(message.content)
        tail = self.rewriter.finish()
        if tail:
            content = _append(content, tail)
        metadata = {**message.response_metadata, REFERENCES_METADATA_KEY: self.metadata()}
        return message.model_copy(update={"content": content, "response_metadata": metadata})

    def final_chunk(self) -> AIMessageChunk:
        """The closing chunk of a chat stream: held-back text, the list and the metadata."""
        tail = self.rewriter.finish()
        content: str | list[Any] = tail
        if self.has_list_content and tail:
            content = [{"type": "text", "text": tail}]
        return AIMessageChunk(
            content=content,
            id=self.last_id,
            response_metadata={REFERENCES_METADATA_KEY: self.metadata()},
        )

    def metadata(self) -> list[dict[str, Any]]:
        return [ref.to_dict() for ref in self.rewriter.references]


def _append(content: str | list[Any], tail: str) -> str | list[Any]:
    if isinstance(content, str):
        return content + tail
    return [*content, {"type": "text", "text": tail}]


def _event_payload(references: list[UsedReference]) -> dict[str, Any]:
    return {
        "references": [ref.to_dict() for ref in references],
        "documents": [(ref.number, ref.document) for ref in references],
    }


class ReferencedRunnable(Runnable[Mapping[str, Any], Any]):
    """Wrap a runnable so that its ``[n](id=k)`` citations are renumbered and styled.

    Build it with :func:`manage_references`. It works on chat models, LLMs and chains that
    output ``str``, message chunks or whole messages, in all six calling modes. The input dict
    is passed unchanged to a wrapped chain; a wrapped bare language model receives the value
    of the ``"input"`` key instead (messages, a prompt value or a string). At the end of
    each run the cited sources are reported:

    * in the text, through the style's reference list;
    * for chat outputs, in ``response_metadata["references"]`` of the final message (a list
      of ``{"number", "source", "title", "positions"}``);
    * for every output type, as a custom callback event named ``"references"`` (see
      :data:`REFERENCES_EVENT`) whose data holds the same list and the ``(number, Document)``
      pairs; it reaches ``astream_events`` and callback handlers' ``on_custom_event``.
    """

    def __init__(
        self,
        bound: Runnable[Any, Any],
        *,
        documents_key: str = "documents",
        style: ReferenceStyle | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(bound, Runnable):
            raise TypeError(f"manage_references() takes a Runnable, not {type(bound).__name__}")
        if style is not None and not isinstance(style, ReferenceStyle):
            raise TypeError(f"style must be a ReferenceStyle, not {type(style).__name__}")
        self.bound = bound
        self.documents_key = documents_key
        self.style = style if style is not None else MarkdownReferenceStyle()
        self.name = name or f"ManageReferences[{bound.get_name()}]"
        inner = bound.bound if isinstance(bound, RunnableBinding) else bound
        self._is_model = isinstance(inner, BaseLanguageModel)

    @property
    @override
    def InputType(self) -> type[Mapping[str, Any]]:
        return dict

    @property
    @override
    def OutputType(self) -> Any:
        return self.bound.OutputType

    def _documents(self, input: Any) -> Sequence[Document]:
        if not isinstance(input, Mapping):
            raise TypeError(
                f"manage_references() input must be a dict holding {self.documents_key!r}, "
                f"got {type(input).__name__}"
            )
        if self.documents_key not in input:
            raise MissingDocumentsError(
                f"manage_references() input has no {self.documents_key!r} key: pass the list "
                f"of Documents put in the prompt under {self.documents_key!r} "
                f"(keys found: {sorted(map(str, input))})"
            )
        documents = input[self.documents_key]
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            raise TypeError(
                f"input[{self.documents_key!r}] must be a list of Documents, "
                f"got {type(documents).__name__}"
            )
        for i, doc in enumerate(documents):
            if not isinstance(doc, Document):
                raise TypeError(
                    f"input[{self.documents_key!r}][{i}] is {type(doc).__name__}, not a Document"
                )
        return documents

    def _session(self, input: Any) -> _Session:
        return _Session(ReferenceRewriter(self._documents(input), self.style))

    def _bound_input(self, input: Mapping[str, Any]) -> Any:
        """The input of the wrapped runnable: the dict itself, or its model input."""
        if not self._is_model:
            return input
        if MODEL_INPUT_KEY not in input:
            raise MissingDocumentsError(
                f"manage_references() wraps a bare language model: put the model input "
                f"(messages, a prompt value or a string) under {MODEL_INPUT_KEY!r}, next to "
                f"{self.documents_key!r}, or wrap a chain such as `prompt | model`"
            )
        return input[MODEL_INPUT_KEY]

    # -- whole outputs ---------------------------------------------------------------------

    def _finish_output(self, session: _Session, output: Any) -> Any:
        if isinstance(output, str):
            return session.rewriter.feed(output) + session.rewriter.finish()
        if isinstance(output, BaseMessage):
            return session.finish_message(output)
        raise TypeError(
            "manage_references() needs a runnable that outputs text (str or a message), "
            f"got {type(output).__name__}. Put output parsers after it."
        )

    def _invoke(
        self,
        input: Mapping[str, Any],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        session = self._session(input)
        output = self._finish_output(session, self.bound.invoke(self._bound_input(input), config))
        dispatch_custom_event(
            REFERENCES_EVENT, _event_payload(session.rewriter.references), config=config
        )
        return output

    async def _ainvoke(
        self,
        input: Mapping[str, Any],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        session = self._session(input)
        output = self._finish_output(
            session, await self.bound.ainvoke(self._bound_input(input), config)
        )
        await adispatch_custom_event(
            REFERENCES_EVENT, _event_payload(session.rewriter.references), config=config
        )
        return output

    @override
    def invoke(
        self,
        input: Mapping[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        return self._call_with_config(self._invoke, input, ensure_config(config), **kwargs)

    @override
    async def ainvoke(
        self,
        input: Mapping[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        return await self._acall_with_config(self._ainvoke, input, ensure_config(config), **kwargs)

    # -- streams ---------------------------------------------------------------------------

    def _transform(
        self,
        inputs: Iterator[Mapping[str, Any]],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[Any]:
        input = _merge_inputs(inputs)
        session = self._session(input)
        whole: BaseMessage | None = None
        feed = session.rewriter.feed
        parser = session.rewriter.parser
        for chunk in self.bound.stream(self._bound_input(input), config):
            if type(chunk) is str:  # the hot path of string streams, inlined
                if "[" not in chunk and not parser.pending:
                    if chunk:
                        yield chunk
                elif text := feed(chunk):
                    yield text
                continue
            if isinstance(chunk, BaseMessage) and not isinstance(chunk, BaseMessageChunk):
                whole = chunk  # a non-streaming runnable: the message is the whole output
                continue
            out = session.rewrite(chunk)
            if out is not None:
                yield out
        yield from self._close(session, whole)
        dispatch_custom_event(
            REFERENCES_EVENT, _event_payload(session.rewriter.references), config=config
        )

    async def _atransform(
        self,
        inputs: AsyncIterator[Mapping[str, Any]],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[Any]:
        input: Any = None
        async for item in inputs:
            input = item if input is None else _merge_inputs(iter((input, item)))
        session = self._session(input)
        whole: BaseMessage | None = None
        async for chunk in self.bound.astream(self._bound_input(input), config):
            if isinstance(chunk, BaseMessage) and not isinstance(chunk, BaseMessageChunk):
                whole = chunk
                continue
            out = session.rewrite(chunk)
            if out is not None:
                yield out
        for out in self._close(session, whole):
            yield out
        await adispatch_custom_event(
            REFERENCES_EVENT, _event_payload(session.rewriter.references), config=config
        )

    def _close(self, session: _Session, whole: BaseMessage | None) -> Iterator[Any]:
        if whole is not None:
            yield session.finish_message(whole)
        elif session.saw_chunks:
            yield session.final_chunk()
        else:
            tail = session.rewriter.finish()
            if tail:
                yield tail

    @override
    def transform(
        self,
        input: Iterator[Mapping[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        yield from self._transform_stream_with_config(input, self._transform, config, **kwargs)

    @override
    def stream(
        self,
        input: Mapping[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        yield from self.transform(iter([input]), config, **kwargs)

    @override
    async def atransform(
        self,
        input: AsyncIterator[Mapping[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        async for chunk in self._atransform_stream_with_config(
            input, self._atransform, config, **kwargs
        ):
            yield chunk

    @override
    async def astream(
        self,
        input: Mapping[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        async def single() -> AsyncIterator[Mapping[str, Any]]:
            yield input

        async for chunk in self.atransform(single(), config, **kwargs):
            yield chunk


def manage_references(
    runnable: Runnable[Any, Any],
    *,
    documents_key: str = "documents",
    style: ReferenceStyle | None = None,
) -> ReferencedRunnable:
    """Wrap a chat model, LLM or chain so that its citations become real references.

    The wrapped runnable is prompted (see :data:`~langchain_references.FORMAT_REFERENCES`) to
    cite documents as ``[n](id=k)``, where ``k`` is the 1-based position of the document in
    the list it was given. While the answer streams, citations are found even when split
    across tokens, renumbered by first use with one number per distinct source, written in
    ``style`` and followed by the reference list. Text that is not a citation passes through
    unchanged.

    Args:
        runnable: The runnable that writes the answer. It receives the whole input dict.
        documents_key: The input key holding the list of Documents put in the prompt.
        style: How citations and the list are written; :class:`MarkdownReferenceStyle` by
            default.

    Returns:
        A runnable taking the same dict input and producing the same output type.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.runnables import RunnableLambda
        >>> from langchain_references import TextReferenceStyle
        >>> answer = RunnableLambda(lambda _: "Paris is in France [1](id=1).")
        >>> chain = manage_references(answer, style=TextReferenceStyle())
        >>> docs = [Document("...", metadata={"source": "https://fr.example"})]
        >>> print(chain.invoke({"documents": docs}))
        Paris is in France [1].
        <BLANKLINE>
        - [1] https://fr.example
    """
    return ReferencedRunnable(runnable, documents_key=documents_key, style=style)
