"""The demo corpus: a few short web-page-like articles written for this project.

The text lives in ``langchain_references/_data/demo_corpus.json`` (data, not code). This module
turns it into LangChain :class:`~langchain_core.documents.Document` chunks for retrieval and into
full HTML pages, so the same corpus can also be served from a local HTTP server and extracted
like real web pages. Several articles are split into more than one chunk that share the
article's URL, which shows how citations of the same source get one number.

The site lives under the reserved ``.invalid`` top-level domain: its URLs can never resolve.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

from langchain_core.documents import Document

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "BASE_URL",
    "SAMPLE_QUESTION",
    "Article",
    "CorpusError",
    "load_articles",
    "load_documents",
    "render_page",
    "render_pages",
]

#: Root URL of the demo site (the ``.invalid`` domain never resolves).
BASE_URL: Final = "https://demo.langchain-references.invalid"
#: A question the corpus answers from two sources (the Space Needle and the Monorail pages).
SAMPLE_QUESTION: Final = (
    "When was the Space Needle built, and how can visitors get there from downtown Seattle?"
)

_DATA_FILE: Final = "_data/demo_corpus.json"


class CorpusError(LangchainReferencesError, ValueError):
    """The corpus data file is malformed."""


@dataclass(frozen=True, slots=True)
class Article:
    """One page of the demo site.

    Attributes:
        path: URL path of the page, e.g. ``/space/europa``.
        section: The site section the page belongs to.
        title: The page title.
        chunks: The article text, one paragraph per chunk.
    """

    path: str
    section: str
    title: str
    chunks: tuple[str, ...]

    @property
    def url(self) -> str:
        """Absolute URL of the page."""
        return BASE_URL + self.path


@dataclass(frozen=True, slots=True)
class _Site:
    name: str
    base_url: str
    notice: str
    articles: tuple[Article, ...]


def _require_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        msg = f"{where}: {key!r} must be a non-empty string"
        raise CorpusError(msg)
    return value


def _parse_article(raw: object, index: int) -> Article:
    where = f"articles[{index}]"
    if not isinstance(raw, dict):
        msg = f"{where} must be an object"
        raise CorpusError(msg)
    path = _require_str(raw, "path", where)
    if not path.startswith("/"):
        msg = f"{where}: path {path!r} must start with '/'"
        raise CorpusError(msg)
    chunks = raw.get("chunks")
    if (
        not isinstance(chunks, list)
        or not chunks
        or not all(isinstance(c, str) and c.strip() for c in chunks)
    ):
        msg = f"{where}: 'chunks' must be a non-empty list of non-empty strings"
        raise CorpusError(msg)
    return Article(
        path=path,
        section=_require_str(raw, "section", where),
        title=_require_str(raw, "title", where),
        chunks=tuple(chunks),
    )


def _parse_site(raw: object) -> _Site:
    if not isinstance(raw, dict) or not isinstance(raw.get("site"), dict):
        msg = "corpus must be an object with 'site' and 'articles'"
        raise CorpusError(msg)
    site = raw["site"]
    base_url = _require_str(site, "base_url", "site")
    if base_url != BASE_URL:
        msg = f"site.base_url is {base_url!r}, expected {BASE_URL!r}"
        raise CorpusError(msg)
    articles_raw = raw.get("articles")
    if not isinstance(articles_raw, list) or not articles_raw:
        msg = "'articles' must be a non-empty list"
        raise CorpusError(msg)
    articles = tuple(_parse_article(item, i) for i, item in enumerate(articles_raw))
    paths = [a.path for a in articles]
    if len(set(paths)) != len(paths):
        msg = "article paths must be unique"
        raise CorpusError(msg)
    return _Site(
        name=_require_str(site, "name", "site"),
        base_url=base_url,
        notice=_require_str(site, "notice", "site"),
        articles=articles,
    )


@cache
def _site() -> _Site:
    text = (resources.files("langchain_references") / _DATA_FILE).read_text(encoding="utf-8")
    return _parse_site(json.loads(text))


def load_articles() -> tuple[Article, ...]:
    """Return the articles of the demo site, in site order.

    Returns:
        The articles.
    """
    return _site().articles


def load_documents() -> list[Document]:
    """Return the corpus as retrieval chunks.

    Every chunk is one paragraph of an article. Its metadata holds ``source`` (the page URL,
    shared by all chunks of the same article) and ``title``; its ``id`` is ``<path>#<n>``.

    Returns:
        A new list of documents on every call (callers may modify it).
    """
    return [
        Document(
            id=f"{article.path}#{number}",
            page_content=chunk,
            metadata={"source": article.url, "title": article.title},
        )
        for article in _site().articles
        for number, chunk in enumerate(article.chunks, start=1)
    ]


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def render_page(article: Article) -> str:
    """Render one article as a complete HTML page with site navigation and a footer.

    Every piece of text is HTML-escaped.

    Args:
        article: The article to render.

    Returns:
        The HTML document.
    """
    site = _site()
    nav_items = "\n".join(
        f'        <li><a href="{_escape(other.path)}">{_escape(other.title)}</a></li>'
        for other in site.articles
    )
    related = "\n".join(
        f'        <li><a href="{_escape(other.path)}">{_escape(other.title)}</a></li>'
        for other in site.articles
        if other.section == article.section and other.path != article.path
    )
    paragraphs = "\n".join(f"      <p>{_escape(chunk)}</p>" for chunk in article.chunks)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{_escape(article.title)} | {_escape(site.name)}</title>
  <link rel="canonical" href="{_escape(article.url)}">
</head>
<body>
  <header>
    <p class="site-name"><a href="/">{_escape(site.name)}</a></p>
    <nav aria-label="Site">
      <ul>
{nav_items}
      </ul>
    </nav>
  </header>
  <main>
    <article>
      <h1>{_escape(article.title)}</h1>
      <p class="byline">{_escape(site.name)}, section {_escape(article.section)}</p>
{paragraphs}
    </article>
    <aside>
      <h2>Related pages</h2>
      <ul>
{related}
      </ul>
    </aside>
  </main>
  <footer>
    <p>{_escape(site.notice)}</p>
    <p><a href="/">Home</a> | <a href="/about">About</a> | <a href="/privacy">Privacy</a></p>
  </footer>
</body>
</html>
"""


def render_pages() -> dict[str, str]:
    """Render every article as an HTML page.

    Returns:
        A mapping from URL path (e.g. ``/space/europa``) to the page's HTML.
    """
    return {article.path: render_page(article) for article in _site().articles}
