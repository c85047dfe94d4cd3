"""The command-line demo, end to end: Chroma + MiniLM + a chat model + manage_references."""

from __future__ import annotations

import io
import re
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

import langchain_references.cli.demo as demo_main
from langchain_references.cli import main
from langchain_references.demo import NOT_FOUND_ANSWER, ExtractiveAnswerer
from langchain_references.demo.corpus import BASE_URL, SAMPLE_QUESTION, load_documents
from langchain_references.services.embeddings import MiniLMEmbeddings

RETRIEVED = "Retrieved documents:"


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


class _Memo(Embeddings):
    """Remembers the vectors of the real model, so each run does not re-embed the corpus."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.vectors: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        self.vectors.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@pytest.fixture(scope="module")
def memo(minilm: MiniLMEmbeddings) -> _Memo:
    return _Memo(minilm)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, memo: _Memo) -> None:
    # One model for the whole module (loading it is the slow part), no key from the machine.
    monkeypatch.setattr(demo_main, "shared_minilm", lambda: memo)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _demo(*argv: str) -> tuple[int, str, str]:
    """``langchain-references demo ARGV``: exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["demo", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _answer(*argv: str) -> tuple[str, str, str]:
    """A successful run: the streamed answer, the retrieved-documents list and stderr."""
    code, out, err = _demo(*argv)
    assert code == 0, err
    answer, _, documents = out.partition(RETRIEVED)
    assert documents, out
    return answer, documents, err


def _run(*argv: str) -> tuple[str, str]:
    answer, documents, _ = _answer(*argv)
    return answer, documents


def _document_lines(documents: str) -> list[str]:
    return [line.strip() for line in documents.strip().splitlines()]


def _number_and_source(line: str) -> tuple[str | None, str]:
    """Parse ``id=N cited as [n]: title <url>`` (or ``not cited``)."""
    match = re.fullmatch(r"id=\d+ (?:cited as \[(\d+)\]|not cited): .* <(.+)>", line)
    assert match is not None, line
    return match.group(1), match.group(2)


def test_default_run_streams_markdown_citations_and_the_reference_list() -> None:
    answer, documents, err = _answer()
    assert "offline ExtractiveAnswerer" in err
    assert f"<sup>[[1]({BASE_URL}/seattle/" in answer
    assert f"<sup>[[2]({BASE_URL}/seattle/" in answer
    assert "- **1** [" in answer
    assert "- **2** [" in answer
    assert "](id=" not in answer
    lines = _document_lines(documents)
    assert len(lines) == demo_main.DEFAULT_K
    assert any("cited as [1]" in line for line in lines)
    assert any("cited as [2]" in line for line in lines)


def test_chunks_of_one_source_share_one_number() -> None:
    answer, documents = _run("--question", "When was the Space Needle built and how tall is it?")
    numbers = {
        url: set(re.findall(r"\[\[(\d+)\]\(" + re.escape(url), answer))
        for url in {d.metadata["source"] for d in load_documents()}
    }
    assert all(len(found) <= 1 for found in numbers.values()), numbers
    for line in _document_lines(documents):
        number, url = _number_and_source(line)
        if number is not None:
            assert numbers[url] == {number}


@pytest.mark.parametrize("style", ["text", "html"])
def test_other_styles_rewrite_every_citation(style: str) -> None:
    answer, _ = _run("--style", style, "--question", "Could Europa have an ocean?", "-k", "3")
    assert "](id=" not in answer
    assert f"{BASE_URL}/space/europa" in answer
    if style == "html":
        assert f'href="{BASE_URL}/space/europa"' in answer
    else:
        assert "[1]" in answer


def test_empty_style_removes_citations_without_a_list() -> None:
    answer, documents = _run("--style", "empty", "--question", "Could Europa have an ocean?")
    assert "](id=" not in answer
    assert "[1]" not in answer
    assert BASE_URL not in answer
    assert "Europa" in answer
    assert "cited as [1]" in documents


def test_unanswerable_question_cites_nothing() -> None:
    answer, documents = _run("--question", "What currency does Japan use?")
    assert answer.strip() == f"Question: What currency does Japan use?\n\n{NOT_FOUND_ANSWER}"
    assert all("not cited" in line for line in _document_lines(documents))


def test_k_sets_the_number_of_retrieved_documents() -> None:
    _, documents = _run("-k", "2")
    assert len(_document_lines(documents)) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-k", "0"], "argument -k: expected a positive integer, got '0'"),
        (["-k", "x"], "argument -k: expected a positive integer, got 'x'"),
        (["--question", "  "], "argument --question: must not be empty"),
        (["--style", "x"], "argument --style: invalid choice: 'x'"),
    ],
)
def test_bad_arguments_exit_with_usage_error(argv: list[str], message: str) -> None:
    code, out, err = _demo(*argv)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: langchain-references demo ")
    assert f"langchain-references demo: error: {message}" in err


def test_model_option_without_langchain_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)
    code, out, err = _demo("--model", "openai:gpt-4o-mini")
    assert code == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("error: --model openai:gpt-4o-mini needs the optional package")
    assert 'pip install ".[llm]"' in line
    assert 'pip install ".[llm]"' in line


def _fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def test_model_option_uses_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    requested: list[str] = []

    def init_chat_model(name: str) -> GenericFakeChatModel:
        requested.append(name)
        return GenericFakeChatModel(messages=iter(["It opened in 1962 [1](id=1)[7](id=2)."]))

    _fake_module(monkeypatch, "langchain")
    _fake_module(monkeypatch, "langchain.chat_models", init_chat_model=init_chat_model)
    answer, documents, err = _answer("--model", "someprovider:some-model")
    assert requested == ["someprovider:some-model"]
    assert err == demo_main.MODEL_NOTICE.format(model="someprovider:some-model") + "\n"
    question = f"Question: {SAMPLE_QUESTION}\n\n"
    assert answer.startswith(question + "It opened in 1962 <sup>[[1](")
    parsed = [_number_and_source(line) for line in _document_lines(documents)]
    expected = "1" if parsed[0][1] == parsed[1][1] else "2"
    assert [number for number, _ in parsed] == ["1", expected, None, None]
    assert f"- **{expected}** [" in answer


def test_model_option_reports_unknown_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def init_chat_model(name: str) -> GenericFakeChatModel:
        raise ValueError(f"Unable to infer model provider for {name}")

    _fake_module(monkeypatch, "langchain")
    _fake_module(monkeypatch, "langchain.chat_models", init_chat_model=init_chat_model)
    code, _, err = _demo("--model", "nope")
    assert code == 2
    assert err == "error: cannot load --model nope: Unable to infer model provider for nope\n"


def test_a_key_never_switches_to_a_networked_model_silently(
    monkeypatch: pytest.MonkeyPatch, minilm: MiniLMEmbeddings
) -> None:
    created: list[dict[str, Any]] = []

    class ChatOpenAI(GenericFakeChatModel):
        def __init__(self, **kwargs: Any) -> None:
            created.append(kwargs)
            super().__init__(messages=iter(["ok"]))

    _fake_module(monkeypatch, "langchain_openai", ChatOpenAI=ChatOpenAI)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    notice = io.StringIO()
    model = demo_main.select_model(None, minilm, notice=notice)
    assert isinstance(model, ExtractiveAnswerer)
    assert created == []
    assert notice.getvalue() == (
        demo_main.OPENAI_KEY_NOTICE + "\n" + demo_main.OFFLINE_NOTICE + "\n"
    )
    assert "--model openai:gpt-4o-mini" in notice.getvalue()
    notice = io.StringIO()
    assert isinstance(
        demo_main.select_model(None, minilm, offline=True, notice=notice), ExtractiveAnswerer
    )
    assert "ExtractiveAnswerer" in notice.getvalue()


def test_the_demo_names_its_model_and_prints_the_question_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code, out, err = _demo("--question", "How tall is the Space Needle?", "-k", "2")
    assert code == 0
    assert err.splitlines() == [demo_main.OPENAI_KEY_NOTICE, demo_main.OFFLINE_NOTICE]
    assert out.startswith("Question: How tall is the Space Needle?\n\n")


def test_a_model_failing_while_answering_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Offline(GenericFakeChatModel):
        def _stream(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("Connection error.")

    def init_chat_model(name: str) -> GenericFakeChatModel:
        return Offline(messages=iter([]))

    _fake_module(monkeypatch, "langchain")
    _fake_module(monkeypatch, "langchain.chat_models", init_chat_model=init_chat_model)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the key is there; the network is not
    code, out, err = _demo("--model", "openai:gpt-4o-mini", "-k", "1")
    assert code == 2
    assert out.startswith("Question: ")
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        "error: the model openai:gpt-4o-mini failed while answering: "
        "ConnectionError: Connection error."
    )


def test_a_key_without_langchain_openai_falls_back_offline(
    monkeypatch: pytest.MonkeyPatch, minilm: MiniLMEmbeddings
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_openai", None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    notice = io.StringIO()
    model = demo_main.select_model(None, minilm, notice=notice)
    assert isinstance(model, ExtractiveAnswerer)
    assert model.embeddings is minilm
    assert "ExtractiveAnswerer" in notice.getvalue()


def test_vector_store_uses_cosine_distance(minilm: MiniLMEmbeddings) -> None:
    documents = load_documents()
    store = demo_main.build_vector_store(minilm, documents)
    try:
        question = "How long does the monorail ride take?"
        results = store.similarity_search_with_score(question, k=3)
        query = np.array(minilm.embed_query(question))
        for document, distance in results:
            vector = np.array(minilm.embed_query(document.page_content))
            assert distance == pytest.approx(1.0 - float(query @ vector), abs=1e-3)
        assert results[0][0].metadata["source"] == f"{BASE_URL}/seattle/monorail"
    finally:
        store.delete_collection()


def test_a_missing_embedding_model_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    absent = tmp_path / "absent.onnx"
    monkeypatch.setattr(demo_main, "shared_minilm", lambda: MiniLMEmbeddings(model_path=absent))
    code, out, err = _demo()
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("error: ")
    assert f"file not found: {absent}" in err
