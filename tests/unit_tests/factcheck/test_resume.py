"""Resumable fact-check runs: finished checks, searches, pages and judgements from the run cache."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from langchain_references.factcheck.cache import PageCache
from langchain_references.factcheck.chain import ITEM_NAMESPACE, FactCheckChain
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.types import SearchHit
from langchain_references.judges import Judge, Judgement, Label
from langchain_references.judges.cached import CachedJudge, judge_fingerprint
from langchain_references.services.runcache import RunCache
from tests.unit_tests.conftest import LocalSite

STATEMENTS = [f"Topic {name} is covered by its page" for name in ("alpha", "beta", "gamma")]


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


class PageSearch:
    """Two hits per query, pages of the local site named after the query's second word."""

    name = "pages"

    def __init__(self, site: LocalSite) -> None:
        self.site = site
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def search(self, query: str, k: int = 10) -> list[SearchHit]:
        with self._lock:
            self.calls.append(query)
        word = query.split()[1]
        return [
            SearchHit(title=f"{word} {i}", link=self.site.url(f"/page/{word}-{i}"), rank=i)
            for i in range(2)
        ][:k]

    async def asearch(self, query: str, k: int = 10) -> list[SearchHit]:
        return self.search(query, k)


class CountingJudge(Judge):
    """Entails every passage; counts its calls; ``fail_on`` words make it fail."""

    def __init__(self, confidence: float = 0.8, fail_on: str = "") -> None:
        self.confidence = confidence
        self._fail_on = fail_on  # private: not a setting (a transient outage)
        self._delay_s = 0.0  # private: not a setting (a slow model)
        self.calls = 0
        self._lock = threading.Lock()

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        with self._lock:
            self.calls += 1
        time.sleep(self._delay_s)
        if self._fail_on and self._fail_on in passage:
            raise RuntimeError("judge unavailable")
        return Judgement(label=Label.ENTAILS, confidence=self.confidence, rationale="yes")


def chain(site: LocalSite, judge: Judge, cache: RunCache) -> tuple[FactCheckChain, PageSearch]:
    search = PageSearch(site)
    fetcher = PageFetcher(allow_private=True, cache=PageCache(store=cache))
    built = FactCheckChain(
        search=search, judge=judge, embeddings=Embed(), fetcher=fetcher, k=3, cache=cache
    )
    return built, search


def summary(results: list) -> list[tuple[str, str, float, int]]:  # type: ignore[type-arg]
    return [(r.statement, r.verdict.value, r.confidence, len(r.supporting)) for r in results]


def test_a_resumed_run_reuses_every_finished_check(local_site: LocalSite, tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite3"
    first_judge = CountingJudge()
    first, first_search = chain(local_site, first_judge, RunCache(path, reuse=False))
    before = first.batch(STATEMENTS)
    assert first_judge.calls > 0
    assert len(first_search.calls) == 3
    fetched = sum(local_site.requests.values())

    cache = RunCache(path, reuse=True)
    judge = CountingJudge()
    resumed, search = chain(local_site, judge, cache)
    after = resumed.batch(STATEMENTS)
    assert summary(after) == summary(before)
    assert [r.supporting for r in after] == [r.supporting for r in before]
    assert (judge.calls, search.calls, sum(local_site.requests.values())) == (0, [], fetched)
    assert cache.reused(ITEM_NAMESPACE) == 3


def test_a_fresh_run_recomputes_everything(local_site: LocalSite, tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite3"
    chain(local_site, CountingJudge(), RunCache(path))[0].batch(STATEMENTS)
    fetched = sum(local_site.requests.values())
    judge = CountingJudge()
    again, search = chain(local_site, judge, RunCache(path, reuse=False))
    asyncio.run(again.abatch(STATEMENTS))
    assert len(search.calls) == 3
    assert judge.calls > 0
    assert sum(local_site.requests.values()) == 2 * fetched


def test_changing_the_judge_redoes_the_judging_only(local_site: LocalSite, tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite3"
    chain(local_site, CountingJudge(confidence=0.8), RunCache(path))[0].batch(STATEMENTS)
    fetched = sum(local_site.requests.values())
    cache = RunCache(path)
    judge = CountingJudge(confidence=0.7)  # another setting: another judge
    resumed, search = chain(local_site, judge, cache)
    results = asyncio.run(resumed.abatch(STATEMENTS))
    assert [r.supporting[0].confidence for r in results] == [0.7, 0.7, 0.7]
    assert judge.calls == sum(r.counts.judged for r in results) > 0
    assert search.calls == []
    assert sum(local_site.requests.values()) == fetched
    assert cache.reused(ITEM_NAMESPACE) == 0
    assert cache.reused("search") == 3
    assert cache.reused("page") == 6


def test_a_check_with_a_failed_judgement_is_redone_keeping_the_others(
    local_site: LocalSite, tmp_path: Path
) -> None:
    path = tmp_path / "run.sqlite3"
    flaky = CountingJudge(fail_on="gamma-1")
    results = chain(local_site, flaky, RunCache(path))[0].batch(STATEMENTS)
    assert [r.counts.judge_errors for r in results] == [0, 0, 1]
    cache = RunCache(path)
    judge = CountingJudge()
    resumed, _ = chain(local_site, judge, cache)
    again = resumed.batch(STATEMENTS)
    assert [r.counts.judge_errors for r in again] == [0, 0, 0]
    assert cache.reused(ITEM_NAMESPACE) == 2
    assert judge.calls == 1  # only the judgement that failed; gamma-0's came from the cache


def test_the_judge_fingerprint_tells_settings_apart() -> None:
    assert judge_fingerprint(CountingJudge(0.8)) == judge_fingerprint(CountingJudge(0.8))
    assert judge_fingerprint(CountingJudge(0.8)) != judge_fingerprint(CountingJudge(0.7))
    cached = CachedJudge(CountingJudge(), RunCache(":memory:"))
    assert judge_fingerprint(cached) == judge_fingerprint(CountingJudge())


_KILLED_RUN = textwrap.dedent(
    """
    import sys
    from langchain_references.services.runcache import RunCache
    from tests.unit_tests.factcheck import test_resume as t

    class Site:
        def __init__(self, base): self.base = base
        def url(self, path): return self.base + path.lstrip("/")

    judge = t.CountingJudge()
    judge._delay_s = 0.05
    built, _ = t.chain(Site(sys.argv[2]), judge, RunCache(sys.argv[1], reuse=False))
    for i in range(1000):
        built.invoke(f"Topic item{i} is covered by its page")
        print(i, flush=True)
    """
)


def test_a_run_killed_by_sigkill_resumes_from_what_finished(
    local_site: LocalSite, tmp_path: Path
) -> None:
    path = tmp_path / "run.sqlite3"
    repo = Path(__file__).resolve().parents[3]
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(path), local_site.base_url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert process.stdout is not None
    finished = [int(process.stdout.readline()) for _ in range(3)]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    assert finished == [0, 1, 2]

    cache = RunCache(path)
    judge = CountingJudge()
    resumed, search = chain(local_site, judge, cache)
    statements = [f"Topic item{i} is covered by its page" for i in range(6)]
    results = resumed.batch(statements)
    assert all(r.checked for r in results)
    reused = cache.reused(ITEM_NAMESPACE)
    assert 3 <= reused <= 4  # the three reported, perhaps one finished after its report
    # Searched again: what did not finish, except perhaps the item in flight at the kill, whose
    # search results the run cache had already stored.
    left = statements[reused:]
    assert set(search.calls) in (set(left), set(left[1:]))
    assert len(search.calls) == len(set(search.calls))


def test_another_retrieval_mode_is_another_check(local_site: LocalSite) -> None:
    judge, search = CountingJudge(), PageSearch(local_site)
    keys = [
        FactCheckChain(search=search, judge=judge, embeddings=Embed(), retrieval=mode).item_key(
            "a claim"
        )
        for mode in ("dense", "bm25", "hybrid", "dense")
    ]
    assert len(set(keys[:3])) == 3
    assert keys[3] == keys[0]
