"""Hostile servers on 127.0.0.1: each resource limit holds and the batch's other pages arrive."""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pysbd
import pytest

from langchain_references.citations.sentences import SEGMENT_WINDOW
from langchain_references.factcheck.extract import extract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PRESPLIT_CHARS, PassageSplitter
from langchain_references.factcheck.types import FetchReport

CAP = 200_000  # the fetcher's byte cap in these tests
GOOD = (
    b"<html><body><article><p>"
    + b"A good page about arctic terns. " * 20
    + b"</p></article></body></html>"
)
HTML = "text/html; charset=utf-8"
SENTENCES = 8_000


def _bomb(size: int) -> bytes:
    return b"<html><body><p>" + b"\0" * size


def _zlib(data: bytes) -> bytes:
    return zlib.compress(data, 9)


def _long_paragraph() -> str:
    return " ".join(f"Sentence {i} tells that arctic terns fly very far." for i in range(SENTENCES))


Route = Callable[[BaseHTTPRequestHandler], None]


def _send(handler: BaseHTTPRequestHandler, body: bytes, **headers: str) -> None:
    handler.send_response(200)
    headers.setdefault("Content-Type", HTML)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _drip(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", HTML)
    handler.end_headers()
    for byte in GOOD:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.2)


def _endless(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", HTML)
    handler.end_headers()  # no Content-Length: the body runs until the client hangs up
    while True:
        handler.wfile.write(b"<p>" + b"z" * 65_536 + b"</p>")


_GZIP_BOMB = gzip.compress(_bomb(50 * CAP), 9)
ROUTES: dict[str, Route] = {
    "/good": lambda h: _send(h, GOOD),
    "/gzip-bomb": lambda h: _send(h, _GZIP_BOMB, Content_Encoding="gzip"),
    "/gzip-gzip": lambda h: _send(
        h, gzip.compress(gzip.compress(_bomb(50 * CAP), 9), 9), Content_Encoding="gzip, gzip"
    ),
    "/gzip-x3": lambda h: _send(
        h, gzip.compress(gzip.compress(gzip.compress(GOOD))), Content_Encoding="gzip, gzip, gzip"
    ),
    "/gzip-ok": lambda h: _send(h, gzip.compress(GOOD), Content_Encoding="gzip"),
    "/gzip-gzip-ok": lambda h: _send(
        h, gzip.compress(gzip.compress(GOOD)), Content_Encoding="gzip, gzip"
    ),
    "/deflate-bomb": lambda h: _send(h, _zlib(_bomb(50 * CAP)), Content_Encoding="deflate"),
    "/deflate-ok": lambda h: _send(h, _zlib(GOOD), Content_Encoding="deflate"),
    "/zstd": lambda h: _send(h, b"\x28\xb5\x2f\xfd" + b"\0" * 64, Content_Encoding="zstd"),
    "/br": lambda h: _send(h, b"\x1b" * 64, Content_Encoding="br"),
    "/drip": _drip,
    "/endless": _endless,
    "/punycode": lambda h: _send(
        h,
        b"<html><body><p>" + b"plain-ascii-text " * 200 + b"</p></body></html>",
        Content_Type="text/html; charset=punycode",
    ),
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class _Handler(BaseHTTPRequestHandler):
    seen_encodings: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        _Handler.seen_encodings.append(self.headers.get("Accept-Encoding", ""))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            ROUTES[self.path](self)


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _fetch(base: str, *paths: str, timeout_s: float = 5.0) -> FetchReport:
    fetcher = PageFetcher(allow_private=True, max_bytes=CAP, timeout_s=timeout_s)
    return fetcher.fetch_all([base + p for p in (*paths, "/good")])


def _reason(report: FetchReport, base: str, path: str) -> str:
    return {f.url: f.reason for f in report.failures}[base + path]


def _good_arrived(report: FetchReport, base: str) -> None:
    assert [p.url for p in report.pages if p.url == base + "/good"] == [base + "/good"]
    assert "arctic terns" in next(p.body for p in report.pages if p.url == base + "/good")


@pytest.mark.parametrize("path", ["/gzip-bomb", "/gzip-gzip", "/deflate-bomb"])
def test_compression_bombs_stop_at_the_decompressed_cap(hostile: str, path: str) -> None:
    report = _fetch(hostile, path)
    assert _reason(report, hostile, path).startswith("too large")
    _good_arrived(report, hostile)


@pytest.mark.parametrize("path", ["/gzip-ok", "/gzip-gzip-ok", "/deflate-ok"])
def test_honest_compressed_pages_are_decoded(hostile: str, path: str) -> None:
    report = _fetch(hostile, path)
    assert {p.url: p.body for p in report.pages}[hostile + path] == GOOD.decode()


@pytest.mark.parametrize("path", ["/zstd", "/br", "/gzip-x3"])
def test_unbounded_or_deep_encodings_are_refused(hostile: str, path: str) -> None:
    report = _fetch(hostile, path)
    assert _reason(report, hostile, path).startswith("refused")
    _good_arrived(report, hostile)
    assert set(_Handler.seen_encodings) == {"gzip, deflate"}


def test_a_drip_feeding_server_is_stopped_by_the_timeout(hostile: str) -> None:
    report = _fetch(hostile, "/drip", timeout_s=1.0)
    assert _reason(report, hostile, "/drip").startswith("timeout")
    _good_arrived(report, hostile)


def test_a_huge_page_without_content_length_stops_at_the_cap(hostile: str) -> None:
    report = _fetch(hostile, "/endless")
    assert _reason(report, hostile, "/endless").startswith("too large")
    _good_arrived(report, hostile)


def test_a_punycode_charset_is_ignored(hostile: str) -> None:
    report = _fetch(hostile, "/punycode")
    body = {p.url: p.body for p in report.pages}[hostile + "/punycode"]
    assert "plain-ascii-text plain-ascii-text" in body  # decoded as text, not as punycode
    _good_arrived(report, hostile)


class _SpySegmenter:
    """Records the length of every text pysbd is asked to segment."""

    calls: ClassVar[list[int]] = []

    def __init__(self, **kwargs: Any) -> None:
        self._real = _REAL_SEGMENTER(**kwargs)

    def processor(self, text: str) -> Any:
        _SpySegmenter.calls.append(len(text))
        return self._real.processor(text)


_REAL_SEGMENTER = pysbd.Segmenter


def test_a_long_paragraph_reaches_pysbd_only_in_bounded_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_references.factcheck.types import ExtractedPage

    _SpySegmenter.calls = []
    monkeypatch.setattr(pysbd, "Segmenter", _SpySegmenter)
    text = _long_paragraph()
    pages = [
        ExtractedPage(url=u, final_url=u, title=u, text=t, rank=r, content_type="text/html")
        for r, (u, t) in enumerate([("https://x/long", text), ("https://x/good", GOOD.decode())])
    ]
    splitter = PassageSplitter(max_passages_per_page=10**6, max_passages=10**6)
    passages = splitter.split(pages)
    assert _SpySegmenter.calls
    # Pre-split pieces of at most PRESPLIT_CHARS, read by pysbd in windows of SEGMENT_WINDOW.
    assert max(_SpySegmenter.calls) <= min(PRESPLIT_CHARS, SEGMENT_WINDOW)
    assert len(_SpySegmenter.calls) <= 2 * len(text) // SEGMENT_WINDOW + 2  # linear
    assert "".join(p.text for p in passages if p.url == "https://x/long").replace(" ", "") == (
        text.replace(" ", "")
    )
    assert any(p.url == "https://x/good" for p in passages)


def test_extraction_of_a_hostile_batch_keeps_the_good_page(hostile: str) -> None:
    report = _fetch(hostile, "/gzip-ok", "/punycode")
    extracted = extract_all(report.pages, max_chars=len(GOOD) + 10)
    assert {p.url for p in extracted.pages} == {hostile + "/good", hostile + "/gzip-ok"}
    assert [f.reason.split(":")[0] for f in extracted.failures] == ["too large to extract"]
