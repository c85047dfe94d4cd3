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
from collections.abc import Awaitable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor

from langchain_references.citations.evaluation import AnswerReport
from langchain_references.citations.sentences import CitedSentence, SentenceCitationTracker
from langchain_references.citations.verifier import SentenceVerdict
from langchain_references.core._parser import DEFAULT_MARKERS, Event
from langchain_references.core.numbering import ABSENT_DOCUMENT
from langchain_references.core.styles import UnsupportedClaim
from langchain_references.services._concurrency import check_concurrency

__all__ = [
    "CITATION_CHECK_KEY",
    "DEFAULT_MAX_CONCURRENCY",
    "CitationChecker",
    "StreamingCitationCheck",
    "citation_report",
]


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


#: Sentences verified at once when the run's config sets no ``max_concurrency``.
DEFAULT_MAX_CONCURRENCY: Final = 4

_Pending: TypeAlias = "Future[SentenceVerdict] | asyncio.Task[SentenceVerdict]"


def _awaitable(pending: _Pending) -> Awaitable[SentenceVerdict]:
    return asyncio.wrap_future(pending) if isinstance(pending, Future) else pending


class StreamingCitationCheck:
    """The citation check of one run.

    Each completed sentence is verified at once, in a worker thread (sync path) or an asyncio
    task (async path); at most ``config["max_concurrency"]`` sentences (default
    :data:`DEFAULT_MAX_CONCURRENCY`) are verified at a time on either path. Both paths keep
    the same bookkeeping: one list of pending verifications, in sentence order.

    Args:
        verifier: The checker of one sentence.
        documents: The documents of the prompt (ids are 1-based positions).
        config: The run's child config, passed to the verifier (its judge calls are child runs).
        use_async: Schedule verifications as asyncio tasks (the caller runs in an event loop)
            instead of worker threads.
        markers: The citation dialects :meth:`feed` reads (a caller that parses the answer
            gives its events to :meth:`feed_events` instead).

    Raises:
        ValueError: If ``config["max_concurrency"]`` is set and not an integer >= 1, or
            ``markers`` names an unknown dialect.
    """

    def __init__(
        self,
        verifier: CitationChecker,
        documents: Sequence[Document],
        config: RunnableConfig,
        *,
        use_async: bool,
        markers: Collection[str] = DEFAULT_MARKERS,
    ) -> None:
        limit = check_concurrency(config.get("max_concurrency"), "config['max_concurrency']")
        self._limit = DEFAULT_MAX_CONCURRENCY if limit is None else limit
        self._verifier = verifier
        self._passages = {
            i: doc for i, doc in enumerate(documents, start=1) if doc is not ABSENT_DOCUMENT
        }
        self._config = config
        self._tracker = SentenceCitationTracker(markers=markers)
        self._use_async = use_async
        self._pending: list[_Pending] = []
        self._executor: ContextThreadPoolExecutor | None = None
        self._slots: asyncio.Semaphore | None = None

    def feed(self, text: str) -> None:
        """Consume raw answer text; start verifying each sentence it completes."""
        self._start(self._tracker.feed(text))

    def feed_events(self, events: Iterable[Event]) -> None:
        """Consume the answer's parser events; start verifying each sentence they complete."""
        self._start(self._tracker.feed_events(events))

    def close(self, events: Iterable[Event] = ()) -> None:
        """The answer ended after ``events`` (its parser's last): verify its last sentence."""
        self._start(self._tracker.close_events(events))

    @property
    def sentences(self) -> int:
        """How many sentences are being (or were) verified."""
        return len(self._pending)

    def end_of(self, index: int) -> int:
        """Where sentence ``index`` ends in the answer as written (see the tracker's ``ends``)."""
        return self._tracker.ends[index]

    def verdict(self, index: int) -> SentenceVerdict | None:
        """The verdict of sentence ``index`` if it has come, else None (never waits).

        Raises:
            Exception: What the verifier raised for this sentence.
        """
        pending = self._pending[index]
        return pending.result() if pending.done() else None

    def finish(self) -> list[SentenceVerdict]:
        """Wait for every verification (sync path) and return the verdicts in order."""
        try:
            return [pending.result() for pending in self._close()]
        finally:
            self.cancel()

    async def afinish(self) -> list[SentenceVerdict]:
        """Wait for every verification (async path) and return the verdicts in order."""
        try:
            return list(await asyncio.gather(*map(_awaitable, self._close())))
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stop pending verifications (the consumer left the stream early)."""
        for pending in self._pending:
            pending.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # ------------------------------------------------------------------ scheduling

    def _start(self, sentences: Iterable[CitedSentence]) -> None:
        schedule = self._task if self._use_async else self._thread
        self._pending.extend(schedule(sentence) for sentence in sentences)

    def _close(self) -> list[_Pending]:
        self._start(self._tracker.close())
        return self._pending

    def _thread(self, sentence: CitedSentence) -> Future[SentenceVerdict]:
        if self._executor is None:
            self._executor = ContextThreadPoolExecutor(max_workers=self._limit)
        return self._executor.submit(
            self._verifier.verify, sentence, self._passages, config=self._config
        )

    def _task(self, sentence: CitedSentence) -> asyncio.Task[SentenceVerdict]:
        return asyncio.get_running_loop().create_task(self._averify(sentence))

    async def _averify(self, sentence: CitedSentence) -> SentenceVerdict:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        async with self._slots:
            return await self._verifier.averify(sentence, self._passages, config=self._config)


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
