"""Extract the main text and title of fetched pages with trafilatura.

HTML goes through ``trafilatura.extract`` (main text only, tables kept, comments dropped). When
that yields fewer than ``min_main_chars`` characters, extraction is retried with
``include_comments=True, include_links=True``, which recovers pages whose content trafilatura
classifies as comments or link lists. The title comes from ``trafilatura.extract_metadata``,
else the search hit's title, else the URL. Plain-text pages pass through unchanged.

Each page has a budget: a body over ``max_chars`` characters is not parsed, and a page whose
extraction runs past ``timeout_s`` seconds becomes a failure while the other pages go on.
Pages are extracted on worker threads (at most ``max_workers`` at a time, never on the event
loop); a thread that overruns its budget cannot be interrupted, so it is abandoned (a daemon
thread, logged) and its page reported as a failure.

Trafilatura never fetches anything here: it receives the HTML fetched by
:class:`~langchain_references.factcheck.fetch.PageFetcher`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final, TypedDict, Unpack

from langchain_references._optional import importing
from langchain_references.factcheck.types import (
    ExtractedPage,
    ExtractReport,
    FetchedPage,
)
from langchain_references.failures import Failure

with importing("trafilatura", "factcheck", feature="Text extraction"):
    import trafilatura

__all__ = [
    "DEFAULT_EXTRACT_TIMEOUT_S",
    "DEFAULT_MAX_EXTRACT_CHARS",
    "DEFAULT_MAX_WORKERS",
    "DEFAULT_MIN_MAIN_CHARS",
    "ExtractOptions",
    "aextract_all",
    "extract_all",
    "extract_html",
    "extract_page",
]

logger = logging.getLogger(__name__)

#: Below this many characters, the main text is extracted again with comments and links.
DEFAULT_MIN_MAIN_CHARS: Final = 100
#: Pages with a longer body (in characters) are not parsed (twice the fetcher's byte cap).
DEFAULT_MAX_EXTRACT_CHARS: Final = 4_000_000
#: Seconds one page's extraction may take before it becomes a failure.
DEFAULT_EXTRACT_TIMEOUT_S: Final = 30.0
#: Pages extracted at the same time.
DEFAULT_MAX_WORKERS: Final = 4


def _extract_html(html: str, url: str | None, min_main_chars: int) -> str:
    text = trafilatura.extract(
        html, url=url, include_comments=False, include_tables=True, output_format="txt"
    )
    if text is None or len(text.strip()) < min_main_chars:
        fallback = trafilatura.extract(
            html,
            url=url,
            include_comments=True,
            include_links=True,
            include_tables=True,
            output_format="txt",
        )
        if fallback is not None and len(fallback.strip()) > len((text or "").strip()):
            logger.debug("Used the comments+links fallback extraction for %s", url)
            text = fallback
    return (text or "").strip()


def _html_title(html: str, url: str | None) -> str | None:
    try:
        metadata = trafilatura.extract_metadata(html, default_url=url)
    except Exception:  # metadata is optional; never lose the page for it
        logger.debug("Metadata extraction failed for %s", url, exc_info=True)
        return None
    title = getattr(metadata, "title", None) if metadata is not None else None
    return title.strip() if isinstance(title, str) and title.strip() else None


def extract_html(
    html: str, url: str | None = None, *, min_main_chars: int = DEFAULT_MIN_MAIN_CHARS
) -> tuple[str, str | None]:
    """Extract the main text and the title of an HTML document.

    Args:
        html: The HTML.
        url: Its URL, if known (helps trafilatura and fills relative links).
        min_main_chars: Below this many characters of main text, retry with comments and
            links included.

    Returns:
        ``(text, title)``: the main text (empty if none was found, one paragraph per line) and
        the title from the page metadata (``None`` if it has none).
    """
    return _extract_html(html, url, min_main_chars), _html_title(html, url)


def _failure(page: FetchedPage, reason: str) -> Failure:
    logger.info("Extraction failed for %s: %s", page.url, reason)
    return Failure(url=page.url, stage="extract", reason=reason, rank=page.rank)


def extract_page(
    page: FetchedPage,
    *,
    min_main_chars: int = DEFAULT_MIN_MAIN_CHARS,
    max_chars: int = DEFAULT_MAX_EXTRACT_CHARS,
) -> ExtractedPage | Failure:
    """Extract the main text and title of one page (on the calling thread, no time budget).

    Args:
        page: A fetched page (HTML or plain text).
        min_main_chars: Below this many characters of main text, retry with comments and
            links included.
        max_chars: A body longer than this many characters is not parsed.

    Returns:
        The extracted page, or a failure (stage ``"extract"``) if the body is too large or
        no text was found.
    """

    def failure(reason: str) -> Failure:
        return _failure(page, reason)

    if len(page.body) > max_chars:
        return failure(f"too large to extract: {len(page.body)} > {max_chars} characters")
    fallback_title = page.hit.title.strip() if page.hit is not None else ""
    if page.is_plain_text:
        text = page.body.replace("\r\n", "\n").replace("\r", "\n").strip()
        title = fallback_title
    else:
        try:
            text = _extract_html(page.body, page.final_url, min_main_chars)
        except Exception as exc:  # a malformed page must not stop the run
            logger.debug("trafilatura failed on %s", page.url, exc_info=True)
            return failure(f"extraction error: {type(exc).__name__}: {exc}")
        title = _html_title(page.body, page.final_url) or fallback_title
    if not text:
        return failure("no main text extracted")
    return ExtractedPage(
        url=page.url,
        final_url=page.final_url,
        title=title or page.final_url,
        text=text,
        rank=page.rank,
        content_type=page.content_type,
    )


class ExtractOptions(TypedDict, total=False):
    """The keyword options of :func:`extract_all` and :func:`aextract_all`.

    Attributes:
        min_main_chars: See :func:`extract_page` (default :data:`DEFAULT_MIN_MAIN_CHARS`).
        max_chars: A body longer than this many characters becomes a failure unparsed
            (default :data:`DEFAULT_MAX_EXTRACT_CHARS`).
        timeout_s: Seconds each page's extraction may take (from its start); ``None``
            extracts without a time budget (default :data:`DEFAULT_EXTRACT_TIMEOUT_S`).
        max_workers: Pages extracted at the same time (default :data:`DEFAULT_MAX_WORKERS`).
    """

    min_main_chars: int
    max_chars: int
    timeout_s: float | None
    max_workers: int


@dataclass(frozen=True)
class _Limits:
    """:class:`ExtractOptions` with their defaults, checked."""

    min_main_chars: int = DEFAULT_MIN_MAIN_CHARS
    max_chars: int = DEFAULT_MAX_EXTRACT_CHARS
    timeout_s: float | None = DEFAULT_EXTRACT_TIMEOUT_S
    max_workers: int = DEFAULT_MAX_WORKERS

    def __post_init__(self) -> None:
        if self.min_main_chars < 0:
            raise ValueError(f"min_main_chars must be >= 0, got {self.min_main_chars}")
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be >= 1, got {self.max_chars}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {self.timeout_s}")
        if self.max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {self.max_workers}")


def _start(
    page: FetchedPage,
    min_main_chars: int,
    max_chars: int,
    done: Callable[[ExtractedPage | Failure], None],
) -> None:
    """Extract ``page`` on a new daemon thread and pass the result (never an error) to ``done``."""
    context = contextvars.copy_context()

    def work() -> None:
        try:
            result = context.run(
                extract_page, page, min_main_chars=min_main_chars, max_chars=max_chars
            )
        except Exception as exc:  # extract_page already catches trafilatura's errors
            logger.error("Unexpected error extracting %s", page.url, exc_info=exc)
            result = _failure(page, f"unexpected {type(exc).__name__}: {exc}")
        done(result)

    threading.Thread(target=work, name=f"extract-{page.rank}", daemon=True).start()


def _put(
    finished: queue.SimpleQueue[tuple[int, ExtractedPage | Failure]],
    index: int,
    result: ExtractedPage | Failure,
) -> None:
    finished.put((index, result))


def _timed_out(page: FetchedPage, timeout_s: float) -> Failure:
    logger.warning(
        "Extraction of %s passed its %ss budget; its thread is abandoned", page.url, timeout_s
    )
    return _failure(page, f"extraction timeout after {timeout_s}s")


def _report(results: Sequence[ExtractedPage | Failure | None]) -> ExtractReport:
    return ExtractReport(
        pages=[r for r in results if isinstance(r, ExtractedPage)],
        failures=[r for r in results if isinstance(r, Failure)],
    )


def extract_all(pages: Sequence[FetchedPage], **options: Unpack[ExtractOptions]) -> ExtractReport:
    """Extract every page; pages without text, too large or too slow become failures.

    Args:
        pages: Fetched pages.
        **options: The bounds (:class:`ExtractOptions`); with ``timeout_s=None`` the pages
            are extracted on the calling thread.

    Returns:
        Extracted pages and failures, each in input order.

    Raises:
        ValueError: If ``min_main_chars`` is negative or another bound is not positive.
    """
    limits = _Limits(**options)
    min_main_chars, max_chars, timeout_s = limits.min_main_chars, limits.max_chars, limits.timeout_s
    if timeout_s is None:
        return _report(
            [extract_page(p, min_main_chars=min_main_chars, max_chars=max_chars) for p in pages]
        )
    results: list[ExtractedPage | Failure | None] = [None] * len(pages)
    finished: queue.SimpleQueue[tuple[int, ExtractedPage | Failure]] = queue.SimpleQueue()
    deadlines: dict[int, float] = {}  # running pages
    waiting = iter(range(len(pages)))
    while True:
        while len(deadlines) < limits.max_workers and (index := next(waiting, None)) is not None:
            deadlines[index] = time.monotonic() + timeout_s
            _start(pages[index], min_main_chars, max_chars, partial(_put, finished, index))
        if not deadlines:
            break
        try:
            index, result = finished.get(
                timeout=max(0.0, min(deadlines.values()) - time.monotonic())
            )
        except queue.Empty:
            now = time.monotonic()
            for late in [i for i, deadline in deadlines.items() if deadline <= now]:
                del deadlines[late]
                results[late] = _timed_out(pages[late], timeout_s)
            continue
        if index in deadlines:  # else it already timed out
            del deadlines[index]
            results[index] = result
    return _report(results)


async def aextract_all(
    pages: Sequence[FetchedPage], **options: Unpack[ExtractOptions]
) -> ExtractReport:
    """Async :func:`extract_all`: pages are extracted on worker threads, off the event loop.

    Same arguments, result and errors as :func:`extract_all` (with ``timeout_s=None`` the
    pages still run on worker threads, without a time budget).
    """
    limits = _Limits(**options)
    min_main_chars, max_chars, timeout_s = limits.min_main_chars, limits.max_chars, limits.timeout_s
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(limits.max_workers)

    async def one(page: FetchedPage) -> ExtractedPage | Failure:
        async with slots:
            future: asyncio.Future[ExtractedPage | Failure] = loop.create_future()

            def done(result: ExtractedPage | Failure) -> None:
                try:
                    loop.call_soon_threadsafe(_settle, future, result)
                except RuntimeError:  # an abandoned page ending after its loop closed
                    logger.debug("Extraction of %s ended after the event loop closed", page.url)

            _start(page, min_main_chars, max_chars, done)
            try:
                return await asyncio.wait_for(future, timeout_s)
            except TimeoutError:  # only with a timeout_s
                return _timed_out(page, timeout_s or 0.0)

    return _report(await asyncio.gather(*(one(page) for page in pages)))


def _settle(
    future: asyncio.Future[ExtractedPage | Failure], result: ExtractedPage | Failure
) -> None:
    if not future.done():  # a timed-out page's future is already cancelled
        future.set_result(result)
