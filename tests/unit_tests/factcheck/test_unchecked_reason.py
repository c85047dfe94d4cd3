"""Why a statement could not be checked: the first stage that left nothing, word for word."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from langchain_references.factcheck.stages import FactCheckState, to_result, unchecked_reason
from langchain_references.factcheck.types import ExtractedPage, FetchedPage, SearchHit
from langchain_references.factcheck.verdict import Verdict, VerdictResult
from langchain_references.failures import Failure
from tests.unit_tests.factcheck.test_evidence_sources import passage

HIT = SearchHit(title="t", link="https://a.example/", rank=0)


def _state(*failures: Failure, hits: int = 1) -> FactCheckState:
    state = FactCheckState.begin("s", "q")
    return replace(state, hits=(HIT,) * hits, failures=failures)


def _fetch(reason: str) -> Failure:
    return Failure(stage="fetch", reason=reason, url="https://a.example/")


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (_state(hits=0), "the search found nothing for 'q'"),
        (_state(), "no page could be fetched (1 hit)"),  # no failure recorded: nothing added
        (_state(_fetch("HTTP 404")), "no page could be fetched (1 hit): HTTP 404"),
        (
            _state(_fetch("HTTP 404"), _fetch("timeout"), hits=2),
            "no page could be fetched (2 hits): HTTP 404 (and 1 more)",
        ),
        (
            _state(_fetch("HTTP 404"), _fetch("timeout"), _fetch("HTTP 500"), hits=3),
            "no page could be fetched (3 hits): HTTP 404 (and 2 more)",
        ),
    ],
)
def test_the_reason_names_the_first_failure_and_counts_the_others(
    state: FactCheckState, reason: str
) -> None:
    assert unchecked_reason(state) == reason


def _page() -> FetchedPage:
    return FetchedPage(
        url="https://a.example/",
        final_url="https://a.example/",
        status=200,
        content_type="text/html",
        body="<html></html>",
        elapsed_s=0.0,
        rank=0,
    )


@pytest.mark.parametrize(
    ("failures", "reason"),
    [
        ((), "no page had readable text"),
        (
            (Failure(stage="extract", reason="no main text extracted", url="https://a.example/"),),
            "no page had readable text: no main text extracted",
        ),
    ],
)
def test_fetched_pages_without_text_are_the_reason(
    failures: tuple[Failure, ...], reason: str
) -> None:
    state = replace(_state(*failures), pages=(_page(),))
    assert unchecked_reason(state) == reason


def test_a_result_needs_the_aggregate_stage() -> None:
    with pytest.raises(ValueError, match=r"^the aggregate stage has not run$"):
        to_result(_state())


@pytest.mark.parametrize(
    ("details", "error"),
    [
        ({}, "the statement could not be checked"),
        ({"error": "search failed: boom"}, "search failed: boom"),
    ],
)
def test_an_error_verdict_gives_its_reason_or_a_plain_one(
    details: dict[str, str], error: str
) -> None:
    outcome = VerdictResult(verdict=Verdict.ERROR, confidence=0.0, score=0.0, details=details)
    result = to_result(replace(_state(), outcome=outcome))
    assert (result.verdict, result.error) == (Verdict.ERROR, error)
    assert result.verdict_details == {"error": error}


def test_a_result_counts_no_neutral_passage_when_none_was_counted_and_times_the_check() -> None:
    state = FactCheckState.begin("s", "q")
    outcome = VerdictResult(verdict=Verdict.SUPPORTED, confidence=0.5, score=0.5)
    before = time.perf_counter()
    result = to_result(replace(state, outcome=outcome, counts={"hits": 2}))
    after = time.perf_counter()
    assert (result.neutral_count, result.counts.hits) == (0, 2)
    # measured from the start of the check: not before it began, not after it returned
    assert 0.0 <= result.total_s <= after - state.started
    assert result.total_s >= before - state.started


def _extracted() -> ExtractedPage:
    return ExtractedPage(
        url="https://a.example/",
        final_url="https://a.example/",
        title="t",
        text="Sea ice is melting.",
        rank=0,
        content_type="text/html",
    )


def test_readable_pages_that_gave_no_passage_are_the_reason() -> None:
    state = replace(_state(), pages=(_page(),), extracted=(_extracted(),))
    assert unchecked_reason(state) == "no passage could be cut from the pages"


def test_passages_of_which_none_was_selected_are_the_reason() -> None:
    state = replace(
        _state(),
        pages=(_page(),),
        extracted=(_extracted(),),
        passages=(passage("Sea ice is melting.", "https://a.example/", 0),),
    )
    assert unchecked_reason(state) == "no passage was selected for judging"
