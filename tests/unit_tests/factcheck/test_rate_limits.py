"""The fetcher under a server that answers 429 beyond a rate: limited, retried, nothing lost."""

from __future__ import annotations

import asyncio

from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.services.ratelimit import RateLimit, RateLimiter
from tests.unit_tests.factcheck.throttled_server import serve_throttled

RATE = 10.0  # the server's limit, requests per second


def test_without_a_limiter_a_429_is_a_failure() -> None:
    with serve_throttled(RATE, burst=1) as site:
        urls = [site.url(f"/page/{i}") for i in range(6)]
        report = PageFetcher(allow_private=True, max_concurrency=6).fetch_all(urls)
    assert len(report.failures) >= 1
    assert {f.reason for f in report.failures} == {"HTTP 429"}


def test_the_limiter_keeps_the_server_at_its_limit_with_no_failed_item() -> None:
    limiter = RateLimiter({"fetch": RateLimit(requests_per_second=RATE, max_concurrent=4)})
    with serve_throttled(RATE, burst=2) as site:  # burst 2: slack for network jitter only
        urls = [site.url(f"/page/{i}") for i in range(20)]
        fetcher = PageFetcher(allow_private=True, max_concurrency=8, limiter=limiter)
        report = fetcher.fetch_all(urls)
    assert report.failures == []
    assert [p.url for p in report.pages] == urls
    assert site.refused == []
    assert site.max_in_window(1.0) <= RATE + 1
    assert limiter.retries == {}


def test_a_limiter_set_too_fast_is_brought_back_by_retry_after() -> None:
    limiter = RateLimiter(
        {"fetch": RateLimit(requests_per_second=100.0, max_concurrent=8, burst=8)}
    )
    with serve_throttled(RATE, burst=2, retry_after="0.3") as site:
        urls = [site.url(f"/page/{i}") for i in range(12)]
        fetcher = PageFetcher(allow_private=True, max_concurrency=8, limiter=limiter)
        report = asyncio.run(fetcher.afetch_all(urls))
    assert report.failures == []
    assert [p.url for p in report.pages] == urls
    assert len(site.refused) >= 1  # the server did push back...
    host_key = "fetch:127.0.0.1"
    assert limiter.retries[host_key] == len(site.refused)  # ...and every refusal was retried
    assert len(site.served) == 12
