"""The relevance stage in each retrieval mode, and each passage embedded once per run."""

from __future__ import annotations

import threading

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from langchain_references.factcheck.relevance import aselect_relevant, select_relevant
from langchain_references.factcheck.stages import FactCheckState, JudgeStage, RelevanceStage
from langchain_references.factcheck.types import Passage
from langchain_references.judges import HeuristicJudge
from langchain_references.services.embedding_cache import CachedEmbeddings, shared_cache
from langchain_references.services.retrieval import BM25Index, reciprocal_rank_fusion

from .test_relevance import BagOfWords, _cos, passages_of


class Counting(Embeddings):
    """Counts the texts the wrapped embeddings embed (documents and queries)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.documents: list[str] = []
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.documents.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            self.queries.append(text)
        return self.inner.embed_query(text)


STATEMENT = "Arctic sea ice is declining"
# BagOfWords puts "arctic"/"sea"/"ice" texts near the statement; BM25 favours the rare words.
TEXTS = [
    "Sea ice in the Arctic is declining fast, the ice is thinner every year.",  # both agree
    "The Arctic is warming; Arctic summers are longer.",
    "Declining glaciers and declining snow cover are seen worldwide.",
    "Honey bees communicate with a waggle dance.",
    "Sea levels rise as land ice melts into the sea.",
    "Ice, sea, Arctic: a poem about the north.",
    "Declining, declining, declining: the word of the year.",
]


def _passages() -> list[Passage]:
    return passages_of(TEXTS)


def _dense_order() -> list[int]:
    embeddings = BagOfWords()
    query = embeddings.embed_query(STATEMENT)
    scored = [(i, _cos(query, embeddings.embed_query(t))) for i, t in enumerate(TEXTS)]
    return [i for i, _ in sorted(scored, key=lambda pair: (-pair[1], pair[0]))]


def _bm25_order() -> list[int]:
    index = BM25Index.build([str(i) for i in range(len(TEXTS))], TEXTS)
    return [int(i) for i, _ in index.top(STATEMENT, len(TEXTS))]


def _selected(mode: str, k: int = 4) -> list[tuple[int, float]]:
    passages = _passages()
    results = select_relevant(STATEMENT, passages, embeddings=BagOfWords(), k=k, retrieval=mode)  # type: ignore[arg-type]
    return [(passages.index(p), s) for p, s in results]


def test_the_three_modes_rank_differently_and_as_specified() -> None:
    dense, bm25 = _dense_order(), _bm25_order()
    assert 3 not in bm25  # the bees share no word with the statement
    fused = [i for i, _ in reciprocal_rank_fusion([dense, bm25])]
    assert dense != bm25  # the example tells the modes apart
    assert fused not in (dense, bm25)
    assert [i for i, _ in _selected("dense")] == dense[:4]
    assert [i for i, _ in _selected("bm25")] == bm25[:4]
    assert [i for i, _ in _selected("hybrid")] == fused[:4]
    assert [i for i, _ in _selected("hybrid", k=50)] == fused  # every passage, fused


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_every_mode_reports_the_cosine_similarity(mode: str) -> None:
    embeddings = BagOfWords()
    query = embeddings.embed_query(STATEMENT)
    for i, similarity in _selected(mode):
        assert similarity == pytest.approx(_cos(query, embeddings.embed_query(TEXTS[i])), abs=1e-5)


async def test_async_selection_matches_sync_in_each_mode() -> None:
    for mode in ("dense", "bm25", "hybrid"):
        sync = select_relevant(STATEMENT, _passages(), embeddings=BagOfWords(), k=3, retrieval=mode)  # type: ignore[arg-type]
        async_ = await aselect_relevant(
            STATEMENT,
            _passages(),
            embeddings=BagOfWords(),
            k=3,
            retrieval=mode,  # type: ignore[typeddict-item]
        )
        assert [p for p, _ in async_] == [p for p, _ in sync]


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="retrieval must be one of"):
        select_relevant(STATEMENT, _passages(), embeddings=BagOfWords(), retrieval="sparse")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retrieval must be one of"):
        RelevanceStage(embeddings=BagOfWords(), vector_store=None, k=3, retrieval="x")  # type: ignore[arg-type]


# ------------------------------------------------------------------ embedding once


def _run_relevance_then_judge(mode: str, embeddings: Embeddings) -> FactCheckState:
    state = FactCheckState.begin(STATEMENT, STATEMENT).advance(passages=tuple(_passages()))
    config = RunnableConfig()
    relevance = RelevanceStage(embeddings=embeddings, vector_store=None, k=4, retrieval=mode)  # type: ignore[arg-type]
    state = relevance.as_runnable().invoke(state, config)
    judge = JudgeStage(HeuristicJudge(embeddings), max_concurrency=2)
    return judge.as_runnable().invoke(state, config)


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_relevance_and_judge_embed_each_passage_once(mode: str) -> None:
    counting = Counting(BagOfWords())
    state = _run_relevance_then_judge(mode, counting)
    assert len(state.judgements) == 4
    # every text at most once as a document; the statement once as a query, once as a document
    assert len(counting.documents) == len(set(counting.documents))
    assert counting.queries == [STATEMENT]
    judged = {p.text for p, _ in state.selected}
    if mode == "bm25":  # only the selected passages are embedded
        assert set(counting.documents) == judged | {STATEMENT}
    else:
        assert set(counting.documents) == set(TEXTS) | {STATEMENT}


def test_without_the_shared_cache_the_judge_would_embed_again() -> None:
    # the same run with the judge on a separate embeddings object: the passages twice
    counting = Counting(BagOfWords())
    state = FactCheckState.begin(STATEMENT, STATEMENT).advance(passages=tuple(_passages()))
    config = RunnableConfig()
    relevance = RelevanceStage(embeddings=counting, vector_store=None, k=4)
    state = relevance.as_runnable().invoke(state, config)
    other = Counting(counting)
    JudgeStage(HeuristicJudge(other), max_concurrency=2).as_runnable().invoke(state, config)
    assert len(other.documents) == 5  # 4 passages + the statement, nothing reused


def test_cached_embeddings_embed_each_distinct_text_once() -> None:
    counting = Counting(BagOfWords())
    cache = CachedEmbeddings(counting, max_entries=3)
    first = cache.embed_documents(["a b", "c", "a b"])
    assert first == BagOfWords().embed_documents(["a b", "c", "a b"])
    assert counting.documents == ["a b", "c"]
    first[0][0] = 99.0  # a caller's change does not reach the cache
    assert cache.embed_documents(["c", "a b"]) == BagOfWords().embed_documents(["c", "a b"])
    assert counting.documents == ["a b", "c"]
    cache.embed_documents(["d", "e"])  # evicts the least recently used ("c")
    cache.embed_documents(["c"])
    assert counting.documents == ["a b", "c", "d", "e", "c"]
    assert cache.embed_query("a b") == BagOfWords().embed_query("a b")
    assert counting.queries == ["a b"]  # queries are kept apart from documents
    cache.embed_query("a b")
    assert counting.queries == ["a b"]


async def test_cached_embeddings_async_share_the_memo() -> None:
    counting = Counting(BagOfWords())
    cache = CachedEmbeddings(counting)
    assert await cache.aembed_documents(["x", "y"]) == cache.embed_documents(["y", "x"])[::-1]
    assert await cache.aembed_query("x") == cache.embed_query("x")
    assert counting.documents == ["x", "y"]
    assert counting.queries == ["x"]


def test_shared_cache_is_one_per_embeddings_object() -> None:
    a, b = BagOfWords(), BagOfWords()
    assert shared_cache(a) is shared_cache(a)
    assert shared_cache(a) is not shared_cache(b)
    cache = CachedEmbeddings(a)
    assert shared_cache(cache) is cache
    with pytest.raises(ValueError, match="max_entries must be >= 1"):
        CachedEmbeddings(a, max_entries=0)
