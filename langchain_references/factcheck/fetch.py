"""Fetch evidence pages concurrently, safely and with bounds.

:class:`PageFetcher` downloads many URLs at once with ``httpx`` (one ``AsyncClient`` per
batch), at most ``max_concurrency`` at a time. Each URL gets at most ``timeout_s`` seconds in
all (DNS, connect, redirects, body), at most ``max_bytes`` of (decompressed) body, which is
streamed and abandoned as soon as it passes the cap, and at most ``max_redirects`` redirects.
Redirects are followed by hand so :class:`~langchain_references.factcheck.netguard.NetGuard`
checks every hop, and each request connects to the address the guard checked (no DNS
rebinding). Only ``text/html``, ``application/xhtml+xml`` and ``text/plain`` responses are read.

The body is read raw and decompressed here, incrementally and with an output limit, so the
cap counts decompressed bytes and a compression bomb stops at the cap: only ``gzip`` and
``deflate`` are asked for and accepted (at most :data:`MAX_CONTENT_ENCODINGS` stacked),
anything else (``br``, ``zstd``...) is refused. The charset is taken from
:data:`TEXT_CHARSETS` only (real text encodings; never ``punycode``, ``idna``, ``utf-7`` or
the ``rot13``/``base64`` codecs); an unknown or refused one falls back to detection.

Every URL ends as either a :class:`~langchain_references.factcheck.types.FetchedPage` or a
:class:`~langchain_references.factcheck.types.Failure` with a short reason; one failing
URL never stops the others.

Examples:
    >>> fetcher = PageFetcher(cache=PageCache("/tmp/pages"))  # doctest: +SKIP
    >>> report = fetcher.fetch_all(["https://example.org/"])  # doctest: +SKIP
    >>> report.pages[0].body[:15], report.failures  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import re
import ssl
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from langchain_references._optional import importing

with importing("httpx", "factcheck", feature="Page fetching"):
    import charset_normalizer
    import httpx

from langchain_references.errors import LangchainReferencesError
from langchain_references.factcheck.cache import CachedPage, PageCache
from langchain_references.factcheck.netguard import (
    BlockedURLError,
    HostResolutionError,
    NetGuard,
    ResolvedURL,
    Resolver,
    blocked_reason,
)
from langchain_references.factcheck.types import (
    FetchedPage,
    FetchReport,
    SearchHit,
)
from langchain_references.failures import Failure
from langchain_references.services._concurrency import check_concurrency, run_sync
from langchain_references.services.ratelimit import RETRY_STATUSES, RateLimiter

__all__ = [
    "ACCEPTED_CONTENT_TYPES",
    "DEFAULT_USER_AGENT",
    "MAX_CONTENT_ENCODINGS",
    "TEXT_CHARSETS",
    "PageFetcher",
    "decode_body",
]

logger = logging.getLogger(__name__)

#: Media types the fetcher reads; anything else is recorded as a failure before its body.
ACCEPTED_CONTENT_TYPES: Final = frozenset({"text/html", "application/xhtml+xml", "text/plain"})
#: User-Agent sent with every request.
DEFAULT_USER_AGENT: Final = (
    "langchain-references/0.1 (fact-check evidence fetcher; python-httpx/" + httpx.__version__ + ")"
)
_ACCEPT: Final = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8"
# Only what is decompressed here with an output limit (httpx would add br/zstd if installed).
_ACCEPT_ENCODING: Final = "gzip, deflate"
#: Most ``Content-Encoding`` layers a response may stack (e.g. ``gzip, gzip``); more is refused.
MAX_CONTENT_ENCODINGS: Final = 2
_GZIP_NAMES: Final = frozenset({"gzip", "x-gzip"})
_DEFLATE_NAMES: Final = frozenset({"deflate"})
# Largest raw read handed to a decompressor at once (its output is bounded separately).
_RAW_CHUNK: Final = 64 * 1024
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_:.\-]{1,40})""", re.I
)
#: Canonical codec names (``codecs.lookup(name).name``) a page may declare: real text
#: encodings only. Anything else (``punycode``, ``idna``, ``utf-7``, ``raw_unicode_escape``,
#: ``rot13``, ``zlib``/``base64`` codecs, unknown names) is ignored and the charset detected.
TEXT_CHARSETS: Final = frozenset(
    {
        "ascii", "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
        "utf-32-le", "utf-32-be",
        *(f"cp125{i}" for i in range(9)),
        *(f"iso8859-{i}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
        "koi8-r", "koi8-u", "koi8-t", "mac-roman", "mac-cyrillic", "mac-greek", "mac-latin2",
        "cp437", "cp850", "cp866", "cp874", "tis-620",
        "shift_jis", "shift_jis_2004", "shift_jisx0213", "cp932", "euc_jp", "euc_jis_2004",
        "euc_jisx0213", "iso2022_jp", "iso2022_jp_2", "iso2022_kr", "euc_kr", "cp949", "johab",
        "gb2312", "gbk", "gb18030", "hz", "big5", "big5hkscs", "cp950",
    }
)  # fmt: skip


def _text_charset(name: str) -> str | None:
    """The canonical codec name of ``name`` if it is an allowed text encoding, else ``None``."""
    try:
        canonical = codecs.lookup(name.strip()).name
    except (LookupError, ValueError):
        logger.debug("Unknown charset %r", name)
        return None
    if canonical not in TEXT_CHARSETS:
        logger.info("Ignoring charset %r: not a text encoding this fetcher accepts", name)
        return None
    return canonical


# Below this size, statistical charset detection guesses wrong too often (e.g. short Latin-1
# French read as Estonian); the web's legacy default, windows-1252, is the better bet.
_MIN_DETECT_BYTES = 2048


def decode_body(body: bytes, charset: str | None) -> str:
    """Decode a response body.

    In order: the charset from the ``Content-Type`` header when it is valid and in
    :data:`TEXT_CHARSETS`; the charset a ``<meta>`` tag declares in the first 2 KB (same
    rule); UTF-8 when the bytes are valid UTF-8; the best guess of ``charset_normalizer`` for
    bodies of 2 KB or more; windows-1252 (the HTML standard's fallback for unlabelled Western
    pages).

    Args:
        body: Raw (decompressed) body.
        charset: Charset announced by the server, if any.

    Returns:
        The text.
    """
    declared = [charset] if charset else []
    if meta := _META_CHARSET.search(body[:2048]):
        declared.append(meta.group(1).decode("ascii"))
    for name in declared:
        codec = _text_charset(name)
        if codec is None:
            continue
        try:
            return body.decode(codec)
        except UnicodeDecodeError:
            logger.debug("Declared charset %r does not decode the body", name)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if len(body) >= _MIN_DETECT_BYTES:
        best = charset_normalizer.from_bytes(body).best()
        if best is not None:
            return str(best)
    return body.decode("cp1252", errors="replace")


class _TooLargeError(LangchainReferencesError):
    """A (decompressed) body passed the byte cap."""


class _ZlibLayer:
    """One gzip or deflate layer, decompressed incrementally with a bounded output.

    ``gzip`` accepts concatenated members; ``deflate`` accepts a zlib stream or, as browsers
    do, a raw deflate stream.
    """

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._gzip = encoding in _GZIP_NAMES
        self._raw_fallback = not self._gzip  # deflate: retry as raw deflate on a bad header
        self._decompressor = self._new()

    def _new(self, raw: bool = False) -> Any:
        if self._gzip:
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        return zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)

    def feed(self, data: bytes, limit: int) -> bytes:
        """Decompress ``data``; raise :class:`_TooLargeError` past ``limit`` output bytes."""
        out: list[bytes] = []
        produced = 0
        while data:
            try:
                # Ask for one byte more than allowed: getting it means the cap is passed.
                chunk = self._decompressor.decompress(data, limit - produced + 1)
            except zlib.error as exc:
                if self._raw_fallback:
                    self._raw_fallback = False
                    self._decompressor = self._new(raw=True)
                    continue
                raise _FetchFailureError(f"bad {self.encoding} body: {exc}") from exc
            self._raw_fallback = False
            produced += len(chunk)
            if produced > limit:
                raise _TooLargeError
            out.append(chunk)
            data = self._decompressor.unconsumed_tail
            if not data and self._decompressor.eof:
                data = self._decompressor.unused_data
                if data and self._gzip:
                    self._decompressor = self._new()  # the next gzip member
                elif data:
                    logger.debug(
                        "Ignoring %d byte(s) after the %s stream", len(data), self.encoding
                    )
                    data = b""
        return b"".join(out)


class _BodyDecoder:
    """Undo a response's ``Content-Encoding`` layers with every layer's output capped."""

    def __init__(self, content_encoding: str, max_bytes: int) -> None:
        names = [n.strip().lower() for n in content_encoding.split(",")]
        names = [n for n in names if n and n != "identity"]
        if len(names) > MAX_CONTENT_ENCODINGS:
            raise _FetchFailureError(
                f"refused: {len(names)} stacked content-encodings (max {MAX_CONTENT_ENCODINGS})"
            )
        for name in names:
            if name not in _GZIP_NAMES | _DEFLATE_NAMES:
                raise _FetchFailureError(f"refused: unsupported content-encoding {name}")
        # Applied in the listed order, so undone in reverse.
        self._layers = [_ZlibLayer(name) for name in reversed(names)]
        self._max_bytes = max_bytes
        self._produced = [0] * (len(self._layers) + 1)  # per layer output, then the body
        self.raw_bytes = 0

    def feed(self, raw: bytes) -> bytes:
        """Decode the next raw chunk; raise :class:`_TooLargeError` past the cap."""
        self.raw_bytes += len(raw)
        if self.raw_bytes > self._max_bytes:  # compressed data never needs more than the cap
            raise _TooLargeError
        data = raw
        for index, layer in enumerate(self._layers):
            data = layer.feed(data, self._max_bytes - self._produced[index])
            self._produced[index] += len(data)
        self._produced[-1] += len(data)
        if self._produced[-1] > self._max_bytes:
            raise _TooLargeError
        return data


@cache
def _default_ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes ~50 ms: do it once per process, not once per batch.
    return httpx.create_ssl_context()


class _FetchFailureError(LangchainReferencesError):
    """A URL could not be fetched; ``reason`` is the short human-readable cause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _ThrottledFetchError(_FetchFailureError):
    """The server answered 429 or 503: the rate limiter may retry (it reads these fields)."""

    def __init__(self, status_code: int, retry_after: str | None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.headers = {"retry-after": retry_after} if retry_after is not None else {}


@dataclass(frozen=True)
class _Downloaded:
    final_url: str
    status: int
    content_type: str
    body: str
    private: bool


@dataclass(frozen=True)
class _Job:
    """One URL to fetch, with the rank and search hit its page or failure carries."""

    url: str
    rank: int
    hit: SearchHit | None

    def failure(self, reason: str) -> Failure:
        logger.info("Fetch failed for %s: %s", self.url, reason)
        return Failure(url=self.url, stage="fetch", reason=reason, rank=self.rank)

    def page(
        self, source: _Downloaded | CachedPage, *, from_cache: bool, elapsed_s: float
    ) -> FetchedPage:
        return FetchedPage(
            url=self.url,
            final_url=source.final_url,
            status=source.status,
            content_type=source.content_type,
            body=source.body,
            from_cache=from_cache,
            elapsed_s=elapsed_s,
            rank=self.rank,
            hit=self.hit,
        )


def _jobs(sources: Sequence[str | SearchHit]) -> list[_Job]:
    """One job per distinct URL, for its first occurrence, in input order."""
    jobs: dict[str, _Job] = {}
    for position, source in enumerate(sources):
        if isinstance(source, SearchHit):
            job = _Job(source.link, source.rank, source)
        elif isinstance(source, str):
            job = _Job(source, position, None)
        else:
            raise TypeError(f"sources must be URLs or SearchHit, got {type(source).__name__}")
        if job.url in jobs:
            logger.debug("Skipping duplicate URL %s (rank %d)", job.url, job.rank)
            continue
        jobs[job.url] = job
    return list(jobs.values())


def _reason(exc: Exception, url: str, timeout_s: float) -> str:
    """The short reason recorded for ``url`` when fetching it raised ``exc``."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return f"timeout after {timeout_s}s"
    if isinstance(exc, HostResolutionError | _FetchFailureError):
        return exc.reason
    if isinstance(exc, BlockedURLError):
        return f"refused: {exc.reason}"
    if isinstance(exc, httpx.ConnectError):
        return f"connection failed: {exc}" if str(exc) else "connection failed"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__}: {exc}"
    logger.error("Unexpected error fetching %s", url, exc_info=exc)
    return f"unexpected {type(exc).__name__}: {exc}"


def _media_type(response: httpx.Response) -> str:
    raw: str = response.headers.get("content-type", "")
    return raw.split(";", 1)[0].strip().lower()


class PageFetcher:
    """Concurrent, bounded, SSRF-guarded page fetcher with an optional on-disk cache.

    Args:
        max_concurrency: Maximum number of requests in flight.
        timeout_s: Time budget per URL in seconds (DNS, connect, all redirects, body).
        max_bytes: Maximum body size in bytes (after decompression).
        max_redirects: Maximum number of redirects followed per URL.
        user_agent: ``User-Agent`` header.
        allow_private: Allow private, loopback and other non-public addresses (tests, intranet).
        cache: Page cache; ``None`` disables caching.
        resolver: Async host resolver for the guard (defaults to the loop's ``getaddrinfo``).
        guard: A ready-made guard (e.g. a subclass with an allow-list) instead of
            ``allow_private``/``resolver``; it checks the URL before the cache and every hop.
        accepted_content_types: Media types that are read.
        limiter: Rate limits per host (key ``"fetch:HOST"``), shared with every fetcher and
            worker holding the same limiter; a 429 or 503 is then retried after its
            ``Retry-After`` (each attempt gets ``timeout_s``). Without one, a URL gets one
            attempt and a 429 is a failure.

    Raises:
        ValueError: If a bound is not positive (``max_redirects`` may be 0), or ``guard`` is
            given together with ``allow_private`` or ``resolver``.
    """

    def __init__(
        self,
        *,
        max_concurrency: int = 8,
        timeout_s: float = 10.0,
        max_bytes: int = 2_000_000,
        max_redirects: int = 5,
        user_agent: str = DEFAULT_USER_AGENT,
        allow_private: bool = False,
        cache: PageCache | None = None,
        resolver: Resolver | None = None,
        guard: NetGuard | None = None,
        accepted_content_types: Iterable[str] = ACCEPTED_CONTENT_TYPES,
        limiter: RateLimiter | None = None,
    ) -> None:
        check_concurrency(max_concurrency)
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if max_redirects < 0:
            raise ValueError(f"max_redirects must be >= 0, got {max_redirects}")
        if guard is not None and (allow_private or resolver is not None):
            raise ValueError("pass allow_private/resolver or a guard, not both")
        self.max_concurrency = max_concurrency
        self.timeout_s = float(timeout_s)
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.user_agent = user_agent
        self._guard = guard or NetGuard(allow_private=allow_private, resolver=resolver)
        self.allow_private = self._guard.allow_private
        self.cache = cache
        self.accepted_content_types = frozenset(t.lower() for t in accepted_content_types)
        self.limiter = limiter

    # ------------------------------------------------------------------ public API

    def fetch_all(self, sources: Sequence[str | SearchHit]) -> FetchReport:
        """Fetch URLs (or search hits) concurrently; see :meth:`afetch_all`.

        Args:
            sources: URLs or search hits.

        Returns:
            The pages and the failures, each in input order.
        """
        return run_sync(self.afetch_all(sources))

    async def afetch_all(self, sources: Sequence[str | SearchHit]) -> FetchReport:
        """Fetch URLs (or search hits) concurrently.

        A hit's rank is kept on its page (a bare URL gets its input position as rank). A URL
        that appears twice is fetched once, for its first occurrence.

        Args:
            sources: URLs or search hits.

        Returns:
            The pages and the failures, each in input order.

        Raises:
            TypeError: If a source is neither a string nor a :class:`SearchHit`.
        """
        jobs = _jobs(sources)
        if not jobs:
            return FetchReport()

        semaphore = asyncio.Semaphore(self.max_concurrency)
        async with httpx.AsyncClient(
            follow_redirects=False,
            timeout=httpx.Timeout(self.timeout_s),
            headers={
                "User-Agent": self.user_agent,
                "Accept": _ACCEPT,
                "Accept-Encoding": _ACCEPT_ENCODING,
            },
            limits=httpx.Limits(max_connections=self.max_concurrency),
            verify=_default_ssl_context(),
            trust_env=False,  # a proxy would re-resolve host names behind the guard's back
        ) as client:
            results = await asyncio.gather(*(self._fetch_one(client, semaphore, j) for j in jobs))
        pages = [r for r in results if isinstance(r, FetchedPage)]
        failures = [r for r in results if isinstance(r, Failure)]
        logger.info("Fetched %d page(s), %d failure(s)", len(pages), len(failures))
        return FetchReport(pages=pages, failures=failures)

    # ------------------------------------------------------------------ one URL

    async def _fetch_one(
        self, client: httpx.AsyncClient, semaphore: asyncio.Semaphore, job: _Job
    ) -> FetchedPage | Failure:
        start = time.perf_counter()
        try:
            self._guard.parse(job.url)
        except BlockedURLError as exc:
            return job.failure(_reason(exc, job.url, self.timeout_s))

        if self.cache is not None:
            entry = await asyncio.to_thread(self.cache.get, job.url)
            if entry is not None and (self.allow_private or not entry.private):
                return job.page(entry, from_cache=True, elapsed_s=time.perf_counter() - start)

        async with semaphore:
            start = time.perf_counter()
            try:
                downloaded = await self._attempts(client, job.url)
            except Exception as exc:  # one bad source must not stop the run
                return job.failure(_reason(exc, job.url, self.timeout_s))
            elapsed = time.perf_counter() - start

        if self.cache is not None:
            try:
                await asyncio.to_thread(
                    self.cache.put,
                    job.url,
                    final_url=downloaded.final_url,
                    status=downloaded.status,
                    content_type=downloaded.content_type,
                    body=downloaded.body,
                    private=downloaded.private,
                )
            except OSError as exc:
                logger.warning("Could not cache %s: %s", job.url, exc)
        return job.page(downloaded, from_cache=False, elapsed_s=elapsed)

    async def _attempt(self, client: httpx.AsyncClient, url: str) -> _Downloaded:
        async with asyncio.timeout(self.timeout_s):
            return await self._download(client, url)

    async def _attempts(self, client: httpx.AsyncClient, url: str) -> _Downloaded:
        """One attempt, or as many as the rate limiter allows for the URL's host."""
        if self.limiter is None:
            return await self._attempt(client, url)
        key = f"fetch:{httpx.URL(url).host}"
        return await self.limiter.acall(key, lambda: self._attempt(client, url))

    def _build_request(self, client: httpx.AsyncClient, target: ResolvedURL) -> httpx.Request:
        # Connect to the address the guard checked; keep the name for Host, SNI and the
        # certificate check.
        pinned = target.url.copy_with(host=target.pinned_ip)
        extensions: dict[str, Any] = {}
        if target.url.scheme == "https":
            extensions["sni_hostname"] = target.host
        return client.build_request(
            "GET",
            pinned,
            headers={"Host": target.url.netloc.decode("ascii")},
            extensions=extensions,
        )

    async def _download(self, client: httpx.AsyncClient, url: str) -> _Downloaded:
        current = httpx.URL(url)
        private = False
        for _hop in range(self.max_redirects + 1):
            target = await self._guard.check(current)
            private = private or any(blocked_reason(a) is not None for a in target.addresses)
            response = await client.send(self._build_request(client, target), stream=True)
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    current = target.url.join(location)
                    logger.debug("Redirect %s -> %s", target.url, current)
                    continue
                return await self._read(response, target, private)
            finally:
                await response.aclose()
        raise _FetchFailureError(f"too many redirects (> {self.max_redirects})")

    async def _read(
        self, response: httpx.Response, target: ResolvedURL, private: bool
    ) -> _Downloaded:
        status = response.status_code
        if status in RETRY_STATUSES:
            raise _ThrottledFetchError(status, response.headers.get("retry-after"))
        if not 200 <= status < 300:
            raise _FetchFailureError(f"HTTP {status}")
        media_type = _media_type(response)
        if media_type and media_type not in self.accepted_content_types:
            raise _FetchFailureError(f"content-type {media_type} not HTML or plain text")
        too_large = f"too large: > {self.max_bytes} bytes"
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise _FetchFailureError(too_large)
        decoder = _BodyDecoder(response.headers.get("content-encoding", ""), self.max_bytes)
        chunks: list[bytes] = []
        try:
            async for raw in response.aiter_raw(_RAW_CHUNK):
                chunks.append(decoder.feed(raw))
        except _TooLargeError:
            logger.warning(
                "Body of %s passed the %d byte cap (%d raw byte(s) read)",
                target.url,
                self.max_bytes,
                decoder.raw_bytes,
            )
            raise _FetchFailureError(too_large) from None
        # Charset detection is CPU work: keep it off the event loop.
        body = await asyncio.to_thread(decode_body, b"".join(chunks), response.charset_encoding)
        return _Downloaded(
            final_url=str(target.url),
            status=status,
            content_type=media_type,
            body=body,
            private=private,
        )
