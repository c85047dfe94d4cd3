"""The chain's evidence sources: an index instead of the web, or beside it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from langchain_references.factcheck.chain import FactCheckChain, create_fact_check_chain
from langchain_references.factcheck.evidence import (
    IndexedPassage,
    PassageIndex,
    VectorStoreIndex,
    merge_evidence,
)
from langchain_references.factcheck.result import FactCheckResult
from langchain_references.factcheck.stages import FactCheckState
from langchain_references.factcheck.types import Passage
from langchain_references.factcheck.verdict import Verdict
from tests.unit_tests.factcheck.test_chain import (
    RULES,
    STATEMENT,
    TERN_PAGES,
    HashEmbeddings,
    KeywordJudge,
    make_chain,
    recording,
    tern_site,
)

__all__ = ["tern_site"]  # the fixture, imported for the tests below


def passage(text: str, url: str, rank: int) -> Passage:
    return Passage(
        text=text, url=url, title=f"title {rank}", rank=rank, index_in_page=0, n_tokens=5
    )


class ListIndex:
    """A :class:`PassageIndex` over a fixed list; records which driver was called."""

    def __init__(self, found: list[IndexedPassage], name: str = "notes") -> None:
        self.found = found
        self.name = name
        self.calls: list[tuple[str, str, int]] = []

    def find(self, statement: str, k: int) -> list[IndexedPassage]:
        self.calls.append(("find", statement, k))
        return self.found[:k]

    async def afind(self, statement: str, k: int) -> list[IndexedPassage]:
        self.calls.append(("afind", statement, k))
        return self.found[:k]


class BrokenIndex(ListIndex):
    def find(self, statement: str, k: int) -> list[IndexedPassage]:
        raise RuntimeError("the index is down")

    async def afind(self, statement: str, k: int) -> list[IndexedPassage]:
        raise RuntimeError("the index is down")


NOTES = [
    IndexedPassage(
        passage("a supportive survey of tern migration", "https://a.example/1", 0), 0.9, "e1"
    ),
    IndexedPassage(passage("a contrary opinion on terns", "", 1), 0.7, "e2"),
    IndexedPassage(
        passage("another supportive record of terns", "https://c.example/3", 2), 0.5, "e3"
    ),
]


def index_chain(index: Any, **kwargs: Any) -> FactCheckChain:
    return create_fact_check_chain(index=index, judge=KeywordJudge(RULES), k=3, **kwargs)


def _without_timings(result: FactCheckResult) -> dict[str, Any]:
    return result.model_dump(exclude={"timings", "total_s"})


async def test_an_index_alone_gives_the_passages_judged_without_fetching() -> None:
    index = ListIndex(NOTES)
    chain = index_chain(index)

    result = await chain.ainvoke(STATEMENT)

    assert index.calls == [("afind", STATEMENT, 3)]
    assert result.verdict is Verdict.SUPPORTED
    assert [e.url for e in result.supporting] == ["https://a.example/1", "https://c.example/3"]
    assert [e.similarity for e in result.supporting] == [0.9, 0.5]
    assert [(e.url, e.title) for e in result.contradicting] == [("", "title 1")]
    counts = result.counts
    assert (counts.hits, counts.fetched, counts.extracted, counts.passages, counts.judged) == (
        3,
        0,
        0,
        3,
        3,
    )
    assert [stage for stage in result.timings] == ["search", "judge", "aggregate"]


def test_both_drivers_of_an_index_chain_give_the_same_result() -> None:
    import asyncio

    index = ListIndex(NOTES)
    chain = index_chain(index)

    sync = chain.invoke(STATEMENT)
    async_ = asyncio.run(chain.ainvoke(STATEMENT))

    assert [call[0] for call in index.calls] == ["find", "afind"]
    assert _without_timings(sync) == _without_timings(async_)


@pytest.mark.parametrize(
    ("index", "reason"),
    [
        (ListIndex([]), f"the search found nothing for {STATEMENT!r}"),
        (
            BrokenIndex([]),
            "search failed: evidence index: RuntimeError: the index is down",
        ),
    ],
)
def test_an_empty_or_failing_index_is_an_error_verdict_with_its_reason(
    index: Any, reason: str
) -> None:
    result = index_chain(index).invoke(STATEMENT)

    assert result.verdict is Verdict.ERROR
    assert result.error == reason
    assert result.confidence == 0.0


def test_the_index_takes_part_in_the_check_key() -> None:
    one = index_chain(ListIndex(NOTES, name="one"))
    same = index_chain(ListIndex(NOTES, name="one"))
    other = index_chain(ListIndex(NOTES, name="two"))

    assert one.item_key(STATEMENT) == same.item_key(STATEMENT)
    assert one.item_key(STATEMENT) != other.item_key(STATEMENT)


def test_a_chain_needs_a_source_and_an_index_must_be_one() -> None:
    with pytest.raises(ValueError, match="search provider, an index, or both"):
        create_fact_check_chain(judge=KeywordJudge(RULES))
    with pytest.raises(TypeError, match="index must have name, find"):
        create_fact_check_chain(index=object(), judge=KeywordJudge(RULES))  # type: ignore[arg-type]
    assert isinstance(ListIndex(NOTES), PassageIndex)


async def test_index_and_web_are_judged_together_most_similar_first(tern_site: str) -> None:
    index = ListIndex(NOTES[:1])
    chain = make_chain(recording(tern_site, list(TERN_PAGES)), KeywordJudge(RULES), index=index)

    result = await chain.ainvoke(STATEMENT)

    judged = sorted(result.evidence, key=lambda e: e.relevance_rank)
    similarities = [e.similarity for e in judged]
    assert similarities == sorted(similarities, reverse=True)
    assert "https://a.example/1" in [e.url for e in judged]
    web = [e.url for e in judged if e.url.startswith(tern_site)]
    assert len(web) == 3
    assert result.counts.hits == 4  # three search hits and one index entry
    assert (result.counts.fetched, result.counts.extracted) == (3, 3)  # only the web's pages
    assert index.calls == [("afind", STATEMENT, chain.k)]  # the chain's k, as for the web


def _state(selected: list[tuple[Passage, float]], **counts: int) -> FactCheckState:
    state = FactCheckState.begin(STATEMENT, STATEMENT)
    return replace(state, selected=tuple(selected), counts=counts)


def test_merge_orders_by_similarity_the_web_first_on_a_tie() -> None:
    web_a, web_b = passage("web a", "w/a", 0), passage("web b", "w/b", 1)
    index_a, index_b = passage("index a", "i/a", 0), passage("index b", "i/b", 1)
    web = _state([(web_a, 0.8), (web_b, 0.4)], hits=2, fetched=2)
    index = _state([(index_a, 0.8), (index_b, 0.6)], hits=2)

    merged = merge_evidence({"index": index, "web": web})

    assert [(p.url, s) for p, s in merged.selected] == [
        ("w/a", 0.8),
        ("i/a", 0.8),
        ("i/b", 0.6),
        ("w/b", 0.4),
    ]
    assert dict(merged.counts) == {"hits": 4, "fetched": 2}


@pytest.fixture
def tern_store() -> Iterator[Any]:
    from langchain_chroma import Chroma

    from langchain_references.services._chroma import ephemeral_client

    store = Chroma(
        collection_name=f"test-{uuid.uuid4().hex}",
        embedding_function=HashEmbeddings(),
        client=ephemeral_client(),
        collection_metadata={"hnsw:space": "cosine"},
    )
    store.add_texts(
        [
            "Arctic terns migrate from pole to pole every year, a supportive survey says",
            "Arctic terns do not migrate pole to pole every year, a contrary blog says",
            "Penguins cannot fly",
        ],
        metadatas=[
            {"url": "https://survey.example/terns", "title": "Survey"},
            {"source": "https://blog.example/terns"},
            {"source": "notes/penguins.txt"},
        ],
        ids=["survey", "blog", "penguins"],
    )
    try:
        yield store
    finally:
        store.delete_collection()


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
async def test_a_langchain_vector_store_is_an_index(tern_store: Any, driver: str) -> None:
    index = VectorStoreIndex(tern_store, name="terns")
    chain = index_chain(index)

    if driver == "invoke":
        result = chain.invoke(STATEMENT)
    else:
        result = await chain.ainvoke(STATEMENT)

    found = index.find(STATEMENT, 3)
    assert [item.id for item in found] == ["survey", "blog", "penguins"]
    assert [item.passage.url for item in found] == [
        "https://survey.example/terns",
        "https://blog.example/terns",
        "",
    ]
    assert [item.passage.title for item in found] == [
        "Survey",
        "https://blog.example/terns",
        "penguins",
    ]
    scores = [item.similarity for item in found]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[2]
    assert (result.counts.supporting, result.counts.contradicting) == (1, 1)
    assert [e.url for e in result.supporting] == ["https://survey.example/terns"]
    assert [e.url for e in result.contradicting] == ["https://blog.example/terns"]
    assert result.counts.fetched == 0


def test_a_vector_store_index_refuses_what_is_not_a_store() -> None:
    with pytest.raises(TypeError, match="store must be a VectorStore"):
        VectorStoreIndex(object())  # type: ignore[arg-type]
