"""Pages served on a port that changes with every run, named in cache keys by their content.

The offline searches of the command line (``--search demo``, ``--search local:FOLDER``) serve
their pages from a local HTTP server on an ephemeral port, so the links of the same pages
change from run to run. A :class:`ServedCorpus` names those pages by what they are instead of
where they are served: its :attr:`~ServedCorpus.identity` is the digest of the pages (paths and
bytes), and :meth:`~ServedCorpus.stable` maps a served URL (``http://127.0.0.1:54321/a``) to a
form that does not depend on the port (``corpus:<digest>/a``); :meth:`~ServedCorpus.served`
maps it back to this run's server. The run cache keys the searches and pages of a served
corpus by the stable forms (:class:`~langchain_references.factcheck.search.cached.CachedSearch`,
:class:`~langchain_references.factcheck.cache.PageCache`), so a resumed run reuses them, and
editing a page of the folder changes the digest, so nothing stale is reused. The links shown in
results stay the served ones.

Examples:
    >>> corpus = ServedCorpus.of_pages("http://127.0.0.1:54321/", {"/a": "<p>A</p>"})
    >>> stable = corpus.stable("http://127.0.0.1:54321/a")
    >>> stable == f"corpus:{corpus.digest}/a"
    True
    >>> ServedCorpus("http://127.0.0.1:40000/", corpus.digest).served(stable)
    'http://127.0.0.1:40000/a'
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ServedCorpus", "pages_digest"]


def pages_digest(pages: Mapping[str, str | bytes]) -> str:
    """The SHA-256 of a set of pages: their paths, kinds (text or bytes) and contents.

    Args:
        pages: ``{url path: page}``, as served by
            :func:`~langchain_references.demo.site.serve_pages`.

    Returns:
        64 hex digits; equal for equal pages, whatever the order of the mapping.

    Raises:
        TypeError: If a path is not a string or a page is neither text nor bytes.
    """
    digest = hashlib.sha256()
    for path in sorted(pages):
        page = pages[path]
        if not isinstance(path, str) or not isinstance(page, str | bytes):
            raise TypeError(f"pages must map str paths to str or bytes, got {path!r}")
        kind, body = ("text", page.encode("utf-8")) if isinstance(page, str) else ("bytes", page)
        name = path.encode("utf-8", "surrogatepass")
        # lengths first: no two different sets of pages give the same bytes
        digest.update(f"{len(name)}:{kind}:{len(body)}:".encode())
        digest.update(name)
        digest.update(body)
    return digest.hexdigest()


@dataclass(frozen=True)
class ServedCorpus:
    """Pages served under ``base_url`` (this run's server), known by their ``digest``.

    Args:
        base_url: The server's base URL, e.g. ``"http://127.0.0.1:54321/"`` (a missing
            trailing slash is added).
        digest: The pages' :func:`pages_digest`.

    Raises:
        ValueError: If ``digest`` is empty.
    """

    base_url: str
    digest: str

    def __post_init__(self) -> None:
        if not self.digest:
            raise ValueError("a served corpus needs the digest of its pages")
        if not self.base_url.endswith("/"):
            object.__setattr__(self, "base_url", self.base_url + "/")

    @classmethod
    def of_pages(cls, base_url: str, pages: Mapping[str, str | bytes]) -> ServedCorpus:
        """The corpus of ``pages`` served under ``base_url``.

        Args:
            base_url: The server's base URL.
            pages: The pages it serves (``{url path: page}``).

        Returns:
            The corpus.
        """
        return cls(base_url, pages_digest(pages))

    @property
    def identity(self) -> str:
        """What the cache keys of this corpus's searches say instead of the server's address."""
        return f"corpus:{self.digest}"

    @property
    def stable_base(self) -> str:
        """The stable form of :attr:`base_url`: ``corpus:<digest>/``."""
        return self.identity + "/"

    def stable(self, url: str) -> str:
        """The form of ``url`` that cache keys use (other URLs are returned as they are).

        Args:
            url: A URL, e.g. a search hit's link.

        Returns:
            ``corpus:<digest>/<path>`` for a URL under :attr:`base_url`, else ``url``.
        """
        if url.startswith(self.base_url):
            return self.stable_base + url[len(self.base_url) :]
        return url

    def served(self, url: str) -> str:
        """The URL of a stable form on this run's server (the inverse of :meth:`stable`).

        Args:
            url: A URL or a stable form read from a cache.

        Returns:
            :attr:`base_url` + path for a stable form of this corpus, else ``url``.
        """
        if url.startswith(self.stable_base):
            return self.base_url + url[len(self.stable_base) :]
        return url
