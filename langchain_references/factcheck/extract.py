"""Extract the main text and title of fetched pages with trafilatura.

HTML goes through ``trafilatura.extract`` (main text only, tables kept, comments dropped). When
that yields fewer than ``min_main_chars`` characters, extraction is retried with
``include_comments=True, include_links=True``, which recovers pages whose content trafilatura
classifies as comments or link lists. The title comes from ``trafilatura.extract_metadata``,
else the search hit's title, else the URL. Plain-text pages pass through unchanged.

Each page has a budget: a body over ``max_chars`` characters is not parsed, and a page whose
extraction runs past ``timeout_s`` seconds becomes a failure while the other pages go on.
Each HTML page is parsed in a worker process (``_isolation.call_isolated``; at most
``max_workers`` at a time; workers are reused between pages):

* trafilatura is not thread-safe: concurrent ``extract`` calls in one process crash it now and
  then with SIGSEGV or SIGABRT inside libxml2 (trafilatura issues #840 and #925), which would
  end a server or a batch run; a crash in a worker is that page's failure;
* a page over its time budget has its worker killed, instead of a thread that cannot be
  interrupted parsing on.

Trafilatura never fetches anything here: it receives the HTML fetched by
:class:`~langchain_references.factcheck.fetch.PageFetcher`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, TypedDict, Unpack

from langchain_references._optional import importing
from langchain_references.factcheck.types import (
    ExtractedPage,
    ExtractReport,
    FetchedPage,
)
from langchain_references.failures import Failure
from langchain_references.services._isolation import (
    WorkerDiedError,
    WorkerStoppedError,
    WorkerTimeoutError,
    call_isolated,
)

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


def _timed_out(page: FetchedPage, timeout_s: float) -> Failure:
    logger.warning(
        "Extraction of %s passed its %ss budget; its process is killed", page.url, timeout_s
    )
    return _failure(page, f"extraction timeout after {timeout_s}s")


def _report(results: Sequence[ExtractedPage | Failure]) -> ExtractReport:
    return ExtractReport(
        pages=[r for r in results if isinstance(r, ExtractedPage)],
        failures=[r for r in results if isinstance(r, Failure)],
    )


def _extract_in_worker(
    page: FetchedPage, min_main_chars: int, max_chars: int
) -> ExtractedPage | Failure:
    """:func:`extract_page`, as called in a worker process."""
    return extract_page(page, min_main_chars=min_main_chars, max_chars=max_chars)


#: The function a worker process runs for a page (module-level, pickled by reference).
_IN_WORKER: Callable[[FetchedPage, int, int], ExtractedPage | Failure] = _extract_in_worker


def _isolated(page: FetchedPage, limits: _Limits, stop: threading.Event) -> ExtractedPage | Failure:
    """Extract ``page`` in a worker process, killed past the page's time budget or on ``stop``.

    A page that needs no parsing (plain text, or over the size budget) is handled here; a
    worker that dies (a crash in libxml2, the out-of-memory killer) is that page's failure.
    """
    if page.is_plain_text or len(page.body) > limits.max_chars:  # nothing to parse
        return extract_page(page, min_main_chars=limits.min_main_chars, max_chars=limits.max_chars)
    try:
        return call_isolated(
            _IN_WORKER,
            page,
            limits.min_main_chars,
            limits.max_chars,
            timeout_s=limits.timeout_s,
            stop=stop,
        )
    except WorkerTimeoutError:
        return _timed_out(page, limits.timeout_s or 0.0)
    except WorkerDiedError as exc:
        return _failure(page, f"extraction process died: {exc}")
    except WorkerStoppedError:
        return _failure(page, "extraction stopped")
    except Exception as exc:  # extract_page already catches trafilatura's errors
        logger.error("Unexpected error extracting %s", page.url, exc_info=exc)
        return _failure(page, f"unexpected {type(exc).__name__}: {exc}")


def extract_all(pages: Sequence[FetchedPage], **options: Unpack[ExtractOptions]) -> ExtractReport:
    """Extract every page; pages without text, too large or too slow become failures.

    Each HTML page is parsed in a worker process (at most ``max_workers`` at a time), killed
    when it passes ``timeout_s``.

    Args:
        pages: Fetched pages.
        **options: The bounds (:class:`ExtractOptions`); ``timeout_s=None`` gives no time
            budget.

    Returns:
        Extracted pages and failures, each in input order.

    Raises:
        ValueError: If ``min_main_chars`` is negative or another bound is not positive.
    """
    limits = _Limits(**options)
    stop = threading.Event()
    with ThreadPoolExecutor(limits.max_workers, thread_name_prefix="extract") as pool:
        try:
            return _report(list(pool.map(lambda page: _isolated(page, limits, stop), pages)))
        finally:  # an interrupt (Ctrl-C): kill the workers still running before waiting
            stop.set()


async def aextract_all(
    pages: Sequence[FetchedPage], **options: Unpack[ExtractOptions]
) -> ExtractReport:
    """Async :func:`extract_all`: the same worker processes, waited for off the event loop.

    Same arguments, result and errors as :func:`extract_all`; cancelling the call kills the
    workers still running.
    """
    limits = _Limits(**options)
    slots = asyncio.Semaphore(limits.max_workers)
    stop = threading.Event()

    async def one(page: FetchedPage) -> ExtractedPage | Failure:
        async with slots:
            return await asyncio.to_thread(_isolated, page, limits, stop)

    try:
        return _report(await asyncio.gather(*(one(page) for page in pages)))
    finally:
        stop.set()
