"""Peak memory and time per hostile page: fetch (on 127.0.0.1), extraction and passages.

Run: ``python benchmarks/bench_hostile.py``. Each hostile page is fetched alone with the default
2 MB cap (plus one honest page in the same batch), then its stage is timed; peak Python memory
comes from ``tracemalloc``. Prints a table.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_references.factcheck.extract import extract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PassageSplitter
from langchain_references.factcheck.types import ExtractedPage

logger = logging.getLogger("bench_hostile")
GOOD = b"<html><body><article><p>" + b"An honest page about arctic terns. " * 20 + b"</p>"
BOMB = b"<html><body><p>" + b"\0" * 200_000_000  # 200 MB once decompressed
PAYLOADS: dict[str, tuple[bytes, dict[str, str]]] = {
    "gzip bomb (200 MB)": (gzip.compress(BOMB, 9), {"Content-Encoding": "gzip"}),
    "gzip, gzip bomb": (
        gzip.compress(gzip.compress(BOMB, 9), 9),
        {"Content-Encoding": "gzip, gzip"},
    ),
    "deflate bomb": (zlib.compress(BOMB, 9), {"Content-Encoding": "deflate"}),
    "zstd declared": (b"\x28\xb5\x2f\xfd" + b"\0" * 64, {"Content-Encoding": "zstd"}),
    "charset=punycode 320 KB": (
        b"<p>" + b"plain-ascii-text-" * 19_000 + b"</p>",
        {"Content-Type": "text/html; charset=punycode"},
    ),
    "honest gzip": (gzip.compress(GOOD), {"Content-Encoding": "gzip"}),
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body, headers = PAYLOADS.get(self.path.lstrip("/").replace("%20", " "), (GOOD, {}))
        self.send_response(200)
        headers = {"Content-Type": "text/html; charset=utf-8", **headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)


def _measure(run: Callable[[], str]) -> tuple[str, float, float]:
    tracemalloc.start()
    start = time.perf_counter()
    outcome = run()
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return outcome, elapsed, peak / 1e6


def main() -> None:
    """Run every hostile case and print the table."""
    logging.basicConfig(level=logging.ERROR)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    fetcher = PageFetcher(allow_private=True)
    rows: list[tuple[str, str, str, float, float]] = []
    try:
        for name, (body, _) in PAYLOADS.items():
            url = base + name.replace(" ", "%20")

            def fetch(url: str = url) -> str:
                report = fetcher.fetch_all([url, base + "good"])
                outcome = {f.url: f.reason for f in report.failures}.get(url, "page")
                return f"{outcome}; honest page {'ok' if len(report.pages) >= 1 else 'LOST'}"

            rows.append((name, f"fetch ({len(body):,} B on the wire)", *_measure(fetch)))
    finally:
        server.shutdown()

    long_text = " ".join(f"Sentence {i} says arctic terns fly far." for i in range(8_000))
    page = ExtractedPage(
        url="u", final_url="u", title="t", text=long_text, rank=0, content_type="text/html"
    )

    def split() -> str:
        return f"{len(PassageSplitter().split([page]))} passages (cap 200)"

    rows.append(("8k-sentence paragraph", f"passages ({len(long_text):,} chars)", *_measure(split)))

    html = "<html><body><p>" + "x" * 5_000_000 + "</p></body></html>"
    from langchain_references.factcheck.types import FetchedPage

    fetched = FetchedPage(
        url="u",
        final_url="u",
        status=200,
        content_type="text/html",
        body=html,
        elapsed_s=0.0,
        rank=0,
    )

    def extract() -> str:
        report = extract_all([fetched])
        return report.failures[0].reason if report.failures else "page"

    rows.append(("5 MB HTML", "extract", *_measure(extract)))

    header = ("case", "stage", "outcome", "time (s)", "peak MB")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(3)]
    lines = [
        f"{header[0]:<{widths[0]}}  {header[1]:<{widths[1]}}  {header[2]:<{widths[2]}}  "
        f"{header[3]:>8}  {header[4]:>8}"
    ]
    for case, stage, outcome, seconds, peak in rows:
        lines.append(
            f"{case:<{widths[0]}}  {stage:<{widths[1]}}  {outcome:<{widths[2]}}  "
            f"{seconds:>8.2f}  {peak:>8.1f}"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
