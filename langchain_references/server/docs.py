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
from dataclasses import dataclass
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


def _assets(request: Request) -> str:
    """The URL prefix of the assets (after the application's root path), escaped."""
    return html.escape(str(request.scope.get("root_path", "")) + _PREFIX)


def _openapi_url(request: Request) -> str:
    """The URL of the OpenAPI document (after the application's root path), escaped."""
    return html.escape(str(request.scope.get("root_path", "")) + str(request.app.openapi_url))


@dataclass(frozen=True, slots=True)
class _DocsPage:
    """A docs page; in its markup ``{assets}`` and ``{openapi}`` stand for the escaped URLs.

    Attributes:
        path: Where it is served.
        name: The route's name.
        title: Its title (after the application's).
        head: Markup of its ``<head>`` after the title and icon.
        body: Markup of its ``<body>``.
        policy: Its Content-Security-Policy.
    """

    path: str
    name: str
    title: str
    head: str
    body: str
    policy: str

    def response(self, request: Request) -> Response:
        """The page (the route's handler).

        Args:
            request: The request (its application's title, OpenAPI URL and root path).

        Returns:
            The HTML page, with the page's Content-Security-Policy.
        """
        urls = {"assets": _assets(request), "openapi": _openapi_url(request)}
        page = (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(request.app.title)} - {self.title}</title>\n"
            f'<link rel="icon" type="image/png" href="{urls["assets"]}favicon.png">\n'
            f"{self.head.format(**urls)}</head>\n<body>\n{self.body.format(**urls)}</body>\n"
            "</html>\n"
        )
        return Response(page, media_type="text/html; charset=utf-8", headers=_headers(self.policy))


#: Swagger UI (``/docs``) and ReDoc (``/redoc``, it starts itself on its ``<redoc>`` element).
_PAGES: Final = (
    _DocsPage(
        "/docs",
        "swagger_ui",
        "Swagger UI",
        '<link rel="stylesheet" href="{assets}swagger-ui.css">\n',
        '<div id="swagger-ui" data-openapi-url="{openapi}"></div>\n'
        '<script src="{assets}swagger-ui-bundle.js"></script>\n'
        '<script src="{assets}swagger-init.js"></script>\n',
        DOCS_CONTENT_SECURITY_POLICY,
    ),
    _DocsPage(
        "/redoc",
        "redoc",
        "ReDoc",
        "",
        '<redoc spec-url="{openapi}"></redoc>\n'
        '<script src="{assets}redoc.standalone.js"></script>\n',
        REDOC_CONTENT_SECURITY_POLICY,
    ),
)
for _docs_page in _PAGES:
    router.add_api_route(
        _docs_page.path, _docs_page.response, methods=["GET"], name=_docs_page.name
    )
del _docs_page


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
