"""Types and base class of the judges that compare a statement with a passage.

A judge decides whether a passage *entails* a statement, *contradicts* it, or says nothing
about it (*unknown*). Every judge is a LangChain :class:`~langchain_core.runnables.Runnable`
that takes ``{"statement": str, "passage": str}`` (or a :class:`JudgeInput`) and returns a
:class:`Judgement`, so judges compose with other runnables and support ``batch`` / ``abatch``
with ``config={"max_concurrency": n}``.

To write a judge, subclass :class:`Judge` and implement :meth:`Judge._judge`; optionally
:meth:`Judge._ajudge` (native async) and :meth:`Judge._judge_batch` (vectorised batches).

Every judge says what it is: :meth:`Judge.info` (or :func:`judge_info` for any judge runnable)
gives a :class:`JudgeInfo` (kind, model, description), which the fact-check results, the
factuality results and the citation verdicts carry so that every report and every JSON
document names the judge behind its verdicts.
"""

from __future__ import annotations

import logging
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal, Self, TypeAlias, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import (
    ContextThreadPoolExecutor,
    get_config_list,
    run_in_executor,
)
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Judge",
    "JudgeInfo",
    "JudgeInput",
    "JudgeInputLike",
    "JudgeKind",
    "Judgement",
    "Label",
    "coerce_judge_input",
    "judge_info",
    "paired_outputs",
    "raise_interrupts",
]

logger = logging.getLogger(__name__)

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")

#: In a call of :meth:`Judge._batch_threads`: set once the batch was interrupted.
_ABANDONED: ContextVar[threading.Event | None] = ContextVar("judge_batch_abandoned", default=None)


def _not_abandoned(record: logging.LogRecord) -> bool:
    """Drop what a call still in flight logs after its batch was interrupted (Ctrl-C)."""
    abandoned = _ABANDONED.get()
    return abandoned is None or not abandoned.is_set()


logger.addFilter(_not_abandoned)

_MAX_ERROR_CHARS = 500


class Label(StrEnum):
    """What a passage says about a statement."""

    ENTAILS = "entails"
    """The passage, taken as true, implies the statement."""
    CONTRADICTS = "contradicts"
    """The passage, taken as true, implies the statement is false."""
    UNKNOWN = "unknown"
    """The passage neither entails nor contradicts the statement (or the judge failed)."""


class Judgement(BaseModel):
    """A judge's decision about one (statement, passage) pair.

    Attributes:
        label: Entails, contradicts or unknown.
        confidence: The judge's confidence in ``label``, in ``[0, 1]``.
        rationale: A short explanation (from the model, or how a heuristic decided).
        error: Why the judge failed, if it did; a failed judgement is always ``unknown`` with
            confidence 0, so aggregators can skip it.
        probabilities: Optional per-label probabilities (e.g. an NLI model's softmax), each in
            ``[0, 1]``; probabilistic aggregators use them when present.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    label: Label
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = ""
    error: str | None = None
    probabilities: dict[Label, float] | None = None

    @field_validator("probabilities")
    @classmethod
    def _check_probabilities(cls, value: dict[Label, float] | None) -> dict[Label, float] | None:
        if value is not None:
            for label, p in value.items():
                if not (math.isfinite(p) and 0.0 <= p <= 1.0):
                    raise ValueError(f"probability of {label.value!r} must be in [0, 1], got {p}")
        return value

    @model_validator(mode="after")
    def _failed_is_unknown(self) -> Self:
        if self.error is not None and (self.label is not Label.UNKNOWN or self.confidence != 0):
            raise ValueError("a judgement with an error must be 'unknown' with confidence 0")
        return self

    @classmethod
    def failed(cls, reason: str) -> Judgement:
        """Build the judgement recorded when judging fails.

        Args:
            reason: What went wrong (truncated to 500 characters).

        Returns:
            An ``unknown`` judgement with confidence 0 and ``error`` set.
        """
        reason = reason.strip() or "unspecified error"
        if len(reason) > _MAX_ERROR_CHARS:
            reason = reason[: _MAX_ERROR_CHARS - 1] + "…"
        return cls(label=Label.UNKNOWN, confidence=0.0, error=reason)

    @property
    def ok(self) -> bool:
        """Whether the judge succeeded (``error`` is ``None``)."""
        return self.error is None


JudgeKind: TypeAlias = Literal["llm", "nli", "heuristic", "gold", "custom"]
"""What kind of judge made a verdict: a chat model (``llm``), a cross-encoder NLI model
(``nli``), the offline heuristic (``heuristic``), a dataset's gold labels (``gold``, an oracle
for benchmarks) or any other judge (``custom``)."""

#: What each kind of judge is, in the words every report shows (a custom judge says its name).
KIND_DESCRIPTIONS: Final[dict[str, str]] = {
    "llm": "a chat model asked for a label, its confidence and a rationale",
    "nli": "a cross-encoder NLI model",
    "heuristic": (
        "offline heuristic (word overlap and similarity), not an NLI model: rough; "
        "set an LLM judge for real checks"
    ),
    "gold": "the dataset's gold labels (an oracle for benchmarks, not a check of new claims)",
}


class JudgeInfo(BaseModel):
    """Which judge made a verdict: what every result, report and JSON document names.

    Attributes:
        kind: The kind of judge (:data:`JudgeKind`).
        model: The model: ``PROVIDER:MODEL`` for an LLM judge (e.g.
            ``"openai:gpt-4o-mini"``), the model's repository or file for an NLI judge;
            ``None`` for a judge without a model (the heuristic, gold labels).
        description: What the judge is, in a few words, for people.

    Examples:
        >>> info = JudgeInfo.of("llm", model="openai:gpt-4o-mini")
        >>> info.to_dict()["model"]
        'openai:gpt-4o-mini'
        >>> str(JudgeInfo.of("heuristic")).split(" — ")[0]
        'heuristic (no model)'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: JudgeKind
    model: str | None = None
    description: str = Field(min_length=1, pattern=r"\S")

    @field_validator("model")
    @classmethod
    def _model_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("model is blank: give its name or None")
        return value

    @classmethod
    def of(cls, kind: JudgeKind, *, model: str | None = None, description: str = "") -> JudgeInfo:
        """The info of a judge of ``kind``, described in the words of its kind by default.

        Args:
            kind: The kind of judge.
            model: The model's name, if the judge has one.
            description: What the judge is; defaults to the kind's description
                (:data:`KIND_DESCRIPTIONS`; required for a ``custom`` judge).

        Returns:
            The info.

        Raises:
            ValueError: If a custom judge has no description, or a value is invalid.
        """
        return cls(
            kind=kind, model=model, description=description or KIND_DESCRIPTIONS.get(kind, "")
        )

    def to_dict(self) -> dict[str, str | None]:
        """JSON-serialisable form: ``{"kind", "model", "description"}``."""
        return {"kind": self.kind, "model": self.model, "description": self.description}

    def __str__(self) -> str:
        """One line for reports: ``KIND (MODEL) — DESCRIPTION`` (``no model`` without one)."""
        return f"{self.kind} ({self.model or 'no model'}) — {self.description}"


class JudgeInput(BaseModel):
    """Input of a judge: a statement to check and a passage to check it against.

    Attributes:
        statement: The claim to verify (must contain non-blank text).
        passage: The evidence text (may be empty: an empty passage is judged ``unknown``).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    statement: str
    passage: str

    @field_validator("statement")
    @classmethod
    def _non_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("statement is blank")
        return value


JudgeInputLike: TypeAlias = JudgeInput | Mapping[str, Any]
"""A :class:`JudgeInput` or a mapping with ``statement`` and ``passage`` string keys."""


def raise_interrupts(outputs: Iterable[object]) -> None:
    """Raise the first interrupt found among the outputs of ``batch(..., return_exceptions=True)``.

    An interrupt is a ``BaseException`` that is not an ``Exception``: ``KeyboardInterrupt``
    (Ctrl-C), ``SystemExit``, ``asyncio.CancelledError``. LangChain's ``batch`` / ``abatch``
    with ``return_exceptions=True`` may return one in an input's slot (its batch helpers catch
    ``BaseException``); it is a request to stop, not the failure of that input, so it must
    never be recorded as a failed judgement.

    Args:
        outputs: The outputs of the batch, one per input.

    Raises:
        BaseException: The first interrupt among ``outputs``, if any.
    """
    for output in outputs:
        if isinstance(output, BaseException) and not isinstance(output, Exception):
            raise output


def paired_outputs(
    inputs: Iterable[InputT], outputs: Sequence[OutputT]
) -> Iterator[tuple[InputT, OutputT]]:
    """Each input with its output of ``batch(..., return_exceptions=True)``, interrupts first.

    Args:
        inputs: What the batch was run on (or what each call stands for), in order.
        outputs: The batch's outputs, one per input.

    Returns:
        ``(input, output)`` pairs, in order; an output may be an exception (a failed call).

    Raises:
        BaseException: The first interrupt among ``outputs`` (:func:`raise_interrupts`), before
            any pair.
        ValueError: If there are not as many outputs as inputs (when the pairs are read).
    """
    raise_interrupts(outputs)
    return zip(inputs, outputs, strict=True)


def judge_info(judge: object) -> JudgeInfo:
    """Which judge a judge runnable is (:meth:`Judge.info`), whatever wraps it.

    A :class:`Judge` says it itself; a bound or retried judge (``judge.with_config(...)``,
    ``judge.with_retry()``) is the judge it wraps; any other runnable is a ``custom`` judge
    named after the runnable.

    Args:
        judge: The judge (any ``Runnable[{"statement", "passage"}, Judgement]``).

    Returns:
        Its info.
    """
    if isinstance(judge, Judge):
        return judge.info()
    bound = getattr(judge, "bound", None)
    if isinstance(judge, Runnable) and isinstance(bound, Runnable):
        return judge_info(bound)
    name = judge.get_name() if isinstance(judge, Runnable) else type(judge).__name__
    return JudgeInfo.of("custom", description=f"custom judge {name}")


def coerce_judge_input(value: object) -> JudgeInput:
    """Validate a judge input.

    Args:
        value: A :class:`JudgeInput` or a mapping with ``statement`` and ``passage`` strings
            (other keys are ignored).

    Returns:
        The validated input.

    Raises:
        TypeError: If ``value`` is neither a ``JudgeInput`` nor a mapping.
        ValueError: If a key is missing, not a string, or the statement is blank
            (``pydantic.ValidationError`` is a ``ValueError``).
    """
    if isinstance(value, JudgeInput):
        return value
    if isinstance(value, Mapping):
        return JudgeInput.model_validate(dict(value), strict=True)
    raise TypeError(
        "a judge takes a JudgeInput or a mapping with 'statement' and 'passage', "
        f"not {type(value).__name__}"
    )


class Judge(Runnable[JudgeInputLike, Judgement], ABC):
    """Base class of judges.

    Subclasses implement :meth:`_judge`. The base class validates the input, answers
    ``unknown`` for a blank passage without calling the judge, and turns an exception raised by
    the judge into a failed :class:`Judgement` (``error`` set) so a batch goes on; set
    ``raise_errors = True`` to let exceptions propagate instead.

    ``batch`` runs :meth:`_judge` in a thread pool limited by ``config["max_concurrency"]``,
    unless the subclass implements :meth:`_judge_batch`, which then gets chunks of
    ``batch_size`` pairs. ``ainvoke`` / ``abatch`` use :meth:`_ajudge` (by default
    :meth:`_judge` in an executor).

    Examples:
        >>> class SubstringJudge(Judge):
        ...     def _judge(self, statement, passage, *, config):
        ...         if statement.lower() in passage.lower():
        ...             return Judgement(label=Label.ENTAILS, confidence=1.0)
        ...         return Judgement(label=Label.UNKNOWN, confidence=0.5)
        >>> SubstringJudge().invoke({"statement": "ice melts", "passage": "Ice melts."}).label
        <Label.ENTAILS: 'entails'>
    """

    raise_errors: bool = False
    """Re-raise exceptions of the judge instead of recording them in ``Judgement.error``."""
    batch_size: int = 32
    """Chunk size of :meth:`_judge_batch` calls (only used when it is implemented)."""

    #: The kind of judge (:data:`JudgeKind`) that :meth:`info` reports; subclasses that are
    #: not custom judges set it.
    judge_kind: ClassVar[JudgeKind] = "custom"

    _supports_native_batch: ClassVar[bool] = False
    #: Prepended to the rationales the base class writes itself (a blank passage, a failure),
    #: so that a judge that must say what it is (the heuristic) says it in every judgement.
    rationale_prefix: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._supports_native_batch = cls._judge_batch is not Judge._judge_batch

    # ----------------------------------------------------------------- hooks for subclasses

    @abstractmethod
    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        """Judge one pair.

        Args:
            statement: The statement (non-blank).
            passage: The passage (non-blank).
            config: The runnable config, with callbacks of this judge's run; pass it on to
                any runnable called inside.

        Returns:
            The judgement.
        """

    async def _ajudge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        """Judge one pair asynchronously; by default runs :meth:`_judge` in an executor.

        Args:
            statement: The statement (non-blank).
            passage: The passage (non-blank).
            config: The runnable config, with callbacks of this judge's run.

        Returns:
            The judgement.
        """
        return await run_in_executor(config, self._judge, statement, passage, config=config)

    def _judge_batch(
        self, items: Sequence[JudgeInput], *, config: RunnableConfig
    ) -> list[Judgement]:
        """Judge up to ``batch_size`` pairs at once (optional).

        Implement it when the judge can vectorise (e.g. one model call for many pairs).

        Args:
            items: The pairs; passages are non-blank.
            config: The runnable config of the first item of the chunk.

        Returns:
            One judgement per item, in order.
        """
        raise NotImplementedError

    def info(self) -> JudgeInfo:
        """Which judge this is: its kind, its model, what it is.

        A judge with a model overrides this to name it (an
        :class:`~langchain_references.judges.LLMJudge` reports ``PROVIDER:MODEL``); a custom
        judge is described by its class name.

        Returns:
            The judge's info.
        """
        if self.judge_kind == "custom":
            return JudgeInfo.of("custom", description=f"custom judge {type(self).__name__}")
        return JudgeInfo.of(self.judge_kind)

    # ----------------------------------------------------------------------- Runnable API

    @property
    def InputType(self) -> type[JudgeInput]:  # noqa: N802 - Runnable API name
        """The input type."""
        return JudgeInput

    @property
    def OutputType(self) -> type[Judgement]:  # noqa: N802 - Runnable API name
        """The output type."""
        return Judgement

    def judge(self, statement: str, passage: str) -> Judgement:
        """Judge one pair (shortcut for ``invoke({"statement": ..., "passage": ...})``).

        Args:
            statement: The statement.
            passage: The passage.

        Returns:
            The judgement.
        """
        return self.invoke(JudgeInput(statement=statement, passage=passage))

    def invoke(
        self, input: JudgeInputLike, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Judgement:
        """Judge one pair.

        Args:
            input: A :class:`JudgeInput` or ``{"statement": ..., "passage": ...}``.
            config: Runnable config (callbacks, tags, ...).
            **kwargs: Ignored.

        Returns:
            The judgement; a failed one (``error`` set) if the judge raised.

        Raises:
            TypeError: If the input is not a JudgeInput or a mapping.
            ValueError: If the input is invalid (missing key, blank statement, ...).
        """
        return self._call_with_config(self._invoke_one, input, config)

    async def ainvoke(
        self, input: JudgeInputLike, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Judgement:
        """Async :meth:`invoke` (:meth:`_ajudge`); same arguments, result and errors."""
        return await self._acall_with_config(self._ainvoke_one, input, config)

    def batch(
        self,
        inputs: list[JudgeInputLike],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Judgement]:
        """Judge many pairs.

        Args:
            inputs: The pairs.
            config: One config or one per input; ``max_concurrency`` limits parallel calls.
            return_exceptions: Return the exception of an invalid input in its slot instead
                of raising it.
            **kwargs: Ignored.

        Returns:
            One judgement per input, in order.

        Raises:
            KeyboardInterrupt: On Ctrl-C (likewise ``SystemExit``): the calls not started are
                cancelled, and no judgement is recorded for them.
        """
        if not self._supports_native_batch:
            return self._batch_threads(inputs, config, return_exceptions=return_exceptions)
        outputs = self._batch_with_config(
            self._batch_native, inputs, config, return_exceptions=return_exceptions
        )
        raise_interrupts(outputs)
        return outputs

    async def abatch(
        self,
        inputs: list[JudgeInputLike],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Judgement]:
        """Async :meth:`batch` (:meth:`_ajudge` per pair); same arguments and result.

        A judge with :meth:`_judge_batch` runs :meth:`batch` in the default executor.
        """
        if not self._supports_native_batch:
            outputs = await super().abatch(inputs, config, return_exceptions=return_exceptions)
        else:
            outputs = await run_in_executor(
                None, self.batch, inputs, config, return_exceptions=return_exceptions
            )
        raise_interrupts(outputs)
        return outputs

    # ---------------------------------------------------------------------- internals

    def _batch_threads(
        self,
        inputs: list[JudgeInputLike],
        config: RunnableConfig | list[RunnableConfig] | None,
        *,
        return_exceptions: bool,
    ) -> list[Judgement]:
        """``Runnable.batch`` (:meth:`invoke` in a thread pool), but stopped at once on Ctrl-C.

        LangChain's default waits for every queued call when the caller is interrupted; here
        the calls not started are cancelled and the interrupt propagates (the calls in flight
        finish in their threads, their results discarded and their failures not logged).
        """
        configs = get_config_list(config, len(inputs))
        abandoned = threading.Event()

        def one(value: JudgeInputLike, item_config: RunnableConfig) -> Judgement | Exception:
            token = _ABANDONED.set(abandoned)
            try:
                return self.invoke(value, item_config)
            except Exception as exc:
                if not return_exceptions:
                    raise
                return exc
            finally:
                _ABANDONED.reset(token)

        if len(inputs) <= 1:
            outputs = [one(value, c) for value, c in zip(inputs, configs, strict=True)]
        else:
            pool = ContextThreadPoolExecutor(max_workers=configs[0].get("max_concurrency"))
            try:
                futures = [pool.submit(one, v, c) for v, c in zip(inputs, configs, strict=True)]
                outputs = [future.result() for future in futures]
            except BaseException:
                abandoned.set()
                raise
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
        # Exceptions sit in their slots only with return_exceptions, as in Runnable.batch.
        return outputs  # type: ignore[return-value]

    def _record(self, exc: Exception) -> Judgement:
        if self.raise_errors:
            raise exc
        logger.warning("%s failed: %s: %s", type(self).__name__, type(exc).__name__, exc)
        failed = Judgement.failed(f"{type(exc).__name__}: {exc}")
        if not self.rationale_prefix:
            return failed
        return failed.model_copy(update={"rationale": f"{self.rationale_prefix}judging failed."})

    @staticmethod
    def _check_output(value: object) -> Judgement:
        if not isinstance(value, Judgement):
            raise TypeError(f"a judge must return a Judgement, not {type(value).__name__}")
        return value

    def _blank_passage(self) -> Judgement:
        return Judgement(
            label=Label.UNKNOWN,
            confidence=1.0,
            rationale=f"{self.rationale_prefix}The passage is empty.",
        )

    def _invoke_one(
        self, input: JudgeInputLike, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Judgement:
        with _judging(self, input) as call:
            if call.pair is not None:
                call.settle(self._judge(call.pair.statement, call.pair.passage, config=config))
        return call.judgement

    async def _ainvoke_one(
        self,
        input: JudgeInputLike,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Judgement:
        with _judging(self, input) as call:
            if call.pair is not None:
                call.settle(
                    await self._ajudge(call.pair.statement, call.pair.passage, config=config)
                )
        return call.judgement

    def _batch_native(
        self,
        inputs: list[JudgeInputLike],
        run_manager: list[CallbackManagerForChainRun],
        config: list[RunnableConfig],
    ) -> list[Judgement | Exception]:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        results: list[Judgement | Exception] = []
        pending: list[tuple[int, JudgeInput]] = []
        for value in inputs:
            try:
                item = coerce_judge_input(value)
            except (TypeError, ValueError) as exc:
                results.append(exc)
                continue
            if item.passage.strip():
                pending.append((len(results), item))
            results.append(self._blank_passage())
        for start in range(0, len(pending), self.batch_size):
            chunk = pending[start : start + self.batch_size]
            items = [item for _, item in chunk]
            try:
                judged = self._judge_batch(items, config=config[chunk[0][0]])
                if len(judged) != len(items):
                    raise ValueError(
                        f"_judge_batch returned {len(judged)} judgements for {len(items)} pairs"
                    )
                outputs = [self._check_output(j) for j in judged]
            except Exception as exc:
                failed = self._record(exc)
                outputs = [failed] * len(items)
            for (index, _), judgement in zip(chunk, outputs, strict=True):
                results[index] = judgement
        return results


@dataclass
class _Call:
    """One call of a judge's hook, as :func:`_judging` prepares it.

    Attributes:
        judge: The judge.
        pair: The pair to judge, or ``None`` when no call is needed (a blank passage).
        judgement: The judgement: ``unknown`` for a blank passage, else set by :meth:`settle`
            or by :func:`_judging` when the hook raised.
    """

    judge: Judge
    pair: JudgeInput | None
    judgement: Judgement

    def settle(self, output: object) -> None:
        """Record the hook's output (a non-:class:`Judgement` raises ``TypeError``)."""
        self.judgement = self.judge._check_output(output)


@contextmanager
def _judging(judge: Judge, input: JudgeInputLike) -> Iterator[_Call]:
    """The decisions around one call of a judge's hook, shared by the sync and async drivers.

    The input is validated first (an invalid input raises). A blank passage is answered
    ``unknown`` without calling the hook (``pair`` is ``None``); otherwise the driver calls the
    hook on ``pair`` inside the block and hands its output to :meth:`_Call.settle`. An
    exception raised in the block becomes a failed judgement, unless ``raise_errors`` is set.
    """
    item = coerce_judge_input(input)
    call = _Call(judge, item if item.passage.strip() else None, judge._blank_passage())
    try:
        yield call
    except Exception as exc:
        call.judgement = judge._record(exc)
