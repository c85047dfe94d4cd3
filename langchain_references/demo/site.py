"""Serve the demo corpus (or any small set of pages) on 127.0.0.1 for offline fact-checks.

The offline demo of the fact-check chain runs every stage for real without the internet:

* :func:`serve_demo_site` serves the pages of :func:`~langchain_references.demo.corpus.render_pages`
  from a ``ThreadingHTTPServer`` on ``127.0.0.1`` (ephemeral port, background thread) and
  yields its base URL; :func:`serve_pages` does the same for any ``{path: text}`` mapping
  (:func:`pages_from_folder` builds one from a folder of ``.html``/``.txt`` files);
* :class:`DemoSiteSearch` ranks the demo articles by BM25 (``bm25s``) and returns hits that
  link to the local server;
* :class:`LocalOriginGuard` lets the fetcher reach exactly that server (and public addresses),
  instead of opening it to every private address with ``allow_private=True``.

Examples:
    >>> with serve_demo_site() as base_url:  # doctest: +SKIP
    ...     hits = DemoSiteSearch(base_url).search("Europa ocean", k=3)
    ...     fetcher = PageFetcher(guard=LocalOriginGuard([base_url]))
    ...     pages = fetcher.fetch_all(hits).pages
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Final
from urllib.parse import unquote, urljoin, urlsplit

import httpx

from langchain_references.demo.corpus import Article, load_articles, render_pages
from langchain_references.factcheck.netguard import NetGuard, ResolvedURL, Resolver
from langchain_references.factcheck.search.base import BaseSearchProvider
from langchain_references.factcheck.search.local import bm25_ranking, tokenize
from langchain_references.factcheck.types import SearchHit
from langchain_references.services.retrieval import BM25Index

__all__ = [
    "DemoSiteSearch",
    "LocalOriginGuard",
    "pages_from_folder",
    "serve_demo_site",
    "serve_pages",
]

logger = logging.getLogger(__name__)

#: The only address the servers of this module listen on.
HOST: Final = "127.0.0.1"
_TEXT_SUFFIXES: Final = frozenset({".txt"})
_PAGE_SUFFIXES: Final = (".html", ".htm", ".txt")


def _content_type(path: str, *, utf8: bool) -> str:
    suffix = Path(path).suffix.lower()
    kind = "text/plain" if suffix in _TEXT_SUFFIXES else "text/html"
    return f"{kind}; charset=utf-8" if utf8 else kind


def _handler(pages: Mapping[str, tuple[bytes, str]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True  # TCP_NODELAY: no 40 ms delayed-ACK stalls per request
        server_version = "langchain-references-demo"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("demo site: " + format, *args)

        def _respond(self, *, head: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            status, (body, content_type) = 200, pages.get(path, (b"", ""))
            if not content_type:
                status, body, content_type = 404, b"not found\n", "text/plain; charset=utf-8"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._respond(head=False)

        def do_HEAD(self) -> None:
            self._respond(head=True)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 overflows when the fetcher opens 8 connections at
    # once; the dropped SYN is retried after a full second.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Called by socketserver inside its exception handler (client gone, broken pipe...).
        logger.debug("demo site: error while serving %s: %r", client_address, sys.exc_info()[1])


def _check_path(path: object) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"page paths must be strings starting with '/', got {path!r}")
    return path


@contextlib.contextmanager
def serve_pages(pages: Mapping[str, str | bytes], *, port: int = 0) -> Iterator[str]:
    """Serve pages from memory on ``127.0.0.1`` in a background thread.

    A path ending in ``.txt`` is served as ``text/plain``, any other as ``text/html``. Text
    pages are sent as UTF-8 (``charset=utf-8``); byte pages are sent as they are, without a
    charset, so the client decodes them like a page of unknown encoding. Unknown paths get a
    404. The server stops when the ``with`` block ends.

    Args:
        pages: ``{url path: page}``; paths start with ``/`` and are matched after
            percent-decoding the request path (query strings are ignored).
        port: TCP port; 0 picks a free ephemeral port.

    Yields:
        The base URL, e.g. ``"http://127.0.0.1:54321/"``.

    Raises:
        ValueError: If a path does not start with ``/`` or a page is neither text nor bytes.
    """
    encoded: dict[str, tuple[bytes, str]] = {}
    for path, page in pages.items():
        if isinstance(page, str):
            encoded[_check_path(path)] = (page.encode("utf-8"), _content_type(path, utf8=True))
        elif isinstance(page, bytes):
            encoded[_check_path(path)] = (page, _content_type(path, utf8=False))
        else:
            raise ValueError(f"page {path!r} must be str or bytes, got {type(page).__name__}")
    server = _Server((HOST, port), _handler(encoded))
    base_url = f"http://{HOST}:{server.server_address[1]}/"
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="lcr-demo-site",
        daemon=True,
    )
    thread.start()
    logger.info("Serving %d page(s) at %s", len(encoded), base_url)
    try:
        yield base_url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextlib.contextmanager
def serve_demo_site(*, port: int = 0) -> Iterator[str]:
    """Serve the demo corpus pages (:func:`~langchain_references.demo.corpus.render_pages`).

    Args:
        port: TCP port; 0 picks a free ephemeral port.

    Yields:
        The base URL; an article's page is at ``base_url + article.path[1:]``.
    """
    with serve_pages(render_pages(), port=port) as base_url:
        yield base_url


def pages_from_folder(
    folder: str | Path, *, suffixes: Sequence[str] = _PAGE_SUFFIXES
) -> dict[str, bytes]:
    """Read the pages of a folder (recursively) for :func:`serve_pages`.

    Paths are ``/`` + the file's path relative to the folder, which is where
    :class:`~langchain_references.factcheck.search.LocalCorpusSearch` with
    ``base_url`` = the server's base URL points its hits.

    Args:
        folder: The folder.
        suffixes: File suffixes to serve.

    Returns:
        ``{path: file bytes}`` (served as they are).

    Raises:
        ValueError: If ``folder`` is not a directory.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    wanted = frozenset(s.lower() for s in suffixes)
    pages: dict[str, bytes] = {}
    for file in sorted(root.rglob("*")):
        if file.is_file() and file.suffix.lower() in wanted:
            try:
                pages["/" + file.relative_to(root).as_posix()] = file.read_bytes()
            except OSError as exc:
                logger.warning("Skipping unreadable file %s: %s", file, exc)
    return pages


def _origin(url: str) -> tuple[str, str, int]:
    parsed = NetGuard.parse(url)
    host = parsed.host
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"allowed origins must use an IP address, not a host name: {url!r}"
        ) from None
    port = parsed.port if parsed.port is not None else (443 if parsed.scheme == "https" else 80)
    return parsed.scheme, host, port


class LocalOriginGuard(NetGuard):
    """A :class:`~langchain_references.factcheck.netguard.NetGuard` that also allows given origins.

    URLs on one of the origins (scheme, IP address and port, e.g. the demo server's
    ``http://127.0.0.1:54321``) pass even though the address is loopback; every other URL is
    checked as usual, so private addresses stay refused. Origins must be IP literals: a host
    name could resolve elsewhere later.

    Args:
        origins: URLs whose origin is allowed (paths are ignored).
        resolver: Async host resolver for the other URLs.

    Raises:
        ValueError: If an origin is not an http(s) URL with an IP-address host.
    """

    def __init__(self, origins: Iterable[str], *, resolver: Resolver | None = None) -> None:
        super().__init__(allow_private=False, resolver=resolver)
        self.origins = frozenset(_origin(url) for url in origins)

    async def check(self, url: str | httpx.URL) -> ResolvedURL:
        """Check a URL: allowed origins pass, others go through the usual checks.

        Args:
            url: The URL.

        Returns:
            The resolved URL with the address to connect to.
        """
        parsed = self.parse(url)
        host = parsed.host
        port = parsed.port if parsed.port is not None else (443 if parsed.scheme == "https" else 80)
        if (parsed.scheme, host, port) in self.origins:
            return ResolvedURL(url=parsed, host=host, port=port, addresses=(host,), pinned_ip=host)
        return await super().check(parsed)


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 2)].rstrip() + " …"


class DemoSiteSearch(BaseSearchProvider):
    """BM25 search over the demo articles, with hits linking to a local server.

    Each article is indexed by its title and text (the package's one BM25,
    :class:`~langchain_references.services.retrieval.BM25Index`);
    articles that share no word with the query are not returned. The snippet is the article
    paragraph sharing the most words with the query.

    Args:
        base_url: Base URL of the server serving the pages (from :func:`serve_demo_site`).
        articles: Articles to index; defaults to the demo corpus.
        snippet_chars: Maximum snippet length.

    Raises:
        ValueError: If ``base_url`` is not an http(s) URL.
        MissingDependencyError: If ``bm25s`` (extra ``factcheck``) is not installed.
    """

    name: ClassVar[str] = "demo-site"

    def __init__(
        self,
        base_url: str,
        *,
        articles: Sequence[Article] | None = None,
        snippet_chars: int = 300,
    ) -> None:
        NetGuard.parse(base_url)
        self.base_url = base_url.rstrip("/") + "/"
        self.articles = tuple(articles if articles is not None else load_articles())
        self.snippet_chars = snippet_chars
        texts = [" ".join((a.title, *a.chunks)) for a in self.articles]
        self._tokens = [tokenize(text) for text in texts]
        self._bm25 = (
            BM25Index.build([a.path for a in self.articles], texts) if self.articles else None
        )

    def link(self, article: Article) -> str:
        """URL of an article's page on the local server.

        Args:
            article: The article.

        Returns:
            The URL.
        """
        return urljoin(self.base_url, article.path.lstrip("/"))

    def _search(self, query: str, k: int) -> list[SearchHit]:
        matching, wanted = bm25_ranking(
            self._bm25, query, self._tokens, [a.path for a in self.articles]
        )
        hits: list[SearchHit] = []
        for rank, i in enumerate(matching[:k]):
            article = self.articles[i]
            best = max(article.chunks, key=lambda c: len(wanted.intersection(tokenize(c))))
            hits.append(
                SearchHit(
                    title=article.title,
                    snippet=_shorten(best, self.snippet_chars),
                    link=self.link(article),
                    rank=rank,
                )
            )
        return hits
