"""The API docs (/docs, /redoc): local assets, CSP, and both pages in Chromium, offline.

The browser tests start a real uvicorn on 127.0.0.1 and drive Debian's ``chromium`` through
Playwright with every request to another host aborted: the pages must render from the
service alone, under their Content-Security-Policy, without one failed request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from langchain_references.server import docs
from langchain_references.server.docs import (
    ASSETS,
    DOCS_CONTENT_SECURITY_POLICY,
    REDOC_CONTENT_SECURITY_POLICY,
)
from tests.unit_tests.server._native_fixtures import (
    LiveServer,
    make_app,
    make_client,
    native_index,
    native_index_dir,
    native_settings,
)

__all__ = ["make_app", "make_client", "native_index", "native_index_dir", "native_settings"]

PAGES = {"/docs": DOCS_CONTENT_SECURITY_POLICY, "/redoc": REDOC_CONTENT_SECURITY_POLICY}


def _local_urls(html: str) -> list[str]:
    return re.findall(r'(?:src|href|spec-url|data-openapi-url)="([^"]*)"', html)


# --------------------------------------------------------------------------- pages and files


@pytest.mark.parametrize("path", sorted(PAGES))
def test_docs_pages_load_only_local_files_under_a_csp(
    make_client: Callable[..., TestClient], path: str
) -> None:
    response = make_client().get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-security-policy"] == PAGES[path]
    assert response.headers["x-content-type-options"] == "nosniff"
    html = response.text
    assert "http:" not in html
    assert "https:" not in html
    assert "//" not in html.split(">", 1)[1]
    urls = _local_urls(html)
    assert urls
    assert all(url.startswith("/") for url in urls)
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S)
    assert scripts
    assert all(attributes.startswith(' src="/static/docs/') for attributes, _ in scripts)
    assert all(body == "" for _, body in scripts)  # no inline script
    assert "<style" not in html
    assert "style=" not in html
    assert re.search(r"\son[a-z]+\s*=", html) is None


def test_the_csp_allows_own_files_only() -> None:
    for policy in PAGES.values():
        assert "default-src 'none'" in policy
        assert "script-src 'self';" in policy
        assert "unsafe-eval" not in policy
        assert "connect-src 'self';" in policy
        assert "http" not in policy
    assert "unsafe-inline" not in DOCS_CONTENT_SECURITY_POLICY
    assert "style-src 'self'" in DOCS_CONTENT_SECURITY_POLICY


def test_every_page_url_is_served(make_client: Callable[..., TestClient]) -> None:
    client = make_client()
    for path in PAGES:
        for url in _local_urls(client.get(path).text):
            response = client.get(url)
            assert response.status_code == 200, url


@pytest.mark.parametrize("name", sorted(ASSETS))
def test_assets_are_served_with_their_media_types(
    make_client: Callable[..., TestClient], name: str
) -> None:
    response = make_client().get(f"/static/docs/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == ASSETS[name]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"] == DOCS_CONTENT_SECURITY_POLICY
    assert len(response.content) > 100


def test_redoc_bundle_loads_nothing_from_a_cdn(make_client: Callable[..., TestClient]) -> None:
    bundle = make_client().get("/static/docs/redoc.standalone.js").text
    assert "cdn.redoc.ly" not in bundle
    assert "https://cdn." not in bundle


@pytest.mark.parametrize("path", ["/static/docs/nope.js", "/static/docs/..%2Fpage.py"])
def test_unknown_assets_are_404(make_client: Callable[..., TestClient], path: str) -> None:
    assert make_client().get(path).status_code == 404


def test_docs_stay_public_with_an_api_key(make_client: Callable[..., TestClient]) -> None:
    client = make_client(api_key="s3cret")
    for url in ["/docs", "/redoc", "/openapi.json", "/static/docs/swagger-ui-bundle.js"]:
        assert client.get(url).status_code == 200, url
    assert client.post("/api/split", json={"text": "a. b."}).status_code == 401


def test_urls_follow_the_root_path(make_app: Callable[..., FastAPI]) -> None:
    with TestClient(make_app(), root_path="/evidence", base_url="http://localhost") as client:
        html = client.get("/docs").text
    assert 'src="/evidence/static/docs/swagger-ui-bundle.js"' in html
    assert 'data-openapi-url="/evidence/openapi.json"' in html


def test_without_the_assets_package_there_are_no_docs(
    make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docs, "available", lambda: False)
    client = make_client()
    assert client.get("/docs").status_code == 404
    assert client.get("/redoc").status_code == 404
    assert client.get("/openapi.json").status_code == 200


# --------------------------------------------------------------------------- in the browser


@dataclass
class OfflinePage:
    """A page whose requests to any host but 127.0.0.1 are aborted, and what went wrong."""

    page: Any
    blocked: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, list[str]]:
        return {"blocked": self.blocked, "failed": self.failed, "errors": self.errors}


@pytest.fixture
def offline_page(browser: Any, make_app: Callable[..., FastAPI]) -> Iterator[Callable[[str], Any]]:
    """``offline_page(path)``: that path of a live server, in a browser cut from the internet."""
    servers: list[LiveServer] = []
    contexts: list[Any] = []

    def open_page(path: str) -> OfflinePage:
        server = LiveServer(make_app()).__enter__()
        servers.append(server)
        context = browser.new_context()
        contexts.append(context)
        page = OfflinePage(context.new_page())

        def route(route: Any) -> None:
            if urlsplit(route.request.url).hostname == "127.0.0.1":
                route.continue_()
            else:
                page.blocked.append(route.request.url)
                route.abort()

        context.route("**/*", route)
        page.page.on("requestfailed", lambda r: page.failed.append(f"{r.url}: {r.failure}"))
        page.page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
        page.page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.page.goto(server.base_url + path)
        return page

    yield open_page
    for context in contexts:
        context.close()
    for server in servers:
        server.__exit__(None, None, None)


@pytest.mark.slow
def test_swagger_ui_renders_and_runs_offline(offline_page: Callable[[str], Any]) -> None:
    offline = offline_page("/docs")
    page = offline.page
    operation = page.locator(".opblock", has=page.locator("[data-path='/healthcheck']"))
    operation.wait_for(state="visible", timeout=30_000)
    assert page.locator(".opblock").count() > 10
    assert "langchain-references evidence service" in page.inner_text(".info .title")
    # swagger-ui.css applied (an operation block has its styled border), under the CSP
    assert page.eval_on_selector(".opblock", "e => getComputedStyle(e).borderRadius") == "4px"
    operation.locator(".opblock-summary").click()
    operation.locator("button.try-out__btn").click()
    operation.locator("button.execute").click()  # a request to the service itself
    status = operation.locator(".live-responses-table tr.response .response-col_status").first
    status.wait_for(state="visible", timeout=30_000)
    assert status.inner_text().strip() == "200"
    assert offline.problems() == {"blocked": [], "failed": [], "errors": []}


@pytest.mark.slow
def test_redoc_renders_offline(offline_page: Callable[[str], Any]) -> None:
    offline = offline_page("/redoc")
    page = offline.page
    title = page.locator("h1", has_text="langchain-references evidence service")
    title.wait_for(state="visible", timeout=30_000)
    page.locator("[role=menuitem]", has_text="Healthcheck").first.wait_for(state="visible")
    page.wait_for_load_state("networkidle")
    assert offline.problems() == {"blocked": [], "failed": [], "errors": []}
