"""The API docs, offline and under a Content-Security-Policy: Swagger UI and ReDoc.

FastAPI's own docs pages load Swagger UI and ReDoc from a CDN and start Swagger UI with an
inline script. These pages load the assets that the ``fastapi-offline`` package ships
(:data:`VENDOR_ASSETS`), served by this router under ``/static/docs/`` (a fixed list of names:
no file-system lookup from the URL), and start Swagger UI with a script file of this package
(``server/static/swagger-init.js``) that reads the OpenAPI URL from a data attribute. No
request leaves the service's origin: the one URL of a CDN that ReDoc's bundle loads (the logo
of its footer) is served as an empty inline image instead (:data:`PATCHES`).

``/docs`` (Swagger UI) is served with :data:`DOCS_CONTENT_SECURITY_POLICY`: scripts, styles
and requests from the service's own origin only, no inline script or style, images also from
``data:`` URIs (the style sheet's icons). ``/redoc`` gets :data:`REDOC_CONTENT_SECURITY_POLICY`,
the same except that ReDoc writes its styles into ``<style>`` elements (``'unsafe-inline'``
styles, never scripts) and builds its search index in a ``blob:`` worker.

Call :func:`available` before including :data:`router`: without ``fastapi-offline`` the
service serves no docs pages rather than pages that reach a CDN.
"""

from __future__ import annotations

import html
import importlib.util
from functools import lru_cache
from importlib import resources
from typing import Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

__all__ = [
    "ASSETS",
    "DOCS_CONTENT_SECURITY_POLICY",
    "PATCHES",
    "REDOC_CONTENT_SECURITY_POLICY",
    "VENDOR_ASSETS",
    "available",
    "router",
]

#: The package that ships Swagger UI's and ReDoc's files.
VENDOR_PACKAGE: Final = "fastapi_offline"
_COMMON: Final = (
    "default-src 'none'; script-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: The CSP of ``/docs`` and of the assets: own origin only, no inline code.
DOCS_CONTENT_SECURITY_POLICY: Final = _COMMON + "; style-src 'self'"
#: The CSP of ``/redoc``: ReDoc's generated ``<style>`` elements and its search worker too.
REDOC_CONTENT_SECURITY_POLICY: Final = (
    _COMMON + "; style-src 'self' 'unsafe-inline'; worker-src blob:"
)
_JS: Final = "text/javascript; charset=utf-8"
#: Files of ``fastapi-offline``'s ``static`` folder served under ``/static/docs/``.
VENDOR_ASSETS: Final[dict[str, str]] = {
    "swagger-ui-bundle.js": _JS,
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": _JS,
    "favicon.png": "image/png",
}
#: Every file under ``/static/docs/``: the vendor's and this package's start-up script.
ASSETS: Final[dict[str, str]] = {**VENDOR_ASSETS, "swagger-init.js": _JS}
_HEADERS: Final[dict[str, str]] = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_PREFIX: Final = "/static/docs/"
#: Replacements in the vendor's files as served: ReDoc's footer logo comes from its CDN.
PATCHES: Final[dict[str, tuple[bytes, bytes]]] = {
    "redoc.standalone.js": (
        b'"https://cdn.redoc.ly/redoc/logo-mini.svg"',
        b'"data:image/svg+xml,%3Csvg%20xmlns=%27http://www.w3.org/2000/svg%27/%3E"',
    ),
}

router = APIRouter(include_in_schema=False)


def available() -> bool:
    """Whether the package with Swagger UI's and ReDoc's files is installed."""
    return importlib.util.find_spec(VENDOR_PACKAGE) is not None


@lru_cache(maxsize=len(ASSETS))
def _read(name: str) -> bytes:
    """An asset's bytes (read once per process; they never change)."""
    if name in VENDOR_ASSETS:
        data = (resources.files(VENDOR_PACKAGE) / "static" / name).read_bytes()
        if name in PATCHES:
            data = data.replace(*PATCHES[name])
        return data
    return (resources.files("langchain_references.server") / "static" / name).read_bytes()


def _headers(policy: str, *, cache: str = "no-cache") -> dict[str, str]:
    return {**_HEADERS, "Content-Security-Policy": policy, "Cache-Control": cache}


def _page(request: Request, title: str, head: str, body: str, policy: str) -> Response:
    """An HTML page: ``head`` and ``body`` are markup already escaped."""
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(request.app.title)} - {title}</title>\n"
        f'<link rel="icon" type="image/png" href="{_assets(request)}favicon.png">\n'
        f"{head}</head>\n<body>\n{body}</body>\n</html>\n"
    )
    return Response(page, media_type="text/html; charset=utf-8", headers=_headers(policy))


def _assets(request: Request) -> str:
    """The URL prefix of the assets (after the application's root path), escaped."""
    return html.escape(str(request.scope.get("root_path", "")) + _PREFIX)


def _openapi_url(request: Request) -> str:
    """The URL of the OpenAPI document (after the application's root path), escaped."""
    return html.escape(str(request.scope.get("root_path", "")) + str(request.app.openapi_url))


@router.get("/docs")
def swagger_ui(request: Request) -> Response:
    """Swagger UI, from local files.

    Args:
        request: The request (its application's title, OpenAPI URL and root path).

    Returns:
        The page, with :data:`DOCS_CONTENT_SECURITY_POLICY`.
    """
    assets = _assets(request)
    return _page(
        request,
        "Swagger UI",
        f'<link rel="stylesheet" href="{assets}swagger-ui.css">\n',
        f'<div id="swagger-ui" data-openapi-url="{_openapi_url(request)}"></div>\n'
        f'<script src="{assets}swagger-ui-bundle.js"></script>\n'
        f'<script src="{assets}swagger-init.js"></script>\n',
        DOCS_CONTENT_SECURITY_POLICY,
    )


@router.get("/redoc")
def redoc(request: Request) -> Response:
    """ReDoc, from local files (it starts itself on the ``<redoc spec-url>`` element).

    Args:
        request: The request (its application's title, OpenAPI URL and root path).

    Returns:
        The page, with :data:`REDOC_CONTENT_SECURITY_POLICY`.
    """
    return _page(
        request,
        "ReDoc",
        "",
        f'<redoc spec-url="{_openapi_url(request)}"></redoc>\n'
        f'<script src="{_assets(request)}redoc.standalone.js"></script>\n',
        REDOC_CONTENT_SECURITY_POLICY,
    )


@router.get(_PREFIX + "{name}")
def asset(name: str) -> Response:
    """A file of the docs pages.

    Args:
        name: The file name (only :data:`ASSETS` exist).

    Returns:
        The file (cached for a day), or a 404.
    """
    media_type = ASSETS.get(name)
    if media_type is None:
        return Response(
            b"not found",
            status_code=404,
            media_type="text/plain",
            headers=_headers(DOCS_CONTENT_SECURITY_POLICY),
        )
    return Response(
        _read(name),
        media_type=media_type,
        headers=_headers(DOCS_CONTENT_SECURITY_POLICY, cache="public, max-age=86400"),
    )
