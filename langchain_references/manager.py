"""The runnable that rewrites citations while a wrapped runnable streams its answer.

Every decision about one chunk of the wrapped runnable's output is taken in one place, the step
of a run (:meth:`_Session.step`, which :meth:`_Session.step_for` splits into the text step and
the message step; the drivers call them through a :class:`_Steps` table, one call per chunk).
The calling modes are thin drivers around it: ``stream`` and
``invoke`` run :meth:`ReferencedRunnable._run` (``invoke`` as a stream of one whole output),
``astream`` and ``ainvoke`` run its async twin, which differs only in ``async for`` and in
awaiting the citation check and the event. The chat model wrapper
(:mod:`langchain_references.chat_model`) drives the same step. Inside a LangGraph node that
streams, :class:`_Relay` shows the rewritten chunks to the graph's ``"messages"`` stream.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from functools import reduce
from operator import add
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    NamedTuple,
    TypeAlias,
    cast,
    get_args,
)

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForChainRun,
    BaseCallbackManager,
    CallbackManager,
    CallbackManagerForChainRun,
)
from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import (
    LC_ID_PREFIX,
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    BaseMessageChunk,
    message_chunk_to_message,
)
from langchain_core.messages.content import Citation, create_citation
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, LLMResult
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.runnables.config import ensure_config
from langchain_core.runnables.configurable import DynamicRunnable
from langchain_core.runnables.utils import ConfigurableFieldSpec
from langchain_core.tracers._streaming import _StreamingCallbackHandler
from langchain_core.utils.pydantic import TypeBaseModel, get_fields
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from typing_extensions import override

from langchain_references.citations.streaming import (
    CITATION_CHECK_KEY,
    CitationChecker,
    StreamingCitationCheck,
    citation_report,
)
from langchain_references.core._parser import DEFAULT_MARKERS, Event, check_markers
from langchain_references.core._parser import Citation as ParsedCitation
from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import (
    MarkdownReferenceStyle,
    ReferenceStyle,
    UnsupportedClaim,
)
from langchain_references.errors import LangchainReferencesError
from langchain_references.native.registry import (
    ADAPTER_NAMES,
    NativeOption,
    UnknownAdapterError,
)
from langchain_references.native.stream import NativeRun

if TYPE_CHECKING:
    from langchain_references.citations.verifier import SentenceVerdict

__all__ = ["REFERENCES_EVENT", "MissingDocumentsError", "ReferencedRunnable"]

#: What the reader sees of a citation whose document does not support its sentence
#: (``manage_references(on_unsupported=...)``).
OnUnsupported: TypeAlias = Literal["keep", "flag", "drop"]
_ON_UNSUPPORTED: Final = get_args(OnUnsupported)

#: Name of the custom callback event that carries the cited references at the end of a run.
REFERENCES_EVENT = "references"
#: Input key holding the model input when the wrapped runnable is a bare language model.
MODEL_INPUT_KEY = "input"
#: Key of ``response_metadata`` (chat outputs) that lists the cited references.
REFERENCES_METADATA_KEY = "references"

#: Config of the input schema (field names such as ``model_name`` are allowed).
_SCHEMA_CONFIG = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

#: A source of output chunks: the wrapped runnable called on its input and the child config.
_Source = Callable[[Any, RunnableConfig], Iterator[Any]]
_AsyncSource = Callable[[Any, RunnableConfig], AsyncIterator[Any]]


class MissingDocumentsError(LangchainReferencesError, KeyError):
    """The input of :func:`manage_references` lacks the documents key."""

    # the message as written, not quoted as ``KeyError.__str__`` quotes a missing key
    __str__ = Exception.__str__


def _merge_input(final: Any, chunk: Any) -> Any:
    """Add one chunk of a streamed input to the input so far (a chunk that cannot be added wins).

    Args:
        final: The input so far (None before the first chunk).
        chunk: The next chunk.

    Returns:
        The input with the chunk added.
    """
    if final is None:
        return chunk
    try:
        return final + chunk
    except TypeError:
        return chunk


def _join(outputs: list[Any], *, streamed: bool = False) -> Any:
    """The output of ``invoke``: the outputs of the stream, added up.

    Args:
        outputs: What the run yielded.
        streamed: Whether the wrapped runnable was streamed (not invoked): its chunks, added
            up, are then made the message ``invoke`` returns.
    """
    if not outputs:
        return ""
    joined = reduce(add, outputs)
    if streamed and isinstance(joined, BaseMessageChunk):
        return message_chunk_to_message(joined)
    return joined


def _has_listeners(config: RunnableConfig) -> bool:
    """Whether the run's custom event could reach a callback handler.

    ``config`` is the run's child config: its callback manager holds every inheritable handler
    of the run (callbacks passed in a config or bound, tracers, ``astream_events``'
    handler), configured when the run started. Without one, dispatching the event would
    configure a callback manager that reaches nobody (about 20 µs a run).

    Args:
        config: The run's child config.

    Returns:
        False only when the config holds a callback manager without handlers.
    """
    callbacks = config.get("callbacks")
    return not isinstance(callbacks, BaseCallbackManager) or bool(callbacks.handlers)


async def _once(value: Any) -> AsyncIterator[Any]:
    """An async iterator of one value."""
    yield value


#: The tag LangGraph's ``stream_mode="messages"`` skips: the wrapped model's raw tokens carry it
#: when the wrapper streams the rewritten answer in their place.
NOSTREAM_TAG = "nostream"
#: Metadata key LangGraph sets on the runs of a graph's nodes.
_LANGGRAPH_KEY = "langgraph_checkpoint_ns"


def _streams_to_langgraph(config: RunnableConfig) -> bool:
    """Whether the run is inside a LangGraph node whose graph streams tokens to a reader.

    LangGraph's ``stream_mode="messages"`` (and ``astream_events``) attach a streaming
    callback handler; its messages stream shows the tokens of chat model runs only.
    """
    callbacks = config.get("callbacks")
    return (
        _LANGGRAPH_KEY in (config.get("metadata") or {})
        and isinstance(callbacks, BaseCallbackManager)
        and any(isinstance(h, _StreamingCallbackHandler) for h in callbacks.handlers)
    )


class _Relay:
    """Shows the rewritten answer to LangGraph's messages stream as a chat model run's tokens.

    Inside a LangGraph node that streams, the wrapped runnable runs with the
    :data:`NOSTREAM_TAG` tag (its raw ``[n](id=k)`` tokens are not streamed) and the wrapper
    opens a chat model run of its own whose tokens are the rewritten chunks, each once, the
    closing one last. Elsewhere the relay does nothing. The decisions are here; the sync and
    async twins below only call the callback managers.
    """

    __slots__ = ("active", "chunks", "id", "run")

    def __init__(self, active: bool) -> None:
        self.active = active
        self.run: Any = None
        self.chunks: list[BaseMessageChunk] = []
        self.id: str | None = None

    def inner_config(self, config: RunnableConfig) -> RunnableConfig:
        """The config of the wrapped runnable: tagged not to stream when the relay is on."""
        if not self.active:
            return config
        return {**config, "tags": [*(config.get("tags") or []), NOSTREAM_TAG]}

    def _start_args(self, name: str) -> dict[str, Any]:
        return {"serialized": {"name": name}, "messages": [[]], "name": name}

    def _chunk(self, out: Any) -> ChatGenerationChunk | None:
        """The chat chunk of one output (None for a whole message: reported at the end)."""
        if isinstance(out, BaseMessageChunk):
            message = out
        elif isinstance(out, str):
            message = AIMessageChunk(content=out, id=self.id)
        else:
            return None
        self.chunks.append(message)
        return ChatGenerationChunk(message=message)

    def _result(self, outputs: Any) -> LLMResult:
        if isinstance(outputs, BaseMessage) and not isinstance(outputs, BaseMessageChunk):
            message: BaseMessage = outputs
        elif self.chunks:
            message = message_chunk_to_message(reduce(add, self.chunks))
        else:
            message = AIMessage(content="", id=self.id)
        return LLMResult(generations=[[ChatGeneration(message=message)]])

    # -- sync ----------------------------------------------------------------------------

    @classmethod
    def open(cls, runnable: Runnable[Any, Any], config: RunnableConfig) -> _Relay:
        relay = cls(_streams_to_langgraph(config))
        if relay.active:
            manager = cast(CallbackManager, config["callbacks"])
            (relay.run,) = manager.on_chat_model_start(**relay._start_args(runnable.get_name()))
            relay.id = f"{LC_ID_PREFIX}-{relay.run.run_id}"
        return relay

    def emit(self, out: Any) -> Any:
        if self.active and (chunk := self._chunk(out)) is not None:
            self.run.on_llm_new_token(chunk.message.text, chunk=chunk)
        return out

    def end(self, last: Any = None) -> None:
        if self.active:
            self.run.on_llm_end(self._result(last))

    def fail(self, error: BaseException) -> None:
        if self.active:
            self.run.on_llm_error(error)

    # -- async ---------------------------------------------------------------------------

    @classmethod
    async def aopen(cls, runnable: Runnable[Any, Any], config: RunnableConfig) -> _Relay:
        relay = cls(_streams_to_langgraph(config))
        if relay.active:
            manager = cast(AsyncCallbackManager, config["callbacks"])
            (relay.run,) = await manager.on_chat_model_start(
                **relay._start_args(runnable.get_name())
            )
            relay.id = f"{LC_ID_PREFIX}-{relay.run.run_id}"
        return relay

    async def aemit(self, out: Any) -> Any:
        if self.active and (chunk := self._chunk(out)) is not None:
            await self.run.on_llm_new_token(chunk.message.text, chunk=chunk)
        return out

    async def aend(self, last: Any = None) -> None:
        if self.active:
            await self.run.on_llm_end(self._result(last))

    async def afail(self, error: BaseException) -> None:
        if self.active:
            await self.run.on_llm_error(error)


def _unwrap(runnable: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """The runnable under bindings (``bind``, ``with_config``) and configurable wrappers."""
    while True:
        if isinstance(runnable, RunnableBinding):
            runnable = runnable.bound
        elif isinstance(runnable, DynamicRunnable):
            runnable = runnable.default
        else:
            return runnable


def _field(field: Any) -> tuple[Any, Any]:
    """A ``create_model`` definition copied from a field of another model."""
    if isinstance(field, FieldInfo):
        return (field.annotation, field)
    return (field.annotation, ... if field.required else field.default)  # pydantic v1


class _NativeCite(NamedTuple):
    """A provider's own citation held back with the text around it (``on_unsupported``)."""

    document: Document
    quote: str | None


#: What the session holds back while a sentence waits for its verdict.
_Held = str | ParsedCitation | _NativeCite


def _size(item: _Held) -> int:
    """Characters of the answer as written that a held item stands for."""
    if isinstance(item, str):
        return len(item)
    return len(item.raw) if isinstance(item, ParsedCitation) else 0


class _Steps(dict[type, Callable[[Any], Any]]):
    """A driver's table of a session's steps by class of chunk, filled as classes come.

    ``steps[chunk.__class__](chunk)`` is :meth:`_Session.step` without its None for ``""``
    (see :meth:`_Session.step_for`, which makes every choice). The table belongs to the
    driver's run (a local of its loop), not to the session: the session holds no reference
    to its own bound methods.
    """

    __slots__ = ("_session",)

    def __init__(self, session: _Session) -> None:
        super().__init__()
        self._session = session

    def __missing__(self, cls: type) -> Callable[[Any], Any]:
        step = self[cls] = self._session.step_for(cls)
        return step


class _Session:
    """State of one run: the rewriter, the optional citation check, the output's shape.

    With a citation check, each text chunk is parsed once, by the rewriter's parser, and its
    events go to both the check's sentence tracker and the rewriter (:meth:`feed`). With
    ``on_unsupported`` other than ``"keep"``, the events are held back sentence by sentence
    until the sentence's verdict has come (:meth:`_release`), then rendered with the
    citations the verdict finds unsupported flagged or dropped.
    """

    __slots__ = (
        "check",
        "check_data",
        "ended",
        "feed",
        "has_list_content",
        "held",
        "held_at",
        "last_id",
        "last_position",
        "mark_unsupported",
        "native",
        "on_unsupported",
        "released",
        "rewriter",
        "saw_chunks",
        "text_index",
        "unsupported",
        "v1",
        "verdicts",
        "whole",
    )

    def __init__(
        self,
        rewriter: ReferenceRewriter,
        check: StreamingCitationCheck | None = None,
        *,
        mark_unsupported: bool = False,
        on_unsupported: OnUnsupported = "keep",
        v1: bool = False,
    ) -> None:
        self.rewriter = rewriter
        # v1 output: text as standard content blocks, the closing one with the citations
        self.v1 = v1
        # the "index" of the answer's text blocks (v1 merging): that of the wrapped stream's
        # text blocks, None if they have none (a closing block at 0 would merge into a
        # reasoning or tool block there)
        self.text_index: Any = 0
        self.check = check
        self.mark_unsupported = mark_unsupported
        self.on_unsupported = on_unsupported
        # what waits for its sentence's verdict (None: nothing is held, "keep" or no check)
        self.held: list[_Held] | None = (
            [] if check is not None and on_unsupported != "keep" else None
        )
        self.held_at = 0  # offset in the answer as written of the first held item
        self.released = 0  # sentences rendered so far (held mode)
        self.ended = ""  # what the end of the wrapped stream released (see close())
        self.verdicts: list[SentenceVerdict] | None = None
        #: ``feed(text)``: take a text chunk, return the rewritten text now certain. Without a
        #: citation check it is the rewriter's own ``feed`` (no layer of the session's on the
        #: hot path); with one, :meth:`_checked_feed`.
        self.feed: Callable[[str], str] = rewriter.feed if check is None else self._checked_feed
        self.check_data: dict[str, Any] | None = None
        self.unsupported: list[UnsupportedClaim] = []
        self.has_list_content = False
        self.saw_chunks = False
        self.last_id: str | None = None
        self.last_position = False  # the wrapped stream marked a chunk as its last
        self.whole: BaseMessage | None = None
        self.native: NativeRun | None = None  # the provider's own citations, if read

    def _checked_feed(self, text: str) -> str:
        """:attr:`feed` with a citation check: one parse, for the check and the rewriter.

        The rewriter's parser parses the chunk; its events go to :meth:`_route`.
        """
        return self._route(self.rewriter.parse(text))

    def cite(self, document: Document, quote: str | None) -> str:
        """Take a provider's own citation (the native run's); return the text now certain."""
        rewriter = self.rewriter
        if self.check is None:
            return rewriter.cite(document, quote=quote)
        out = self._route(rewriter.parser.flush())  # the text before it, parsed once too
        if self.held is None:
            return out + rewriter.render_citation(document, quote=quote)
        self.held.append(_NativeCite(document, quote))
        return out

    def _route(self, events: list[Event]) -> str:
        """Parsed events of the answer: to the check, then rendered (or held back)."""
        assert self.check is not None  # only called with a check
        self.check.feed_events(events)
        if self.held is None:
            return self.rewriter.feed_events(events)
        self.held.extend(events)
        return self._release()

    # -- holding sentences back until their verdict (on_unsupported != "keep") -------------

    def _release(self, *, final: bool = False) -> str:
        """Render the held sentences whose verdicts have come, in order (never waits).

        Args:
            final: The run is over and every verdict is in: render everything held.
        """
        check, held = self.check, self.held
        if check is None or held is None:
            return ""
        out: list[str] = []
        while self.released < check.sentences:
            verdict = check.verdict(self.released)
            if verdict is None:
                break
            out.append(self._render(self._take(check.end_of(self.released)), verdict))
            self.released += 1
        if final:  # what follows the last sentence (blanks), or is in none
            out.append(self._render(self._take(self.held_at + sum(map(_size, held))), None))
        return "".join(out)

    def _take(self, end: int) -> list[_Held]:
        """The held items up to offset ``end`` of the answer (a text item is cut there)."""
        held = self.held
        assert held is not None
        taken: list[_Held] = []
        at = self.held_at
        count = 0
        for item in held:
            size = _size(item)
            if at + size <= end:
                taken.append(item)
                at += size
                count += 1
                continue
            if at < end and isinstance(item, str):
                taken.append(item[: end - at])
                held[count] = item[end - at :]
                at = end
            break
        del held[:count]
        self.held_at = at
        return taken

    def _render(self, items: list[_Held], verdict: SentenceVerdict | None) -> str:
        """Render one sentence's held items as its verdict decides (None: as they are)."""
        drop: frozenset[int] = frozenset()
        flag: frozenset[int] = frozenset()
        if verdict is not None and verdict.verification_worthy:
            unsupported = frozenset(c.doc_id for c in verdict.citations if not c.precise)
            if self.on_unsupported == "drop":
                drop = unsupported
            else:
                flag = unsupported
        rewriter = self.rewriter
        parts: list[str] = []
        events: list[Event] = []
        for item in items:
            if isinstance(item, _NativeCite):
                parts.append(rewriter.feed_events(events, drop=drop, flag=flag))
                parts.append(rewriter.render_citation(item.document, quote=item.quote))
                events = []
            else:
                events.append(item)
        parts.append(rewriter.feed_events(events, drop=drop, flag=flag))
        return "".join(parts)

    # -- one chunk ---------------------------------------------------------------------------

    def step(self, chunk: Any) -> Any:
        """Take one output chunk of the wrapped runnable; return the chunk to yield, or None.

        This is every decision about one chunk, for every driver. It returns None when there
        is nothing to yield yet (text held back, or a whole message kept for the end of the
        run). Text goes to the rewriter (and the citation check, if any), which passes text
        that cannot hold a citation through unchanged; every other chunk goes to
        :meth:`rewrite`.

        Args:
            chunk: A ``str``, a message chunk or a whole message.

        Returns:
            The rewritten chunk, or None.
        """
        return self.step_for(chunk.__class__)(chunk) or None

    def step_for(self, cls: type) -> Callable[[Any], Any]:
        """The step of a class of chunk: :attr:`feed` for text, :meth:`rewrite` for the rest.

        What it returns, called on a chunk of that class, gives the text now certain or the
        chunk to yield; either is to be yielded only if it is truthy (``""`` or None: nothing
        yet). :meth:`step` is this with None for nothing; the drivers call it through a
        :class:`_Steps` table, which takes text straight to the rewriter (one call per
        chunk, not two).

        Args:
            cls: The class of a chunk of the wrapped runnable's output.

        Returns:
            The bound step for chunks of that class.
        """
        return self.feed if issubclass(cls, str) else self.rewrite

    def rewrite(self, chunk: Any) -> Any:
        """Rewrite a message chunk, or keep a whole message for the end; None to yield nothing.

        Raises:
            TypeError: If the chunk is neither text nor a message.
        """
        # the exact class first: isinstance of a pydantic (ABC) class costs more per chunk
        if chunk.__class__ is AIMessageChunk or isinstance(chunk, BaseMessageChunk):
            self.saw_chunks = True
            if chunk.id:
                self.last_id = chunk.id
            content = self._native_content(chunk) if self.native is not None else None
            if content is None:
                content = self.rewrite_content(chunk.content)
            if self.v1 and isinstance(content, str):
                content = self.text_blocks(content)
            update: dict[str, Any] = {}
            if getattr(chunk, "chunk_position", None) == "last":
                # the closing chunk, which carries the reference list, is the last one
                self.last_position = True
                update["chunk_position"] = None
            if content is not chunk.content:
                update["content"] = content
            if not update:
                return chunk
            if not content and _bare(chunk):
                return None  # text held back, and nothing else in the chunk: yield nothing
            return chunk.model_copy(update=update)
        if isinstance(chunk, BaseMessage):  # a non-streaming runnable: the whole output
            whole = self._native_content(chunk) if self.native is not None else None
            if whole is None:
                whole = self.rewrite_content(chunk.content)
            self.whole = chunk.model_copy(update={"content": whole})
            return None
        raise TypeError(
            "manage_references() needs a runnable that outputs text (str, messages or message "
            f"chunks), got {type(chunk).__name__}. Put output parsers after it."
        )

    def _native_content(self, message: BaseMessage) -> str | list[Any] | None:
        """The content with the provider's own citations rendered, or None if none are read.

        Once the native run knows that no adapter reads this run, the session lets it go:
        the later chunks skip it.
        """
        native = self.native
        assert native is not None  # the caller checks
        content = native.rewrite(message)
        if content is None:
            if native.idle:
                self.native = None
            return None
        if not isinstance(content, str):
            self.has_list_content = True
        return content

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
                self.text_index = block.get("index")
                text = block.get("text")  # None (left as it is) in a block without text
                new_text = feed(text) if isinstance(text, str) else text
                new_block = block if new_text is text else {**block, "text": new_text}
            else:
                new_block = block
            changed = changed or new_block is not block
            blocks.append(new_block)
        return blocks if changed else content

    # -- end of the answer -----------------------------------------------------------------

    # The close sequence of a run, for every driver: after the last chunk, ``close()`` (or
    # ``await aclose()``) ends the stream, waits for the citation check and returns what to
    # yield last; the driver cancels the check in a ``finally`` (the consumer may leave early).

    def close(self) -> list[Any]:
        """End the run (sync path): the closing outputs, the citation check collected.

        Returns:
            What the run yields after the last chunk (see :meth:`closing`).
        """
        self._end_stream()
        if self.check is not None:
            self.verdicts = self.check.finish()
        return self.closing()

    async def aclose(self) -> list[Any]:
        """Async :meth:`close`: the citation check awaited."""
        self._end_stream()
        if self.check is not None:
            self.verdicts = await self.check.afinish()
        return self.closing()

    def _end_stream(self) -> None:
        """The wrapped stream ended: render what the native run held, end the answer's parse.

        With a check, the parser's last events go to it (its last sentence) before the
        verdicts are waited for; without one, :meth:`ReferenceRewriter.finish` closes the
        parser.
        """
        ended = self.native.finish() if self.native is not None else ""
        if self.check is not None:
            ended += self._route_last(self.rewriter.parser.close())
        self.ended = ended

    def _route_last(self, events: list[Event]) -> str:
        """The parser's last events: the check's last sentence, then rendered or held."""
        assert self.check is not None
        self.check.close(events)
        if self.held is None:
            return self.rewriter.feed_events(events)
        self.held.extend(events)
        return ""

    def cancel(self) -> None:
        """Stop the citation check, if any (verifications not yet collected are dropped)."""
        if self.check is not None:
            self.check.cancel()

    def tail(self) -> str:
        """The last text: what the end released, the reference list, the unsupported claims.

        Every held sentence is rendered first (every verdict is in), so the check's report
        numbers the sources as the answer does.
        """
        tail = self.ended + self._release(final=True) + self.rewriter.finish()
        if self.verdicts is not None:
            numbers = {
                position: ref.number
                for ref in self.rewriter.references
                for position in ref.positions
            }
            self.check_data, self.unsupported = citation_report(self.verdicts, numbers)
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

    def report(self, config: RunnableConfig) -> None:
        """Send the ``"references"`` custom event to the run's handlers, if any."""
        if _has_listeners(config):
            dispatch_custom_event(REFERENCES_EVENT, self.event_payload(), config=config)

    async def areport(self, config: RunnableConfig) -> None:
        """Async :meth:`report`."""
        if _has_listeners(config):
            await adispatch_custom_event(REFERENCES_EVENT, self.event_payload(), config=config)

    def text_block(self, text: str) -> dict[str, Any]:
        """A text block of the answer, at the index of its text blocks if they have one."""
        block: dict[str, Any] = {"type": "text", "text": text}
        if self.text_index is not None:
            block["index"] = self.text_index
        return block

    def text_blocks(self, text: str) -> list[dict[str, Any]]:
        """Text as v1 content: one text block at the answer's index (none for no text)."""
        return [self.text_block(text)] if text else []

    def annotations(self) -> list[Citation]:
        """The answer's citations as standard v1 ``Citation`` annotations, in text order.

        ``start_index`` / ``end_index`` delimit each rendered marker in the answer text as
        written (``message.text``); ``cited_text`` is the provider's quote, else the cited
        chunk; ``url`` is the source id when it is a link; ``title`` is the title the
        reference list shows (the style's ``title_key``).
        """
        style = self.rewriter.style
        annotations = []
        for span in self.rewriter.spans:
            document = span.document
            source = style.get_source_id(document)
            annotations.append(
                create_citation(
                    url=source if isinstance(source, str) and "://" in source else None,
                    title=style.get_title(document),
                    cited_text=span.quote or document.page_content,
                    start_index=span.start,
                    end_index=span.end,
                )
            )
        return annotations

    def closing(self) -> list[Any]:
        """What the run yields after the last chunk (called by :meth:`close`).

        Returns:
            The whole message of a non-streaming runnable, closed; or the closing chunk of a
            chat stream; or the text tail of a string stream (nothing if it is empty). With
            v1 output, a message's last text block carries the citation annotations.
        """
        tail = self.tail()
        if self.whole is not None:
            content = _append(self.whole.content, tail) if tail else self.whole.content
            if self.v1:
                others = [b for b in _as_blocks(content) if b.get("type") != "text"]
                text = {"type": "text", "text": _text_of(content)}
                content = [*others, {**text, "annotations": self.annotations()}]
            metadata = {**self.whole.response_metadata, **self.metadata()}
            return [
                self.whole.model_copy(update={"content": content, "response_metadata": metadata})
            ]
        if self.saw_chunks:
            blocks: str | list[Any] = tail
            if self.v1:
                blocks = [{**self.text_block(tail), "annotations": self.annotations()}]
            elif self.has_list_content and tail:
                blocks = [{"type": "text", "text": tail}]
            return [
                AIMessageChunk(
                    content=blocks,
                    id=self.last_id,
                    response_metadata=self.metadata(),
                    chunk_position="last" if self.last_position else None,
                )
            ]
        return [tail] if tail else []


def _bare(chunk: BaseMessageChunk) -> bool:
    """Whether an ``AIMessageChunk`` carries nothing but its content, id and position.

    Such a chunk whose text is all held back is not yielded (as a held-back ``str`` chunk is
    not): its id is kept for the closing chunk, and its ``chunk_position`` moves there; a
    chunk with tool calls, usage, metadata or a name is yielded, with empty content.
    """
    return (
        chunk.__class__ is AIMessageChunk
        and not chunk.tool_call_chunks
        and chunk.usage_metadata is None
        and not chunk.response_metadata
        and not chunk.additional_kwargs
        and chunk.name is None
    )


def _as_blocks(content: str | list[Any]) -> list[dict[str, Any]]:
    """Content as a list of block dicts (a str is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]


def _text_of(content: str | list[Any]) -> str:
    """The text of content (its text blocks, joined)."""
    return "".join(b.get("text", "") for b in _as_blocks(content) if b.get("type") == "text")


def _append(content: str | list[Any], tail: str) -> str | list[Any]:
    if isinstance(content, str):
        return content + tail
    return [*content, {"type": "text", "text": tail}]


def _checked_output_version(output_version: str | None) -> str | None:
    """``output_version`` if it is None, ``"v0"`` or ``"v1"``; else a ValueError."""
    if output_version not in (None, "v0", "v1"):
        raise ValueError(f"output_version must be None, 'v0' or 'v1', not {output_version!r}")
    return output_version


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

    The schemas describe the wrapper: the input schema holds the documents key and the input
    fields of the wrapped runnable (the ``"input"`` key for a bare model), the output schema
    and the configurable fields (:attr:`config_specs`) are the wrapped runnable's.
    """

    def __init__(
        self,
        bound: Runnable[Any, Any],
        *,
        documents_key: str = "documents",
        style: ReferenceStyle | None = None,
        verifier: CitationChecker | None = None,
        mark_unsupported: bool = False,
        on_unsupported: OnUnsupported = "keep",
        native: NativeOption | str = "auto",
        name: str | None = None,
        markers: Collection[str] = DEFAULT_MARKERS,
        output_version: str | None = None,
    ) -> None:
        self.markers = tuple(sorted(check_markers(markers)))
        self.output_version = _checked_output_version(output_version)
        if native is not None and native != "auto" and native not in ADAPTER_NAMES:
            raise UnknownAdapterError(
                f"native={native!r} is not an adapter: use 'auto', None or one of "
                f"{list(ADAPTER_NAMES)}"
            )
        self.native = native
        self._wrap(bound)
        if style is not None and not isinstance(style, ReferenceStyle):
            raise TypeError(f"style must be a ReferenceStyle, not {type(style).__name__}")
        self.documents_key = documents_key
        self.style = style if style is not None else MarkdownReferenceStyle()
        if verifier is not None and not isinstance(verifier, CitationChecker):
            raise TypeError(
                "verifier must have verify() and averify() (e.g. a CitationVerifier), "
                f"not {type(verifier).__name__}"
            )
        if mark_unsupported and verifier is None:
            raise ValueError("mark_unsupported=True needs a verifier")
        if on_unsupported not in _ON_UNSUPPORTED:
            raise ValueError(
                f"on_unsupported must be one of {list(_ON_UNSUPPORTED)}, not {on_unsupported!r}"
            )
        if on_unsupported != "keep" and verifier is None:
            raise ValueError(f"on_unsupported={on_unsupported!r} needs a verifier")
        self.verifier = verifier
        self.mark_unsupported = mark_unsupported
        self.on_unsupported: OnUnsupported = on_unsupported
        self.name = name or f"ManageReferences[{bound.get_name()}]"

    def _wrap(self, bound: Runnable[Any, Any]) -> None:
        """Set the wrapped runnable, and what is derived from it."""
        if not isinstance(bound, Runnable):
            raise TypeError(f"manage_references() takes a Runnable, not {type(bound).__name__}")
        self.bound = bound
        self._is_model = isinstance(_unwrap(bound), BaseLanguageModel)

    def with_bound(
        self, bound: Runnable[Any, Any], *, output_version: str | None = None
    ) -> ReferencedRunnable:
        """The same wrapper over another runnable (the wrapped model with tools bound).

        Args:
            bound: The runnable to wrap instead.
            output_version: Overrides the ``output_version`` option if given.

        Returns:
            A new wrapper with the same options and name.

        Raises:
            TypeError: If ``bound`` is not a runnable.
            ValueError: If ``output_version`` is not None, ``"v0"`` or ``"v1"``.
        """
        other = copy.copy(self)
        other._wrap(bound)
        if output_version:
            other.output_version = _checked_output_version(output_version)
        return other

    # -- schemas -----------------------------------------------------------------------------

    @property
    @override
    def InputType(self) -> type[Mapping[str, Any]]:
        return dict

    @property
    @override
    def OutputType(self) -> Any:
        return self.bound.OutputType

    @override
    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        """The input dict: the documents key and the input fields of the wrapped runnable.

        Args:
            config: The config the schema is for (configurable runnables depend on it).

        Returns:
            A pydantic model with the documents key (a list of ``Document``) and either the
            wrapped runnable's own input fields or, for a bare model, the ``"input"`` key.
        """
        fields = get_fields(self.bound.get_input_schema(config))
        definitions: dict[str, Any] = {}
        if self._is_model:
            root = fields.get("root")
            definitions[MODEL_INPUT_KEY] = _field(root) if root is not None else (Any, ...)
        else:
            definitions = {
                name: _field(field)
                for name, field in fields.items()
                if name not in ("root", "__root__")
            }
        key = self.documents_key
        # pydantic treats a name starting with "_" as private: such a key goes by its alias
        definitions[f"documents{key}" if key.startswith("_") else key] = (
            list[Document],
            Field(alias=key, description="The documents put in the prompt, cited as [n](id=k)."),
        )
        model: type[BaseModel] = create_model(
            self.get_name("Input"), __config__=_SCHEMA_CONFIG, **definitions
        )
        return model

    @override
    def get_output_schema(self, config: RunnableConfig | None = None) -> TypeBaseModel:
        """The output schema of the wrapped runnable: the wrapper keeps the output type.

        Args:
            config: The config the schema is for (configurable runnables depend on it).

        Returns:
            The wrapped runnable's output schema.
        """
        return self.bound.get_output_schema(config)

    @property
    @override
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The configurable fields of the wrapped runnable (the config reaches it unchanged)."""
        return self.bound.config_specs

    # -- the input ---------------------------------------------------------------------------

    def _documents(self, input: Any) -> Sequence[Document]:
        if (
            self.native is not None
            and self._is_model
            and (not isinstance(input, Mapping) or self.documents_key not in input)
        ):
            return []  # a bare model's provider citations carry their own sources
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

    def _bound_input(self, input: Mapping[str, Any]) -> Any:
        """The input of the wrapped runnable: the dict itself, or its model input."""
        if not self._is_model:
            return input
        if self.native is not None and not isinstance(input, Mapping):
            return input  # a bare model called like a model: its citations are its own
        if MODEL_INPUT_KEY not in input:
            raise MissingDocumentsError(
                f"manage_references() wraps a bare language model: put the model input "
                f"(messages, a prompt value or a string) under {MODEL_INPUT_KEY!r}, next to "
                f"{self.documents_key!r}, or wrap a chain such as `prompt | model`"
            )
        return input[MODEL_INPUT_KEY]

    def _start(
        self, input: Any, config: RunnableConfig, *, use_async: bool
    ) -> tuple[_Session, Any]:
        """Check the input and open the run: its session and the wrapped runnable's input."""
        documents = self._documents(input)
        return self.open_session(documents, config, use_async=use_async), self._bound_input(input)

    def open_session(
        self,
        documents: Sequence[Document],
        config: RunnableConfig,
        *,
        use_async: bool,
        output_version: str | None = None,
    ) -> _Session:
        """Open the state of one answer over ``documents`` (citation ids are their positions).

        Args:
            documents: The documents the model was shown, id ``k`` at position ``k``.
            config: The config the citation check's judges run with.
            use_async: Whether the run is async (the citation check runs its judges so).
            output_version: ``"v1"`` for standard content blocks with citation
                annotations (default: the wrapper's own ``output_version``).

        Returns:
            The session whose :meth:`_Session.step` takes the answer's chunks.
        """
        check = None
        if self.verifier is not None:
            check = StreamingCitationCheck(self.verifier, documents, config, use_async=use_async)
        v1 = (output_version or self.output_version) == "v1"
        session = _Session(
            ReferenceRewriter(documents, self.style, markers=self.markers, track_spans=v1),
            check,
            mark_unsupported=self.mark_unsupported,
            on_unsupported=self.on_unsupported,
            v1=v1,
        )
        if self.native is not None:
            session.native = NativeRun(
                self.native, session.rewriter, documents, session.feed, session.cite
            )
        return session

    # -- the drivers: the same loop, sync and async ----------------------------------------

    def _run(self, inputs: Iterator[Any], config: RunnableConfig, source: _Source) -> Iterator[Any]:
        """Drive one run: merge the input, stream the source through the step, close the run.

        Args:
            inputs: The chunks of the input dict.
            config: The run's child config.
            source: The wrapped runnable's stream (or its whole output as one chunk).

        Yields:
            The rewritten chunks, then the closing output (see :meth:`_Session.closing`).
        """
        input = None
        for item in inputs:
            input = _merge_input(input, item)
        session, bound_input = self._start(input, config, use_async=False)
        relay = _Relay.open(self, config)
        try:
            steps, relayed = _Steps(session), relay.active  # no relay: no call per chunk
            for chunk in source(bound_input, relay.inner_config(config)):
                if out := steps[chunk.__class__](chunk):
                    yield relay.emit(out) if relayed else out
            closing = session.close()
        except BaseException as error:
            relay.fail(error)
            raise
        finally:
            session.cancel()
        for out in closing:
            yield relay.emit(out)
        relay.end(closing[-1] if closing else None)
        session.report(config)

    async def _arun(
        self, inputs: AsyncIterator[Any], config: RunnableConfig, source: _AsyncSource
    ) -> AsyncIterator[Any]:
        """Async :meth:`_run`: the same loop, with ``async for`` and awaited check and event."""
        input = None
        async for item in inputs:
            input = _merge_input(input, item)
        session, bound_input = self._start(input, config, use_async=True)
        relay = await _Relay.aopen(self, config)
        try:
            steps, relayed = _Steps(session), relay.active  # no relay: no call per chunk
            async for chunk in source(bound_input, relay.inner_config(config)):
                if out := steps[chunk.__class__](chunk):
                    yield await relay.aemit(out) if relayed else out
            closing = await session.aclose()
        except BaseException as error:
            await relay.afail(error)
            raise
        finally:
            session.cancel()
        for out in closing:
            yield await relay.aemit(out)
        await relay.aend(closing[-1] if closing else None)
        await session.areport(config)

    def _invoked(self, input: Any, config: RunnableConfig) -> Iterator[Any]:
        """The wrapped runnable's whole output, as a stream of one chunk."""
        yield self.bound.invoke(input, config)

    async def _ainvoked(self, input: Any, config: RunnableConfig) -> AsyncIterator[Any]:
        """Async :meth:`_invoked`."""
        yield await self.bound.ainvoke(input, config)

    def _invoke(
        self,
        input: Mapping[str, Any],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        if _streams_to_langgraph(config):  # the rewritten tokens stream to the graph's reader
            return _join(list(self._run(iter((input,)), config, self.bound.stream)), streamed=True)
        return _join(list(self._run(iter((input,)), config, self._invoked)))

    async def _ainvoke(
        self,
        input: Mapping[str, Any],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        streamed = _streams_to_langgraph(config)
        source = self.bound.astream if streamed else self._ainvoked
        outputs = [out async for out in self._arun(_once(input), config, source)]
        return _join(outputs, streamed=streamed)

    def _transform(
        self,
        inputs: Iterator[Mapping[str, Any]],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[Any]:
        return self._run(inputs, config, self.bound.stream)

    def _atransform(
        self,
        inputs: AsyncIterator[Mapping[str, Any]],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[Any]:
        return self._arun(inputs, config, self.bound.astream)

    # -- the Runnable interface ------------------------------------------------------------

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

    # The stream methods return the stream of ``_transform_stream_with_config`` as it is: a
    # generator layer of their own would cost every chunk a hop.

    @override
    def transform(
        self,
        input: Iterator[Mapping[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        return self._transform_stream_with_config(input, self._transform, config, **kwargs)

    @override
    def stream(
        self,
        input: Mapping[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        return self.transform(iter((input,)), config, **kwargs)

    @override
    def atransform(
        self,
        input: AsyncIterator[Mapping[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        return self._atransform_stream_with_config(input, self._atransform, config, **kwargs)

    @override
    def astream(
        self,
        input: Mapping[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        return self.atransform(_once(input), config, **kwargs)
