"""The fact-check chain end to end against local HTTP servers, with scripted judges."""

from __future__ import annotations

import asyncio
import hashlib
import html
import re
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, cast
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackManager, BaseCallbackHandler, CallbackManager
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig, RunnableGenerator, RunnableLambda

from langchain_references.demo.site import serve_pages
from langchain_references.factcheck import stages
from langchain_references.factcheck.chain import (
    PROGRESS_EVENT,
    FactCheckChain,
    FactCheckRequest,
    coerce_request,
    create_fact_check_chain,
)
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.passages import PassageSplitter
from langchain_references.factcheck.result import STAGES, FactCheckProgress, FactCheckResult
from langchain_references.factcheck.search import RecordedSearch
from langchain_references.factcheck.stages import FactCheckState
from langchain_references.factcheck.types import SearchHit
from langchain_references.factcheck.verdict import (
    RankedJudgement,
    Verdict,
    VerdictResult,
    WeightedVoteAggregator,
)
from langchain_references.judges import Judge, Judgement, Label
from tests.unit_tests.conftest import LocalSite
from tests.unit_tests.factcheck.test_relevance import passages_of

STATEMENT = "Arctic terns migrate from pole to pole every year"


class HashEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors; records the threads it ran on."""

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def _vector(self, text: str) -> list[float]:
        self.threads.add(threading.get_ident())
        vector = [0.0] * 256
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 256] += 1.0
        vector[0] += 0.01  # never the zero vector
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class KeywordJudge(Judge):
    """Labels a passage by the first keyword it contains; unknown otherwise."""

    def __init__(self, rules: Mapping[str, Label], *, confidence: float = 0.9) -> None:
        self.rules = dict(rules)
        self.confidence = confidence
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def decide(self, passage: str) -> Judgement:
        with self._lock:
            self.seen.append(passage)
        lowered = passage.lower()
        for word, label in self.rules.items():
            if word in lowered:
                return Judgement(
                    label=label, confidence=self.confidence, rationale=f"mentions {word}"
                )
        return Judgement(label=Label.UNKNOWN, confidence=0.6, rationale="off topic")

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return self.decide(passage)


class AsyncOnlyJudge(KeywordJudge):
    """Its sync path raises: only the async path can produce real judgements."""

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        raise RuntimeError("sync judge path used")

    async def _ajudge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return self.decide(passage)


class RecordingAggregator:
    """Records what it is given, then delegates to the weighted vote."""

    def __init__(self) -> None:
        self.calls: list[list[RankedJudgement]] = []

    def aggregate(self, judgements: Sequence[RankedJudgement]) -> VerdictResult:
        self.calls.append(list(judgements))
        return WeightedVoteAggregator().aggregate(judgements)


def page(title: str, *paragraphs: str) -> str:
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return (
        f"<!DOCTYPE html><html><head><title>{html.escape(title)}</title></head>"
        f"<body><article><h1>{html.escape(title)}</h1>{body}</article></body></html>"
    )


TERN_PAGES = {
    "/terns/support-a": page(
        "Tern facts",
        "Arctic terns migrate from the Arctic to the Antarctic and back every year, "
        "the supportive finding of every survey.",
    ),
    "/terns/support-b": page(
        "Bird migration",
        "Each year the arctic tern flies pole to pole, a supportive record of the longest "
        "migration of any animal.",
    ),
    "/terns/contra-c": page(
        "A contrarian blog",
        "Arctic terns do not migrate pole to pole every year, this contrary blog claims "
        "without evidence.",
    ),
}
RULES = {"supportive": Label.ENTAILS, "contrary": Label.CONTRADICTS}


def recording(base_url: str, paths: Sequence[str], query: str = STATEMENT) -> RecordedSearch:
    return RecordedSearch(
        {
            query: [
                {"title": f"hit {i}", "snippet": "", "link": base_url + path.lstrip("/")}
                for i, path in enumerate(paths)
            ]
        }
    )


def make_chain(search: Any, judge: Any, **kwargs: Any) -> FactCheckChain:
    kwargs.setdefault("embeddings", HashEmbeddings())
    kwargs.setdefault("fetcher", PageFetcher(allow_private=True, timeout_s=5))
    kwargs.setdefault("splitter", PassageSplitter(min_chars=20))
    return create_fact_check_chain(search=search, judge=judge, **kwargs)


@pytest.fixture
def tern_site() -> Any:
    with serve_pages(TERN_PAGES) as base_url:
        yield base_url


async def test_verdict_and_evidence_come_from_the_judged_pages(tern_site: str) -> None:
    paths = list(TERN_PAGES)
    chain = make_chain(recording(tern_site, paths), KeywordJudge(RULES), weight_by="search")

    result = await chain.ainvoke(STATEMENT)

    assert result.statement == STATEMENT
    assert result.verdict is Verdict.SUPPORTED
    assert result.score > 0
    urls = {e.url: e for e in result.evidence}
    assert sorted(e.url for e in result.supporting) == [
        tern_site + "terns/support-a",
        tern_site + "terns/support-b",
    ]
    assert [e.url for e in result.contradicting] == [tern_site + "terns/contra-c"]
    for rank, path in enumerate(paths):
        evidence = urls[tern_site + path.lstrip("/")]
        assert evidence.rank == rank  # the search rank travels with the source
        assert evidence.title == TERN_PAGES[path].split("<title>")[1].split("</title>")[0]
        assert evidence.text in html.unescape(TERN_PAGES[path])
        assert evidence.rationale.startswith("mentions ")
        assert -1.0 <= evidence.similarity <= 1.0
    assert result.counts.hits == result.counts.fetched == result.counts.extracted == 3
    assert result.counts.supporting == 2
    assert result.counts.contradicting == 1
    assert result.failed_sources == []


async def test_contradicting_majority_gives_refuted(tern_site: str) -> None:
    rules = {"supportive": Label.CONTRADICTS, "contrary": Label.CONTRADICTS}
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), KeywordJudge(rules))

    result = await chain.ainvoke({"statement": STATEMENT})

    assert result.verdict is Verdict.REFUTED
    assert result.score < 0
    assert result.supporting == []
    assert len(result.contradicting) == 3


async def test_dead_urls_timeouts_and_errors_are_recorded_and_the_run_goes_on(
    local_site: LocalSite, dead_local_url: str
) -> None:
    links = [
        local_site.url("/page/supportive-terns"),
        dead_local_url,
        local_site.url("/slow?s=5"),
        local_site.url("/404"),
        local_site.url("/pdf"),
    ]
    search = RecordedSearch(
        {STATEMENT: [{"title": f"t{i}", "link": link} for i, link in enumerate(links)]}
    )
    fetcher = PageFetcher(allow_private=True, timeout_s=0.5)
    chain = make_chain(search, KeywordJudge(RULES), fetcher=fetcher)

    result = await chain.ainvoke(STATEMENT)

    failures = {f.url: f for f in result.failed_sources}
    assert set(failures) == set(links[1:])
    assert all(f.stage == "fetch" for f in failures.values())
    assert failures[dead_local_url].reason.startswith("connection failed")
    assert failures[dead_local_url].rank == 1
    assert failures[links[2]].reason == "timeout after 0.5s"
    assert failures[links[3]].reason == "HTTP 404"
    assert "application/pdf" in failures[links[4]].reason
    assert result.verdict is Verdict.SUPPORTED
    assert {e.url for e in result.supporting} == {links[0]}
    assert result.counts.hits == 5
    assert result.counts.fetched == 1


async def test_a_failed_search_is_recorded_and_nothing_is_judged() -> None:
    class BrokenSearch(RecordedSearch):
        def _search(self, query: str, k: int) -> list[SearchHit]:
            raise ConnectionError("search API down")

    judge = KeywordJudge(RULES)
    result = await make_chain(BrokenSearch({}), judge).ainvoke(STATEMENT)

    assert (result.verdict, result.confidence) == (Verdict.ERROR, 0.0)
    assert result.error is not None
    assert result.error.startswith("search failed: ")
    assert "search API down" in result.error
    assert [(f.stage, f.query) for f in result.failed_sources] == [("search", STATEMENT)]
    assert "search API down" in result.failed_sources[0].reason
    assert result.counts.hits == 0
    assert judge.seen == []
    assert set(result.timings) == set(STAGES)


async def test_judge_failures_become_unknown_with_the_error_recorded(tern_site: str) -> None:
    class FlakyJudge(KeywordJudge):
        def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
            if "contrary" in passage:
                raise TimeoutError("model timed out")
            return self.decide(passage)

    chain = make_chain(recording(tern_site, list(TERN_PAGES)), FlakyJudge(RULES))

    result = await chain.ainvoke(STATEMENT)

    assert result.contradicting == []
    assert len(result.supporting) == 2
    assert result.counts.judge_errors == 1
    assert result.neutral_count == 0
    [failure] = result.failed_sources
    assert failure.stage == "judge"
    assert failure.url == tern_site + "terns/contra-c"
    assert failure.rank == 2
    assert "TimeoutError: model timed out" in failure.reason
    assert result.verdict is Verdict.SUPPORTED


async def test_any_runnable_can_judge_and_its_exceptions_are_recorded(tern_site: str) -> None:
    def judge(item: dict[str, str]) -> Judgement:
        if "contrary" in item["passage"]:
            raise ValueError("cannot parse the reply")
        if "supportive" in item["passage"]:
            return Judgement(label=Label.ENTAILS, confidence=0.8)
        return "not a judgement"  # type: ignore[return-value]

    chain = make_chain(recording(tern_site, list(TERN_PAGES)), RunnableLambda(judge))

    result = await chain.ainvoke(STATEMENT)

    assert len(result.supporting) == 2
    reasons = [f.reason for f in result.failed_sources]
    assert reasons == ["ValueError: cannot parse the reply"]


class BrokenBatchJudge(KeywordJudge):
    """Its batch calls fail as a whole (or return the wrong number of judgements)."""

    def __init__(self, *, short: bool = False) -> None:
        super().__init__(RULES)
        self.short = short

    def batch(self, inputs: list[Any], *args: Any, **kwargs: Any) -> list[Judgement]:
        if self.short:
            return [self.decide("supportive")]
        raise ConnectionError("judge service down")

    async def abatch(self, inputs: list[Any], *args: Any, **kwargs: Any) -> list[Judgement]:
        return self.batch(inputs)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("short", "reason"),
    [
        (False, "ConnectionError: judge service down"),
        (True, "ValueError: the judge returned 1 results for 3 passages"),
    ],
)
async def test_a_judge_failing_on_the_whole_batch_fails_the_passages_not_the_run(
    tern_site: str, mode: str, short: bool, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), BrokenBatchJudge(short=short))

    with caplog.at_level("WARNING", logger=stages.__name__):
        if mode == "sync":
            result = chain.invoke(STATEMENT)
        else:
            result = await chain.ainvoke(STATEMENT)

    assert (result.verdict, result.confidence) == (Verdict.ERROR, 0.0)
    assert result.error == f"the judge failed on all 3 passages: {reason} (and 2 more)"
    assert result.counts.judge_errors == result.counts.judged == 3
    assert [(f.stage, f.reason) for f in result.failed_sources] == [("judge", reason)] * 3
    assert list(result.timings) == list(STAGES)
    logged = [r.getMessage() for r in caplog.records if r.name == stages.__name__]
    whole_batch = f"The judge failed on the whole batch: {reason}"
    assert (whole_batch in logged) is not short  # a short answer fails in finish, not recover


async def test_async_path_is_native_and_offloads_cpu_work(tern_site: str) -> None:
    embeddings = HashEmbeddings()
    judge = AsyncOnlyJudge(RULES)
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), judge, embeddings=embeddings)
    loop_thread = threading.get_ident()

    result = await chain.ainvoke(STATEMENT)

    assert asyncio.get_running_loop() is not None
    assert result.counts.judge_errors == 0  # the sync judge path, which raises, was not used
    assert len(result.supporting) == 2
    assert embeddings.threads  # embedding ran...
    assert loop_thread not in embeddings.threads  # ...off the event loop's thread


def test_sync_invoke_uses_the_sync_judge_path(tern_site: str) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), AsyncOnlyJudge(RULES))

    result = chain.invoke(STATEMENT)

    assert result.counts.judge_errors == 3
    assert {f.reason for f in result.failed_sources} == {"RuntimeError: sync judge path used"}
    assert result.verdict is Verdict.ERROR  # no judgement succeeded: nothing was checked


async def test_sync_invoke_works_inside_a_running_event_loop(tern_site: str) -> None:
    chain = make_chain(
        recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES), weight_by="search"
    )

    result = chain.invoke(STATEMENT)  # e.g. a notebook cell: runs on a worker thread's loop

    assert result.verdict is Verdict.SUPPORTED


class RunRecorder(BaseCallbackHandler):
    """Records the chain runs (name, id, parent) and the custom events (name, data, run)."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, UUID, UUID | None]] = []
        self.custom: list[tuple[str, Any, UUID]] = []

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self.starts.append((kwargs.get("name") or "", run_id, parent_run_id))

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.custom.append((name, data, run_id))

    def names(self) -> dict[UUID, str]:
        return {run_id: name for name, run_id, _ in self.starts}

    def children(self, parent: UUID) -> list[tuple[str, UUID]]:
        return [(name, run_id) for name, run_id, p in self.starts if p == parent]


EXPECTED_PROGRESS = [(stage, done) for stage in STAGES for done in (False, True)]


def check_progress(events: Sequence[Any], result: FactCheckResult) -> None:
    """One start and one end event per stage, in order, consistent with the result."""
    assert all(isinstance(e, FactCheckProgress) for e in events)
    assert [(e.stage, e.done) for e in events] == EXPECTED_PROGRESS
    assert all(e.statement == result.statement for e in events)
    done = {e.stage: e for e in events if e.done}
    assert done["search"].counts["hits"] == result.counts.hits == 3
    assert done["fetch"].counts == {"pages": 3, "failed": 0}
    assert done["fetch"].detail == "3 pages, 0 failed"
    assert done["extract"].detail == "3 pages with text, 0 failed"
    assert done["relevance"].counts["kept"] == result.counts.judged
    assert done["judge"].counts["supporting"] == len(result.supporting)
    assert result.timings == {stage: done[stage].elapsed_s for stage in STAGES}
    starts = [e for e in events if not e.done]
    assert starts[0].detail == "searching recorded"
    assert all(e.elapsed_s == 0 and e.counts == {} for e in starts)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_progress_events_reach_callback_handlers_on_both_paths(
    tern_site: str, mode: str
) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES))
    recorder = RunRecorder()
    config: RunnableConfig = {"callbacks": [recorder]}

    if mode == "sync":
        result = chain.invoke(STATEMENT, config)
    else:
        result = await chain.ainvoke(STATEMENT, config)

    assert {name for name, _, _ in recorder.custom} == {PROGRESS_EVENT}
    check_progress([data for _, data, _ in recorder.custom], result)
    names = recorder.names()
    # each event is dispatched under the run of its own stage
    assert all(names[run_id] == data.stage for _, data, run_id in recorder.custom)


async def test_astream_events_show_progress_and_the_judge_as_child_runs(tern_site: str) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES))

    events = [e async for e in chain.astream_events(STATEMENT, version="v2")]

    root = events[0]
    assert root["event"] == "on_chain_start"
    assert root["name"] == "fact_check"
    judge_starts = [
        e for e in events if e["event"] == "on_chain_start" and e["name"] == "KeywordJudge"
    ]
    assert len(judge_starts) == 3
    assert all(root["run_id"] in e["parent_ids"] for e in judge_starts)
    progress = [e for e in events if e["event"] == "on_custom_event"]
    assert {e["name"] for e in progress} == {PROGRESS_EVENT}
    assert all(root["run_id"] in e["parent_ids"] for e in progress)
    end = events[-1]
    assert end["event"] == "on_chain_end"
    assert end["run_id"] == root["run_id"]
    result = end["data"]["output"]
    assert isinstance(result, FactCheckResult)
    check_progress([e["data"] for e in progress], result)
    streamed = [e["data"]["chunk"] for e in events if e["event"] == "on_chain_stream"]
    assert all(isinstance(c, (FactCheckResult, FactCheckState)) for c in streamed)
    root_chunks = [
        e["data"]["chunk"]
        for e in events
        if e["event"] == "on_chain_stream" and e["run_id"] == root["run_id"]
    ]
    assert root_chunks == [result]


async def test_astream_events_stop_cleanly_when_the_consumer_leaves_early(
    tern_site: str,
) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES))

    stream = cast("AsyncGenerator[Any, None]", chain.astream_events(STATEMENT, version="v2"))
    async for event in stream:
        if event["event"] == "on_custom_event":
            first = event["data"]
            break
    await stream.aclose()

    assert isinstance(first, FactCheckProgress)
    assert (first.stage, first.done) == ("search", False)


async def test_stream_and_astream_yield_the_same_single_result(tern_site: str) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES))

    synced = list(chain.stream(STATEMENT))
    streamed = [item async for item in chain.astream(STATEMENT)]

    assert [type(item) for item in synced] == [type(item) for item in streamed]
    assert [type(item) for item in streamed] == [FactCheckResult]
    timing = {"timings", "total_s"}
    assert synced[0].model_dump(exclude=timing) == streamed[0].model_dump(exclude=timing)
    assert list(synced[0].timings) == list(streamed[0].timings) == list(STAGES)


async def test_a_piped_runnable_receives_only_the_result(tern_site: str) -> None:
    chain = make_chain(
        recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES), weight_by="search"
    )
    received: list[Any] = []

    def verdict(result: Any) -> str:
        received.append(result)
        return str(result.verdict.value)

    def chunks(items: Iterator[Any]) -> Iterator[Any]:
        for item in items:
            received.append(item)
            yield item

    async def achunks(items: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in items:
            received.append(item)
            yield item

    piped = chain | RunnableLambda(verdict)
    assert piped.invoke(STATEMENT) == "supported"
    assert await piped.ainvoke(STATEMENT) == "supported"
    assert list(piped.stream(STATEMENT)) == ["supported"]
    assert [v async for v in piped.astream(STATEMENT)] == ["supported"]
    passthrough = chain | RunnableGenerator(chunks, achunks)
    assert [type(r) for r in passthrough.stream(STATEMENT)] == [FactCheckResult]
    assert [type(r) async for r in passthrough.astream(STATEMENT)] == [FactCheckResult]

    assert len(received) == 6
    assert all(isinstance(item, FactCheckResult) for item in received)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_callbacks_see_the_stages_and_the_judge_runs(tern_site: str, mode: str) -> None:
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES))
    recorder = RunRecorder()
    config: RunnableConfig = {"callbacks": [recorder], "tags": ["t1"]}

    if mode == "sync":
        chain.invoke(STATEMENT, config)
    else:
        await chain.ainvoke(STATEMENT, config)

    [(_, root_id, root_parent)] = [s for s in recorder.starts if s[0] == "fact_check"]
    assert root_parent is None
    steps = recorder.children(root_id)
    assert [name for name, _ in steps] == ["prepare", *STAGES, "result"]
    judge_stage = dict(steps)["judge"]
    judges = [s for s in recorder.starts if s[0] == "KeywordJudge"]
    assert len(judges) == 3
    assert all(parent == judge_stage for _, _, parent in judges)


class InFlightJudge(KeywordJudge):
    """Counts the judge calls in flight (sync calls on threads, async ones on the loop)."""

    def __init__(self) -> None:
        super().__init__(RULES)
        self.in_flight = 0
        self.peak = 0

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        self._enter()
        try:
            time.sleep(0.2)
            return self.decide(passage)
        finally:
            self._leave()

    async def _ajudge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        self._enter()
        try:
            await asyncio.sleep(0.05)
            return self.decide(passage)
        finally:
            self._leave()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("default", "caller", "peak"),
    [(1, None, 1), (1, 3, 3), (3, 1, 1), (3, None, 3)],
    ids=["default-only", "caller-raises", "caller-lowers", "default-3"],
)
async def test_the_callers_max_concurrency_wins_over_the_chains_default(
    tern_site: str, mode: str, default: int, caller: int | None, peak: int
) -> None:
    judge = InFlightJudge()
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), judge, max_concurrency=default)
    config: RunnableConfig = {} if caller is None else {"max_concurrency": caller}

    if mode == "sync":
        result = chain.invoke(STATEMENT, config)
    else:
        result = await chain.ainvoke(STATEMENT, config)

    assert len(judge.seen) == result.counts.judged == 3
    assert judge.peak == peak


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_each_driver_calls_only_the_apis_of_its_own_kind(
    tern_site: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"{name} called on the {mode} path")

        return call

    fetcher = PageFetcher(allow_private=True, timeout_s=5)
    if mode == "sync":
        apis = ["asearch_report", "aextract_all", "aselect_relevant"]
    else:
        apis = ["search_report", "extract_all", "select_relevant"]
        monkeypatch.setattr(fetcher, "fetch_all", forbidden("fetch_all"))
    for name in apis:
        monkeypatch.setattr(stages, name, forbidden(name))
    judge = AsyncOnlyJudge(RULES) if mode == "async" else KeywordJudge(RULES)
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), judge, fetcher=fetcher)

    if mode == "sync":
        result = chain.invoke(STATEMENT)
    else:
        result = await chain.ainvoke(STATEMENT)

    assert result.failed_sources == []
    assert result.counts.judge_errors == 0
    assert len(result.supporting) == 2


def test_batch_checks_statements_in_order(tern_site: str) -> None:
    other = "Puffins nest in burrows"
    search = RecordedSearch(
        {
            STATEMENT: [{"title": "a", "link": tern_site + "terns/support-a"}],
            other: [{"title": "c", "link": tern_site + "terns/contra-c"}],
        }
    )
    chain = make_chain(search, KeywordJudge(RULES))

    results = chain.batch([STATEMENT, {"statement": other}])

    assert [r.statement for r in results] == [STATEMENT, other]
    assert [r.verdict for r in results] == [Verdict.SUPPORTED, Verdict.REFUTED]


async def test_abatch_checks_statements_concurrently_in_order(tern_site: str) -> None:
    other = "Puffins nest in burrows"
    search = RecordedSearch(
        {
            STATEMENT: [{"title": "a", "link": tern_site + "terns/support-a"}],
            other: [{"title": "c", "link": tern_site + "terns/contra-c"}],
        }
    )
    chain = make_chain(search, AsyncOnlyJudge(RULES))

    results = await chain.abatch([other, STATEMENT], {"max_concurrency": 2})

    assert [r.statement for r in results] == [other, STATEMENT]
    assert [r.verdict for r in results] == [Verdict.REFUTED, Verdict.SUPPORTED]


async def test_the_query_key_replaces_the_statement_as_search_query(tern_site: str) -> None:
    search = recording(tern_site, ["/terns/support-a"], query="arctic tern migration")
    chain = make_chain(search, KeywordJudge(RULES))

    with_query = await chain.ainvoke({"statement": STATEMENT, "query": "arctic tern migration"})
    without = await chain.ainvoke(STATEMENT)

    assert with_query.counts.hits == 1
    assert with_query.verdict is Verdict.SUPPORTED
    assert without.counts.hits == 0


async def test_the_aggregator_gets_relevance_positions_by_default(tern_site: str) -> None:
    aggregator = RecordingAggregator()
    chain = make_chain(
        recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES), aggregator=aggregator
    )

    result = await chain.ainvoke(STATEMENT)

    [call] = aggregator.calls
    assert [rank for _, rank, _ in call] == list(range(3))
    similarities = [similarity for _, _, similarity in call if similarity is not None]
    assert len(similarities) == 3
    assert similarities == sorted(similarities, reverse=True)
    by_position = {e.relevance_rank: e for e in result.evidence}
    assert [j.label for j, _, _ in call] == [by_position[i].label for i in range(3)]


async def test_k_bounds_the_judged_passages(tern_site: str) -> None:
    judge = KeywordJudge(RULES)
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), judge, k=2)

    result = await chain.ainvoke(STATEMENT)

    assert result.counts.passages == 3
    assert result.counts.judged == len(judge.seen) == 2


async def test_an_existing_chroma_store_is_used_and_left_as_it_was(tern_site: str) -> None:
    import uuid

    from langchain_chroma import Chroma

    from langchain_references.factcheck.relevance import chroma_client

    store = Chroma(
        collection_name=f"test-{uuid.uuid4().hex}",
        embedding_function=HashEmbeddings(),
        client=chroma_client(),
    )
    store.add_texts(["an unrelated document about supportive terns"], ids=["own"])
    try:
        chain = make_chain(
            recording(tern_site, list(TERN_PAGES)),
            KeywordJudge(RULES),
            embeddings=None,
            vector_store=store,
        )
        result = await chain.ainvoke(STATEMENT)
        assert result.counts.judged == 3
        assert tern_site in result.supporting[0].url
        assert store.get()["ids"] == ["own"]
    finally:
        store.delete_collection()


def test_result_json_round_trips(tern_site: str) -> None:
    chain = make_chain(
        recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES), weight_by="search"
    )

    result = chain.invoke(STATEMENT)

    assert FactCheckResult.model_validate_json(result.to_json()) == result
    assert '"verdict":"supported"' in result.to_json()


def test_recorded_veriscore_search_over_pages_served_under_the_recorded_titles(
    factcheck_data_dir: Any,
) -> None:
    import json

    record = json.loads((factcheck_data_dir / "veriscore_data_sample.jsonl").read_text())
    claim, hits = next(iter(record["claim_search_results"].items()))
    pages = {
        f"/r/{i}": page(hit["title"], f"{hit['snippet']} (search result {i})")
        for i, hit in enumerate(hits)
    }
    with serve_pages(pages) as base_url:
        local = [{**hit, "link": f"{base_url}r/{i}"} for i, hit in enumerate(hits)]
        chain = make_chain(
            RecordedSearch({claim: local}),
            KeywordJudge({"hormon": Label.ENTAILS, "cycle": Label.ENTAILS}),
            max_results=len(hits),
        )
        result = chain.invoke(claim)

    assert result.counts.hits == result.counts.fetched == len(hits)
    assert result.failed_sources == []
    assert result.verdict is Verdict.SUPPORTED
    for evidence in result.supporting:
        index = int(evidence.url.rsplit("/", 1)[1])
        assert evidence.rank == index
        assert evidence.title == " ".join(hits[index]["title"].split())


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("", ValueError),
        ("   ", ValueError),
        (42, TypeError),
        ({"statement": 3}, ValueError),
        ({"text": "no statement key"}, ValueError),
        ({"statement": "ok", "query": " "}, ValueError),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        coerce_request(value)


def test_good_input_is_normalized() -> None:
    assert coerce_request("  a   b ") == FactCheckRequest(statement="a b")
    assert coerce_request({"statement": "a", "extra": 1}).search_query == "a"
    assert coerce_request({"statement": "a", "query": "q"}).search_query == "q"


def test_bad_input_raises_from_invoke_without_searching() -> None:
    class CountingSearch(RecordedSearch):
        calls = 0

        def _search(self, query: str, k: int) -> list[SearchHit]:
            CountingSearch.calls += 1
            return []

    chain = make_chain(CountingSearch({}), KeywordJudge(RULES))
    with pytest.raises(ValueError, match="blank"):
        chain.invoke(" ")
    assert CountingSearch.calls == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 0},
        {"max_results": 0},
        {"max_concurrency": 0},
        {"k": True},
        {"weight_by": "title"},
    ],
)
def test_bad_numbers_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        make_chain(RecordedSearch({}), KeywordJudge(RULES), **kwargs)


def test_bad_components_are_refused() -> None:
    with pytest.raises(TypeError, match="search"):
        make_chain(object(), KeywordJudge(RULES))
    with pytest.raises(TypeError, match="judge"):
        make_chain(RecordedSearch({}), lambda x: x)
    with pytest.raises(TypeError, match="aggregator"):
        make_chain(RecordedSearch({}), KeywordJudge(RULES), aggregator=object())
    with pytest.raises(ValueError, match="not both"):
        make_chain(RecordedSearch({}), KeywordJudge(RULES), vector_store=object())


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"search": None},
            ValueError,
            "give a search provider, an index, or both: there is no evidence",
        ),
        ({"index": object()}, TypeError, "index must have name, find() and afind(), not object"),
        (
            {"search": object()},
            TypeError,
            "search must have search() and asearch() methods, not object",
        ),
        ({"judge": None}, TypeError, "judge must be a Runnable, not NoneType"),
        ({"embeddings": "e"}, TypeError, "embeddings must be an Embeddings, not str"),
        (
            {"vector_store": object()},
            ValueError,
            "pass embeddings or vector_store, not both: the store embeds itself",
        ),
        ({"fetcher": "f"}, TypeError, "fetcher must be a PageFetcher, not str"),
        ({"splitter": "s"}, TypeError, "splitter must be a PassageSplitter, not str"),
        ({"aggregator": "a"}, TypeError, "aggregator must have an aggregate() method, not str"),
        ({"k": 0}, ValueError, "k must be an integer >= 1, got 0"),
        ({"max_results": 1.5}, ValueError, "max_results must be an integer >= 1, got 1.5"),
        (
            {"max_concurrency": False},
            ValueError,
            "max_concurrency must be an integer >= 1, got False",
        ),
        (
            {"weight_by": "title"},
            ValueError,
            "weight_by must be 'relevance' or 'search', got 'title'",
        ),
        ({"cache": "c"}, TypeError, "cache must be a RunCache, not str"),
        ({"limiter": "l"}, TypeError, "limiter must be a RateLimiter, not str"),
    ],
)
def test_each_bad_argument_has_its_message(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {"search": RecordedSearch({}), "judge": KeywordJudge(RULES)}
    arguments.update(kwargs)
    with pytest.raises(error) as raised:
        make_chain(**arguments)
    assert str(raised.value) == message


def test_the_first_bad_argument_in_the_checking_order_is_reported() -> None:
    # every argument below is wrong: the errors come in the order of the parameters above
    bad: dict[str, Any] = {
        "search": object(),
        "judge": None,
        "embeddings": "e",
        "fetcher": "f",
        "splitter": "s",
        "aggregator": "a",
        "k": 0,
        "max_results": 0,
        "max_concurrency": 0,
        "weight_by": "title",
        "cache": "c",
        "limiter": "l",
    }
    seen = []
    while bad:
        with pytest.raises((TypeError, ValueError)) as raised:
            create_fact_check_chain(
                **{"search": RecordedSearch({}), "judge": KeywordJudge(RULES), **bad}
            )
        seen.append(str(raised.value).split()[0])
        bad.pop(seen[-1])
    assert seen == [
        "search",
        "judge",
        "embeddings",
        "fetcher",
        "splitter",
        "aggregator",
        "k",
        "max_results",
        "max_concurrency",
        "weight_by",
        "cache",
        "limiter",
    ]


def test_schema_names_the_input_and_output() -> None:
    chain = make_chain(RecordedSearch({}), KeywordJudge(RULES))
    assert chain.get_name() == "fact_check"
    assert chain.get_input_schema() is FactCheckRequest
    assert set(chain.get_input_jsonschema()["properties"]) == {"statement", "query"}
    assert chain.get_input_jsonschema()["required"] == ["statement"]
    assert "verdict" in chain.get_output_jsonschema()["properties"]


def test_the_chain_is_a_composition_of_stage_runnables() -> None:
    chain = make_chain(RecordedSearch({}), KeywordJudge(RULES), name="my_check")

    nodes = [node.name for node in chain.get_graph().nodes.values()]

    assert [s.stage for s in chain.stages] == list(STAGES)
    for name in ("prepare", *STAGES, "result"):
        assert name in nodes
    assert chain.get_name() == "my_check"


def test_a_custom_name_names_the_root_run(tern_site: str) -> None:
    chain = make_chain(recording(tern_site, ["/terns/support-a"]), KeywordJudge(RULES), name="x")
    recorder = RunRecorder()

    chain.invoke(STATEMENT, {"callbacks": [recorder]})

    assert [name for name, _, parent in recorder.starts if parent is None] == ["x"]


def judge_state(*texts: str) -> FactCheckState:
    """A state ready for the judge stage: one selected passage per text, in order."""
    selected = tuple((passage, 0.5) for passage in passages_of(list(texts)))
    return FactCheckState.begin(STATEMENT, STATEMENT).advance(selected=selected)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_stage_driven_directly_reports_to_the_run_of_its_config(mode: str) -> None:
    """Called with a caller's run config (no runnable around it, nothing in the context), a
    stage sends both progress events to that run and its work runs the judge under it."""
    recorder = RunRecorder()
    judge = RunnableLambda(
        lambda item: Judgement(label=Label.ENTAILS, confidence=0.8), name="judge_fn"
    )
    stage = stages.JudgeStage(judge, max_concurrency=2)
    state = judge_state("first passage", "second passage")

    if mode == "sync":
        run = CallbackManager.configure([recorder]).on_chain_start(None, {}, name="caller")
        out = stage.invoke(state, {"callbacks": run.get_child()})
    else:
        arun = await AsyncCallbackManager.configure([recorder]).on_chain_start(
            None, {}, name="caller"
        )
        out = await stage.ainvoke(state, {"callbacks": arun.get_child()})
    run_id = run.run_id if mode == "sync" else arun.run_id

    progress = [
        (name, data.stage, data.done, data.detail, rid) for name, data, rid in recorder.custom
    ]
    assert progress == [
        (PROGRESS_EVENT, "judge", False, "judging 2 passages", run_id),
        (
            PROGRESS_EVENT,
            "judge",
            True,
            "2 supporting, 0 contradicting, 0 neutral, 0 failed",
            run_id,
        ),
    ]
    # the judge's runs are children of the caller's run: the work got the config
    assert [name for name, _ in recorder.children(run_id)] == ["judge_fn", "judge_fn"]
    assert [j.label for j in out.judgements] == [Label.ENTAILS, Label.ENTAILS]


def test_a_judge_output_that_is_not_a_judgement_fails_its_passage_by_type() -> None:
    def judge(item: dict[str, str]) -> Any:
        if item["passage"] == "a number":
            return 7
        if item["passage"] == "an error":
            raise ValueError("bad reply")
        return Judgement(label=Label.ENTAILS, confidence=0.8)

    state = (
        stages.JudgeStage(RunnableLambda(judge), max_concurrency=2)
        .as_runnable()
        .invoke(judge_state("a number", "fine", "an error"))
    )

    assert [(j.label, j.confidence, j.error) for j in state.judgements] == [
        (Label.UNKNOWN, 0.0, "the judge returned int, not a Judgement"),
        (Label.ENTAILS, 0.8, None),
        (Label.UNKNOWN, 0.0, "ValueError: bad reply"),
    ]
