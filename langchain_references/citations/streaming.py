"""Check an answer's citations while it streams (``manage_references(..., verifier=...)``).

As the answer streams, a :class:`~langchain_references.citations.sentences.SentenceCitationTracker`
cuts the raw text into sentences with the documents they cite; each completed sentence is sent
to the verifier at once (in a worker thread on the sync path, as an asyncio task on the async
path), so judging overlaps with generation. When the stream ends, the verdicts are collected
into a citation report (citation recall and precision after Liu et al., see
:mod:`langchain_references.citations.verifier`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor

from langchain_references.citations.evaluation import AnswerReport
from langchain_references.citations.sentences import CitedSentence, SentenceCitationTracker
from langchain_references.citations.verifier import SentenceVerdict
from langchain_references.styles import UnsupportedClaim

__all__ = ["CITATION_CHECK_KEY", "CitationChecker", "StreamingCitationCheck", "citation_report"]

logger = logging.getLogger(__name__)

#: Key of ``response_metadata`` (and of the ``references`` event data) with the check report.
CITATION_CHECK_KEY = "citation_check"


@runtime_checkable
class CitationChecker(Protocol):
    """What ``manage_references(verifier=...)`` needs: one sentence in, one verdict out.

    :class:`~langchain_references.citations.verifier.CitationVerifier` implements it.
    """

    def verify(
        self,
        sentence: CitedSentence,
        passages_by_id: Mapping[int, Document],
        *,
        config: RunnableConfig | None = None,
    ) -> SentenceVerdict:
        """Check one sentence against the documents it cites."""
        ...

    async def averify(
        self,
        sentence: CitedSentence,
        passages_by_id: Mapping[int, Document],
        *,
        config: RunnableConfig | None = None,
    ) -> SentenceVerdict:
        """Async :meth:`verify`."""
        ...


class StreamingCitationCheck:
    """The citation check of one run.

    Args:
        verifier: The checker of one sentence.
        documents: The documents of the prompt (ids are 1-based positions).
        config: The run's child config, passed to the verifier (its judge calls are child runs).
        use_async: Schedule verifications as asyncio tasks (the caller runs in an event loop)
            instead of worker threads.
    """

    def __init__(
        self,
        verifier: CitationChecker,
        documents: Sequence[Document],
        config: RunnableConfig,
        *,
        use_async: bool,
    ) -> None:
        self._verifier = verifier
        self._passages = {i: doc for i, doc in enumerate(documents, start=1)}
        self._config = config
        self._tracker = SentenceCitationTracker()
        self._use_async = use_async
        self._tasks: list[asyncio.Task[SentenceVerdict]] = []
        self._futures: list[Future[SentenceVerdict]] = []
        self._executor: ContextThreadPoolExecutor | None = None

    def feed(self, text: str) -> None:
        """Consume raw answer text; start verifying each sentence it completes."""
        for sentence in self._tracker.feed(text):
            self._start(sentence)

    def _start(self, sentence: CitedSentence) -> None:
        if self._use_async:
            coro = self._verifier.averify(sentence, self._passages, config=self._config)
            self._tasks.append(asyncio.get_running_loop().create_task(coro))
            return
        if self._executor is None:
            workers = self._config.get("max_concurrency") or 4
            self._executor = ContextThreadPoolExecutor(max_workers=workers)
        self._futures.append(
            self._executor.submit(
                self._verifier.verify, sentence, self._passages, config=self._config
            )
        )

    def _close_tracker(self) -> None:
        for sentence in self._tracker.close():
            self._start(sentence)

    def finish(self) -> list[SentenceVerdict]:
        """Wait for every verification (sync path) and return the verdicts in order."""
        self._close_tracker()
        try:
            return [future.result() for future in self._futures]
        finally:
            self.cancel()

    async def afinish(self) -> list[SentenceVerdict]:
        """Wait for every verification (async path) and return the verdicts in order."""
        self._close_tracker()
        return list(await asyncio.gather(*self._tasks))

    def cancel(self) -> None:
        """Stop pending verifications (the consumer left the stream early)."""
        for task in self._tasks:
            task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def citation_report(
    verdicts: Sequence[SentenceVerdict], numbers: Mapping[int, int]
) -> tuple[dict[str, Any], list[UnsupportedClaim]]:
    """Summarise the verdicts of one answer.

    Args:
        verdicts: One verdict per sentence, in order.
        numbers: Reference number of each cited document position.

    Returns:
        The report (citation recall and precision, per-sentence verdicts, and the
        ``unsupported`` claims as dicts) and the unsupported claims.
    """
    report = AnswerReport(index=0, question=None, location=None, sentences=tuple(verdicts))
    unsupported: list[UnsupportedClaim] = []
    for verdict in report.worthy:
        imprecise = tuple(
            dict.fromkeys(
                numbers[c.doc_id]
                for c in verdict.citations
                if not c.precise and c.doc_id in numbers
            )
        )
        if verdict.supported and not imprecise:
            continue
        unsupported.append(
            UnsupportedClaim(verdict.sentence.text, imprecise, bool(verdict.supported))
        )
    data = report.to_dict()
    for key in ("index", "question", "location"):
        data.pop(key, None)
    data["unsupported"] = [claim.to_dict() for claim in unsupported]
    return data, unsupported
