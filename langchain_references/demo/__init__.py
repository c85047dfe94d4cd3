"""The offline demo: corpus, extractive answerer and a local demo site for the fact-check.

Run it with ``langchain-references demo --help`` (:mod:`langchain_references.cli.demo`).
The pieces are reusable:

* :mod:`langchain_references.demo.corpus`: a small web-page-like corpus written for the demo,
  as LangChain documents and as HTML pages;
* :mod:`langchain_references.demo.answerer`: :class:`ExtractiveAnswerer`, an offline chat model
  that answers with cited sentences copied from the prompt's documents (a stand-in, not an
  LLM);
* :mod:`langchain_references.demo.site`: the corpus served as web pages on 127.0.0.1 with a
  matching search provider (``factcheck --search demo``).

Names load on first use (the command line reads :data:`SAMPLE_QUESTION` without the answerer).
"""

from typing import TYPE_CHECKING

from langchain_references._optional import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BASE_URL": "corpus",
        "NOT_FOUND_ANSWER": "answerer",
        "SAMPLE_QUESTION": "corpus",
        "ExtractiveAnswerer": "answerer",
        "load_documents": "corpus",
        "render_pages": "corpus",
    },
)
