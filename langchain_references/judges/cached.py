"""A judge whose judgements are kept in a run cache, keyed by the judge's identity.

:class:`CachedJudge` wraps any judge runnable. Each ``(statement, passage)`` pair's judgement
is stored in a :class:`~langchain_references.services.runcache.RunCache` (namespace ``"judgement"``)
under a key made of :func:`judge_fingerprint` (the judge's
:class:`~langchain_references.judges.base.JudgeInfo`, class and settings), the statement and
the passage. A resumed run (the cache reusing) judges only the pairs it has no judgement for;
changing the judge (another model, the heuristic with or without embeddings) changes every
key, so the judging is redone. Failed judgements (``error`` set) are not stored.

:func:`~langchain_references.judges.base.judge_info` sees through the wrapper (it is the judge
it wraps, like ``judge.with_config(...)``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Final

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import get_config_list

from langchain_references.judges.base import (
    JudgeInputLike,
    Judgement,
    coerce_judge_input,
    judge_info,
)
from langchain_references.services.runcache import RunCache, content_key, object_settings

__all__ = ["JUDGEMENT_NAMESPACE", "CachedJudge", "judge_fingerprint"]

logger = logging.getLogger(__name__)

#: Namespace of the judgements in a run cache.
JUDGEMENT_NAMESPACE: Final = "judgement"


def _innermost(judge: object) -> object:
    bound = getattr(judge, "bound", None)
    while isinstance(bound, Runnable):
        judge, bound = bound, getattr(bound, "bound", None)
    return judge


def judge_fingerprint(judge: object) -> dict[str, Any]:
    """What identifies a judge in cache keys: its info, class and settings.

    The settings are those of :func:`~langchain_references.services.runcache.object_settings`
    (public
    attributes: simple values by value, other objects by class name, e.g. the embeddings of a
    heuristic judge). Two judges with the same fingerprint are taken to judge alike.

    Args:
        judge: The judge runnable (wrappers such as ``with_config`` are seen through).

    Returns:
        ``{"info": ..., "class": ..., "settings": {...}}`` (JSON-serialisable).
    """
    return {"info": judge_info(judge).to_dict(), **object_settings(_innermost(judge))}


class CachedJudge(Runnable[JudgeInputLike, Judgement]):
    """A judge answered from a run cache when it can (see the module docs).

    Args:
        judge: The judge runnable.
        cache: The run cache.

    Attributes:
        bound: The wrapped judge.
        fingerprint: Its :func:`judge_fingerprint`.
    """

    def __init__(self, judge: Runnable[JudgeInputLike, Judgement], cache: RunCache) -> None:
        if not isinstance(judge, Runnable):
            raise TypeError(f"judge must be a Runnable, not {type(judge).__name__}")
        self.bound = judge
        self.cache = cache
        self.fingerprint = judge_fingerprint(judge)
        self.name = judge.get_name()

    def _key(self, value: JudgeInputLike) -> str:
        pair = coerce_judge_input(value)
        return content_key("judgement", self.fingerprint, pair.statement, pair.passage)

    def _lookup(self, keys: Sequence[str]) -> list[Judgement | None]:
        found: list[Judgement | None] = []
        for key in keys:
            value = self.cache.get(JUDGEMENT_NAMESPACE, key)
            try:
                found.append(Judgement.model_validate(value) if value is not None else None)
            except ValueError:
                logger.warning("Ignoring a malformed cached judgement")
                found.append(None)
        return found

    def _record(self, keys: Sequence[str], outputs: Sequence[object]) -> None:
        for key, output in zip(keys, outputs, strict=True):
            if isinstance(output, Judgement) and output.error is None:
                self.cache.put(JUDGEMENT_NAMESPACE, key, output.model_dump(mode="json"))

    @staticmethod
    def _missing(found: Sequence[Judgement | None]) -> list[int]:
        return [i for i, judgement in enumerate(found) if judgement is None]

    @staticmethod
    def _merge(found: Sequence[Judgement | None], computed: Sequence[Any]) -> list[Any]:
        """The cached judgements with the computed ones in the gaps, in input order."""
        fresh = iter(computed)
        return [judgement if judgement is not None else next(fresh) for judgement in found]

    def invoke(
        self, input: JudgeInputLike, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Judgement:
        """The cached judgement of the pair, else the judge's (stored when it succeeded).

        Args:
            input: ``{"statement", "passage"}``.
            config: Runnable config.
            **kwargs: Passed to the judge.

        Returns:
            The judgement.
        """
        judgement: Judgement = self.batch([input], config, **kwargs)[0]
        return judgement

    async def ainvoke(
        self, input: JudgeInputLike, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Judgement:
        """Async :meth:`invoke`."""
        judgement: Judgement = (await self.abatch([input], config, **kwargs))[0]
        return judgement

    def batch(
        self,
        inputs: list[JudgeInputLike],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Judge the pairs the cache has no judgement for, in one batch of the judge.

        Args:
            inputs: The pairs.
            config: One config, or one per input.
            return_exceptions: Return errors in place instead of raising.
            **kwargs: Passed to the judge.

        Returns:
            One judgement (or error) per input, in order.
        """
        keys = [self._key(value) for value in inputs]
        found = self._lookup(keys)
        missing = self._missing(found)
        if not missing:
            return list(found)
        configs = get_config_list(config, len(inputs))
        computed = self.bound.batch(
            [inputs[i] for i in missing],
            [configs[i] for i in missing],
            return_exceptions=return_exceptions,
            **kwargs,
        )
        self._record([keys[i] for i in missing], computed)
        return self._merge(found, computed)

    async def abatch(
        self,
        inputs: list[JudgeInputLike],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Async :meth:`batch` (the cache is read and written in a worker thread)."""
        keys = [self._key(value) for value in inputs]
        found = await asyncio.to_thread(self._lookup, keys)
        missing = self._missing(found)
        if not missing:
            return list(found)
        configs = get_config_list(config, len(inputs))
        computed = await self.bound.abatch(
            [inputs[i] for i in missing],
            [configs[i] for i in missing],
            return_exceptions=return_exceptions,
            **kwargs,
        )
        await asyncio.to_thread(self._record, [keys[i] for i in missing], computed)
        return self._merge(found, computed)
