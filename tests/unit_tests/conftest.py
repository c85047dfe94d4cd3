"""Fixtures shared by the unit tests: a local HTTP site on 127.0.0.1 and the shared data."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import Phase, settings

from tests.conftest import in_ray_group

# The properties are about behaviour, not timing: no deadline. A test's time depends on the load
# of the machine (`make unit` runs two test processes on it), so a deadline fails at random.
settings.register_profile("default", deadline=None)
# `make mutation` runs every test that reaches a mutated function, once per mutant: a failing
# property is reported as found, without shrinking it or tracing an explanation.
settings.register_profile(
    "mutation", phases=[Phase.explicit, Phase.reuse, Phase.generate], database=None, deadline=None
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def _fresh_thread_pools_in_a_forked_child() -> None:
    """Drop thread pools a fork copied without their threads (``make mutation`` forks per mutant).

    langchain-core keeps one lazily made executor for async callbacks run from sync code; in a
    forked child it still holds the parent's (now absent) worker threads, so work handed to it
    would wait forever.
    """
    from langchain_core.callbacks import manager

    manager._executor.cache_clear()


os.register_at_fork(after_in_child=_fresh_thread_pools_in_a_forked_child)

REPO_ROOT = Path(__file__).resolve().parents[2]
# The Climate-FEVER loader lives with the benchmarks that use it (``benchmarks/climate_fever.py``).
if str(REPO_ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
SHARED_DATA = REPO_ROOT / ".." / "shared" / "data"
HTML_FIXTURES = SHARED_DATA / "html_fixtures"

PLAIN_TEXT = (
    "The first paragraph of a plain text page talks about the migration of arctic terns, "
    "which fly from pole to pole every year.\n"
    "It wraps onto a second line.\n"
    "\n"
    "The second paragraph explains that the journey is the longest known migration of any "
    "animal, about seventy thousand kilometres.\n"
)


@pytest.fixture
def factcheck_data_dir() -> Path:
    """The shared data folder; skips the test if it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA}")
    return SHARED_DATA.resolve()


@pytest.fixture
def shared_data() -> Path:
    """The shared data folder; skips the test if it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA.resolve()


@pytest.fixture
def html_fixture_dir(factcheck_data_dir: Path) -> Path:
    """The saved trafilatura HTML test pages."""
    folder = factcheck_data_dir / "html_fixtures"
    if not folder.is_dir():
        pytest.skip(f"HTML fixtures not found at {folder}")
    return folder


def _page(title: str, text: str) -> bytes:
    return (
        f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
        f"<p>{text}</p></article></body></html>"
    ).encode()


@dataclass
class LocalSite:
    """A tiny website on 127.0.0.1 whose behaviour is chosen by the path.

    Paths: ``/fixtures/<file>`` (shared HTML fixtures), ``/page/<name>`` (small HTML page
    mentioning ``<name>``), ``/text`` (plain text), ``/slow?s=<seconds>``, ``/404``, ``/pdf``,
    ``/big`` (streamed HTML larger than 300 kB, no Content-Length), ``/big-declared``,
    ``/redirect/<n>`` (a chain of n redirects ending at ``/page/end``), ``/redirect-to?to=<url>``,
    ``/latin1`` (ISO-8859-1 page with charset header).
    """

    base_url: str
    host: str
    port: int
    fixtures: Path | None
    requests: Counter[str] = field(default_factory=Counter)
    host_headers: list[str] = field(default_factory=list)
    user_agents: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    delay_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        return self.base_url + path.lstrip("/")


def _make_handler(site: LocalSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(
            self, status: int, body: bytes, content_type: str, *, length: bool = True
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            path, query = parts.path, parse_qs(parts.query)
            with site.lock:
                site.requests[path] += 1
                site.host_headers.append(self.headers.get("Host", ""))
                site.user_agents.append(self.headers.get("User-Agent", ""))
                site.in_flight += 1
                site.max_in_flight = max(site.max_in_flight, site.in_flight)
            try:
                if site.delay_s:
                    site.stop.wait(site.delay_s)
                self._route(path, query)
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with site.lock:
                    site.in_flight -= 1

        def _route(self, path: str, query: dict[str, list[str]]) -> None:
            html = "text/html; charset=utf-8"
            if path.startswith("/fixtures/") and site.fixtures is not None:
                file = site.fixtures / path.removeprefix("/fixtures/")
                if file.is_file() and file.parent == site.fixtures:
                    self._send(200, file.read_bytes(), html)
                    return
            elif path.startswith("/page/"):
                name = path.removeprefix("/page/")
                text = f"This page is about {name}. " * 8
                self._send(200, _page(f"Page {name}", text), html)
                return
            elif path == "/text":
                self._send(200, PLAIN_TEXT.encode(), "text/plain; charset=utf-8")
                return
            elif path == "/slow":
                site.stop.wait(float(query.get("s", ["5"])[0]))
                self._send(200, _page("slow", "finally"), html)
                return
            elif path == "/pdf":
                self._send(200, b"%PDF-1.4\n" + b"0" * 2000, "application/pdf")
                return
            elif path == "/big":
                self.send_response(200)
                self.send_header("Content-Type", html)
                self.end_headers()
                self.wfile.write(b"<html><body><p>")
                for _ in range(300):
                    self.wfile.write(b"x" * 1024)
                self.wfile.write(b"</p></body></html>")
                return
            elif path == "/big-declared":
                self._send(200, b"<p>" + b"y" * 300_000 + b"</p>", html)
                return
            elif path.startswith("/redirect/"):
                remaining = int(path.removeprefix("/redirect/"))
                target = "/page/end" if remaining <= 1 else f"/redirect/{remaining - 1}"
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            elif path == "/redirect-to":
                self.send_response(302)
                self.send_header("Location", query["to"][0])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            elif path == "/latin1":
                body = _page("Crème brûlée", "Une crème brûlée réussie demande de la patience.")
                self._send(200, body.decode().encode("iso-8859-1"), "text/html; charset=iso-8859-1")
                return
            self._send(404, b"<p>not found</p>", html)

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 drops connections under concurrent fetches (retried after 1 s).
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


def _serve(fixtures: Path | None) -> Iterator[LocalSite]:
    site = LocalSite(base_url="", host="127.0.0.1", port=0, fixtures=fixtures)
    server = _QuietServer(("127.0.0.1", 0), _make_handler(site))
    site.port = int(server.server_address[1])
    site.base_url = f"http://127.0.0.1:{site.port}/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield site
    finally:
        site.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def local_site() -> Iterator[LocalSite]:
    """A local HTTP site on 127.0.0.1 (an ephemeral port) serving the shared HTML fixtures."""
    fixtures = HTML_FIXTURES.resolve() if HTML_FIXTURES.is_dir() else None
    yield from _serve(fixtures)


@pytest.fixture
def dead_local_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port that was just freed)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/gone"


class _SharedRay:
    """One local Ray (127.0.0.1, two CPUs) for consecutive tests: each start costs seconds."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None

    def start(self) -> None:
        if self._stack is None:
            from langchain_references.services.engine import RayOptions, ray_session

            stack = contextlib.ExitStack()
            stack.enter_context(ray_session(RayOptions(workers=2)))
            self._stack = stack

    def stop(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()


_SHARED_RAY = _SharedRay()


@pytest.fixture
def local_ray(request: pytest.FixtureRequest) -> None:
    """A local Ray that the test's engine calls and commands join (they start none of their own).

    Started by the first test that asks for it, stopped after the last of the Ray tests
    (``RAY_TESTS`` in ``tests/conftest.py``) that run in a row: those of a module, or (``make
    unit``, where one process runs them one after another) all of them, share one Ray, and no
    Ray outlives them.
    """
    if not in_ray_group(request.node.nodeid):
        pytest.fail(f"{request.node.nodeid} runs on Ray: add it to RAY_TESTS in tests/conftest.py")
    pytest.importorskip("ray")
    _SHARED_RAY.start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop the shared Ray when the next test is not one of the Ray tests (or there is none)."""
    try:
        return (yield)
    finally:
        if nextitem is None or not in_ray_group(nextitem.nodeid):
            _SHARED_RAY.stop()


def pytest_sessionfinish() -> None:
    """No Ray outlives the session (an interrupted run included)."""
    _SHARED_RAY.stop()


@pytest.fixture(autouse=True)
def _no_memo_from_other_tests() -> None:
    """Start each test with the library's memo caches empty.

    A test then computes what it checks instead of reading a value another test left (a
    mutation run forks each mutant from a process that ran every test once).
    """
    from langchain_references.core import _parser, styles

    styles.safe_url.cache_clear()
    _parser._HELD.clear()
    _parser._grammar.cache_clear()


@pytest.fixture(autouse=True)
def _user_cache_in_tmp(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commands record their runs under the user cache directory: a temporary one in tests."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
