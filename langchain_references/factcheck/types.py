"""Typed records passed between the I/O stages of the fact-check chain.

The stages are: search (:class:`SearchHit`), fetch (:class:`FetchedPage`), extract
(:class:`ExtractedPage`), split (:class:`Passage`). A source that fails at any stage becomes a
:class:`Failure` and the run goes on with the other sources.

All records are frozen pydantic v2 models, so they are hashable, validated on construction and
serialise with ``model_dump()`` / ``model_dump_json()``.

The search ``rank`` (0-based position in the search results, best first) travels with a source
through every stage, so evidence and failures can always be traced back to a search position.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from langchain_references.failures import Failure

__all__ = [
    "ExtractReport",
    "ExtractedPage",
    "FetchReport",
    "FetchedPage",
    "Passage",
    "SearchHit",
    "SearchReport",
]

#: Stage of the chain at which a source failed.


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SearchHit(_Record):
    """One search result.

    Attributes:
        title: Title shown by the search engine.
        snippet: Short text shown by the search engine (may be empty).
        link: URL of the result.
        rank: 0-based position in the result list (0 = best).
    """

    title: str
    snippet: str = ""
    link: str = Field(min_length=1)
    rank: int = Field(ge=0)


class FetchedPage(_Record):
    """A page downloaded by :class:`~langchain_references.factcheck.fetch.PageFetcher`.

    Attributes:
        url: The URL that was asked for.
        final_url: The URL after redirects.
        status: HTTP status of the final response.
        content_type: Media type of the response, lower case, without parameters
            (e.g. ``"text/html"``); empty if the server sent none.
        body: The decoded body (HTML or plain text).
        from_cache: Whether the page came from the on-disk cache.
        elapsed_s: Seconds spent getting the page (network or cache).
        rank: Search rank of the source (the input position if no search hit was given).
        hit: The search hit the URL came from, if any.
    """

    url: str
    final_url: str
    status: int
    content_type: str
    body: str
    from_cache: bool = False
    elapsed_s: float = Field(ge=0.0)
    rank: int = Field(ge=0)
    hit: SearchHit | None = None

    @property
    def is_plain_text(self) -> bool:
        """Whether the body is plain text rather than (X)HTML."""
        return self.content_type == "text/plain"


class FetchReport(_Record):
    """Result of fetching several URLs: the pages that arrived and the failures.

    Attributes:
        pages: Fetched pages, in input order.
        failures: One failure per URL that could not be fetched, in input order.
    """

    pages: list[FetchedPage] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)


class ExtractedPage(_Record):
    """Main text and title extracted from a fetched page.

    Attributes:
        url: The URL that was asked for.
        final_url: The URL after redirects.
        title: Page title (from the page metadata, else the search title, else the URL).
        text: Main text, one paragraph per line for HTML pages.
        rank: Search rank of the source.
        content_type: Media type of the fetched page.
    """

    url: str
    final_url: str
    title: str
    text: str
    rank: int = Field(ge=0)
    content_type: str

    @property
    def is_plain_text(self) -> bool:
        """Whether the text came from a plain-text page (paragraphs separated by blank lines)."""
        return self.content_type == "text/plain"


class ExtractReport(_Record):
    """Result of extracting several pages.

    Attributes:
        pages: Pages with main text, in input order.
        failures: Pages from which no text could be extracted.
    """

    pages: list[ExtractedPage] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)


class SearchReport(_Record):
    """Result of one search: the hits, or the failure that prevented them.

    Attributes:
        query: The query that was searched.
        hits: Hits, best first.
        failures: At most one failure (stage ``"search"``) if the provider raised.
    """

    query: str
    hits: list[SearchHit] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)


class Passage(_Record):
    """A token-bounded piece of a page's main text, the unit of evidence.

    Attributes:
        text: The passage text.
        url: URL of the page it comes from (the URL after redirects).
        title: Title of the page.
        rank: Search rank of the page.
        index_in_page: 0-based position of the passage among its page's passages.
        n_tokens: Number of tokens of ``text`` in the tokenizer used to bound it.
    """

    text: str = Field(min_length=1)
    url: str
    title: str
    rank: int = Field(ge=0)
    index_in_page: int = Field(ge=0)
    n_tokens: int = Field(ge=1)
