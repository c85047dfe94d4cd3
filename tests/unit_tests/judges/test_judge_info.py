"""Every judge names itself: kind, model and description (``Judge.info`` / ``judge_info``)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig, RunnableLambda
from pydantic import ValidationError

from langchain_references.judges import (
    HeuristicJudge,
    Judge,
    JudgeInfo,
    Judgement,
    Label,
    LLMJudge,
    judge_info,
    offline_judge,
)
from langchain_references.judges.llm import chat_model_name
from langchain_references.judges.spec import JudgeSpecError, judge_from_spec, llm_of_spec
from tests.unit_tests.fakes import ChatScripted, ScriptedChatModel, tool_reply


class ShrugJudge(Judge):
    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        return Judgement(label=Label.UNKNOWN, confidence=0.5)


def test_the_heuristic_says_it_is_rough_and_has_no_model() -> None:
    info = HeuristicJudge().info()
    assert (info.kind, info.model) == ("heuristic", None)
    assert "not an NLI model" in info.description
    assert "rough" in info.description
    assert "set an LLM judge for real checks" in info.description
    assert offline_judge(use_embeddings=False).info() == info  # the default judge too
    assert str(info) == f"heuristic (no model) — {info.description}"


def test_an_llm_judge_names_its_model_as_provider_and_model() -> None:
    judge = LLMJudge(ChatScripted(model="judge-model-7"))
    info = judge.info()
    assert (info.kind, info.model) == ("llm", "scripted:judge-model-7")
    assert info.to_dict() == {
        "kind": "llm",
        "model": "scripted:judge-model-7",
        "description": "a chat model asked for a label, its confidence and a rationale",
    }
    assert str(info).startswith("llm (scripted:judge-model-7) — a chat model")


def test_a_chat_model_without_a_model_name_is_named_after_its_class() -> None:
    assert LLMJudge(ScriptedChatModel()).info().model == "ScriptedChatModel"


def test_an_openai_model_is_named_as_init_chat_model_spells_it() -> None:
    openai = pytest.importorskip("langchain_openai")
    model = openai.ChatOpenAI(model="gpt-4o-mini", api_key="sk-test")  # no call is made
    assert chat_model_name(model) == "openai:gpt-4o-mini"
    assert LLMJudge(model).info().model == "openai:gpt-4o-mini"


def test_a_chat_model_whose_tracing_parameters_fail_is_named_after_its_class() -> None:
    class Broken(ScriptedChatModel):
        def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
            raise RuntimeError("no params")

    assert chat_model_name(Broken()) == "Broken"


def test_a_custom_judge_is_named_after_its_class() -> None:
    assert ShrugJudge().info() == JudgeInfo(
        kind="custom", model=None, description="custom judge ShrugJudge"
    )


def test_wrapped_judges_are_the_judge_they_wrap() -> None:
    judge = LLMJudge(ChatScripted())
    expected = judge.info()
    assert judge_info(judge) == expected
    assert judge_info(judge.with_retry(stop_after_attempt=2)) == expected
    assert judge_info(judge.with_config(tags=["x"])) == expected
    assert judge_info(HeuristicJudge().with_config(run_name="h")).kind == "heuristic"


def test_any_other_runnable_is_a_custom_judge_named_after_the_runnable() -> None:
    def says_unknown(value: Any) -> Judgement:
        return Judgement(label=Label.UNKNOWN, confidence=0.5)

    info = judge_info(RunnableLambda(says_unknown))
    assert (info.kind, info.model, info.description) == (
        "custom",
        None,
        "custom judge says_unknown",
    )


def test_a_judge_with_a_model_can_say_so() -> None:
    class Named(ShrugJudge):
        judge_kind = "nli"

        def info(self) -> JudgeInfo:
            return JudgeInfo.of("nli", model="org/tiny-nli")

    info = judge_info(Named())
    assert (info.kind, info.model, info.description) == (
        "nli",
        "org/tiny-nli",
        "a cross-encoder NLI model",
    )


def test_a_gold_judge_is_its_own_kind() -> None:
    class Gold(ShrugJudge):
        judge_kind = "gold"

    info = Gold().info()
    assert (info.kind, info.model) == ("gold", None)
    assert "gold labels" in info.description


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"kind": "oracle", "description": "x"}, "kind"),
        ({"kind": "llm", "model": "  ", "description": "x"}, "model is blank"),
        ({"kind": "llm", "description": " "}, "description"),
        ({"kind": "custom"}, "description"),
        ({"kind": "llm", "description": "x", "temperature": 0}, "temperature"),
    ],
)
def test_bad_judge_info_is_refused(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        JudgeInfo(**fields)


def test_a_custom_judge_info_needs_a_description() -> None:
    with pytest.raises(ValidationError, match="description"):
        JudgeInfo.of("custom")


# --------------------------------------------------------------------------- specs


def test_offline_specs_need_no_model() -> None:
    assert llm_of_spec("heuristic") is None
    assert llm_of_spec("heuristic-lexical") is None
    judge, model = judge_from_spec("heuristic-lexical", load_model=pytest.fail)
    assert model is None
    assert isinstance(judge, HeuristicJudge)
    assert judge.embeddings is None
    assert judge.info().kind == "heuristic"


def test_an_llm_spec_loads_its_model_and_names_it() -> None:
    loaded: list[str] = []

    def load(name: str) -> ChatScripted:
        loaded.append(name)
        return ChatScripted(
            model=name.partition(":")[2],
            script=[tool_reply("JudgeReply", label="entails", confidence=0.8, rationale="r")],
        )

    judge, model = judge_from_spec("llm:scripted:judge-2", load_model=load)
    assert loaded == ["scripted:judge-2"]
    assert isinstance(judge, LLMJudge)
    assert judge.llm is model
    assert judge.info().model == "scripted:judge-2"
    assert judge.invoke({"statement": "s", "passage": "p"}).label is Label.ENTAILS


@pytest.mark.parametrize("spec", ["oracle", "llm:", "llm:  ", "LLM:openai:gpt-4o", ""])
def test_unknown_specs_are_refused_with_the_choices(spec: str) -> None:
    with pytest.raises(JudgeSpecError) as caught:
        llm_of_spec(spec)
    assert str(caught.value) == (
        "must be 'heuristic', 'heuristic-lexical', 'llm:PROVIDER:MODEL' or 'nli:MODEL', "
        f"got {spec!r}"
    )
