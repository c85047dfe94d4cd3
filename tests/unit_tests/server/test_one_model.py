"""One embedding model per process: ``serve --search`` loads MiniLM once.

The evidence index, the offline judge and the web branch's relevance stage all take the
process's one :func:`~langchain_references.services.embeddings.shared_minilm`; the loads are counted
at the model loader.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from langchain_references.judges import HeuristicJudge
from langchain_references.server.app import build_services, create_app
from langchain_references.server.settings import ServerSettings
from langchain_references.services import embeddings as embeddings_module
from langchain_references.services.embeddings import MiniLMEmbeddings, shared_minilm

from .conftest import INDEX_NAME


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[MiniLMEmbeddings]:
    """A fresh process's shared model, and every model load from now on."""
    monkeypatch.setattr(embeddings_module, "_SHARED", embeddings_module._Shared())
    loaded: list[MiniLMEmbeddings] = []
    real = MiniLMEmbeddings._build_runtime

    def counting(self: MiniLMEmbeddings) -> object:
        loaded.append(self)
        return real(self)

    monkeypatch.setattr(MiniLMEmbeddings, "_build_runtime", counting)
    return loaded


def test_serve_with_a_search_back_end_loads_one_minilm(
    built_index_dir: Path, tmp_path: Path, loads: list[MiniLMEmbeddings]
) -> None:
    recording = tmp_path / "search.json"
    recording.write_text("{}", encoding="utf-8")  # no web hits: the index branch answers
    settings = ServerSettings(
        index_name=INDEX_NAME,
        persist_dir=built_index_dir,
        search_backend=f"recorded:{recording}",
        judge="heuristic",
    )
    services = build_services(settings)
    assert isinstance(services.judge, HeuristicJudge)
    assert services.judge.embeddings is services.index.embeddings is shared_minilm()
    body = {"statement": "Arctic sea ice is declining.", "top_k": 2}
    with TestClient(create_app(settings, services=services), base_url="http://localhost") as client:
        response = client.post("/v1/factcheck", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["counts"]["judged"] == 2
        article = client.post("/v1/article", json={"text": body["statement"], "top_k": 1})
        assert article.status_code == 200, article.text
    assert len(loads) == 1
    assert loads[0] is shared_minilm()


def test_shared_minilm_is_one_object_per_process(loads: list[MiniLMEmbeddings]) -> None:
    first = shared_minilm()
    assert shared_minilm() is first
    from langchain_references.judges import offline_judge
    from langchain_references.server.index import load_embeddings

    assert load_embeddings() is first
    assert load_embeddings("minilm") is first
    assert offline_judge().embeddings is first
    assert len(loads) == 1  # offline_judge loads it (a probe); nothing loads it again
