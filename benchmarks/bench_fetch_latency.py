"""Wall time of PageFetcher.fetch_all against sequential fetching, on a slow local server.

A local HTTP server on 127.0.0.1 answers every request after ``delay`` seconds (a ~6 kB HTML
page). For each N, the script measures:

* one ``fetch_all`` of N URLs with the default bound (``max_concurrency=8``),
* one ``fetch_all`` of N URLs with ``max_concurrency=N``,
* a real sequential loop (one URL per ``fetch_all`` call, one after the other),

and prints N, delay, concurrency, wall time (median of ``--repeat`` runs), N x delay (the
ideal sequential time), the measured sequential time, the speed-up over the measured
sequential loop and wall / delay (the target with concurrency >= N is close to 1; with a bound
of 8 it is ceil(N / 8)), and the spread between the first and the last request arriving at the
server.

Usage: ``python benchmarks/bench_fetch_latency.py [--sizes 5,10,20] [--delay 0.3]``.
"""

from __future__ import annotations

import argparse
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_references.factcheck.fetch import PageFetcher

PAGE = (
    "<html><head><title>Bench</title></head><body><article>"
    + "<p>Evidence paragraph used to measure fetch latency with a slow server.</p>" * 80
    + "</article></body></html>"
).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


ARRIVALS: list[float] = []


@contextmanager
def slow_server(delay: float) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True  # headers and body are separate writes

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            ARRIVALS.append(time.perf_counter())
            time.sleep(delay)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def timed_fetch_all(fetcher: PageFetcher, urls: list[str]) -> float:
    ARRIVALS.clear()
    start = time.perf_counter()
    report = fetcher.fetch_all(urls)
    wall = time.perf_counter() - start
    if report.failures or len(report.pages) != len(urls):
        raise RuntimeError(f"unexpected failures: {report.failures}")
    return wall


def timed_sequential(fetcher: PageFetcher, urls: list[str]) -> float:
    start = time.perf_counter()
    for url in urls:
        report = fetcher.fetch_all([url])
        if report.failures:
            raise RuntimeError(f"unexpected failure: {report.failures}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5,10,20", help="comma-separated numbers of URLs")
    parser.add_argument("--delay", type=float, default=0.3, help="server delay per response (s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (median reported)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    delay: float = args.delay

    header = (
        f"{'N':>4} {'delay_s':>7} {'concur':>6} {'wall_s':>7} {'N*delay':>8} "
        f"{'seq_s':>7} {'speedup':>8} {'wall/delay':>10} {'ideal':>6} {'spread_s':>8}"
    )
    print(header)
    print("-" * len(header))
    with slow_server(delay) as base:
        PageFetcher(allow_private=True).fetch_all([f"{base}/warm-up"])  # imports, TLS context
        for n in sizes:
            urls = [f"{base}/page/{n}/{i}" for i in range(n)]
            sequential = timed_sequential(PageFetcher(allow_private=True), urls)
            for concurrency in sorted({8, n}):
                fetcher = PageFetcher(allow_private=True, max_concurrency=concurrency)
                runs = []
                for _ in range(args.repeat):
                    runs.append((timed_fetch_all(fetcher, urls), max(ARRIVALS) - min(ARRIVALS)))
                wall, spread = sorted(runs)[len(runs) // 2]  # median run by wall time
                ideal = math.ceil(n / concurrency)
                print(
                    f"{n:>4} {delay:>7.2f} {concurrency:>6} {wall:>7.3f} {n * delay:>8.2f} "
                    f"{sequential:>7.3f} {sequential / wall:>7.1f}x {wall / delay:>10.2f} "
                    f"{ideal:>6} {spread:>8.3f}"
                )


if __name__ == "__main__":
    main()
