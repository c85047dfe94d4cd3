"""Links and titles in the service's JSON: each goes through one sanitiser.

A record's URL is untrusted (the index is built from files, the web back-end returns what it
finds); a client may put a response's URL in a link. :func:`link` is
:func:`~langchain_references.core.styles.safe_url` for JSON fields (``None`` when the URL must not
be linked), and the helpers below apply it to the structured parts of the native responses:
references (``source``), fact-check evidence and failures (``url``, ``""`` when unsafe, as the
result model types it). Titles are as untrusted (a page's ``<title>``, a record's field):
:func:`title` is :func:`~langchain_references.core.styles.clean_title` for JSON fields (control
and bidi characters removed, one line, at most
:data:`~langchain_references.core.styles.MAX_TITLE_CHARS` characters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from langchain_references.core.styles import clean_title, safe_url
from langchain_references.factcheck.result import Evidence, FactCheckResult
from langchain_references.failures import Failure

__all__ = ["link", "safe_reference", "safe_result", "title"]


def link(url: object) -> str | None:
    """A URL ready for a JSON link field, or ``None`` (absent, empty, or unsafe).

    Args:
        url: The untrusted URL (anything that is not a non-empty string is no link).

    Returns:
        :func:`~langchain_references.core.styles.safe_url` of it, or ``None``.
    """
    return safe_url(url) if isinstance(url, str) and url else None


def safe_reference(reference: Mapping[str, Any]) -> dict[str, Any]:
    """A reference's JSON form (``number``, ``source``, ``title``...), its fields made safe.

    Args:
        reference: A :meth:`~langchain_references.core.numbering.UsedReference.to_dict` result.

    Returns:
        A copy whose ``source`` is :func:`link` of the original and whose ``title`` is
        :func:`title` of it.
    """
    return {
        **reference,
        "source": link(reference.get("source")),
        "title": title(reference.get("title")),
    }


def title(text: object) -> str | None:
    """A title ready for a JSON field, or ``None`` (absent or empty once cleaned).

    Args:
        text: The untrusted title (anything but a string is no title).

    Returns:
        :func:`~langchain_references.core.styles.clean_title` of it (control and bidi characters
        removed, one line, capped), or ``None``.
    """
    return (clean_title(text) or None) if isinstance(text, str) else None


_Item = TypeVar("_Item", Evidence, Failure)


def _safe_urls(items: list[_Item]) -> list[_Item]:
    """The items, each whose URL :func:`link` changes copied with the safe URL (or ``""``)."""
    out = []
    for item in items:
        url = link(item.url) or ""
        out.append(item if url == item.url else item.model_copy(update={"url": url}))
    return out


def safe_result(result: FactCheckResult) -> FactCheckResult:
    """A fact-check result whose evidence and failure URLs are safe (``""`` when not).

    Args:
        result: The chain's result.

    Returns:
        A copy with each URL as :func:`link` gives it (``""`` for an unsafe one).
    """
    return result.model_copy(
        update={
            "supporting": _safe_urls(result.supporting),
            "contradicting": _safe_urls(result.contradicting),
            "failed_sources": _safe_urls(result.failed_sources),
        }
    )
