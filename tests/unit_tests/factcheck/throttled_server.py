"""A local HTTP server (127.0.0.1) that answers 429 beyond a request rate, for rate-limit tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ThrottledSite:
    """What the server saw: times of served and refused requests."""

    rate: float
    burst: int
    retry_after: str
    base_url: str = ""
    served: list[float] = field(default_factory=list)
    refused: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _tokens: float = 0.0
    _updated: float = 0.0

    def admit(self) -> bool:
        with self.lock:
            now = time.monotonic()
            if not self._updated:
                self._tokens, self._updated = float(self.burst), now
            self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.rate)
            self._updated = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                self.served.append(now)
                return True
            self.refused.append(now)
            return False

    def url(self, path: str) -> str:
        return self.base_url + path.lstrip("/")

    def max_in_window(self, window_s: float = 1.0) -> int:
        """Most requests served in any window of ``window_s`` seconds."""
        times = sorted(self.served)
        best, start = 0, 0
        for end, t in enumerate(times):
            while t - times[start] >= window_s:
                start += 1
            best = max(best, end - start + 1)
        return best

    def observed_rate(self) -> float:
        """Served requests per second over the run (first to last)."""
        if len(self.served) < 2:
            return 0.0
        return (len(self.served) - 1) / (self.served[-1] - self.served[0])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@contextmanager
def serve_throttled(
    rate: float, *, burst: int = 1, retry_after: str = "1"
) -> Iterator[ThrottledSite]:
    """Serve pages at ``/page/NAME``, answering 429 (with ``Retry-After``) beyond ``rate``/s."""
    site = ThrottledSite(rate=rate, burst=burst, retry_after=retry_after)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if site.admit():
                name = self.path.rsplit("/", 1)[-1]
                body = f"<html><body><p>Page {name} is about rate limits.</p></body></html>"
                self._send(200, body.encode(), {"Content-Type": "text/html; charset=utf-8"})
            else:
                self._send(429, b"too many requests", {"Retry-After": site.retry_after})

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = _Server(("127.0.0.1", 0), Handler)
    site.base_url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
