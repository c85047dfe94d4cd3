"""Verifiable LLM answers for LangChain.

:func:`manage_references` wraps a chain, chat model or LLM so that its ``[n](id=k)``
citations are renumbered and written in a :class:`ReferenceStyle` while the answer streams.
The other parts live in subpackages, each with a small public API:

:class:`ReferencesMiddleware` does the same for ``create_agent(middleware=[...])``, with
document ids kept for the whole conversation.

* :mod:`langchain_references.citations`: check an answer's citations (recall / precision);
* :mod:`langchain_references.judges`: the judges (LLM, NLI, offline heuristic);
* :mod:`langchain_references.factcheck`: the fact-check chain (search, fetch, judge, verdict);
* :mod:`langchain_references.factuality`: FactReasoner-style long-form factuality.

Every exception the package raises on purpose is a :class:`LangchainReferencesError`. The
names are imported on first access.
``__version__`` is the installed version (``"0+unknown"`` when the package is not installed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_references._optional import lazy_exports

if TYPE_CHECKING:
    from langchain_references._version import __version__
    from langchain_references.chat_model import ReferencedChatModel
    from langchain_references.core.prompting import FORMAT_REFERENCES, format_documents
    from langchain_references.core.rewriter import UsedReference
    from langchain_references.core.styles import (
        EmptyReferenceStyle,
        HTMLReferenceStyle,
        MarkdownReferenceStyle,
        ReferenceStyle,
        TextReferenceStyle,
    )
    from langchain_references.errors import LangchainReferencesError
    from langchain_references.factory import manage_references
    from langchain_references.failures import Failure
    from langchain_references.manager import (
        REFERENCES_EVENT,
        MissingDocumentsError,
        ReferencedRunnable,
    )
    from langchain_references.middleware import ReferencesMiddleware

#: Public name -> the submodule that defines it (imported on first access: a worker process or
#: the command line that needs one submodule does not load LangChain for the others).
_EXPORTS = {
    "ReferencedChatModel": "chat_model",
    "LangchainReferencesError": "errors",
    "Failure": "failures",
    "REFERENCES_EVENT": "manager",
    "MissingDocumentsError": "manager",
    "ReferencedRunnable": "manager",
    "manage_references": "factory",
    "ReferencesMiddleware": "middleware",
    "FORMAT_REFERENCES": "core.prompting",
    "format_documents": "core.prompting",
    "UsedReference": "core.rewriter",
    "EmptyReferenceStyle": "core.styles",
    "HTMLReferenceStyle": "core.styles",
    "MarkdownReferenceStyle": "core.styles",
    "ReferenceStyle": "core.styles",
    "TextReferenceStyle": "core.styles",
    "__version__": "_version",  # importlib.metadata, read on first access
}

__all__ = [
    "FORMAT_REFERENCES",
    "REFERENCES_EVENT",
    "EmptyReferenceStyle",
    "Failure",
    "HTMLReferenceStyle",
    "LangchainReferencesError",
    "MarkdownReferenceStyle",
    "MissingDocumentsError",
    "ReferenceStyle",
    "ReferencedChatModel",
    "ReferencedRunnable",
    "ReferencesMiddleware",
    "TextReferenceStyle",
    "UsedReference",
    "__version__",
    "format_documents",
    "manage_references",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
