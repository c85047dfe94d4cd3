"""Resumable runs and rate limits, measured offline against local servers on 127.0.0.1.

    python benchmarks/bench_resume_rate.py [--statements 12] [--delay 0.05] [--rate 10]

**Resume.** A fact-check batch (a local site, a search that links to it, a judge that takes
``--delay`` seconds per passage) runs from scratch, then "crashes" after two thirds of the
statements (only those are run, as a killed run leaves them), then the whole batch is resumed
from the run cache; then resumed again with another judge (the judging is redone, the
searches and pages are reused). The table gives each run's time, its ratio to the full run,
the statements reused and the judge calls and page requests made.

**Rate limit.** A local server answers 429 (``Retry-After: 0.3``) beyond ``--rate`` requests
per second. 40 pages are fetched (8 in flight) with no limiter, with a limiter at the
server's rate, and with one set 5x too fast. The table gives the failed items, the 429s, the
retries, the observed rate and the most requests served in any one-second window.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from langchain_references.factcheck.cache import PageCache
from langchain_references.factcheck.chain import ITEM_NAMESPACE, FactCheckChain
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.types import SearchHit
from langchain_references.judges import Judge, Judgement, Label
from langchain_references.services.ratelimit import RateLimit, RateLimiter
from langchain_references.services.runcache import RunCache


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@contextmanager
def serve(rate: float | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Pages at /page/NAME; beyond ``rate`` requests/s (token bucket, burst 2) a 429."""
    state: dict[str, Any] = {"served": [], "refused": 0, "paths": Counter()}
    lock = threading.Lock()
    bucket = {"tokens": 2.0, "at": time.monotonic()}

    def admit() -> bool:
        with lock:
            now = time.monotonic()
            if rate is not None:
                bucket["tokens"] = min(2.0, bucket["tokens"] + (now - bucket["at"]) * rate)
                bucket["at"] = now
                if bucket["tokens"] < 1:
                    state["refused"] += 1
                    return False
                bucket["tokens"] -= 1
            state["served"].append(now)
            return True

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            state["paths"][self.path] += 1
            if admit():
                name = self.path.rsplit("/", 1)[-1]
                text = f"The {name} page is about {name}. " * 20
                body = f"<html><body><article><p>{text}</p></article></body></html>".encode()
                status, headers = 200, {"Content-Type": "text/html; charset=utf-8"}
            else:
                body, status, headers = b"slow down", 429, {"Retry-After": "0.3"}
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", state
    finally:
        server.shutdown()
        server.server_close()


class Embed(Embeddings):
    def _vector(self, text: str) -> list[float]:
        vector = [0.01] * 64
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 64] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class Search:
    name = "bench"

    def __init__(self, base: str) -> None:
        self.base = base

    def search(self, query: str, k: int = 10) -> list[SearchHit]:
        word = query.split()[1]
        return [SearchHit(title=word, link=f"{self.base}page/{word}-{i}", rank=i) for i in range(3)]

    async def asearch(self, query: str, k: int = 10) -> list[SearchHit]:
        return self.search(query, k)


class SlowJudge(Judge):
    def __init__(self, confidence: float) -> None:
        self.confidence = confidence
        self._delay = 0.0
        self._calls = 0
        self._lock = threading.Lock()

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self._lock:
            self._calls += 1
        time.sleep(self._delay)
        return Judgement(label=Label.ENTAILS, confidence=self.confidence)


def bench_resume(statements: int, delay: float) -> None:
    items = [f"Topic item{i} is covered" for i in range(statements)]
    crashed_after = statements * 2 // 3
    rows = []
    with serve(None) as (base, state), tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.sqlite3"
        full_s = 0.0

        def run(label: str, batch: list[str], reuse: bool, confidence: float, cache_path: Path):
            nonlocal full_s
            cache = RunCache(cache_path, reuse=reuse)
            judge = SlowJudge(confidence)
            judge._delay = delay
            chain = FactCheckChain(
                search=Search(base),
                judge=judge,
                embeddings=Embed(),
                fetcher=PageFetcher(allow_private=True, cache=PageCache(store=cache)),
                k=3,
                cache=cache,
            )
            before = sum(state["paths"].values())
            start = time.perf_counter()
            chain.batch(batch, {"max_concurrency": 2})
            elapsed = time.perf_counter() - start
            if label == "full run, from scratch":
                full_s = elapsed
            rows.append(
                (
                    label,
                    f"{elapsed:.2f}",
                    f"{elapsed / full_s:.2f}",
                    f"{cache.reused(ITEM_NAMESPACE)}/{len(batch)}",
                    str(judge._calls),
                    str(sum(state["paths"].values()) - before),
                )
            )

        run("full run, from scratch", items, False, 0.8, Path(folder) / "other.sqlite3")
        run(f"run killed after {crashed_after}", items[:crashed_after], False, 0.8, path)
        run("--resume of the whole batch", items, True, 0.8, path)
        run("--resume, another judge", items, True, 0.7, path)
    header = ("run", "seconds", "vs full", "reused", "judge calls", "page requests")
    print_table(f"Resume ({statements} statements, judge {delay}s per passage)", header, rows)


def bench_rate(rate: float, pages: int = 40) -> None:
    rows = []
    for label, limit in (
        ("no limiter", None),
        (f"limiter at {rate:g}/s (the server's limit)", rate),
        (f"limiter at {rate * 5:g}/s (5x too fast)", rate * 5),
    ):
        limiter = None
        if limit is not None:
            limiter = RateLimiter(
                {"fetch": RateLimit(requests_per_second=limit, max_concurrent=8, burst=1)}
            )
        with serve(rate) as (base, state):
            fetcher = PageFetcher(allow_private=True, max_concurrency=8, limiter=limiter)
            start = time.perf_counter()
            report = fetcher.fetch_all([f"{base}page/p{i}" for i in range(pages)])
            elapsed = time.perf_counter() - start
            served = sorted(state["served"])
        rate_seen = (len(served) - 1) / (served[-1] - served[0]) if len(served) > 1 else 0.0
        most, first = 0, 0
        for last, t in enumerate(served):
            while t - served[first] >= 1.0:
                first += 1
            most = max(most, last - first + 1)
        retries = sum(limiter.retries.values()) if limiter is not None else 0
        rows.append(
            (
                label,
                f"{len(report.pages)}/{pages}",
                str(len(report.failures)),
                str(state["refused"]),
                str(retries),
                f"{rate_seen:.1f}",
                str(most),
                f"{elapsed:.2f}",
            )
        )
    header = ("fetcher", "pages", "failed", "429s", "retries", "req/s", "max in 1s", "seconds")
    print_table(f"Rate limit (server allows {rate:g} req/s, burst 2)", header, rows)


def print_table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    print(f"\n{title}")
    for index, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=12)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--rate", type=float, default=10.0)
    args = parser.parse_args()
    bench_resume(args.statements, args.delay)
    bench_rate(args.rate)


if __name__ == "__main__":
    main()
