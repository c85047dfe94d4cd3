"""Live LLM judge, atomizer and citation check against OpenAI; skipped without a key."""

from __future__ import annotations

import os

import pytest

pytestmark = [
    pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY"),
    pytest.mark.enable_socket,
]

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")


def test_llm_judge_labels_clear_cases() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_references.judges import Label, LLMJudge

    judge = LLMJudge(langchain_openai.ChatOpenAI(model=MODEL, temperature=0))
    supports, refutes = judge.batch(
        [
            {"statement": "Paris is in France.", "passage": "Paris is the capital of France."},
            {"statement": "Paris is in Spain.", "passage": "Paris is the capital of France."},
        ]
    )
    assert supports.label is Label.ENTAILS
    assert refutes.label is Label.CONTRADICTS


def test_atomizer_splits_a_response() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_references.factuality import Atomizer

    atomizer = Atomizer(langchain_openai.ChatOpenAI(model=MODEL, temperature=0))
    atoms = atomizer.invoke("Marie Curie was a physicist. She won two Nobel Prizes.")
    assert len(atoms) >= 2
