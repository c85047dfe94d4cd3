from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import BaseModel

from langchain_references.factuality import Atomizer, FactualityInput, load_inputs
from langchain_references.factuality.io import (
    FactualityFormatError,
    dump_jsonl,
    input_to_dict,
    parse_result,
)
from langchain_references.factuality.model import Atom, Context, candidate_pairs
from langchain_references.factuality.pipeline import (
    FactualityEvaluatorInput,
    FactualityPipeline,
    FactualityResult,
    coerce_factuality_input,
    create_factuality_evaluator,
)
from langchain_references.factuality.relations import normalize_version
from langchain_references.factuality.retrieval import (
    ContextRetriever,
    RetrievedContexts,
    VectorStoreContexts,
)
from langchain_references.judges import (
    HeuristicJudge,
    Judge,
    Judgement,
    Label,
    LLMJudge,
    offline_judge,
)
from tests.unit_tests.factuality.test_retrieval import BagOfWords
from tests.unit_tests.fakes import ChatScripted, ScriptedChatModel


class GoldJudge(Judge):
    """Entails (0.9) an atom labelled S, contradicts (0.9) one labelled NS; unknown otherwise."""

    def __init__(self, record: FactualityInput) -> None:
        self.labels = {a.text: a.label for a in record.atoms}
        self.calls = 0

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        self.calls += 1
        label = self.labels.get(statement)
        if label == "S":
            return Judgement(label=Label.ENTAILS, confidence=0.9)
        if label == "NS":
            return Judgement(label=Label.CONTRADICTS, confidence=0.9)
        return Judgement(label=Label.UNKNOWN, confidence=0.5)


@pytest.fixture
def flaherty(shared_data: Path) -> FactualityInput:
    (record,) = load_inputs(shared_data / "factreasoner_flaherty_wikipedia.json").records
    return record


@pytest.mark.parametrize("version", [1, 2, 3])
def test_flaherty_with_a_gold_judge(flaherty: FactualityInput, version: int) -> None:
    judge = GoldJudge(flaherty)
    result = create_factuality_evaluator(judge=judge, version=version).invoke(flaherty)
    scores = result.scores
    assert scores is not None
    assert scores.gold is not None
    fr = normalize_version(version)
    assert result.num_judged_pairs == judge.calls
    assert judge.calls == len(candidate_pairs(flaherty.atoms, flaherty.contexts, version=fr))
    with_contexts = {a.id for a in flaherty.atoms if a.contexts}
    for atom in flaherty.atoms:
        decided = version > 1 or atom.id in with_contexts
        p = scores.probabilities[atom.id]
        if not decided:
            assert p == pytest.approx(0.5)
        elif atom.label == "S":
            assert p > 0.5
        else:
            assert p < 0.5
    s_with = sum(
        1 for a in flaherty.atoms if a.label == "S" and (version > 1 or a.id in with_contexts)
    )
    assert scores.gold.true_positive == s_with
    assert scores.gold.false_positive == 0
    assert scores.gold.true_negative == sum(1 for a in flaherty.atoms if a.label == "NS")
    assert scores.gold.gold_factuality_score == pytest.approx(7 / 26)
    assert result.version == fr
    assert set(result.timings) == {"retrieve", "judge", "infer"}
    assert result.graph is not None
    assert len(result.relations) == len(result.graph.relations)


def test_result_dict_has_factreasoner_fields(flaherty: FactualityInput, tmp_path: Path) -> None:
    result = create_factuality_evaluator(judge=GoldJudge(flaherty), version=1).invoke(flaherty)
    data = json.loads(json.dumps(result.to_dict()))
    for key in (
        "factuality_score",
        "marginals",
        "predictions",
        "true_positive",
        "entropy",
        "topic",
        "query",
        "response",
        "atoms",
        "relations",
        "failures",
        "timings",
    ):
        assert key in data
    assert data["num_atoms"] == 26
    assert data["atoms"][0] == {
        "id": "a0",
        "text": "Lanny Flaherty is an American.",
        "original": "Lanny Flaherty is an American.",
        "label": "S",
        "contexts": ["c_a0_0", "c_a0_1", "c_a0_2"],
    }
    assert {f["item"] for f in data["failures"]} == {a.id for a in flaherty.atoms if not a.contexts}
    with (tmp_path / "out.jsonl").open("w", encoding="utf-8") as handle:
        dump_jsonl(handle, [data])
    back = parse_result(json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8")))
    assert back.predictions == result.scores.predictions  # type: ignore[union-attr]


def tool(name: str, **args: Any) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": "1", "type": "tool_call"}]
    )


RESPONSE = "Paris is the capital of France. It is on the Seine. Rome is in Spain."
ATOM_TEXTS = ["Paris is the capital of France.", "It is on the Seine.", "Rome is in Spain."]
ATOMIZED = tool("AtomicClaims", claims=ATOM_TEXTS)
REVISED = tool(
    "RevisedAtoms",
    atoms=[
        {"id": "a0", "text": "Paris is the capital of France."},
        {"id": "a1", "text": "Paris is on the Seine."},
        {"id": "a2", "text": "Rome is in Spain."},
    ],
)
STORE_DOCS = [
    "Paris is the capital of France.",
    "Paris lies on the river Seine.",
    "Rome is the capital of Italy, not Spain.",
]


class WordJudge(Judge):
    """Contradicts when the passage says 'not <last word>'; entails when it shares the first
    and last content words with the statement; unknown otherwise."""

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        words = [w.strip(".,").lower() for w in statement.split()]
        text = passage.lower()
        if f"not {words[-1]}" in text:
            return Judgement(label=Label.CONTRADICTS, confidence=0.9)
        if words[0] in text and words[-1] in text:
            return Judgement(label=Label.ENTAILS, confidence=0.9)
        return Judgement(label=Label.UNKNOWN, confidence=0.6)


def response_evaluator(*steps: Any, **kwargs: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script=list(steps))
    store = InMemoryVectorStore(BagOfWords())
    store.add_texts(STORE_DOCS)
    evaluator = create_factuality_evaluator(
        model,
        judge=WordJudge(),
        retriever=VectorStoreContexts(store, k=1),
        version=1,
        **kwargs,
    )
    return evaluator, model


def check_response_result(result: Any) -> None:
    assert [(a.id, a.text, a.original) for a in result.atoms] == [
        ("a0", "Paris is the capital of France.", "Paris is the capital of France."),
        ("a1", "Paris is on the Seine.", "It is on the Seine."),
        ("a2", "Rome is in Spain.", "Rome is in Spain."),
    ]
    contexts = {c.id: c.text for c in result.record.contexts}
    assert [contexts[a.contexts[0]] for a in result.atoms] == STORE_DOCS
    scores = result.scores
    assert scores.predictions == {"a0": "S", "a1": "S", "a2": "NS"}
    assert scores.probabilities["a2"] < 0.5
    assert scores.gold is None
    assert set(result.timings) == {"atomize", "retrieve", "judge", "infer"}
    assert result.failures == ()
    assert result.record.output == RESPONSE
    assert result.record.topic == "Capitals"


def test_response_is_atomized_revised_retrieved_and_scored() -> None:
    evaluator, model = response_evaluator(ATOMIZED, REVISED)
    result = evaluator.invoke({"response": RESPONSE, "topic": "Capitals"})
    check_response_result(result)
    assert len(model.calls) == 2
    assert "It is on the Seine" in model.calls[1][1].text  # the reviser saw the atoms


async def test_async_path() -> None:
    evaluator, _ = response_evaluator(ATOMIZED, REVISED)
    check_response_result(await evaluator.ainvoke({"response": RESPONSE, "topic": "Capitals"}))


def test_the_result_names_the_judge_scored_or_not() -> None:
    evaluator, _ = response_evaluator(ATOMIZED, REVISED)
    result = evaluator.invoke({"response": RESPONSE, "topic": "Capitals"})
    word_judge = {"kind": "custom", "model": None, "description": "custom judge WordJudge"}
    assert result.judge is not None
    assert result.to_dict()["judge"] == word_judge
    failed, _ = response_evaluator(AIMessage(content="no tool"))  # atomizing fails: no scores
    unscored = failed.invoke({"response": RESPONSE})
    assert unscored.scores is None
    assert unscored.to_dict()["judge"] == word_judge


def test_the_default_judges_are_named() -> None:
    offline = FactualityPipeline()  # no model: the offline heuristic
    assert (offline.judge_info.kind, offline.judge_info.model) == ("heuristic", None)
    llm = FactualityPipeline(llm=ChatScripted(model="fr-judge"))  # the LLM judge on the model
    assert (llm.judge_info.kind, llm.judge_info.model) == ("llm", "scripted:fr-judge")


def test_without_revision() -> None:
    evaluator, model = response_evaluator(ATOMIZED, revise=False)
    result = evaluator.invoke({"response": RESPONSE})
    assert result.atoms[1].text == "It is on the Seine."
    assert len(model.calls) == 1


def test_atomizer_failure_is_recorded_and_batch_goes_on(flaherty: FactualityInput) -> None:
    evaluator, _ = response_evaluator(AIMessage(content="no tool"))
    bad, good = evaluator.batch(
        [{"response": RESPONSE}, flaherty], {"max_concurrency": 1}, return_exceptions=True
    )
    assert bad.scores is None
    (failure,) = bad.failures
    assert failure.stage == "atomize"
    assert "AtomizerError" in failure.reason
    assert bad.to_dict()["factuality_score"] is None
    assert good.scores is not None
    assert good.scores.num_atoms == 26


async def test_atomizer_failure_is_recorded_on_the_async_path_too() -> None:
    evaluator, model = response_evaluator(AIMessage(content="no tool"))
    result = await evaluator.ainvoke({"response": RESPONSE})
    assert result.scores is None
    (failure,) = result.failures
    assert (failure.stage, "AtomizerError" in failure.reason) == ("atomize", True)
    assert set(result.timings) == {"atomize"}
    assert len(model.calls) == 1  # the reviser, retriever and judge did not run


def test_reviser_failures_are_recorded() -> None:
    evaluator, _ = response_evaluator(
        ATOMIZED, tool("RevisedAtoms", atoms=[{"id": "a1", "text": "Paris is on the Seine."}])
    )
    result = evaluator.invoke({"response": RESPONSE})
    (failure,) = result.failures
    assert failure.stage == "revise"
    assert failure.item == "a0,a2"
    assert result.scores is not None


def test_input_without_atoms_needs_a_model(flaherty: FactualityInput) -> None:
    evaluator = create_factuality_evaluator(judge=GoldJudge(flaherty))
    with pytest.raises(ValueError, match="no atoms"):
        evaluator.invoke({"response": RESPONSE})
    out = evaluator.batch([{"response": RESPONSE}, flaherty], return_exceptions=True)
    assert isinstance(out[0], ValueError)
    assert out[1].scores is not None


class BrokenRetriever(ContextRetriever):
    def retrieve(
        self, atoms: Any, contexts: Any = (), *, topic: Any = None, config: Any = None
    ) -> RetrievedContexts:
        raise ConnectionError("search backend down")


async def test_retriever_failure_leaves_atoms_at_their_prior(flaherty: FactualityInput) -> None:
    evaluator = create_factuality_evaluator(
        judge=GoldJudge(flaherty), retriever=BrokenRetriever(), atom_prior=0.3
    )
    for result in (
        evaluator.invoke(flaherty),
        evaluator.batch([flaherty])[0],
        await evaluator.ainvoke(flaherty),  # the same stage, driven by the async driver
    ):
        assert result.scores is not None
        assert all(p == pytest.approx(0.3) for p in result.scores.probabilities.values())
        assert result.failures[0].stage == "retrieve"
        assert "backend down" in result.failures[0].reason
        assert result.record.contexts == ()


def test_judge_failures_are_recorded() -> None:
    class Failing(Judge):
        def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
            if "Seine" in passage:
                raise TimeoutError("judge timed out")
            return Judgement(label=Label.ENTAILS, confidence=0.8)

    record = FactualityInput(
        input="q",
        output="r",
        topic=None,
        atoms=(Atom("a0", "Paris is on the Seine.", contexts=("c0", "c1")),),
        contexts=(Context("c0", "Paris lies on the Seine."), Context("c1", "Paris is big.")),
    )
    result = create_factuality_evaluator(judge=Failing(), version=1).invoke(record)
    (failure,) = result.failures
    assert (failure.stage, failure.item) == ("judge", "c0->a0")
    assert "timed out" in failure.reason
    assert [(r.source, r.kind) for r in result.relations] == [("c1", "entailment")]


def test_priors_and_inference_options(flaherty: FactualityInput) -> None:
    judge = GoldJudge(flaherty)
    base = create_factuality_evaluator(judge=judge, version=1).invoke(flaherty)
    high = create_factuality_evaluator(judge=judge, version=1, atom_prior=0.8).invoke(flaherty)
    lone = next(a.id for a in flaherty.atoms if not a.contexts)
    assert high.marginals[lone] == pytest.approx(0.8)
    assert base.marginals[lone] == pytest.approx(0.5)
    bp = create_factuality_evaluator(judge=judge, version=2, inference_method="bp").invoke(flaherty)
    assert bp.inference is not None
    assert bp.inference.bp is not None
    assert {c.method for c in bp.inference.components} <= {"loopy_bp", "isolated"}
    assert base.inference is not None
    assert base.inference.exact
    with pytest.raises(ValueError, match="atom_prior"):
        create_factuality_evaluator(judge=judge, atom_prior=1.5)
    with pytest.raises(ValueError, match="version"):
        create_factuality_evaluator(judge=judge, version=4)


def test_default_judges(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel()
    assert isinstance(FactualityPipeline(llm=model).relation_judge.judge, LLMJudge)
    assert offline_judge(use_embeddings=False).embeddings is None

    import langchain_references.services.embeddings as embeddings_module

    class Unloadable:
        def embed_query(self, text: str) -> list[float]:
            raise embeddings_module.EmbeddingModelError("weights missing")

    monkeypatch.setattr(embeddings_module, "shared_minilm", Unloadable)
    with caplog.at_level(logging.WARNING):
        judge = offline_judge()
    assert isinstance(judge, HeuristicJudge)
    assert judge.embeddings is None
    assert "weights missing" in caplog.text


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"response": "  "}, FactualityFormatError),
        ({"response": "x", "topic": 3}, FactualityFormatError),
        ({"response": "x", "question": 3}, FactualityFormatError),
        ({"atoms": [], "output": "x"}, FactualityFormatError),
        ("text", TypeError),
    ],
)
def test_coerce_errors(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        coerce_factuality_input(value)


def test_coerce_response_dict() -> None:
    record = coerce_factuality_input({"response": "R.", "question": "Q?", "topic": "T"})
    assert (record.input, record.output, record.topic, record.atoms) == ("Q?", "R.", "T", ())


def test_input_and_output_schemas(flaherty: FactualityInput) -> None:
    evaluator = create_factuality_evaluator(judge=GoldJudge(flaherty))
    schema = evaluator.get_input_schema()
    assert schema is FactualityEvaluatorInput
    json_schema = schema.model_json_schema()
    titles = {ref["$ref"].rsplit("/", 1)[-1] for ref in json_schema["anyOf"]}
    assert titles == {"FactualityRecordInput", "FactualityResponseInput"}
    record = json_schema["$defs"]["FactualityRecordInput"]
    assert set(record["required"]) == {"input", "output", "atoms"}
    assert json_schema["$defs"]["FactualityResponseInput"]["required"] == ["response"]
    # What the evaluator accepts validates against the schema.
    schema.model_validate(input_to_dict(flaherty))
    schema.model_validate({"response": "Paris is in France.", "topic": "Paris"})
    with pytest.raises(ValueError, match="validation error"):
        schema.model_validate({"topic": "no response, no atoms"})

    output_schema = evaluator.get_output_schema()
    assert issubclass(output_schema, BaseModel)
    result = output_schema.model_json_schema()["$defs"][FactualityResult.__name__]
    assert {"record", "version", "scores", "marginals", "failures"} <= set(result["properties"])


def test_factory_options_are_the_pipeline_options(flaherty: FactualityInput) -> None:
    atomizer_model = ScriptedChatModel(script=[ATOMIZED])
    evaluator = create_factuality_evaluator(
        judge=WordJudge(),
        atomizer=Atomizer(atomizer_model, retry_wait=False),
        revise=False,
        version=1,
    )
    result = evaluator.invoke({"response": RESPONSE})
    assert [a.text for a in result.atoms] == ATOM_TEXTS
    assert result.failures[0].stage == "retrieve"  # no contexts in a bare response
    with pytest.raises(TypeError):
        create_factuality_evaluator(judge=WordJudge(), no_such_option=1)  # type: ignore[call-arg]
