"""The web page: security headers, static files, and the page driven in headless Chromium.

The browser tests start a real uvicorn on 127.0.0.1 and drive Debian's ``chromium`` through
Playwright (Playwright cannot download its own browser here); they skip, with the install
command, when Chromium is missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from langchain_references.judges import JudgeInfo
from langchain_references.server.page import CONTENT_SECURITY_POLICY
from tests.unit_tests.server._native_fixtures import (
    LiveServer,
    make_app,
    make_client,
    native_index,
    native_index_dir,
    native_settings,
)
from tests.unit_tests.server.conftest import ScriptedJudge

__all__ = ["make_app", "make_client", "native_index", "native_index_dir", "native_settings"]

STATIC = resources.files("langchain_references.server") / "static"


# --------------------------------------------------------------------------- headers and files


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/static/app.js",
        "/static/style.css",
        "/static/favicon.svg",
        "/favicon.ico",
        "/static/x",
    ],
)
def test_every_page_response_has_the_csp(make_client: Callable[..., TestClient], path: str) -> None:
    response = make_client().get(path)
    assert response.status_code == (404 if path == "/static/x" else 200)
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY


def test_static_files_have_their_media_types(make_client: Callable[..., TestClient]) -> None:
    client = make_client()
    assert client.get("/").headers["content-type"] == "text/html; charset=utf-8"
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/style.css").headers["content-type"].startswith("text/css")
    for icon in ("/static/favicon.svg", "/favicon.ico"):
        response = client.get(icon)
        assert response.headers["content-type"] == "image/svg+xml"
        assert response.content.startswith(b"<svg ")
    assert '<link rel="icon" href="/static/favicon.svg"' in client.get("/").text
    assert client.get("/static/../page.py").status_code == 404
    assert client.get("/static/index.html").status_code == 404


def test_the_page_has_no_inline_script_and_no_html_insertion() -> None:
    html = (STATIC / "index.html").read_text()
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S)
    assert scripts == [""]  # one script, from a file
    assert re.search(r"\son[a-z]+\s*=", html) is None  # no inline event handlers
    script = (STATIC / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script


# --------------------------------------------------------------------------- in the browser


@pytest.fixture
def page_at(browser: object, make_app: Callable[..., FastAPI]) -> Iterator[Callable[..., object]]:
    """``page_at(**make_app_kwargs)``: a new browser page on a live server of that app."""
    servers: list[LiveServer] = []
    pages: list[object] = []

    def open_page(**kwargs: object) -> object:
        server = LiveServer(make_app(**kwargs)).__enter__()
        servers.append(server)
        page = browser.new_page()  # type: ignore[attr-defined]
        page.on("dialog", lambda dialog: pytest.fail(f"a dialog opened: {dialog.message}"))
        page.goto(server.base_url + "/")
        pages.append(page)
        return page

    yield open_page
    for page in pages:
        page.close()  # type: ignore[attr-defined]
    for server in servers:
        server.__exit__(None, None, None)


def _set_top_k(page: object, k: int) -> None:
    page.click("details.settings summary")  # type: ignore[attr-defined]
    page.fill("#top-k", str(k))  # type: ignore[attr-defined]


ARTICLE = (
    "Tall towers\n"
    "The Eiffel Tower is 330 metres tall. The Space Needle is 300 metres tall.\n"
    "Honey bees make honey from the nectar of flowers."
)


@pytest.mark.slow
def test_claims_turn_and_show_their_evidence(page_at: Callable[..., object]) -> None:
    judge = ScriptedJudge({"tower is 330": "supports", "184 metres": "refutes"})
    page = page_at(use_judge=judge)
    _set_top_k(page, 2)
    page.fill("#article-text", ARTICLE)  # type: ignore[attr-defined]
    page.click("#article-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#article-view[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    claims = page.locator("#article-view span.claim")  # type: ignore[attr-defined]
    assert claims.count() == 3
    verdicts = [claims.nth(i).get_attribute("data-verdict") for i in range(3)]
    assert verdicts[0] == "supported"
    assert verdicts[1] == "refuted"
    assert verdicts[2] == "not_enough_evidence"
    assert "Tall towers" in page.inner_text("#article-view")  # type: ignore[attr-defined]
    assert page.inner_text("#article-status").startswith("Done: 3 claims")  # type: ignore[attr-defined]
    badge = page.locator("#article-judge")  # type: ignore[attr-defined]
    assert badge.is_visible()
    assert badge.inner_text() == "Judge: custom (no model) — custom judge ScriptedJudge"
    assert badge.get_attribute("data-kind") == "custom"
    assert "rough" not in (badge.get_attribute("class") or "")  # only the heuristic is

    claims.nth(0).click()
    evidence = page.locator("#evidence")  # type: ignore[attr-defined]
    assert evidence.locator("h3").inner_text() == "The Eiffel Tower is 330 metres tall."
    assert evidence.locator(".verdict").inner_text().startswith("supported (confidence ")
    assert evidence.locator("p.judge").inner_text() == (
        "Judge: custom (no model) — custom judge ScriptedJudge"
    )
    passage = evidence.locator("li.passage").first
    assert passage.locator(".number").inner_text() == "[1]"
    assert passage.locator("blockquote").inner_text() == "The tower is 330 metres tall."
    source = passage.locator("a.source")
    assert source.get_attribute("href") == "https://landmarks.example.org/eiffel-tower"
    assert source.get_attribute("rel") == "noopener noreferrer"

    claims.nth(1).click()
    assert evidence.locator(".verdict").inner_text().startswith("contradicted (confidence ")
    assert "184 metres" in evidence.locator("li.passage.contradicts").first.inner_text()

    # no passage leans either way: its score beside the threshold, not "confidence 100%" (a
    # certainty it lacks): the server's note, in the reports' words
    claims.nth(2).click()
    assert evidence.locator(".verdict").inner_text() == "not enough evidence (score +0.00 < 0.30)"


XSS_ARTICLE = (
    'Markup such as <script>window.__pwned = "script"</script> must be shown as text.\n'
    "An image tag <img src=x onerror=\"window.__pwned = 'img'\"> must never load in a page."
)


@pytest.mark.slow
def test_markup_in_the_article_and_the_evidence_stays_text(
    page_at: Callable[..., object],
) -> None:
    page = page_at(use_judge=ScriptedJudge({"Markup": "supports"}))
    _set_top_k(page, 1)
    page.fill("#article-text", XSS_ARTICLE)  # type: ignore[attr-defined]
    page.click("#article-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#article-view[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    view = page.locator("#article-view")  # type: ignore[attr-defined]
    text = view.inner_text()
    assert '<script>window.__pwned = "script"</script>' in text
    assert "<img src=x onerror=\"window.__pwned = 'img'\">" in text
    assert view.locator("script, img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"  # type: ignore[attr-defined]
    page.locator("#article-view span.claim").first.click()  # type: ignore[attr-defined]
    passage = page.locator("#evidence li.passage").first  # type: ignore[attr-defined]
    assert "<script>alert('x')</script>" in passage.locator("blockquote").inner_text()
    title = passage.locator(".source")
    assert title.inner_text().startswith("<img src=x onerror=alert(1)>")
    assert passage.locator("a").count() == 0  # a javascript: URL is never linked
    assert page.locator("#evidence img").count() == 0  # type: ignore[attr-defined]


HEURISTIC_BADGE = (
    "Judge: heuristic (no model) — offline heuristic (word overlap and similarity), not an NLI "
    "model: rough; set an LLM judge for real checks"
)
HOW = (
    "The service's operator sets an LLM judge with: langchain-references serve --judge "
    "llm:PROVIDER:MODEL (or an NLI model: --judge nli:MODEL)"
)


@pytest.mark.slow
def test_the_offline_heuristic_wears_a_rough_badge_that_says_how_to_set_a_judge(
    page_at: Callable[..., object],
) -> None:
    page = page_at()  # the service's default judge: the offline heuristic
    badge = page.locator("#article-judge")  # type: ignore[attr-defined]
    assert not badge.is_visible()  # no verdict, no badge
    _set_top_k(page, 1)
    page.fill("#article-text", "The Space Needle is 184 metres tall.")  # type: ignore[attr-defined]
    page.click("#article-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#article-view[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    assert badge.is_visible()
    assert badge.get_attribute("data-kind") == "heuristic"
    assert "rough" in (badge.get_attribute("class") or "").split()
    assert badge.inner_text().splitlines() == [HEURISTIC_BADGE, HOW]
    assert badge.locator("span.how").inner_text() == HOW
    page.locator("#article-view span.claim").first.click()  # type: ignore[attr-defined]
    assert page.locator("#evidence p.judge").inner_text() == HEURISTIC_BADGE  # type: ignore[attr-defined]

    # the citation check of an answer names its judge too
    answer_badge = page.locator("#answer-judge")  # type: ignore[attr-defined]
    page.fill("#question", "How tall is the Space Needle?")  # type: ignore[attr-defined]
    page.check("#check-citations")  # type: ignore[attr-defined]
    page.click("#answer-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#answer[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    assert answer_badge.is_visible()
    assert answer_badge.inner_text().splitlines() == [HEURISTIC_BADGE, HOW]
    # without the check, no verdict: the badge goes away
    page.uncheck("#check-citations")  # type: ignore[attr-defined]
    page.click("#answer-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#answer[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    assert not answer_badge.is_visible()


class HostileJudge(ScriptedJudge):
    """A custom judge whose name is markup: the badge must show it as text."""

    def info(self) -> JudgeInfo:
        return JudgeInfo(
            kind="custom",
            model="<img src=x onerror=\"window.__pwned = 'model'\">",
            description="<script>window.__pwned = 'description'</script>",
        )


@pytest.mark.slow
def test_a_judge_named_with_markup_is_shown_as_text(page_at: Callable[..., object]) -> None:
    page = page_at(use_judge=HostileJudge({"honey": "supports"}))
    _set_top_k(page, 1)
    page.fill("#article-text", "Honey bees make honey from the nectar of flowers.")  # type: ignore[attr-defined]
    page.click("#article-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#article-view[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    badge = page.locator("#article-judge")  # type: ignore[attr-defined]
    assert badge.inner_text() == (
        "Judge: custom (<img src=x onerror=\"window.__pwned = 'model'\">) — "
        "<script>window.__pwned = 'description'</script>"
    )
    page.locator("#article-view span.claim").first.click()  # type: ignore[attr-defined]
    assert page.locator("#evidence p.judge").inner_text() == badge.inner_text()  # type: ignore[attr-defined]
    assert page.locator("img, #article-judge script, #evidence script").count() == 0  # type: ignore[attr-defined]
    assert page.evaluate("typeof window.__pwned") == "undefined"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_question_streams_a_cited_answer(page_at: Callable[..., object]) -> None:
    page = page_at()
    _set_top_k(page, 3)
    page.fill("#question", "How tall is the Space Needle?")  # type: ignore[attr-defined]
    page.click("#answer-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#answer[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    assert page.inner_text("#answer") == "The Space Needle is 184 metres tall [1]."  # type: ignore[attr-defined]
    assert page.inner_text("#answer-by") == (  # type: ignore[attr-defined]
        "Answered by: extractive (no model) — copies the documents' sentences closest to the "
        "question, each cited: not a generative model"
    )
    link = page.locator("#references li a")  # type: ignore[attr-defined]
    assert link.count() == 1
    assert link.inner_text() == "The Space Needle"
    assert link.get_attribute("href") == "https://landmarks.example.org/space-needle"


@pytest.mark.slow
def test_a_limit_error_is_shown(page_at: Callable[..., object]) -> None:
    page = page_at(max_claims=1)
    page.fill("#article-text", ARTICLE)  # type: ignore[attr-defined]
    page.click("#article-submit")  # type: ignore[attr-defined]
    status = page.locator("#article-status.failed")  # type: ignore[attr-defined]
    status.wait_for(timeout=30_000)
    assert status.inner_text() == "max_claims is 1, the request has 3"


LONG = "x" * 100_000 + "<b>end</b>"


@pytest.mark.slow
def test_a_verdict_shows_the_servers_note_as_text(page_at: Callable[..., object]) -> None:
    page = page_at()
    base: dict[str, object] = {"error": None, "judge": None, "passages": [], "references": []}
    claims = [
        {**base, "id": 0, "text": "A.", "verdict": "not_enough_evidence", "confidence": 0.001,
         "score": 0.2997, "note": "score +0.2997 < 0.30"},
        {**base, "id": 1, "text": "B.", "verdict": "supported", "confidence": 0.75,
         "score": 0.75, "note": "confidence 75%, score +0.75 ≥ 0.30"},
        {**base, "id": 2, "text": "C.", "verdict": "refuted", "confidence": 0.5,
         "score": -0.5, "note": "<b>markup</b> stays text"},
        {**base, "id": 3, "text": "D.", "verdict": "error", "confidence": 0.0,
         "score": 0.0, "note": "never shown for an error", "error": "no page"},
        {**base, "id": 4, "text": "E.", "verdict": "supported", "confidence": 0.75,
         "score": 0.75},  # a server without notes: the verdict alone
    ]  # fmt: skip
    article = _sse(
        (
            "article",
            {
                "text": "A. B. C. D. E.",
                "sentences": [
                    {"start": 3 * i, "end": 3 * i + 2, "claim": i} for i in range(len(claims))
                ],
                "claims": claims,
                "judge": None,
            },
        ),
        *(("claim", claim) for claim in claims),
        ("result", {"counts": {"claims": 5, "sentences": 5}}),
    )
    page.route("**/v1/article", _fulfil(article))  # type: ignore[attr-defined]
    page.fill("#article-text", "A. B. C. D. E.")  # type: ignore[attr-defined]
    page.click("#article-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#article-view[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    spans = page.locator("#article-view span.claim")  # type: ignore[attr-defined]
    badge = page.locator("#evidence .verdict")  # type: ignore[attr-defined]
    shown = []
    for i in range(len(claims)):
        spans.nth(i).click()
        shown.append(badge.inner_text())
    assert shown == [
        "not enough evidence (score +0.2997 < 0.30)",
        "supported (confidence 75%, score +0.75 ≥ 0.30)",
        "contradicted (<b>markup</b> stays text)",
        "could not check",
        "supported",
    ]
    assert badge.locator("b").count() == 0  # type: ignore[attr-defined]


def _sse(*events: tuple[str, object]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


def _fulfil(body: str) -> Callable[[Any], None]:
    def handle(route: Any) -> None:
        route.fulfill(status=200, content_type="text/event-stream", body=body)

    return handle


@pytest.mark.slow
def test_long_fields_are_shown_clipped_as_text(page_at: Callable[..., object]) -> None:
    """A 100 KB title used to freeze the page for seconds: titles, passages and messages are
    clipped for display (the count of characters left out shown), and still inserted as text."""
    page = page_at()
    reference = {"number": 1, "source": "https://a.example.org/", "title": LONG, "positions": [1]}
    answer = _sse(
        ("documents", {"documents": []}),
        ("token", {"text": "An answer [1]."}),
        ("references", {"references": [reference], "citation_check": None}),
        ("result", {"answer": "An answer [1]."}),
    )
    claim = {
        "id": 0,
        "verdict": "supported",
        "confidence": 0.9,
        "text": "A claim.",
        "error": None,
        "judge": {"kind": "custom", "model": LONG, "description": ""},
        "passages": [{"number": 1, "stance": "supports", "text": LONG, "title": LONG, "url": None}],
        "references": [reference],
    }
    article = _sse(
        (
            "article",
            {
                "text": "A claim.",
                "sentences": [{"start": 0, "end": 8, "claim": 0}],
                "claims": [claim],
                "judge": None,
            },
        ),
        ("claim", claim),
        ("result", {"counts": {"claims": 1, "sentences": 1}}),
    )
    for path, body in (("/v1/answer", answer), ("/v1/article", article)):
        page.route("**" + path, _fulfil(body))  # type: ignore[attr-defined]
    page.fill("#question", "Anything?")  # type: ignore[attr-defined]
    page.click("#answer-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#answer[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    clipped = "x" * 300 + "… (99,710 more characters)"
    assert page.inner_text("#references li a") == clipped  # type: ignore[attr-defined]

    page.fill("#article-text", "A claim.")  # type: ignore[attr-defined]
    page.click("#article-submit")  # type: ignore[attr-defined]
    page.wait_for_selector("#article-view[data-done='true']", timeout=60_000)  # type: ignore[attr-defined]
    page.locator("#article-view span.claim").first.click()  # type: ignore[attr-defined]
    evidence = page.locator("#evidence")  # type: ignore[attr-defined]
    assert evidence.locator("li.passage .source").inner_text() == clipped
    assert evidence.locator("ol.sources li .source").inner_text() == clipped
    assert evidence.locator("blockquote").inner_text() == "x" * 3_000 + "… (97,010 more characters)"
    assert evidence.locator("p.judge").inner_text() == (
        "Judge: custom (" + "x" * 300 + "… (99,710 more characters))"
    )
    assert page.locator("b").count() == 0  # type: ignore[attr-defined]
