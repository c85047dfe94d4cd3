"""A running service follows the builds that switch its index, and never writes to the index.

Design under test (server/live.py): the service searches the generation it opened; at most
every ``check_seconds`` a request reads the pointer and moves to a newer complete generation;
a search whose generation was deleted re-reads the pointer and is retried once on the current
generation. The only failures allowed are: Chroma failing, the index having no complete
generation (503 naming the problem), or two more builds finishing during one request.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from langchain_references.server.app import create_app
from langchain_references.server.index import EvidenceIndex, EvidenceRecord, parse_evidence_record
from langchain_references.server.live import LiveIndex
from langchain_references.server.services import Services
from langchain_references.server.settings import ServerSettings
from langchain_references.services.retrieval import Retrieval
from tests.unit_tests.server._build_fakes import WordHashEmbeddings
from tests.unit_tests.server.conftest import ScriptedJudge

NAME = "live-idx"
QUERY = {"claim": "glaciers melt", "top_k": 3}
PATH = "/api/abstract/evidence?re_rank=false"


def _records(tag: str, filler: int = 0) -> list[EvidenceRecord]:
    """Three records titled ``tag`` about glaciers, then ``filler`` records less about them.

    Each filler shares one word with the query ("glaciers") among 1 to 40 others ("far"), so
    that its cosine to the query is graded (0.02 to 0.32) and below the records' (0.63). With
    fillers sharing no word with it, every filler sat at cosine 0: on that plateau Chroma's
    HNSW search (approximate) sometimes stopped before it reached the records and answered
    three fillers, as often from the builder's index as from a reopened one (1 build in 10
    with 1,500 fillers, about 1 in 50 with 200), which failed the switching tests below.
    """
    texts = [f"Record {tag} {i}: glaciers melt." for i in range(3)]
    texts += [f"Filler {tag} {i}: glaciers" + " far" * (1 + i % 40) + "." for i in range(filler)]
    return [
        parse_evidence_record({"id": f"{tag}-{i}", "title": tag, "text": text})
        for i, text in enumerate(texts)
    ]


def _texts(tag: str) -> list[str]:
    return sorted(f"Record {tag} {i}: glaciers melt." for i in range(3))


def _build(directory: Path, tag: str, filler: int = 0) -> str:
    """Build a generation of the index from the records of ``tag``; its name."""
    return EvidenceIndex.build(
        NAME, _records(tag, filler), persist_dir=directory, embeddings=WordHashEmbeddings()
    ).generation


def _open(directory: Path, retrieval: Retrieval = "hybrid") -> EvidenceIndex:
    return EvidenceIndex.open(
        NAME, persist_dir=directory, embeddings=WordHashEmbeddings(), retrieval=retrieval
    )


def _client(directory: Path, index: EvidenceIndex | LiveIndex, **limits: int) -> TestClient:
    settings = ServerSettings(index_name=NAME, persist_dir=directory, **limits)
    services = Services(settings=settings, index=index, judge=ScriptedJudge())
    return TestClient(create_app(settings, services=services), base_url="http://localhost")


def _answer(client: TestClient) -> tuple[int, Any]:
    """The status of one evidence request and the sorted texts it returned (or its error)."""
    response = client.post(PATH, json=QUERY)
    body = response.json()
    if response.status_code != 200:
        return response.status_code, body
    return 200, sorted(item["text"] for item in body)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("retrieval", ["dense", "bm25", "hybrid"])
def test_after_two_rebuilds_the_service_answers_from_the_newest_generation(
    tmp_path: Path, retrieval: Retrieval, caplog: pytest.LogCaptureFixture
) -> None:
    _build(tmp_path, "alpha")
    client = _client(tmp_path, _open(tmp_path, retrieval))  # create_app wraps it: 5 s checks
    assert _answer(client) == (200, _texts("alpha"))

    assert _build(tmp_path, "beta") == f"{NAME}__g2"
    # within the check interval the service still answers from its generation (kept)
    assert _answer(client) == (200, _texts("alpha"))

    assert _build(tmp_path, "gamma") == f"{NAME}__g3"  # deletes alpha's generation
    with caplog.at_level("INFO", logger="langchain_references.server.live"):
        assert _answer(client) == (200, _texts("gamma"))  # retried on the new one, no 503
        assert _answer(client) == (200, _texts("gamma"))
    switches = [r.getMessage() for r in caplog.records if "switched" in r.getMessage()]
    assert switches == [f"index {NAME!r}: switched from generation '{NAME}__g1' to '{NAME}__g3'"]


def test_the_interval_check_picks_up_one_rebuild(tmp_path: Path) -> None:
    _build(tmp_path, "alpha")
    clock = _Clock()
    live = LiveIndex(_open(tmp_path), check_seconds=10, clock=clock)
    client = _client(tmp_path, live)
    _build(tmp_path, "beta")
    clock.now = 9.9
    assert _answer(client) == (200, _texts("alpha"))  # not due: no pointer read
    clock.now = 10.0
    assert _answer(client) == (200, _texts("beta"))
    assert live.generation == f"{NAME}__g2"
    assert live.count() == 6  # 3 abstracts, 3 sentences


def test_the_index_attributes_are_the_current_generations(tmp_path: Path) -> None:
    _build(tmp_path, "alpha")
    clock = _Clock()
    opened = _open(tmp_path, "bm25")
    live = LiveIndex(opened, check_seconds=10, clock=clock)
    _build(tmp_path, "beta")
    clock.now = 10.0
    live.count()  # due: moves to the new generation
    current = live.current
    assert current is not opened
    assert (live.name, live.location, live.generation) == (
        NAME,
        current.location,
        f"{NAME}__g2",
    )
    assert (live.embeddings, live.retrieval) == (current.embeddings, "bm25")
    with pytest.raises(AttributeError, match="'generation'"):
        live.generation = "other"  # type: ignore[assignment]
    assert live.generation == f"{NAME}__g2"


def _over_budget(directory: Path) -> tuple[LiveIndex, _Clock, TestClient, Callable[[], Any]]:
    """A live index on ``alpha`` (3 abstracts), its clock, a client with ``max_judged=5`` and
    a verify request sure to exceed it: a call sends it and gives its status and count."""
    _build(directory, "alpha")
    clock = _Clock()
    live = LiveIndex(_open(directory), check_seconds=10, clock=clock)
    settings = ServerSettings(index_name=NAME, persist_dir=directory, max_judged=5)
    services = Services(settings=settings, index=live, judge=ScriptedJudge())
    client = TestClient(create_app(settings, services=services), base_url="http://localhost")
    body = {"claims": ["glaciers melt", "ice sheets shrink"], "top_k": 10}

    def refused() -> tuple[int, Any]:
        response = client.post("/api/abstract/verify/batch", json=body)
        return response.status_code, response.json().get("actual")

    return live, clock, client, refused


def test_the_judging_budget_counts_the_entries_of_the_generation_served(tmp_path: Path) -> None:
    """A verify request sure to exceed ``max_judged`` is refused by the count of the
    entries of the generation served now, not of the one served when it was first counted."""
    live, clock, client, refused = _over_budget(tmp_path)
    assert refused() == (413, 2 * 3)
    _build(tmp_path, "beta", filler=5)  # 8 abstracts
    clock.now = 10.0
    assert _answer(client) == (200, _texts("beta"))  # the service now serves beta
    assert live.count("abstract") == 8
    assert refused() == (413, 2 * 8)


def test_the_judging_budget_reads_the_pointer_when_only_refused_requests_come(
    tmp_path: Path,
) -> None:
    """After a rebuild, the first request may be one refused before any search: its count is
    the new generation's, read from the pointer then, not the count of the one it replaced."""
    live, clock, _, refused = _over_budget(tmp_path)
    assert refused() == (413, 2 * 3)
    _build(tmp_path, "beta", filler=5)  # 8 abstracts
    clock.now = 9.9
    assert refused() == (413, 2 * 3)  # not due: no pointer read
    assert live.generation == f"{NAME}__g1"
    clock.now = 10.0
    assert refused() == (413, 2 * 8)
    assert live.generation == f"{NAME}__g2"


def test_an_update_in_place_is_picked_up_words_included(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _build(tmp_path, "alpha")
    clock = _Clock()
    # BM25 alone: Chroma's dense search sees added entries at once, the BM25 index it loaded
    # does not until the index is opened again
    live = LiveIndex(_open(tmp_path, "bm25"), check_seconds=10, clock=clock)
    fjords = "Fjords are carved by glaciers."

    def found() -> list[str]:
        return [hit.text for hit in live.search("fjords", granularity="phrase", k=1)]

    assert found() != [fjords]
    assert live.current.revision == 0
    added = parse_evidence_record({"id": "gamma-0", "title": "gamma", "text": fjords})
    _open(tmp_path).add_records([added])  # what `index add` does, in another process
    clock.now = 9.9
    assert found() != [fjords]  # not due: no pointer read
    clock.now = 10.0
    with caplog.at_level("INFO", logger="langchain_references.server.live"):
        assert found() == [fjords]  # BM25 reloaded: the new record is found by its words
    assert (live.generation, live.current.revision) == (f"{NAME}__g1", 1)
    assert [r.getMessage() for r in caplog.records if r.name.endswith(".live")] == [
        f"index {NAME!r}: reopened generation '{NAME}__g1' after an update (revision 1)"
    ]
    clock.now = 20.0
    before = live.current
    found()
    assert live.current is before  # nothing changed since: not reopened again
    _build(tmp_path, "beta")  # a build after updates: a new generation, revision 0 again
    clock.now = 30.0
    found()
    assert (live.generation, live.current.revision) == (f"{NAME}__g2", 0)


def test_a_record_updated_in_place_is_served_with_its_new_text(tmp_path: Path) -> None:
    _build(tmp_path, "alpha")
    clock = _Clock()
    # hybrid reads hits' texts from the snapshot saved with the generation: reopened too
    live = LiveIndex(_open(tmp_path, "hybrid"), check_seconds=10, clock=clock)

    def texts() -> list[str]:
        hits = live.search("glaciers melt", granularity="abstract", k=3)
        return sorted(hit.text for hit in hits)

    assert texts() == _texts("alpha")
    changed = parse_evidence_record(
        {"id": "alpha-0", "title": "alpha", "text": "Record alpha 0: glaciers melt faster."}
    )
    _open(tmp_path).add_records([changed])
    clock.now = 10.0
    assert texts() == sorted(["Record alpha 0: glaciers melt faster.", *_texts("alpha")[1:]])


def test_no_complete_generation_is_a_503_naming_it_then_recovers(tmp_path: Path) -> None:
    _build(tmp_path, "alpha")
    served = _open(tmp_path)
    client = _client(tmp_path, LiveIndex(served, check_seconds=3600))
    _build(tmp_path, "beta")
    _build(tmp_path, "gamma")
    # an in-place update of gamma's generation is running (the pointer says incomplete)
    _open(tmp_path)._mark(complete=False)

    problem = (
        f"evidence index unavailable: index {NAME!r} in {tmp_path} is incomplete: an update "
        f"of its generation '{NAME}__g3' was interrupted or failed; run `index build` again"
    )
    assert _answer(client) == (503, {"detail": problem})
    assert _answer(client) == (503, {"detail": problem})  # still nothing complete to serve

    _build(tmp_path, "delta")  # a build completes: the next request is served from it
    assert _answer(client) == (200, _texts("delta"))


def test_a_failure_of_the_current_generation_stands(tmp_path: Path) -> None:
    """The pointer names the generation that failed: no reopen, the first error is answered."""
    _build(tmp_path, "alpha")
    served = _open(tmp_path)
    live = LiveIndex(served, check_seconds=3600)
    client = _client(tmp_path, live)
    served._bm25 = None
    served.retrieval = "dense"

    class _Failing:
        name = f"{NAME}__g1"

        def query(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("disk on fire")

    served._collection = _Failing()  # type: ignore[assignment]
    status, body = _answer(client)
    assert (status, body["detail"]) == (
        503,
        f"evidence index unavailable: search failed in index {NAME!r}: disk on fire",
    )
    assert live.current is served


@pytest.mark.parametrize("check_seconds", [0.0, 3600.0])
def test_concurrent_requests_while_two_rebuilds_switch(
    tmp_path: Path, check_seconds: float
) -> None:
    """Every request answers 200, from one complete generation, while builds switch.

    ``check_seconds=0`` reads the pointer on every request; 3600 never within the test, so
    that every request after the second build goes through the failure path. Four threads
    query before, during and after the two builds (200 filler records each, so that they
    take a while). They stand for four clients: one test client's work would otherwise run
    one job at a time (``max_client_threads``).
    """
    _build(tmp_path, "alpha", filler=200)
    live = LiveIndex(_open(tmp_path), check_seconds=check_seconds)
    client = _client(tmp_path, live, max_client_threads=4)
    answers: list[tuple[int, Any]] = []
    lock = threading.Lock()
    building, built = threading.Event(), threading.Event()
    during = [0]  # requests answered while the builds ran

    def query() -> None:
        left = 3  # requests after the builds
        while left:
            answer = _answer(client)
            with lock:
                answers.append(answer)
                during[0] += building.is_set() and not built.is_set()
            left -= built.is_set()

    with client:
        threads = [threading.Thread(target=query) for _ in range(4)]
        for thread in threads:
            thread.start()
        while len(answers) < 8:  # every thread is querying
            threading.Event().wait(0.01)
        building.set()
        _build(tmp_path, "beta", filler=200)
        _build(tmp_path, "gamma", filler=200)
        built.set()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
        final = _answer(client)

    allowed = [_texts(tag) for tag in ("alpha", "beta", "gamma")]
    assert [a for a in answers if a[0] != 200 or a[1] not in allowed] == []
    assert answers[0] == (200, _texts("alpha"))
    assert answers[-1] == final == (200, _texts("gamma"))
    assert during[0] > 0


# ------------------------------------------------------------------ the serving path never writes

#: The write methods of Chroma's embedded API (every client and collection write goes
#: through one of them).
_WRITES = (
    "_add",
    "_upsert",
    "_update",
    "_delete",
    "_modify",
    "_fork",
    "create_collection",
    "get_or_create_collection",
    "delete_collection",
    "create_database",
    "create_tenant",
    "delete_database",
    "reset",
)


class _WriteGuard:
    """While armed, every Chroma write fails (``PermissionError``) and is recorded."""

    def __init__(self) -> None:
        from chromadb.api.rust import RustBindingsAPI

        self._api = RustBindingsAPI
        self._originals = {method: getattr(RustBindingsAPI, method) for method in _WRITES}
        self.attempted: list[str] = []

    def arm(self) -> None:
        for method in _WRITES:
            setattr(self._api, method, self._refuse(method))

    def disarm(self) -> None:
        for method, original in self._originals.items():
            setattr(self._api, method, original)

    def _refuse(self, method: str) -> Any:
        def write(*args: Any, **kwargs: Any) -> Any:
            self.attempted.append(method)
            raise PermissionError(f"the serving path called Chroma's {method}")

        return write


@pytest.fixture
def guard() -> Iterator[_WriteGuard]:
    """A :class:`_WriteGuard`, disarmed after the test."""
    write_guard = _WriteGuard()
    yield write_guard
    write_guard.disarm()


def test_the_guard_catches_a_write(tmp_path: Path, guard: _WriteGuard) -> None:
    _build(tmp_path, "alpha")
    guard.arm()
    with pytest.raises(Exception, match="the serving path called"):
        _open(tmp_path)._mark(complete=False)  # a pointer write, as index add does
    assert guard.attempted == ["_modify"]


def test_the_serving_path_calls_no_chroma_write(tmp_path: Path, guard: _WriteGuard) -> None:
    _build(tmp_path, "alpha")
    guard.arm()  # from opening the index on: EvidenceIndex.open, searches, reopens
    client = _client(tmp_path, LiveIndex(_open(tmp_path), check_seconds=0))
    assert _answer(client) == (200, _texts("alpha"))
    assert client.post("/api/abstract/verify", json=QUERY).status_code == 200
    assert client.post("/api/abstract/evidence/batch", json={"claims": ["ice"]}).status_code == 200
    guard.disarm()  # the builds write, of course
    _build(tmp_path, "beta")
    _build(tmp_path, "gamma")
    guard.arm()
    assert _answer(client) == (200, _texts("gamma"))  # the reopen writes nothing either
    assert guard.attempted == []


_ADD_IN_A_CHILD = """
import sys
from langchain_references.server.index import EvidenceIndex, parse_evidence_record
from tests.unit_tests.server._build_fakes import WordHashEmbeddings

index = EvidenceIndex.open(sys.argv[1], persist_dir=sys.argv[2], embeddings=WordHashEmbeddings())
texts = sys.argv[3:]
index.add_records(
    [parse_evidence_record({"id": f"added-{i}", "title": "added", "text": t})
     for i, t in enumerate(texts)]
)
"""

#: Records added by another process, each with words of its own.
ADDED = (
    "Fjords are carved by ancient ice.",
    "Permafrost thaw releases methane.",
    "Sea ice reflects sunlight back.",
    "Tundra shrubs spread northward quickly.",
    "Avalanches follow heavy snowfall.",
)


@pytest.mark.parametrize("retrieval", ["dense", "hybrid"])
def test_records_added_by_another_process_are_found_by_meaning_after_the_reopen(
    tmp_path: Path, retrieval: Retrieval
) -> None:
    """The reopened index searches the vectors on disk, not those loaded at start-up.

    Chroma keeps one system per directory in a process; reopening on it kept the vector
    segment loaded before another process (an update in place) wrote, so the added records
    were found by words only.
    """
    _build(tmp_path, "alpha")
    clock = _Clock()
    live = LiveIndex(_open(tmp_path, retrieval), check_seconds=10, clock=clock)
    before = live.current
    assert live.search("glaciers melt", granularity="abstract", k=1)  # the segment is loaded
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    subprocess.run(
        [sys.executable, "-c", _ADD_IN_A_CHILD, NAME, str(tmp_path), *ADDED],
        env=env,
        check=True,
        timeout=300,
    )
    clock.now = 10.0
    live.fresh()
    assert (live.generation, live.current.revision) == (f"{NAME}__g1", 1)
    vectors = live.embeddings.embed_documents(list(ADDED))
    # the vectors' own ranking, which the hybrid mode fuses with BM25's
    nearest = live.current._dense(vectors, "abstract", 1)
    first = [found[0][0] if found else None for found in nearest]
    if retrieval == "dense":
        assert [live.search(t, granularity="abstract", k=1)[0].id for t in ADDED] == first
    assert first == [f"added-{i}:abstract" for i in range(len(ADDED))]
    # the generation opened before (searches in flight on it) still answers
    assert before.search("glaciers melt", granularity="abstract", k=1)
