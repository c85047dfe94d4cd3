"""Extract the main text and title of fetched pages with trafilatura.

HTML goes through ``trafilatura.extract`` (main text only, tables kept, comments dropped). When
that yields fewer than ``min_main_chars`` characters, extraction is retried with
``include_comments=True, include_links=True``, which recovers pages whose content trafilatura
classifies as comments or link lists. The title comes from ``trafilatura.extract_metadata``,
else the search hit's title, else the URL. Plain-text pages pass through unchanged.

Trafilatura never fetches anything here: it receives the HTML fetched by
:class:`~langchain_references.factcheck.fetch.PageFetcher`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from langchain_core.runnables.config import run_in_executor

from langchain_references.factcheck.types import (
    ExtractedPage,
    ExtractReport,
    FetchedPage,
)
from langchain_references.failures import Failure

try:
    import trafilatura
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "Text extraction needs trafilatura and lxml[html_clean]: "
        "pip install 'langchain-references[factcheck]'"
    ) from exc

__all__ = [
    "DEFAULT_MIN_MAIN_CHARS",
    "aextract_all",
    "extract_all",
    "extract_html",
    "extract_page",
]

logger = logging.getLogger(__name__)

#: Below this many characters, the main text is extracted again with comments and links.
DEFAULT_MIN_MAIN_CHARS: Final = 100


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


def extract_page(
    page: FetchedPage, *, min_main_chars: int = DEFAULT_MIN_MAIN_CHARS
) -> ExtractedPage | Failure:
    """Extract the main text and title of one page.

    Args:
        page: A fetched page (HTML or plain text).
        min_main_chars: Below this many characters of main text, retry with comments and
            links included.

    Returns:
        The extracted page, or a failure (stage ``"extract"``) if no text was found.
    """

    def failure(reason: str) -> Failure:
        logger.info("Extraction failed for %s: %s", page.url, reason)
        return Failure(url=page.url, stage="extract", reason=reason, rank=page.rank)

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


def extract_all(
    pages: Sequence[FetchedPage], *, min_main_chars: int = DEFAULT_MIN_MAIN_CHARS
) -> ExtractReport:
    """Extract every page; pages without text become failures.

    Args:
        pages: Fetched pages.
        min_main_chars: See :func:`extract_page`.

    Returns:
        Extracted pages and failures, each in input order.

    Raises:
        ValueError: If ``min_main_chars`` is negative.
    """
    if min_main_chars < 0:
        raise ValueError(f"min_main_chars must be >= 0, got {min_main_chars}")
    extracted: list[ExtractedPage] = []
    failures: list[Failure] = []
    for page in pages:
        result = extract_page(page, min_main_chars=min_main_chars)
        if isinstance(result, Failure):
            failures.append(result)
        else:
            extracted.append(result)
    return ExtractReport(pages=extracted, failures=failures)


async def aextract_all(
    pages: Sequence[FetchedPage], *, min_main_chars: int = DEFAULT_MIN_MAIN_CHARS
) -> ExtractReport:
    """Async :func:`extract_all`, run in the default executor (extraction is CPU-bound).

    Same arguments, result and errors as :func:`extract_all`.
    """
    return await run_in_executor(None, extract_all, pages, min_main_chars=min_main_chars)
