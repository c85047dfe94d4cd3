"""Verifiable LLM answers for LangChain.

Streaming citations (:func:`manage_references`) with pluggable reference styles, a fact-check
chain with real web evidence, and long-form factuality evaluation.
"""

from langchain_references.checking import CitationChecker, UnsupportedClaim
from langchain_references.documents import format_documents, neutralize_tags
from langchain_references.manager import (
    REFERENCES_EVENT,
    MissingDocumentsError,
    ReferencedRunnable,
    manage_references,
)
from langchain_references.prompting import DATA_NOTICE, FORMAT_REFERENCES, delimit, neutralise
from langchain_references.rewriter import ReferenceRewriter, UsedReference
from langchain_references.styles import (
    EmptyReferenceStyle,
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
    is_safe_url,
)

__all__ = [
    "DATA_NOTICE",
    "FORMAT_REFERENCES",
    "REFERENCES_EVENT",
    "CitationChecker",
    "EmptyReferenceStyle",
    "HTMLReferenceStyle",
    "MarkdownReferenceStyle",
    "MissingDocumentsError",
    "ReferenceRewriter",
    "ReferenceStyle",
    "ReferencedRunnable",
    "TextReferenceStyle",
    "UnsupportedClaim",
    "UsedReference",
    "delimit",
    "format_documents",
    "is_safe_url",
    "manage_references",
    "neutralise",
    "neutralize_tags",
]
