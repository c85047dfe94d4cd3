"""``POST /v1/article``: check every claim of an article against the evidence.

An article (``{"text": ...}``, or ``{"url": ...}`` fetched with the guarded
:class:`~langchain_references.factcheck.fetch.PageFetcher` and read with the chain's
extractor) is cut into sentences with their character offsets (:func:`split_with_offsets`).
**Claims** are the sentences worth checking (:func:`is_claim`): at least four words and not a
question, the test the citation checker uses
(:func:`~langchain_references.citations.sentences.is_verification_worthy`).

Every claim is checked by the service's fact-check pipeline
(:func:`~langchain_references.server.factcheck_api.build_checker`: evidence from the index,
and from the web back-end when one was configured), at most :data:`CLAIM_CONCURRENCY` at a
time. A claim whose check fails (a dead source, a failing judge, an error in the pipeline)
gets the ``error`` verdict with the reason; the other claims go on.

Each claim's passages (supporting first, then contradicting) are numbered by source with the
package's numbering registry (:class:`~langchain_references.core.numbering.SourceNumbering`, the
one the answer rewriter uses), so two passages of one page share a number, and the reference
list is written in the requested style (:func:`cite_evidence`).

Every claim names the judge of its verdict (``judge``: kind, model, description), and so do
the ``article`` and ``result`` documents (the service's judge), so that a page can say at once
which judge it is, e.g. that the offline heuristic is rough.

Events (``Accept: text/event-stream``): ``article`` (the text, its sentences and claims,
before any check), ``progress`` (a stage of a claim's check started or ended: the claim id
and the chain's progress event), ``claim`` (one claim's verdict, as soon as its check ends,
in completion order) and ``result`` (the whole document, claims in text order). Offsets are
in Unicode code points (Python string indices).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from langchain_core.documents import Document
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ConfigDict, Field, model_validator

from langchain_references.citations.sentences import (
    CitedSentence,
    is_verification_worthy,
    iter_sentence_spans,
    sentence_segmenter,
)
from langchain_references.core.numbering import SourceNumbering
from langchain_references.core.styles import (
    EmptyReferenceStyle,
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
)
from langchain_references.factcheck.chain import FactCheckInput
from langchain_references.factcheck.extract import aextract_all
from langchain_references.factcheck.fetch import PageFetcher
from langchain_references.factcheck.result import FactCheckProgress, FactCheckResult
from langchain_references.factcheck.verdict import Verdict, verdict_note
from langchain_references.judges.base import JudgeInfo
from langchain_references.server.cpu import run_cpu_bound
from langchain_references.server.events import (
    PROGRESS_EVENT,
    RESULT_EVENT,
    ApiError,
    Event,
    error_response,
    openapi_responses,
    respond,
)
from langchain_references.server.factcheck_api import (
    DEFAULT_GRANULARITY,
    PageFetcherDep,
    build_checker,
    check_stream,
)
from langchain_references.server.index import Granularity
from langchain_references.server.links import link, safe_reference, safe_result
from langchain_references.server.links import title as title_field
from langchain_references.server.services import ServicesDep
from langchain_references.server.settings import LimitExceededError, Text

sentence_segmenter()  # without pysbd, importing the module fails here

__all__ = [
    "ARTICLE_EVENT",
    "CLAIM_CONCURRENCY",
    "CLAIM_EVENT",
    "STYLES",
    "ArticleBody",
    "InlineNumberStyle",
    "Sentence",
    "cite_evidence",
    "is_claim",
    "router",
    "split_with_offsets",
]

logger = logging.getLogger(__name__)

#: Event with the article's text, sentences and claims, sent before any check.
ARTICLE_EVENT: Final = "article"
#: Event with one claim's verdict and passages.
CLAIM_EVENT: Final = "claim"
#: Claims of one request checked at the same time.
CLAIM_CONCURRENCY: Final = 4

_LINE = re.compile(r"[^\n]+")


class InlineNumberStyle(TextReferenceStyle):
    """``[1]`` in the text and no reference list: for clients that show the list themselves.

    The list is in the structured ``references`` of the response.
    """

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        """Append nothing (the references are reported as data)."""
        return ""


#: Reference styles a request may name (inline links open the cited passage: deep links).
STYLES: Final[dict[str, Callable[[], ReferenceStyle]]] = {
    "markdown": lambda: MarkdownReferenceStyle(deep_links=True),
    "html": lambda: HTMLReferenceStyle(deep_links=True),
    "text": TextReferenceStyle,
    "numbers": InlineNumberStyle,
    "empty": EmptyReferenceStyle,
}
StyleName = Literal["markdown", "html", "text", "numbers", "empty"]


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of an article with its place in the text.

    Attributes:
        index: 0-based position among the article's sentences.
        start: Offset of its first character in the article (code points).
        end: Offset just after its last character; ``text == article[start:end]``.
        text: The sentence as written (surrounding blanks excluded).
    """

    index: int
    start: int
    end: int
    text: str


def split_with_offsets(text: str, *, max_sentences: int | None = None) -> list[Sentence]:
    """Cut a text into sentences, each with its offsets in the text.

    Every line is a block of its own (a heading or a list item never merges with the next
    line); pysbd splits each line into sentences
    (:func:`~langchain_references.citations.sentences.iter_sentence_spans`, linear in the
    text), so the offsets are exact: ``text[start:end]`` is the sentence. CPU-bound: the
    service runs it in its CPU worker process (:mod:`~langchain_references.server.cpu`).

    Args:
        text: The article.
        max_sentences: Stop, with an error, at the sentence after this many (``None``: no
            limit); the splitting costs no more than that.

    Returns:
        The non-blank sentences, in order.

    Raises:
        LimitExceededError: (413) If the text has more than ``max_sentences`` sentences
            (``actual`` is then ``max_sentences + 1``: the splitting stopped there).
    """
    sentences: list[Sentence] = []
    for line in _LINE.finditer(text):
        for start, end in iter_sentence_spans(line.group()):
            if max_sentences is not None and len(sentences) >= max_sentences:
                raise LimitExceededError(
                    "max_sentences", max_sentences, max_sentences + 1, status_code=413
                )
            begin = line.start() + start
            stop = line.start() + end
            sentences.append(Sentence(len(sentences), begin, stop, text[begin:stop]))
    return sentences


def _sentences_and_claims(text: str, max_sentences: int) -> tuple[list[Sentence], list[Sentence]]:
    """The article's sentences and its claims (CPU-bound: run in the CPU worker process)."""
    sentences = split_with_offsets(text, max_sentences=max_sentences)
    return sentences, [s for s in sentences if is_claim(s)]


def is_claim(sentence: Sentence) -> bool:
    """Whether a sentence is checked: at least four words and not a question.

    Args:
        sentence: The sentence.

    Returns:
        The citation checker's verification-worthiness test on its text.
    """
    cited = CitedSentence(index=sentence.index, text=" ".join(sentence.text.split()), doc_ids=())
    return is_verification_worthy(cited)


def cite_evidence(
    result: FactCheckResult, style: ReferenceStyle
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """Number a check's passages by source and write their reference list in a style.

    The passages (supporting first, then contradicting) are cited in order, by position,
    through a :class:`~langchain_references.core.numbering.SourceNumbering`: one number per source
    (URL), by first citation; passages without a URL are sources of their own.

    Args:
        result: The check's result.
        style: The reference style of the list.

    Returns:
        ``(passages, references, references_text)``: each passage as JSON with its
        ``number``, the references (``number``, ``source``, ``title``, ``positions``: 1-based
        positions in ``passages``) and the styled reference list.
    """
    evidence = [*result.supporting, *result.contradicting]
    documents = [
        Document(e.text, metadata={"source": e.url or None, "title": e.title}) for e in evidence
    ]
    numbering = SourceNumbering(documents, style)
    for position in range(1, len(documents) + 1):
        numbering.cite(position)  # only the number counts here, not the marker
    listing = numbering.format_references().strip()
    passages = [
        {
            "number": numbering.number(position),
            "stance": "supports" if position <= len(result.supporting) else "contradicts",
            "text": e.text,
            "title": title_field(e.title) or "",
            "url": link(e.url),
            "confidence": e.confidence,
            "similarity": e.similarity,
            "rationale": e.rationale,
        }
        for position, e in enumerate(evidence, start=1)
    ]
    references = [safe_reference(ref.to_dict()) for ref in numbering.references]
    return passages, references, listing


class ArticleBody(BaseModel):
    """Body of ``POST /v1/article``: the article's ``text`` or its ``url``, not both.

    Attributes:
        text: The article.
        url: A web page to fetch (public addresses only) and read.
        top_k: Evidence passages per claim (the server's ``default_top_k`` when absent).
        granularity: Index entries used as evidence.
        style: Style of each claim's reference list (``references_text``).
    """

    model_config = ConfigDict(extra="forbid")

    text: Text | None = Field(default=None, min_length=1)
    url: Text | None = Field(default=None, min_length=1, max_length=2048)
    top_k: int | None = Field(default=None, ge=1)
    granularity: Granularity = DEFAULT_GRANULARITY
    style: StyleName = "markdown"

    @model_validator(mode="after")
    def _text_or_url(self) -> ArticleBody:
        if (self.text is None) == (self.url is None):
            raise ValueError("give the article's text or its url, not both")
        return self


async def _read_url(url: str, fetcher: PageFetcher) -> tuple[str, str]:
    """Fetch and read a page: ``(title, text)``.

    Raises:
        ApiError: 422 ``fetch_failed`` or ``extract_failed`` with the reason.
    """
    report = await fetcher.afetch_all([url])
    if not report.pages:
        reason = report.failures[0].reason if report.failures else "no page"
        raise ApiError(422, "fetch_failed", f"could not fetch the article: {reason}", {"url": url})
    extracted = await aextract_all(report.pages)
    if not extracted.pages:
        reason = extracted.failures[0].reason if extracted.failures else "no text"
        raise ApiError(422, "extract_failed", f"could not read the article: {reason}", {"url": url})
    page = extracted.pages[0]
    return page.title, page.text


def _claim_json(
    claim_id: int, sentence: Sentence, result: FactCheckResult, style: ReferenceStyle
) -> dict[str, Any]:
    result = safe_result(result)
    passages, references, listing = cite_evidence(result, style)
    return {
        "id": claim_id,
        "sentence": sentence.index,
        "start": sentence.start,
        "end": sentence.end,
        "text": sentence.text,
        "verdict": result.verdict.value,
        "confidence": result.confidence,
        "score": result.score,
        # what the page shows beside the verdict: the reports' and CLI's own words
        "note": None
        if result.verdict is Verdict.ERROR
        else verdict_note(result.verdict, result.confidence, result.score, result.verdict_details),
        "error": result.error,
        "passages": passages,
        "references": references,
        "references_text": listing,
        "neutral_count": result.neutral_count,
        "failed_sources": [f.to_dict() for f in result.failed_sources],
        "judge": None if result.judge is None else result.judge.to_dict(),
    }


async def _check_claim(
    checker: Runnable[FactCheckInput, FactCheckResult],
    claim_id: int,
    sentence: Sentence,
    emit: Callable[[Event], None],
    judge: JudgeInfo | None,
) -> FactCheckResult:
    """One claim's check; its progress goes to ``emit``; a failure is the claim's verdict."""
    statement = " ".join(sentence.text.split())
    try:
        async for item in check_stream(checker, statement):
            if isinstance(item, FactCheckProgress):
                emit(Event(PROGRESS_EVENT, {"claim": claim_id, **item.model_dump(mode="json")}))
            else:
                return item
    except Exception as exc:  # one claim's failure must not stop the others
        logger.warning("Claim %d could not be checked: %s: %s", claim_id, type(exc).__name__, exc)
        reason = f"{type(exc).__name__}: {exc}"
        return FactCheckResult.could_not_check(statement, reason, judge=judge)
    raise RuntimeError("check_stream ended without a result")  # pragma: no cover


async def article_events(
    checker: Runnable[FactCheckInput, FactCheckResult],
    *,
    text: str,
    url: str | None,
    title: str | None,
    sentences: Sequence[Sentence],
    claims: Sequence[Sentence],
    style: ReferenceStyle,
    judge: JudgeInfo | None = None,
) -> AsyncIterator[Event]:
    """The events of one article: the article, progress, each claim as it ends, the result.

    Args:
        checker: The fact-check pipeline.
        text: The article.
        url: Its URL, if it was fetched.
        title: Its title, if known.
        sentences: Its sentences.
        claims: The sentences to check, in text order (claim ids are their positions).
        style: The style of the reference lists.
        judge: The checker's judge: named by the article and result documents, and by a
            claim whose check raised.

    Yields:
        The events (see the module docs).
    """
    claim_of = {sentence.index: i for i, sentence in enumerate(claims)}
    head = {
        "url": url,
        "title": title_field(title),
        "judge": None if judge is None else judge.to_dict(),
        "text": text,
        "sentences": [
            {
                "index": s.index,
                "start": s.start,
                "end": s.end,
                "text": s.text,
                "claim": claim_of.get(s.index),
            }
            for s in sentences
        ],
    }
    yield Event(
        ARTICLE_EVENT,
        {
            **head,
            "claims": [
                {"id": i, "sentence": s.index, "start": s.start, "end": s.end, "text": s.text}
                for i, s in enumerate(claims)
            ],
        },
    )
    queue: asyncio.Queue[Event] = asyncio.Queue()
    slots = asyncio.Semaphore(CLAIM_CONCURRENCY)

    async def run(claim_id: int, sentence: Sentence) -> None:
        async with slots:
            result = await _check_claim(checker, claim_id, sentence, queue.put_nowait, judge)
        try:
            claim = _claim_json(claim_id, sentence, result, style)
        except Exception as exc:  # every claim must end with its event, or the stream hangs
            logger.exception("Claim %d could not be reported", claim_id)
            failed = FactCheckResult.could_not_check(
                result.statement, type(exc).__name__, judge=result.judge
            )
            claim = _claim_json(claim_id, sentence, failed, EmptyReferenceStyle())
        queue.put_nowait(Event(CLAIM_EVENT, claim))

    tasks = [asyncio.create_task(run(i, s)) for i, s in enumerate(claims)]
    done: dict[int, dict[str, Any]] = {}
    try:
        while len(done) < len(claims):
            event = await queue.get()
            if event.name == CLAIM_EVENT:
                done[int(event.data["id"])] = dict(event.data)
            yield event
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    verdicts: dict[str, int] = {}
    for claim in done.values():
        verdicts[claim["verdict"]] = verdicts.get(claim["verdict"], 0) + 1
    yield Event(
        RESULT_EVENT,
        {
            **head,
            "claims": [done[i] for i in range(len(claims))],
            "counts": {"sentences": len(sentences), "claims": len(claims), "verdicts": verdicts},
        },
    )


router = APIRouter(tags=["native"])

_ARTICLE_RESPONSES: Final = openapi_responses(
    "The article's sentences and claims with a verdict, passages and references per claim "
    "(JSON); with `Accept: text/event-stream`: `article`, `progress`, `claim` (one per claim, "
    "as it is decided) and `result` events.",
    "The article exceeds `max_article_chars` or `max_sentences`, or it has more than "
    "`max_claims` claims or a claim longer than `max_claim_chars` (JSON naming the limit).",
    {422: "Invalid body, or the URL could not be fetched or read."},
)


@router.post(
    "/v1/article",
    responses=_ARTICLE_RESPONSES,
    summary="Check every claim of an article (text or URL)",
)
async def article(
    body: ArticleBody,
    request: Request,
    services: ServicesDep,
    fetcher: PageFetcherDep,
) -> Response:
    """Split an article into sentences, pick its claims and check each one.

    Args:
        body: The article (text or URL) and options.
        request: The request (``Accept`` chooses JSON or server-sent events).
        services: The service's shared members.
        fetcher: The guarded page fetcher (for ``url``).

    Returns:
        The checked article as JSON, or its events.
    """
    settings = services.settings
    k = settings.check_top_k(body.top_k)
    title: str | None = None
    if body.text is not None:
        settings.check_article(body.text)
        text = body.text
    else:
        url = body.url or ""
        try:
            title, text = await _read_url(url, fetcher)
        except ApiError as error:
            logger.info("Article URL refused or unreadable: %s", error.message)
            return error_response(error)
        settings.check_article(text)
    sentences, claims = await run_cpu_bound(_sentences_and_claims, text, settings.max_sentences)
    settings.check_claims([s.text for s in claims])
    checker = build_checker(services, k=k, granularity=body.granularity, fetcher=fetcher)
    events = article_events(
        checker,
        text=text,
        url=body.url,
        title=title,
        sentences=sentences,
        claims=claims,
        style=STYLES[body.style](),
        judge=services.judge_info,
    )
    return await respond(request, events)
