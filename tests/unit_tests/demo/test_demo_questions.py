"""The demo answers the question it is asked, and prints it first.

Each question asks for a quantity; the sentence that states it is retrieved from the demo
corpus and must be the first sentence of the offline answer, cited (a sentence that merely
mentions the subject comes after it, if at all).
"""

from __future__ import annotations

import io
import re
from urllib.parse import unquote

import pytest

import langchain_references.cli.demo as demo_main
from langchain_references.cli import main
from langchain_references.demo.corpus import BASE_URL
from langchain_references.services.embeddings import MiniLMEmbeddings

#: (question, the start of the sentence that must open the answer, its page)
QUESTIONS = [
    (
        "How tall is the Space Needle?",
        "The tower is 605 feet (184 meters) tall",
        "/seattle/space-needle",
    ),
    (
        "How far is the Moon from Earth?",
        "It orbits at an average distance of about 384,400 kilometers",
        "/space/the-moon",
    ),
    (
        "How old is the Moon?",
        "Most scientists think it formed about 4.5 billion years ago",
        "/space/the-moon",
    ),
    (
        "When was the Space Needle built, and how can visitors get there from downtown Seattle?",
        "Seattle built the Space Needle for the 1962 World's Fair",
        "/seattle/space-needle",
    ),
]
CITATION = re.compile(r" <sup>\[\[(\d+)\]\(([^)]+)\)\]</sup>\.")


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, minilm: MiniLMEmbeddings) -> None:
    monkeypatch.setattr(demo_main, "shared_minilm", lambda: minilm)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.mark.parametrize(("question", "sentence", "page"), QUESTIONS)
def test_the_demo_prints_the_question_and_cites_the_sentence_that_answers_it(
    question: str, sentence: str, page: str
) -> None:
    out, err = io.StringIO(), io.StringIO()

    code = main(["demo", "--question", question], out=out, err=err)

    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert text.startswith(f"Question: {question}\n\n")
    answer = text.removeprefix(f"Question: {question}\n\n")
    assert answer.startswith(sentence), answer
    first = CITATION.search(answer)
    assert first is not None, answer
    page_url, _, fragment = first.group(2).partition("#:~:text=")
    assert page_url == f"{BASE_URL}{page}"
    # the link opens the page at the quoted sentence (a text fragment of its first words)
    assert unquote(fragment).startswith(" ".join(sentence.split()[:3]))
    assert sentence in answer[: first.start()]
    assert "offline ExtractiveAnswerer" in err.getvalue()
