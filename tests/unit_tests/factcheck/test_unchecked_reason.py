"""Why a statement could not be checked: the first stage that left nothing, word for word."""

from __future__ import annotations

from dataclasses import replace

import pytest

from langchain_references.factcheck.stages import FactCheckState, unchecked_reason
from langchain_references.factcheck.types import SearchHit
from langchain_references.failures import Failure

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
