"""The web page at ``/``: check an article, or ask a question, against the evidence service.

Plain HTML, CSS and JavaScript files shipped in ``server/static`` (no build step), served by
this router: ``/`` is ``index.html``, ``/static/app.js``, ``/static/style.css`` and
``/static/favicon.svg`` (also at ``/favicon.ico``) the rest;
any other name under ``/static/`` is a 404 (no file-system lookup from the URL). The script
calls the native endpoints with ``Accept: text/event-stream`` and inserts every piece of
untrusted text (the article, passages, titles, answers) as text, never as HTML, and clips
the fields a record or a judge controls for display (titles and judge names at 300
characters, passages at 3,000, messages at 1,000, each with the count of characters left
out): a 100 KB title no longer stalls the page's layout.

Every response of this router carries :data:`SECURITY_HEADERS`: a Content-Security-Policy
that allows scripts, styles and requests from the page's own origin only (no inline script,
no ``eval``, no plugins, no framing, no ``<base>``), ``nosniff`` and no referrer.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Final

from fastapi import APIRouter
from fastapi.responses import Response

__all__ = ["CONTENT_SECURITY_POLICY", "SECURITY_HEADERS", "STATIC_FILES", "router"]

#: The page's Content-Security-Policy: its own origin only, no inline code.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: Headers of every response of the page router.
SECURITY_HEADERS: Final[dict[str, str]] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
#: The files served under ``/static/``, with their media types.
STATIC_FILES: Final[dict[str, str]] = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}

router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=8)
def _read(name: str) -> bytes:
    """A file of ``server/static`` (read once per process; the files never change)."""
    return (resources.files("langchain_references.server") / "static" / name).read_bytes()


@router.get("/")
def index() -> Response:
    """The page.

    Returns:
        ``index.html`` with the security headers.
    """
    return Response(
        _read("index.html"), media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


@router.get("/favicon.ico")
def favicon() -> Response:
    """The page's icon where a browser looks for it without reading the page (an SVG).

    Returns:
        ``favicon.svg`` with the security headers.
    """
    return Response(_read("favicon.svg"), media_type="image/svg+xml", headers=SECURITY_HEADERS)


@router.get("/static/{name}")
def static(name: str) -> Response:
    """A script or style sheet of the page.

    Args:
        name: The file name (only :data:`STATIC_FILES` exist).

    Returns:
        The file, or a 404, with the security headers.
    """
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        return Response(
            b"not found", status_code=404, media_type="text/plain", headers=SECURITY_HEADERS
        )
    return Response(_read(name), media_type=media_type, headers=SECURITY_HEADERS)
