"""Long-form factuality evaluator: a Runnable from a response to FactReasoner scores.

:func:`create_factuality_evaluator` composes small runnables::

    prepare -> atomize (+ revise) -> retrieve -> judge -> infer

* **prepare**: the input is a :class:`~langchain_references.factuality.io.FactualityInput`, a
  FactReasoner record (a dict with ``atoms``; see :mod:`~langchain_references.factuality.io`)
  or ``{"response": str, "topic": str, "question": str}`` (``topic`` and ``question``
  optional);
* **atomize**: only when the input has no atoms: the
  :class:`~langchain_references.factuality.atomizer.Atomizer` splits the response and the
  :class:`~langchain_references.factuality.reviser.Reviser` makes the atoms self-contained
  (both need a chat model);
* **retrieve**: a :class:`~langchain_references.factuality.retrieval.ContextRetriever`
  (default: the contexts given in the input);
* **judge**: a :class:`~langchain_references.factuality.relations.RelationJudge` runs the
  judge over the pairs the graph version needs, in one batch;
* **infer**: :func:`~langchain_references.factuality.model.build_fact_graph`,
  :func:`~langchain_references.factuality.inference.run_inference` and
  :func:`~langchain_references.factuality.metrics.score_marginals`.

The output is a :class:`FactualityResult` (scores, marginals, atoms with their texts,
relations, failures, per-stage timings); :meth:`FactualityResult.to_dict` writes FactReasoner's
result fields (:func:`~langchain_references.factuality.io.result_to_dict`) plus those extras.

Each stage that does I/O is written once, as a sans-IO generator that yields the call it needs
and receives its outcome; ``invoke`` and ``ainvoke`` only drive it (``_drive`` / ``_adrive``),
so the sync and async paths take the same decisions. ``get_input_schema()`` describes the
accepted input (:class:`FactualityEvaluatorInput`), ``get_output_schema()`` the result.

Errors: a malformed input, or an input without atoms when no chat model is configured,
raises ``ValueError`` (use ``batch(..., return_exceptions=True)`` to go on with the other
records). Failures met while running (a malformed atomizer reply, a retrieval error, failed
judgements) are recorded in :attr:`FactualityResult.failures`; when atomization fails there
is nothing to score and :attr:`FactualityResult.scores` is ``None``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, TypedDict, Unpack, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel, ConfigDict, Field, RootModel

from langchain_references.factuality.atomizer import Atomizer
from langchain_references.factuality.inference import InferenceResult, Method, run_inference
from langchain_references.factuality.io import (
    FactualityFormatError,
    FactualityInput,
    parse_input,
    result_to_dict,
)
from langchain_references.factuality.metrics import FactualityScores, score_marginals
from langchain_references.factuality.model import (
    PRIOR_PROB_ATOM,
    PRIOR_PROB_CONTEXT,
    Atom,
    FactGraph,
    GraphVersion,
    Relation,
    build_fact_graph,
)
from langchain_references.factuality.relations import (
    RelationJudge,
    RelationResult,
    normalize_version,
)
from langchain_references.factuality.retrieval import (
    ContextRetriever,
    InputContexts,
    RetrievedContexts,
)
from langchain_references.factuality.reviser import Reviser, RevisionResult
from langchain_references.failures import Failure
from langchain_references.judges.base import JudgeInfo, JudgeInputLike, Judgement, judge_info
from langchain_references.judges.llm import LLMJudge
from langchain_references.judges.offline import offline_judge

__all__ = [
    "FactualityEvaluatorInput",
    "FactualityInputLike",
    "FactualityOptions",
    "FactualityPipeline",
    "FactualityRecordInput",
    "FactualityResponseInput",
    "FactualityResult",
    "Failure",
    "coerce_factuality_input",
    "create_factuality_evaluator",
]

logger = logging.getLogger(__name__)

FactualityInputLike: TypeAlias = FactualityInput | Mapping[str, Any]
"""A :class:`FactualityInput`, a FactReasoner record dict, or ``{"response": ...}``."""


class RecordAtom(BaseModel):
    """An atom of a FactReasoner record."""

    id: str = Field(description='Unique id, e.g. "a0"')
    text: str = Field(description="The claim")
    original: str | None = Field(default=None, description="The claim before revision")
    label: Literal["S", "NS"] | None = Field(default=None, description="Optional gold label")
    contexts: list[str] = Field(default_factory=list, description="Context ids, best first")


class RecordContext(BaseModel):
    """A context (piece of evidence) of a FactReasoner record."""

    id: str = Field(description='Unique id, e.g. "c_a0_1"')
    text: str = Field(description="The passage text")
    title: str = ""
    snippet: str = ""
    link: str = ""


class FactualityRecordInput(BaseModel):
    """A FactReasoner input record: the response with its atoms (and contexts)."""

    model_config = ConfigDict(extra="allow")

    input: str = Field(description="The user query")
    output: str = Field(description="The response to assess")
    topic: str | None = None
    atoms: list[RecordAtom]
    contexts: list[RecordContext] = Field(default_factory=list)


class FactualityResponseInput(BaseModel):
    """A response without atoms: the evaluator atomizes it (needs a chat model)."""

    response: str = Field(description="The response to assess (alias: output)")
    topic: str | None = None
    question: str = Field(default="", description="The user query (alias: input)")


class FactualityEvaluatorInput(RootModel[FactualityRecordInput | FactualityResponseInput]):
    """Input schema of the evaluator: a FactReasoner record or ``{"response", "topic"}``.

    It describes the input (``get_input_schema``); the evaluator reads it with
    :func:`coerce_factuality_input`, which also takes a :class:`FactualityInput`.
    """


@dataclass(frozen=True)
class FactualityResult:
    """The assessment of one response.

    Attributes:
        record: The record as assessed: atoms (revised, with their context ids) and contexts.
        version: The graph version used.
        scores: The scores, or ``None`` if the response could not be atomized.
        marginals: ``P(true)`` of every variable (atoms and contexts).
        relations: The relations that became factors of the graph.
        num_judged_pairs: Number of pairs sent to the judge.
        failures: What went wrong, stage by stage.
        timings: Seconds spent per stage.
        inference: How the marginals were computed.
        graph: The Markov network.
        judge: Which judge judged the relations (kind, model, description).
    """

    record: FactualityInput
    version: GraphVersion
    scores: FactualityScores | None
    marginals: dict[str, float] = field(default_factory=dict)
    relations: tuple[Relation, ...] = ()
    num_judged_pairs: int = 0
    failures: tuple[Failure, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    inference: InferenceResult | None = field(default=None, repr=False)
    graph: FactGraph | None = field(default=None, repr=False)
    judge: JudgeInfo | None = None

    @property
    def atoms(self) -> tuple[Atom, ...]:
        """The atoms as assessed."""
        return self.record.atoms

    def to_dict(self) -> dict[str, Any]:
        """FactReasoner's results dictionary plus the judge, atoms, relations, failures, timings."""
        if self.scores is not None:
            out = result_to_dict(self.scores, self.record)
        else:
            out = {
                "topic": self.record.topic,
                "query": self.record.input,
                "response": self.record.output,
                "factuality_score": None,
                "num_atoms": len(self.record.atoms),
            }
        out["version"] = self.version
        out["judge"] = None if self.judge is None else self.judge.to_dict()
        out["atoms"] = [
            {
                "id": a.id,
                "text": a.text,
                "original": a.original if a.original is not None else a.text,
                "label": a.label,
                "contexts": list(a.contexts),
            }
            for a in self.record.atoms
        ]
        out["relations"] = [
            {"from": r.source, "to": r.target, "relation": r.kind, "probability": r.probability}
            for r in self.relations
        ]
        out["num_judged_pairs"] = self.num_judged_pairs
        out["failures"] = [f.to_dict() for f in self.failures]
        out["timings"] = dict(self.timings)
        return out


@dataclass(frozen=True)
class _State:
    """What flows between the stages (internal)."""

    record: FactualityInput
    failures: tuple[Failure, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    judged: RelationResult | None = None
    stopped: bool = False

    def add(self, stage: str, seconds: float, *failures: Failure, **changes: Any) -> _State:
        return replace(
            self,
            failures=self.failures + failures,
            timings=(*self.timings, (stage, seconds)),
            **changes,
        )


def coerce_factuality_input(value: object) -> FactualityInput:
    """Read a pipeline input (see module docstring).

    Args:
        value: A :class:`FactualityInput`, a FactReasoner record dict or a ``{"response"}``
            dict.

    Returns:
        The record (no atoms for a ``{"response"}`` dict).

    Raises:
        FactualityFormatError: On a malformed dict (a ``ValueError``).
        TypeError: If ``value`` is neither a record nor a mapping.
    """
    if isinstance(value, FactualityInput):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(
            f"the evaluator takes a FactualityInput or a mapping, not {type(value).__name__}"
        )
    if "atoms" in value:
        return parse_input(value)
    response = value.get("response", value.get("output"))
    if not isinstance(response, str) or not response.strip():
        raise FactualityFormatError("the input needs 'atoms' or a non-blank 'response' string")
    topic = value.get("topic")
    question = value.get("question", value.get("input", ""))
    if topic is not None and not isinstance(topic, str):
        raise FactualityFormatError("'topic' must be a string")
    if not isinstance(question, str):
        raise FactualityFormatError("'question' must be a string")
    return FactualityInput(input=question, output=response, topic=topic, atoms=(), contexts=())


def _since(start: float) -> float:
    return time.perf_counter() - start


def _revision_failures(revision: RevisionResult) -> list[Failure]:
    failures = [Failure(stage="revise", reason=e) for e in revision.errors]
    if revision.unrevised:
        failures.append(
            Failure(
                stage="revise",
                reason=f"{len(revision.unrevised)} atom(s) left unrevised",
                item=",".join(revision.unrevised),
            )
        )
    return failures


# ---------------------------------------------------------------------- sans-IO stages
# Each I/O stage is a generator: it yields the one call it needs (a ``_Call``, spelled for both
# drivers), receives its ``_Outcome``, and returns the next ``_State``. Every decision (skip,
# timing, what a failure becomes) is in the generator; ``_drive`` / ``_adrive`` only run calls.


@dataclass(frozen=True)
class _Outcome:
    """What a call returned, or the exception it raised (re-raised in the stage by ``get``)."""

    value: Any = None
    error: Exception | None = None

    def get(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


@dataclass(frozen=True)
class _Call:
    """A call with its sync and async spelling and their common arguments."""

    sync: Callable[..., Any]
    asynchronous: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def invoke(cls, runnable: Runnable[Any, Any], value: Any, config: RunnableConfig) -> _Call:
        return cls(runnable.invoke, runnable.ainvoke, (value, config))

    def run(self) -> _Outcome:
        try:
            return _Outcome(self.sync(*self.args, **self.kwargs))
        except Exception as exc:  # handed to the stage, which decides
            return _Outcome(error=exc)

    async def arun(self) -> _Outcome:
        try:
            return _Outcome(await self.asynchronous(*self.args, **self.kwargs))
        except Exception as exc:  # handed to the stage, which decides
            return _Outcome(error=exc)


_Steps: TypeAlias = Generator[_Call, _Outcome, _State]


def _step(steps: _Steps, outcome: _Outcome | None) -> _Call | _State:
    """Start or resume a stage: its next call, or its final state."""
    try:
        return next(steps) if outcome is None else steps.send(outcome)
    except StopIteration as stop:
        state: _State = stop.value
        return state


def _drive(steps: _Steps) -> _State:
    step = _step(steps, None)
    while isinstance(step, _Call):
        step = _step(steps, step.run())
    return step


async def _adrive(steps: _Steps) -> _State:
    step = _step(steps, None)
    while isinstance(step, _Call):
        step = _step(steps, await step.arun())
    return step


def _stage(name: str, steps: Callable[[_State, RunnableConfig], _Steps]) -> Runnable[Any, Any]:
    """A runnable stage: the same steps, driven by ``invoke`` or by ``ainvoke``."""

    def run(state: _State, config: RunnableConfig) -> _State:
        return _drive(steps(state, config))

    async def arun(state: _State, config: RunnableConfig) -> _State:
        return await _adrive(steps(state, config))

    return RunnableLambda(run, afunc=arun, name=name)


class FactualityOptions(TypedDict, total=False):
    """The keyword options of :class:`FactualityPipeline` (their defaults live there)."""

    judge: Runnable[JudgeInputLike, Judgement] | None
    atomizer: Runnable[Any, tuple[Atom, ...]] | None
    reviser: Runnable[Any, RevisionResult] | None
    revise: bool
    retriever: ContextRetriever | None
    version: int | str
    top_k: int | None
    atom_prior: float
    context_prior: float
    use_priors: bool
    inference_method: Method
    max_concurrency: int | None


class FactualityPipeline:
    """The stages of the evaluator, configured once; :meth:`as_runnable` composes them.

    Args:
        judge: The judge of context -> atom (and context -> context) pairs. Default:
            :class:`~langchain_references.judges.LLMJudge` on ``llm`` if given, else
            :func:`~langchain_references.judges.offline_judge` (weak).
        llm: Chat model for the atomizer and reviser (needed for inputs without atoms).
        atomizer: A custom atomizer runnable (default: ``Atomizer(llm)``).
        reviser: A custom reviser runnable (default: ``Reviser(llm)``).
        revise: Revise freshly extracted atoms (ignored for inputs that come with atoms).
        retriever: Where the contexts come from (default: :class:`InputContexts`).
        version: Graph version 1, 2 or 3 (FactReasoner's FR1/FR2/FR3).
        top_k: FR1: contexts per atom used (also trims :class:`InputContexts` by default).
        atom_prior: Prior probability of an atom being true.
        context_prior: Prior probability of a context being true.
        use_priors: FactReasoner's "with priors" factor tables.
        inference_method: ``"auto"``, ``"exact"``, ``"bp"``, ``"gibbs"`` or ``"brute"``.
        max_concurrency: Default limit of parallel judge / model calls (a config's
            ``max_concurrency`` wins).

    Attributes:
        judge_info: Which judge it runs, as every :class:`FactualityResult` names it.

    Raises:
        ValueError: On a bad version, bound or prior.
    """

    def __init__(
        self,
        *,
        judge: Runnable[JudgeInputLike, Judgement] | None = None,
        llm: BaseChatModel | None = None,
        atomizer: Runnable[Any, tuple[Atom, ...]] | None = None,
        reviser: Runnable[Any, RevisionResult] | None = None,
        revise: bool = True,
        retriever: ContextRetriever | None = None,
        version: int | str = 2,
        top_k: int | None = None,
        atom_prior: float = PRIOR_PROB_ATOM,
        context_prior: float = PRIOR_PROB_CONTEXT,
        use_priors: bool = True,
        inference_method: Method = "auto",
        max_concurrency: int | None = None,
    ) -> None:
        for name, prior in (("atom_prior", atom_prior), ("context_prior", context_prior)):
            if not 0.0 <= prior <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {prior}")
        if judge is None:
            judge = LLMJudge(llm) if llm is not None else offline_judge()
        self.version = normalize_version(version)
        self.judge_info = judge_info(judge)
        self.relation_judge = RelationJudge(
            judge, version=self.version, top_k=top_k, max_concurrency=max_concurrency
        )
        self.atomizer = atomizer if atomizer is not None else (Atomizer(llm) if llm else None)
        if reviser is None and revise and llm is not None:
            reviser = Reviser(llm, max_concurrency=max_concurrency)
        self.reviser = reviser if revise else None
        self.retriever = retriever if retriever is not None else InputContexts(top_k)
        self.top_k = top_k
        self.atom_prior = atom_prior
        self.context_prior = context_prior
        self.use_priors = use_priors
        self.inference_method: Method = inference_method

    # ------------------------------------------------------------------ composition

    def as_runnable(self) -> Runnable[FactualityInputLike, FactualityResult]:
        """The evaluator: ``prepare | atomize | retrieve | judge | infer``.

        Its ``get_input_schema()`` is :class:`FactualityEvaluatorInput` and its
        ``get_output_schema()`` describes :class:`FactualityResult`.

        Returns:
            A runnable with ``invoke`` / ``ainvoke`` / ``batch`` / ``abatch``.
        """
        chain = (
            RunnableLambda(self._prepare, name="prepare")
            | _stage("atomize", self._atomize)
            | _stage("retrieve", self._retrieve)
            | _stage("judge", self._judge)
            | RunnableLambda(self._infer, name="infer")
        )
        # The input type is a schema of what the evaluator reads (JSON dicts), not a Python type.
        input_type = cast(Any, FactualityEvaluatorInput)
        return chain.with_config(run_name="factuality_evaluator").with_types(
            input_type=input_type, output_type=FactualityResult
        )

    # ------------------------------------------------------------------ stages

    def _prepare(self, value: Any) -> _State:
        record = coerce_factuality_input(value)
        if not record.atoms and self.atomizer is None:
            raise ValueError(
                "the input has no atoms: pass llm= (or atomizer=) to extract them from the response"
            )
        return _State(record)

    def _atomize(self, state: _State, config: RunnableConfig) -> _Steps:
        """Atomize (and revise) a response given without atoms; a failure stops the record."""
        if state.record.atoms or self.atomizer is None:
            return state
        start = time.perf_counter()
        request: dict[str, Any] = {"response": state.record.output}
        if state.record.topic:
            request["topic"] = state.record.topic
        try:
            atoms = tuple((yield _Call.invoke(self.atomizer, request, config)).get())
            revision: RevisionResult | None = None
            if self.reviser is not None and atoms:
                with_atoms = {**request, "atoms": atoms}
                revision = (yield _Call.invoke(self.reviser, with_atoms, config)).get()
        except Exception as exc:  # a failed response is recorded; a batch goes on
            logger.warning("atomization failed: %s", exc)
            failure = Failure(stage="atomize", reason=f"{type(exc).__name__}: {exc}")
            return state.add("atomize", _since(start), failure, stopped=True)
        failures: list[Failure] = []
        if revision is not None:
            atoms, failures = revision.atoms, _revision_failures(revision)
        record = replace(state.record, atoms=atoms)
        return state.add("atomize", _since(start), *failures, record=record)

    def _retrieve(self, state: _State, config: RunnableConfig) -> _Steps:
        """Find the contexts; a failure leaves every atom without context (at its prior)."""
        if state.stopped:
            return state
        start = time.perf_counter()
        record, retriever = state.record, self.retriever
        args, options = (record.atoms, record.contexts), {"topic": record.topic, "config": config}
        try:
            result: RetrievedContexts = (
                yield _Call(retriever.retrieve, retriever.aretrieve, args, options)
            ).get()
        except Exception as exc:  # a retrieval failure is recorded; atoms keep their prior
            logger.warning("retrieval failed: %s", exc)
            atoms = tuple(replace(a, contexts=()) for a in record.atoms)
            failure = Failure(stage="retrieve", reason=f"{type(exc).__name__}: {exc}")
            bare = replace(record, atoms=atoms, contexts=())
            return state.add("retrieve", _since(start), failure, record=bare)
        found = replace(record, atoms=result.atoms, contexts=result.contexts)
        return state.add("retrieve", _since(start), *result.failures, record=found)

    def _judge(self, state: _State, config: RunnableConfig) -> _Steps:
        """Judge the pairs the graph version needs; failed judgements are recorded."""
        if state.stopped:
            return state
        start = time.perf_counter()
        judge, record = self.relation_judge, state.record
        args, options = (record.atoms, record.contexts), {"config": config}
        result: RelationResult = (
            yield _Call(judge.judge_pairs, judge.ajudge_pairs, args, options)
        ).get()
        failures = [
            Failure(
                stage="judge",
                reason=p.judgement.error or "failed",
                item=f"{p.source}->{p.target}",
            )
            for p in result.failures
        ]
        return state.add("judge", _since(start), *failures, judged=result)

    def _infer(self, state: _State) -> FactualityResult:
        if state.stopped or state.judged is None:
            return FactualityResult(
                record=state.record,
                version=self.version,
                scores=None,
                failures=state.failures,
                timings=dict(state.timings),
                judge=self.judge_info,
            )
        start = time.perf_counter()
        record = state.record
        graph = build_fact_graph(
            record.atoms,
            record.contexts,
            state.judged.relations,
            version=self.version,
            top_k=self.top_k if self.version == "FR1" else None,
            atom_prior=self.atom_prior,
            context_prior=self.context_prior,
            use_priors=self.use_priors,
        )
        inference = run_inference(graph, self.inference_method)
        scores = score_marginals(
            inference.marginals,
            graph.atom_ids,
            labels=record.labels,
            num_contexts=len(graph.context_ids),
        )
        timings = dict(state.timings)
        timings["infer"] = _since(start)
        return FactualityResult(
            record=record,
            version=self.version,
            scores=scores,
            marginals=dict(inference.marginals),
            relations=graph.relations,
            num_judged_pairs=len(state.judged.pairs),
            failures=state.failures,
            timings=timings,
            inference=inference,
            graph=graph,
            judge=self.judge_info,
        )


def create_factuality_evaluator(
    llm: BaseChatModel | None = None, **options: Unpack[FactualityOptions]
) -> Runnable[FactualityInputLike, FactualityResult]:
    """Build the long-form factuality evaluator (see module docstring).

    Args:
        llm: Chat model for atomizing and revising responses given without atoms (and the
            default judge).
        **options: The keyword options of :class:`FactualityPipeline` (defaults there):
            ``judge`` (default ``LLMJudge(llm)``, or the weak
            :func:`~langchain_references.judges.offline_judge` without ``llm``),
            ``retriever`` (default: the contexts given in the input), ``version`` (1, 2 or
            3), ``top_k``, ``atom_prior``, ``context_prior``, ``use_priors``, ``revise``,
            ``inference_method``, ``max_concurrency``, ``atomizer``, ``reviser``.

    Returns:
        ``Runnable[FactualityInput | dict, FactualityResult]``.

    Raises:
        TypeError: On an unknown option.
        ValueError: On a bad version, bound or prior.

    Examples:
        >>> from langchain_references.factuality import load_inputs
        >>> evaluator = create_factuality_evaluator(judge=my_judge, version=2)  # doctest: +SKIP
        >>> (record,) = load_inputs("flaherty_wikipedia.json").records  # doctest: +SKIP
        >>> evaluator.invoke(record).scores.factuality_score  # doctest: +SKIP
    """
    return FactualityPipeline(llm=llm, **options).as_runnable()
