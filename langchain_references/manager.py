"""The runnable that rewrites citations while a wrapped runnable streams its answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessageChunk, BaseMessage, BaseMessageChunk
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.runnables.config import ensure_config
from typing_extensions import override

from langchain_references.citations.streaming import (
    CITATION_CHECK_KEY,
    CitationChecker,
    StreamingCitationCheck,
    citation_report,
)
from langchain_references.rewriter import ReferenceRewriter
from langchain_references.styles import MarkdownReferenceStyle, ReferenceStyle, UnsupportedClaim

if TYPE_CHECKING:
    from langchain_references.citations.verifier import SentenceVerdict

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


class _AlwaysPending:
    """Stands for the parser in the hot loop when every chunk must go through ``feed``."""

    pending = True


_ALWAYS_PENDING = _AlwaysPending()


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
    """State of one run: the rewriter, the optional citation check, the output's shape."""

    __slots__ = (
        "check",
        "check_data",
        "has_list_content",
        "last_id",
        "mark_unsupported",
        "rewriter",
        "saw_chunks",
        "unsupported",
    )

    def __init__(
        self,
        rewriter: ReferenceRewriter,
        check: StreamingCitationCheck | None = None,
        *,
        mark_unsupported: bool = False,
    ) -> None:
        self.rewriter = rewriter
        self.check = check
        self.mark_unsupported = mark_unsupported
        self.check_data: dict[str, Any] | None = None
        self.unsupported: list[UnsupportedClaim] = []
        self.has_list_content = False
        self.saw_chunks = False
        self.last_id: str | None = None

    def feed(self, text: str) -> str:
        if self.check is not None:
            self.check.feed(text)
        return self.rewriter.feed(text)

    def rewrite_content(self, content: str | list[Any]) -> str | list[Any]:
        feed = self.feed
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
            return self.feed(chunk) or None
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

    # -- end of the answer -----------------------------------------------------------------

    def _record_check(self, verdicts: list[SentenceVerdict]) -> None:
        numbers = {
            position: ref.number for ref in self.rewriter.references for position in ref.positions
        }
        self.check_data, self.unsupported = citation_report(verdicts, numbers)

    def collect_check(self) -> None:
        """Wait for the citation check, if any (sync path)."""
        if self.check is not None:
            self._record_check(self.check.finish())

    async def acollect_check(self) -> None:
        """Wait for the citation check, if any (async path)."""
        if self.check is not None:
            self._record_check(await self.check.afinish())

    def tail(self) -> str:
        """Held-back text, the reference list and, if asked, the unsupported claims."""
        tail = self.rewriter.finish()
        if self.mark_unsupported and self.unsupported:
            tail += self.rewriter.style.format_citation_check(self.unsupported)
        return tail

    def metadata(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            REFERENCES_METADATA_KEY: [ref.to_dict() for ref in self.rewriter.references]
        }
        if self.check_data is not None:
            data[CITATION_CHECK_KEY] = self.check_data
        return data

    def event_payload(self) -> dict[str, Any]:
        references = self.rewriter.references
        payload: dict[str, Any] = {
            "references": [ref.to_dict() for ref in references],
            "documents": [(ref.number, ref.document) for ref in references],
        }
        if self.check_data is not None:
            payload[CITATION_CHECK_KEY] = self.check_data
        return payload

    def finish_output(self, output: Any) -> Any:
        """The whole output of a non-streamed run (text fed already), closed."""
        if isinstance(output, str):
            return output + self.tail()
        content = output.content
        tail = self.tail()
        if tail:
            content = _append(content, tail)
        metadata = {**output.response_metadata, **self.metadata()}
        return output.model_copy(update={"content": content, "response_metadata": metadata})

    def final_chunk(self) -> AIMessageChunk:
        """The closing chunk of a chat stream: held-back text, the list and the metadata."""
        tail = self.tail()
        content: str | list[Any] = tail
        if self.has_list_content and tail:
            content = [{"type": "text", "text": tail}]
        return AIMessageChunk(content=content, id=self.last_id, response_metadata=self.metadata())


def _append(content: str | list[Any], tail: str) -> str | list[Any]:
    if isinstance(content, str):
        return content + tail
    return [*content, {"type": "text", "text": tail}]


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

    With a ``verifier``, each sentence's citations are checked while the answer streams and
    the report is added under ``"citation_check"`` (metadata and event), see
    :mod:`langchain_references.citations.streaming`.
    """

    def __init__(
        self,
        bound: Runnable[Any, Any],
        *,
        documents_key: str = "documents",
        style: ReferenceStyle | None = None,
        verifier: CitationChecker | None = None,
        mark_unsupported: bool = False,
        name: str | None = None,
    ) -> None:
        if not isinstance(bound, Runnable):
            raise TypeError(f"manage_references() takes a Runnable, not {type(bound).__name__}")
        if style is not None and not isinstance(style, ReferenceStyle):
            raise TypeError(f"style must be a ReferenceStyle, not {type(style).__name__}")
        self.bound = bound
        self.documents_key = documents_key
        self.style = style if style is not None else MarkdownReferenceStyle()
        if verifier is not None and not isinstance(verifier, CitationChecker):
            raise TypeError(
                "verifier must have verify() and averify() (e.g. a CitationVerifier), "
                f"not {type(verifier).__name__}"
            )
        if mark_unsupported and verifier is None:
            raise ValueError("mark_unsupported=True needs a verifier")
        self.verifier = verifier
        self.mark_unsupported = mark_unsupported
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

    def _session(self, input: Any, config: RunnableConfig, *, use_async: bool) -> _Session:
        documents = self._documents(input)
        check = None
        if self.verifier is not None:
            check = StreamingCitationCheck(self.verifier, documents, config, use_async=use_async)
        return _Session(
            ReferenceRewriter(documents, self.style),
            check,
            mark_unsupported=self.mark_unsupported,
        )

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

    @staticmethod
    def _feed_output(session: _Session, output: Any) -> Any:
        """Rewrite the text of a whole output; the tail is added by ``finish_output``."""
        if isinstance(output, str):
            return session.feed(output)
        if isinstance(output, BaseMessage):
            return output.model_copy(update={"content": session.rewrite_content(output.content)})
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
        session = self._session(input, config, use_async=False)
        output = self._feed_output(session, self.bound.invoke(self._bound_input(input), config))
        session.collect_check()
        output = session.finish_output(output)
        dispatch_custom_event(REFERENCES_EVENT, session.event_payload(), config=config)
        return output

    async def _ainvoke(
        self,
        input: Mapping[str, Any],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        session = self._session(input, config, use_async=True)
        output = await self.bound.ainvoke(self._bound_input(input), config)
        output = self._feed_output(session, output)
        await session.acollect_check()
        output = session.finish_output(output)
        await adispatch_custom_event(REFERENCES_EVENT, session.event_payload(), config=config)
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
        session = self._session(input, config, use_async=False)
        whole: BaseMessage | None = None
        parser: Any
        if session.check is None:
            feed, parser = session.rewriter.feed, session.rewriter.parser
        else:  # every chunk also goes to the citation check
            feed, parser = session.feed, _ALWAYS_PENDING
        pending = parser.pending
        try:
            for chunk in self.bound.stream(self._bound_input(input), config):
                if type(chunk) is str:  # the hot path of string streams, inlined
                    if not pending and "[" not in chunk:
                        yield chunk
                        continue
                    text = feed(chunk)
                    pending = parser.pending
                    if text:
                        yield text
                    continue
                if isinstance(chunk, BaseMessage) and not isinstance(chunk, BaseMessageChunk):
                    whole = self._feed_output(session, chunk)  # non-streaming: the whole output
                    continue
                out = session.rewrite(chunk)
                if out is not None:
                    yield out
            session.collect_check()
        finally:
            if session.check is not None:
                session.check.cancel()
        yield from self._close(session, whole)
        dispatch_custom_event(REFERENCES_EVENT, session.event_payload(), config=config)

    async def _atransform(
        self,
        inputs: AsyncIterator[Mapping[str, Any]],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[Any]:
        input: Any = None
        async for item in inputs:
            input = item if input is None else _merge_inputs(iter((input, item)))
        session = self._session(input, config, use_async=True)
        whole: BaseMessage | None = None
        try:
            async for chunk in self.bound.astream(self._bound_input(input), config):
                if isinstance(chunk, BaseMessage) and not isinstance(chunk, BaseMessageChunk):
                    whole = self._feed_output(session, chunk)
                    continue
                out = session.rewrite(chunk)
                if out is not None:
                    yield out
            await session.acollect_check()
        finally:
            if session.check is not None:
                session.check.cancel()
        for out in self._close(session, whole):
            yield out
        await adispatch_custom_event(REFERENCES_EVENT, session.event_payload(), config=config)

    def _close(self, session: _Session, whole: BaseMessage | None) -> Iterator[Any]:
        if whole is not None:
            yield session.finish_output(whole)
        elif session.saw_chunks:
            yield session.final_chunk()
        else:
            tail = session.tail()
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
    verifier: CitationChecker | None = None,
    mark_unsupported: bool = False,
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
        verifier: Check each sentence's citations against the cited documents while the
            answer streams, e.g. ``CitationVerifier(LLMJudge(model))`` from
            :mod:`langchain_references.factuality`. The report (citation recall and precision,
            unsupported sentences and citations) goes to ``response_metadata["citation_check"]``
            of chat outputs and to the ``"references"`` event of every output.
        mark_unsupported: Also append the unsupported sentences to the text, after the
            reference list, in the style's form (:meth:`ReferenceStyle.format_citation_check`).

    Returns:
        A runnable taking the same dict input and producing the same output type.

    Raises:
        TypeError: If ``runnable``, ``style`` or ``verifier`` has the wrong type.
        ValueError: If ``mark_unsupported`` is set without a verifier.

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
    return ReferencedRunnable(
        runnable,
        documents_key=documents_key,
        style=style,
        verifier=verifier,
        mark_unsupported=mark_unsupported,
    )
