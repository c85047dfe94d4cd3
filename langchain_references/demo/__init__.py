"""An offline demo of streaming citations: corpus, extractive answerer and command line.

Run it with ``python -m langchain_references.demo --help``. The pieces are reusable:

* :mod:`langchain_references.demo.corpus`: a small web-page-like corpus written for the demo,
  as LangChain documents and as HTML pages;
* :mod:`langchain_references.demo.answerer`: :class:`ExtractiveAnswerer`, an offline chat model
  that answers with cited sentences copied from the prompt's documents (a stand-in, not an
  LLM).
"""

from langchain_references.demo.answerer import NOT_FOUND_ANSWER, ExtractiveAnswerer
from langchain_references.demo.corpus import (
    BASE_URL,
    SAMPLE_QUESTION,
    load_documents,
    render_pages,
)

__all__ = [
    "BASE_URL",
    "NOT_FOUND_ANSWER",
    "SAMPLE_QUESTION",
    "ExtractiveAnswerer",
    "load_documents",
    "render_pages",
]
