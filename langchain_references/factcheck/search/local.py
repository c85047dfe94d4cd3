"""Search a local corpus: a folder of HTML/text files (BM25) or a LangChain vector store.

:class:`LocalCorpusSearch` indexes the main text of every ``.html``/``.htm``/``.txt`` file
under a folder (HTML through trafilatura) and ranks files by BM25 (the package's one BM25,
:class:`~langchain_references.services.retrieval.BM25Index`); files sharing no word with the query
are not returned. A hit's link
is ``base_url`` + the file's relative path when ``base_url`` is given (serve the folder with
any HTTP server and fetch the hits like web pages), else the file's ``file://`` URI.

:class:`VectorStoreSearch` asks any LangChain ``VectorStore`` (e.g. a Chroma collection) for
the documents most similar to the query; the link comes from a metadata key.
"""

from __future__ import annotations

import logging
import textwrap
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, urljoin, urlsplit

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from langchain_references.factcheck.fetch import decode_body
from langchain_references.factcheck.search.base import BaseSearchProvider
from langchain_references.factcheck.types import SearchHit
from langchain_references.services.retrieval import BM25Index
from langchain_references.text.words import words

__all__ = ["LocalCorpusSearch", "VectorStoreSearch", "bm25_ranking", "tokenize"]

logger = logging.getLogger(__name__)

_HTML_SUFFIXES = frozenset({".html", ".htm"})


def tokenize(text: str) -> list[str]:
    """Every case-folded word of a text (the package's one tokenizer).

    It is :func:`~langchain_references.text.words.words` with no stop words and no least length.

    The words that decide whether a text matches a query (:func:`bm25_ranking`) and which of its
    paragraphs is the snippet; BM25 itself scores with
    :func:`~langchain_references.services.retrieval.lexical_tokens`. Stop words and one-character
    words are kept, unlike BM25's tokens: a text sharing only such a word with the query is still
    returned (scored 0, so after the others), and a query of stop words alone finds texts.

    Args:
        text: Any text.

    Returns:
        The tokens.
    """
    return words(text)


def bm25_ranking(
    index: BM25Index | None, query: str, tokens: Sequence[Sequence[str]], keys: Sequence[str]
) -> tuple[list[int], frozenset[str]]:
    """Rank the indexed texts that share a word with ``query``: best BM25 score first.

    The ranking of :class:`LocalCorpusSearch` and the demo site's search.

    Args:
        index: The BM25 index of the texts (``None``: no text).
        query: The query.
        tokens: Each text's :func:`tokenize` words, in index order.
        keys: Each text's tie-break key (equal scores in key order).

    Returns:
        The positions of the texts that share a word with the query, best first, and the
        query's words (for the snippets).
    """
    words = frozenset(tokenize(query))
    if index is None or not words:
        return [], words
    scores = index.scores(query)
    matching = [i for i, text in enumerate(tokens) if words.intersection(text)]
    matching.sort(key=lambda i: (-float(scores[i]), keys[i]))
    return matching, words


def _shorten(text: str, width: int) -> str:
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" …")


def _best_paragraph(text: str, query_terms: frozenset[str]) -> str:
    paragraphs = [p for p in text.splitlines() if p.strip()] or [text]
    return max(paragraphs, key=lambda p: len(query_terms.intersection(tokenize(p))))


@dataclass(frozen=True)
class _Doc:
    relpath: str
    link: str
    title: str
    text: str
    tokens: list[str]


class LocalCorpusSearch(BaseSearchProvider):
    """BM25 search over a folder of ``.html``/``.htm``/``.txt`` files.

    The folder is indexed on the first search (call :meth:`reindex` after changing it).

    Args:
        folder: The corpus folder (searched recursively).
        base_url: URL under which the folder is served, e.g. ``"http://127.0.0.1:8000/"``;
            links are then ``base_url`` + relative path instead of ``file://`` URIs.
        suffixes: File suffixes to index.
        snippet_chars: Maximum snippet length.

    Raises:
        ValueError: If ``folder`` is not a directory.
    """

    name: ClassVar[str] = "local-corpus"

    def __init__(
        self,
        folder: str | Path,
        *,
        base_url: str | None = None,
        suffixes: Sequence[str] = (".html", ".htm", ".txt"),
        snippet_chars: int = 300,
    ) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ValueError(f"corpus folder {self.folder} is not a directory")
        self.base_url = base_url.rstrip("/") + "/" if base_url else None
        self.suffixes = frozenset(s.lower() for s in suffixes)
        self.snippet_chars = snippet_chars
        self._lock = threading.Lock()
        self._docs: list[_Doc] | None = None
        self._bm25: BM25Index | None = None

    def _link(self, path: Path, relpath: str) -> str:
        if self.base_url is None:
            return path.resolve().as_uri()
        return urljoin(self.base_url, quote(relpath))

    def _load(self, path: Path) -> _Doc | None:
        from langchain_references.factcheck.extract import extract_html

        relpath = path.relative_to(self.folder).as_posix()
        try:
            raw = path.read_bytes()
        except OSError as exc:
            logger.warning("Skipping unreadable corpus file %s: %s", path, exc)
            return None
        content = decode_body(raw, None)
        title: str | None = None
        if path.suffix.lower() in _HTML_SUFFIXES:
            text, title = extract_html(content, self._link(path, relpath))
        else:
            text = content.strip()
        if not text:
            logger.warning("Skipping corpus file without text: %s", path)
            return None
        return _Doc(
            relpath=relpath,
            link=self._link(path, relpath),
            title=title or path.stem,
            text=text,
            tokens=tokenize(text),
        )

    def reindex(self) -> int:
        """(Re)build the index from the folder.

        Returns:
            The number of indexed files.

        Raises:
            MissingDependencyError: If ``bm25s`` (extra ``factcheck``) is not installed.
        """
        paths = sorted(
            p for p in self.folder.rglob("*") if p.is_file() and p.suffix.lower() in self.suffixes
        )
        docs = [doc for doc in (self._load(p) for p in paths) if doc is not None]
        index = BM25Index.build([d.relpath for d in docs], [d.text for d in docs])
        with self._lock:
            self._docs = docs
            self._bm25 = index if docs else None
        logger.info("Indexed %d file(s) from %s", len(docs), self.folder)
        return len(docs)

    def _search(self, query: str, k: int) -> list[SearchHit]:
        if self._docs is None:
            self.reindex()
        with self._lock:
            docs, bm25 = self._docs or [], self._bm25
        matching, query_terms = bm25_ranking(
            bm25, query, [d.tokens for d in docs], [d.relpath for d in docs]
        )
        return [
            SearchHit(
                title=docs[i].title,
                snippet=_shorten(_best_paragraph(docs[i].text, query_terms), self.snippet_chars),
                link=docs[i].link,
                rank=rank,
            )
            for rank, i in enumerate(matching[:k])
        ]


class VectorStoreSearch(BaseSearchProvider):
    """Similarity search over any LangChain ``VectorStore`` (e.g. Chroma).

    Args:
        store: The vector store.
        link_key: Metadata key holding the document's URL or path.
        title_key: Metadata key holding its title (falls back to the link).
        base_url: If given, links that are not absolute URLs are joined to it (a relative
            path under a served folder).
        snippet_chars: Maximum snippet length.
    """

    name: ClassVar[str] = "vectorstore"

    def __init__(
        self,
        store: VectorStore,
        *,
        link_key: str = "source",
        title_key: str = "title",
        base_url: str | None = None,
        snippet_chars: int = 300,
    ) -> None:
        self.store = store
        self.link_key = link_key
        self.title_key = title_key
        self.base_url = base_url.rstrip("/") + "/" if base_url else None
        self.snippet_chars = snippet_chars

    def _link(self, doc: Document) -> str | None:
        value = doc.metadata.get(self.link_key)
        if not isinstance(value, str) or not value.strip():
            return None
        value = value.strip()
        if urlsplit(value).scheme:
            return value
        if self.base_url is not None:
            return urljoin(self.base_url, quote(value.lstrip("/")))
        return Path(value).resolve().as_uri()

    def _hits(self, docs: Sequence[Document], k: int) -> list[SearchHit]:
        hits: list[SearchHit] = []
        for doc in docs:
            link = self._link(doc)
            if link is None:
                logger.warning("Skipping document without %r metadata", self.link_key)
                continue
            title = doc.metadata.get(self.title_key)
            hits.append(
                SearchHit(
                    title=title.strip() if isinstance(title, str) and title.strip() else link,
                    snippet=_shorten(doc.page_content, self.snippet_chars),
                    link=link,
                    rank=len(hits),
                )
            )
            if len(hits) >= k:
                break
        return hits

    def _search(self, query: str, k: int) -> list[SearchHit]:
        return self._hits(self.store.similarity_search(query, k=k), k)

    async def _asearch(self, query: str, k: int) -> list[SearchHit]:
        return self._hits(await self.store.asimilarity_search(query, k=k), k)
