"""Verifiable LLM answers for LangChain.

:func:`manage_references` wraps a chain, chat model or LLM so that its ``[n](id=k)``
citations are renumbered and written in a :class:`ReferenceStyle` while the answer streams.
The other parts live in subpackages, each with a small public API:

* :mod:`langchain_references.citations`: check an answer's citations (recall / precision);
* :mod:`langchain_references.judges`: the judges (LLM, NLI, offline heuristic);
* :mod:`langchain_references.factcheck`: the fact-check chain (search, fetch, judge, verdict);
* :mod:`langchain_references.factuality`: FactReasoner-style long-form factuality.

Every exception the package raises on purpose is a :class:`LangchainReferencesError`.
``__version__`` is the installed version (``"0+unknown"`` when the package is not installed).
"""

import importlib.metadata

from langchain_references.chat_model import ReferencedChatModel
from langchain_references.errors import LangchainReferencesError
from langchain_references.failures import Failure
from langchain_references.manager import (
    REFERENCES_EVENT,
    MissingDocumentsError,
    ReferencedRunnable,
    manage_references,
)
from langchain_references.prompting import FORMAT_REFERENCES, format_documents
from langchain_references.rewriter import UsedReference
from langchain_references.styles import (
    EmptyReferenceStyle,
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
)

try:
    __version__: str = importlib.metadata.version("langchain-references")
except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0+unknown"

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
    "TextReferenceStyle",
    "UsedReference",
    "__version__",
    "format_documents",
    "manage_references",
]
