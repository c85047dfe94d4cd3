"""``manage_references``: the one entry point that wraps a runnable or a chat model.

It builds a :class:`~langchain_references.manager.ReferencedRunnable` and, over a chat model,
the :class:`~langchain_references.chat_model.ReferencedChatModel` around it: it sits above
both, so that neither imports the other's module back.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from langchain_references.chat_model import ReferencedChatModel
from langchain_references.citations.streaming import CitationChecker
from langchain_references.core._parser import DEFAULT_MARKERS
from langchain_references.core.styles import ReferenceStyle
from langchain_references.manager import OnUnsupported, ReferencedRunnable
from langchain_references.native.registry import NativeOption

__all__ = ["manage_references"]


@overload
def manage_references(
    runnable: BaseChatModel,
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
) -> ReferencedChatModel: ...


@overload
def manage_references(
    runnable: Runnable[Any, Any],
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
) -> ReferencedRunnable: ...


def manage_references(
    runnable: Runnable[Any, Any],
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
) -> ReferencedRunnable | ReferencedChatModel:
    """Wrap a chat model, LLM or chain so that its citations become real references.

    The wrapped runnable is prompted (see :data:`~langchain_references.FORMAT_REFERENCES`) to
    cite documents as ``[n](id=k)``, where ``k`` is the 1-based position of the document in
    the list it was given. While the answer streams, citations are found even when split
    across tokens, renumbered by first use with one number per distinct source, written in
    ``style`` and followed by the reference list. Text that is not a citation passes through
    unchanged.

    Args:
        runnable: The runnable that writes the answer. It receives the whole input dict.
        documents_key: The input key holding the list of Documents put in the prompt;
            ``"documents"`` by default.
        style: How citations and the list are written;
            :class:`MarkdownReferenceStyle` by default.
        verifier: Check each sentence's citations against the cited
            documents while the answer streams, e.g. ``CitationVerifier(LLMJudge(model))``
            from :mod:`langchain_references.factuality`. The report (citation recall and
            precision, unsupported sentences and citations) goes to
            ``response_metadata["citation_check"]`` of chat outputs and to the
            ``"references"`` event of every output. None (default): no check.
        mark_unsupported: Also append the unsupported sentences to the text, after the
            reference list, in the style's form (:meth:`ReferenceStyle.format_citation_check`);
            False by default.
        on_unsupported: What the reader sees of a citation whose document, the verifier
            says, does not support its sentence (a citation that is not *precise*): ``"keep"``
            (default) renders it as any other; ``"flag"`` follows its marker with the style's
            flag (:meth:`ReferenceStyle.format_unsupported`, `` (unsupported)`` in text);
            ``"drop"`` removes it, with the blanks before it, and it takes no number: its
            source is numbered and listed only if another, supported citation cites it.
            Since a verdict comes once its sentence is complete, with ``"flag"`` or
            ``"drop"`` each sentence is held back until its verdict has come (the stream
            goes on sentence by sentence: a sentence is released with the first chunk after
            its verdict, or at the end); with ``"keep"`` nothing is held. Needs a verifier.
        native: Read the provider's own citations too (Anthropic
            Citations, OpenAI Responses annotations, Perplexity, Gemini grounding, Cohere,
            LangChain v1 ``citation`` annotations) and number them with the ``[n](id=k)``
            citations, in one reference list: ``"auto"`` (default) picks the adapter from the
            first chunk (``response_metadata["model_provider"]`` or the chunk shapes), an
            adapter name (see :data:`~langchain_references.native.ADAPTER_NAMES`) forces one,
            None turns it off. With it, the documents key may be absent (provider citations
            carry their sources) and a bare chat model may be called with its own input.
        name: The run name shown in callbacks, traces and ``astream_events``;
            ``"ManageReferences[<wrapped runnable's name>]"`` by default.
        markers: The citation dialects the answer is written in (see
            :data:`~langchain_references.core._parser.MARKER_DIALECTS`): ``"id"`` for
            ``[n](id=k)`` and ``"source"`` for ``【k†source】``, ``【k】`` and OpenAI
            Assistants' ``【k:m†source】`` (both by default), ``"bracket"`` for plain ``[k]``
            and ``[k, m]`` (opt-in: only for prompts that ask for it, since ``[1]`` is common
            in text).
        output_version: ``"v1"``: message outputs are LangChain v1 content
            blocks, and the final message's text block carries standard ``Citation``
            annotations (url, title, cited_text, and ``start_index`` / ``end_index`` of each
            marker in the answer text as written). Over a chat model, the default (None) is
            the model's own ``output_version``. ``str`` outputs carry no annotations (the
            ``"references"`` event and ``response_metadata["references"]`` are always there).

    Returns:
        Over a chat model, a :class:`~langchain_references.ReferencedChatModel`: itself a chat
        model (for ``create_agent``, ``bind_tools``, LangGraph nodes), which reads the
        documents of a conversation from its tool messages' artifacts, and takes the dict
        input below too. Over anything else, a :class:`ReferencedRunnable` taking the same
        dict input and producing the same output type. Its input schema declares the
        documents key next to the wrapped runnable's input fields; its output schema and
        configurable fields are those of the wrapped runnable.

    Raises:
        TypeError: If ``runnable``, ``style`` or ``verifier`` has the wrong type.
        ValueError: If ``mark_unsupported`` or ``on_unsupported`` other than ``"keep"`` is
            set without a verifier, ``on_unsupported`` is not one of its three values, or
            ``markers`` names an unknown dialect.

    Examples:
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
    references = ReferencedRunnable(
        runnable,
        documents_key=documents_key,
        style=style,
        verifier=verifier,
        mark_unsupported=mark_unsupported,
        on_unsupported=on_unsupported,
        native=native,
        name=name,
        markers=markers,
        output_version=output_version,
    )
    if isinstance(runnable, BaseChatModel):
        if output_version is None:  # the chat model's own
            return ReferencedChatModel(wrapped=runnable, references=references)
        return ReferencedChatModel(
            wrapped=runnable, references=references, output_version=output_version
        )
    return references
