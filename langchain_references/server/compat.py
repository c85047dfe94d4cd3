"""The climate evidence API (aaalexlit/cc-evidences-api), served from an :class:`EvidenceIndex`.

Same paths, query parameters, defaults and schemas as its published ``doc/openapi.json``, so
that its clients work unchanged:

* ``POST /api/{abstract|phrase}/evidence[/batch]`` (query ``re_rank=true``);
* ``POST /api/{abstract|phrase}/verify[/batch]`` (query ``include_title=true``,
  ``re_rank=true``, ``filter_nei=true``);
* ``POST /api/split``, ``GET /healthcheck``.

Behaviour: retrieve ``top_k + 5`` entries; keep those with ``similarity > threshold`` (all
without a threshold); ``num`` is the 1-based retrieval rank; with ``re_rank``, order by
(influential citations, citations, year) descending, missing values last, ties by similarity;
cut to ``top_k``. Verify labels each item with the judge (entails -> ``SUPPORTS``,
contradicts -> ``REFUTES``, unknown -> ``NOT_ENOUGH_INFO``, ``probability`` = its
confidence); abstract verify judges each sentence of each abstract. A failed judgement is
``NOT_ENOUGH_INFO`` with probability 0 and an extra ``error`` key, and is kept even with
``filter_nei`` so that the failure is visible. Every verified item has an extra ``judge`` key
naming the judge behind its label (``kind``, ``model``, ``description``: the offline
heuristic is ``{"kind": "heuristic", "model": null, ...}``); the reference's keys are
unchanged.

The decisions live in pure functions (:func:`select_evidence`, :func:`verification_units`,
:func:`verified_items`); :func:`afind_evidence` and :func:`averify_claims` drive them
(the service is async, so there are no sync twins).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Required, TypeAlias, TypedDict, Unpack

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, WithJsonSchema

from langchain_references.judges import Judgement, Label
from langchain_references.judges.base import JudgeInfo, JudgeInputLike
from langchain_references.server.cpu import run_cpu_bound
from langchain_references.server.guard import guarded
from langchain_references.server.index import (
    EvidenceHit,
    EvidenceIndex,
    Granularity,
    split_sentences,
)
from langchain_references.server.live import LiveIndex
from langchain_references.server.services import Services, ServicesDep
from langchain_references.server.settings import LimitExceededError, Text

__all__ = [
    "Claim",
    "Claims",
    "EvidenceOptions",
    "EvidenceOutput",
    "RankedHit",
    "TextToSplit",
    "VerifiedEvidenceOutput",
    "afind_evidence",
    "averify_claims",
    "router",
    "select_evidence",
    "verification_units",
    "verified_items",
]

logger = logging.getLogger(__name__)

#: Extra entries retrieved beyond ``top_k`` (the threshold and re-ranking choose among them).
EXTRA_CANDIDATES: Final = 5
#: Pairs judged per call of the judge: a cancelled request stops after the slice in progress.
JUDGE_SLICE: Final = 32
HEALTHCHECK_TEXT: Final = "Seems to be running"

VerifyLabel: TypeAlias = Literal["SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO"]
_LABELS: Final[dict[Label, VerifyLabel]] = {
    Label.ENTAILS: "SUPPORTS",
    Label.CONTRADICTS: "REFUTES",
    Label.UNKNOWN: "NOT_ENOUGH_INFO",
}

# Optional fields render as their plain type (no ``anyOf``/``null``, no ``default``), as in
# the reference document, which FastAPI generated from pydantic v1 ``Optional`` fields.
_OptFloat = Annotated[float | None, WithJsonSchema({"type": "number"})]
_OptInt = Annotated[int | None, WithJsonSchema({"type": "integer"})]
_OptStr = Annotated[str | None, WithJsonSchema({"type": "string"})]


def _schema_extra(example: dict[str, Any] | None) -> Any:
    """The models' JSON schema hook: no ``null`` defaults, and the example, if any.

    It runs when the module is imported (the models are built then): mutation testing
    switches mutants per call after the import, so none of its mutants could take effect.
    The OpenAPI tests pin its output.
    """

    # pragma: no mutate block
    def extra(schema: dict[str, Any]) -> None:
        for prop in schema.get("properties", {}).values():
            if prop.get("default", ...) is None:
                del prop["default"]
        if example is not None:
            schema["example"] = example

    return extra


class Claim(BaseModel):
    """One claim to find evidence for or to verify."""

    model_config = ConfigDict(
        title="Claim",
        json_schema_extra=_schema_extra(
            {"claim": "There is no climate emergency", "threshold": 0.7, "top_k": 10}
        ),
    )

    threshold: _OptFloat = None
    top_k: _OptInt = None
    claim: Text


class Claims(BaseModel):
    """Several claims, answered in order."""

    model_config = ConfigDict(
        title="Claims",
        json_schema_extra=_schema_extra(
            {
                "claims": [
                    "CO2 is not the cause of our current warming trend.",
                    "Natural variation explains a substantial part of global warming observed "
                    "since 1850",
                ],
                "threshold": 0.6,
                "top_k": 10,
            }
        ),
    )

    threshold: _OptFloat = None
    top_k: _OptInt = None
    claims: list[Text]


class TextToSplit(BaseModel):
    """A text to split into sentences."""

    model_config = ConfigDict(
        title="TextToSplit",
        json_schema_extra=_schema_extra({"text": "There is no climate emergency. CO2 is a gas."}),
    )

    text: Text


class EvidenceOutput(BaseModel):
    """One piece of evidence (``url`` is an extension of the reference schema)."""

    model_config = ConfigDict(title="EvidenceOutput", json_schema_extra=_schema_extra(None))

    num: int
    title: str
    text: str
    similarity: _OptFloat = None
    doi: _OptStr = None
    openalex_id: _OptStr = None
    year: _OptInt = None
    citation_count: _OptInt = None
    influential_citation_count: _OptInt = None
    url: _OptStr = None


class VerifiedEvidenceOutput(EvidenceOutput):
    """A piece of evidence with the judge's label (``error`` and ``judge`` are extensions)."""

    model_config = ConfigDict(title="VerifiedEvidenceOutput", json_schema_extra=_schema_extra(None))

    label: VerifyLabel
    probability: float
    error: _OptStr = None
    judge: JudgeInfo | None = None


@dataclass(frozen=True, slots=True)
class RankedHit:
    """A retrieved entry with its 1-based retrieval rank (``num``)."""

    num: int
    hit: EvidenceHit


@dataclass(frozen=True, slots=True)
class _Unit:
    """One (claim, passage) pair to judge, and the item it becomes."""

    ranked: RankedHit
    text: str
    passage: str


def _rerank_key(ranked: RankedHit) -> tuple[tuple[bool, int], ...]:
    """Descending (influential citations, citations, year), missing values last."""
    hit = ranked.hit
    values = (hit.influential_citation_count, hit.citation_count, hit.year)
    return tuple((value is None, -(value or 0)) for value in values)


def select_evidence(
    hits: Sequence[EvidenceHit], *, threshold: float | None, top_k: int, re_rank: bool
) -> list[RankedHit]:
    """Choose a claim's evidence among its retrieved entries.

    Args:
        hits: The entries retrieved for the claim (``top_k + 5`` of them), best first.
        threshold: Keep only entries with ``similarity > threshold``; ``None`` keeps all.
        top_k: How many to return at most.
        re_rank: Order by (influential citations, citations, year) descending, missing values
            last; ties keep the similarity order.

    Returns:
        At most ``top_k`` entries, each with its 1-based retrieval rank.
    """
    ranked = [
        RankedHit(num, hit)
        for num, hit in enumerate(hits, start=1)
        if threshold is None or hit.similarity > threshold
    ]
    if re_rank:
        ranked.sort(key=_rerank_key)  # stable: ties stay in retrieval order
    return ranked[:top_k]


def _output(ranked: RankedHit, text: str | None = None) -> dict[str, Any]:
    hit = ranked.hit
    return {
        "num": ranked.num,
        "title": hit.title,
        "text": hit.text if text is None else text,
        "similarity": hit.similarity,
        "doi": hit.doi,
        "openalex_id": hit.openalex_id,
        "year": hit.year,
        "citation_count": hit.citation_count,
        "influential_citation_count": hit.influential_citation_count,
        "url": hit.url,
    }


def verification_units(
    evidence: Sequence[RankedHit], *, granularity: Granularity, include_title: bool
) -> list[_Unit]:
    """The passages to judge a claim against.

    Args:
        evidence: The claim's selected evidence.
        granularity: ``"phrase"`` judges each entry; ``"abstract"`` each sentence of each one.
        include_title: Judge ``"title. text"`` rather than the text alone.

    Returns:
        One unit per passage, in order.
    """
    units: list[_Unit] = []
    for ranked in evidence:
        texts = split_sentences(ranked.hit.text) if granularity == "abstract" else []
        for text in texts or [ranked.hit.text]:
            title = ranked.hit.title.strip().rstrip(".")
            passage = f"{title}. {text}" if include_title and title else text
            units.append(_Unit(ranked, text, passage))
    return units


def _verdict(judgement: Judgement | BaseException) -> tuple[VerifyLabel, float, str | None]:
    if isinstance(judgement, BaseException):
        logger.warning("judging failed: %s: %s", type(judgement).__name__, judgement)
        return "NOT_ENOUGH_INFO", 0.0, f"{type(judgement).__name__}: {judgement}"
    return _LABELS[judgement.label], judgement.confidence, judgement.error


def verified_items(
    units: Sequence[_Unit],
    judgements: Sequence[Judgement | BaseException],
    *,
    filter_nei: bool,
    judge: JudgeInfo | None = None,
) -> list[VerifiedEvidenceOutput]:
    """Label each unit with its judgement.

    Args:
        units: The claim's units (:func:`verification_units`).
        judgements: One judgement (or the exception judging raised) per unit.
        filter_nei: Drop ``NOT_ENOUGH_INFO`` items (failed judgements are kept, with
            ``error`` set).
        judge: The judge that made the judgements, named by every item.

    Returns:
        The verified items, in unit order.
    """
    items: list[VerifiedEvidenceOutput] = []
    for unit, judgement in zip(units, judgements, strict=True):
        label, probability, error = _verdict(judgement)
        if filter_nei and label == "NOT_ENOUGH_INFO" and error is None:
            continue
        items.append(
            VerifiedEvidenceOutput(
                **_output(unit.ranked, unit.text),
                label=label,
                probability=probability,
                error=error,
                judge=judge,
            )
        )
    return items


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to retrieve for a request: the non-blank claims and how many entries each."""

    claims: list[Text]
    queries: list[int]  # indices of the claims that are searched (non-blank)
    fetch_k: int
    top_k: int


def _plan(services: Services, claims: Sequence[str], top_k: int | None) -> _Plan:
    settings = services.settings
    settings.check_claims(claims)
    k = settings.check_top_k(top_k)
    queries = [i for i, claim in enumerate(claims) if claim.strip()]
    return _Plan(list(claims), queries, k + EXTRA_CANDIDATES, k)


def _selected(
    plan: _Plan,
    found: Sequence[Sequence[EvidenceHit]],
    *,
    threshold: float | None,
    re_rank: bool,
) -> list[list[RankedHit]]:
    per_claim: list[list[RankedHit]] = [[] for _ in plan.claims]
    for i, hits in zip(plan.queries, found, strict=True):
        per_claim[i] = select_evidence(hits, threshold=threshold, top_k=plan.top_k, re_rank=re_rank)
    return per_claim


class EvidenceOptions(TypedDict, total=False):
    """How :func:`afind_evidence` and :func:`averify_claims` retrieve and select evidence.

    Attributes:
        granularity: ``"abstract"`` or ``"phrase"`` (required).
        threshold: Minimum similarity (exclusive), or ``None`` (default).
        top_k: Items per claim (default: the settings' ``default_top_k``).
        re_rank: Re-rank by citations and year (default True).
    """

    granularity: Required[Granularity]
    threshold: float | None
    top_k: int | None
    re_rank: bool


async def _aselected(
    services: Services, claims: Sequence[str], options: EvidenceOptions
) -> tuple[_Plan, list[list[RankedHit]]]:
    """Retrieve and select the evidence of each claim (the step both endpoints share)."""
    plan = _plan(services, claims, options.get("top_k"))
    queries = [plan.claims[i] for i in plan.queries]
    found = await services.index.asearch_many(
        queries, granularity=options["granularity"], k=plan.fetch_k
    )
    threshold, re_rank = options.get("threshold"), options.get("re_rank", True)
    return plan, _selected(plan, found, threshold=threshold, re_rank=re_rank)


async def afind_evidence(
    services: Services, claims: Sequence[str], **options: Unpack[EvidenceOptions]
) -> list[list[EvidenceOutput]]:
    """The evidence of each claim (the ``evidence`` endpoints, in process).

    Args:
        services: The index and settings.
        claims: The claims (a blank claim gets no evidence).
        **options: Granularity, threshold, ``top_k`` and re-ranking (:class:`EvidenceOptions`).

    Returns:
        The evidence of each claim, one list per claim.

    Raises:
        LimitExceededError: If the claims or ``top_k`` exceed the settings' limits.
        EvidenceIndexError: If the index fails.
    """
    _, selected = await _aselected(services, claims, options)
    return [[EvidenceOutput(**_output(r)) for r in claim] for claim in selected]


def _judge_inputs(claims: Sequence[str], units: Sequence[Sequence[_Unit]]) -> list[JudgeInputLike]:
    return [
        {"statement": claim, "passage": unit.passage}
        for claim, claim_units in zip(claims, units, strict=True)
        for unit in claim_units
    ]


def _assemble(
    units: Sequence[Sequence[_Unit]],
    judgements: Sequence[Judgement | BaseException],
    *,
    filter_nei: bool,
    judge: JudgeInfo,
) -> list[list[VerifiedEvidenceOutput]]:
    out: list[list[VerifiedEvidenceOutput]] = []
    start = 0
    for claim_units in units:
        stop = start + len(claim_units)
        out.append(
            verified_items(claim_units, judgements[start:stop], filter_nei=filter_nei, judge=judge)
        )
        start = stop
    return out


#: Entries of each granularity, per index object (one generation, read-only while it serves).
_ENTRIES: weakref.WeakKeyDictionary[EvidenceIndex, dict[str, int]] = weakref.WeakKeyDictionary()


async def _entries(index: EvidenceIndex | LiveIndex, granularity: Granularity) -> int:
    """How many entries of ``granularity`` the index serves now (counted once per generation).

    A :class:`LiveIndex` reads its pointer first when that is due, as a search would: after a
    rebuild, a request refused before any search counts the new generation. (Its
    :meth:`~LiveIndex.count` is retried on a newer generation if the one served is deleted.)
    """
    served = await asyncio.to_thread(index.fresh) if isinstance(index, LiveIndex) else index
    counts = _ENTRIES.setdefault(served, {})
    if granularity not in counts:
        counts[granularity] = await asyncio.to_thread(index.count, granularity)
    return counts[granularity]


async def _check_judged_before_search(
    services: Services, claims: Sequence[str], options: EvidenceOptions
) -> None:
    """Refuse (413 ``max_judged``) a verify request sure to exceed it, before any search.

    Without a threshold every searched claim gets ``min(top_k, entries)`` evidence entries,
    each judged at least once (an abstract once per sentence): that many pairs at least. A
    request over the limit by that count is refused before its queries are embedded, so that
    it does not hold the embedding threads that other requests' searches wait for. (With a
    threshold the count is only known after the search; it is checked again there.)
    """
    if options.get("threshold") is not None:
        return
    settings = services.settings
    settings.check_claims(claims)
    top_k = settings.check_top_k(options.get("top_k"))
    searched = sum(1 for claim in claims if claim.strip())
    if searched * top_k <= settings.max_judged:
        return  # cannot exceed it with one pair per entry: no need to count the index
    least = searched * min(top_k, await _entries(services.index, options["granularity"]))
    if least > settings.max_judged:
        raise LimitExceededError("max_judged", settings.max_judged, least, status_code=413)


async def averify_claims(
    services: Services,
    claims: Sequence[str],
    *,
    include_title: bool = True,
    filter_nei: bool = True,
    **options: Unpack[EvidenceOptions],
) -> list[list[VerifiedEvidenceOutput]]:
    """The verified evidence of each claim (the ``verify`` endpoints, in process).

    With ``granularity="abstract"`` each sentence of each abstract is judged.

    Args:
        services: The index, judge and settings.
        claims: The claims (a blank claim gets no evidence).
        include_title: Judge ``"title. text"``.
        filter_nei: Drop ``NOT_ENOUGH_INFO`` items.
        **options: Granularity, threshold, ``top_k`` (evidence entries per claim) and
            re-ranking (:class:`EvidenceOptions`).

    Returns:
        The verified evidence of each claim, one list per claim.

    Raises:
        LimitExceededError: If the claims or ``top_k`` exceed the settings' limits, or the
            pairs to judge exceed ``max_judged`` (413).
        EvidenceIndexError: If the index fails.
    """
    await _check_judged_before_search(services, claims, options)
    plan, selected = await _aselected(services, claims, options)
    granularity = options["granularity"]

    def plan_units() -> list[list[_Unit]]:  # splits abstracts: CPU-bound, in a worker thread
        return [
            verification_units(evidence, granularity=granularity, include_title=include_title)
            for evidence in selected
        ]

    units = await asyncio.to_thread(plan_units)  # the event loop's (fair) worker threads
    inputs = _judge_inputs(plan.claims, units)
    maximum = services.settings.max_judged
    if len(inputs) > maximum:
        raise LimitExceededError("max_judged", maximum, len(inputs), status_code=413)
    judgements: list[Judgement | BaseException] = []
    for start in range(0, len(inputs), JUDGE_SLICE):
        chunk = inputs[start : start + JUDGE_SLICE]
        judgements.extend(await services.judge.abatch(chunk, return_exceptions=True))
    return _assemble(units, judgements, filter_nei=filter_nei, judge=services.judge_info)


# --- The router --------------------------------------------------------------------------------

router = APIRouter()
ReRank = Annotated[bool, Query(title="Re Rank")]
IncludeTitle = Annotated[bool, Query(title="Include Title")]
FilterNei = Annotated[bool, Query(title="Filter Nei")]

_EVIDENCE_DESCRIPTION: Final = "Get top_k relevant evidence {}s from scientific articles"
_VERIFY_DESCRIPTION: Final = (
    "Verify claim against phrases extracted from scientific paper abstracts"
)


def _batch_of(claim: Claim) -> Claims:
    """A one-claim batch: a single-claim endpoint answers as its batch endpoint does."""
    return Claims(claims=[claim.claim], threshold=claim.threshold, top_k=claim.top_k)


def _options(claims: Claims, granularity: Granularity, re_rank: bool) -> EvidenceOptions:
    """The evidence options of a request body and its query."""
    return EvidenceOptions(
        granularity=granularity, threshold=claims.threshold, top_k=claims.top_k, re_rank=re_rank
    )


@dataclass
class _VerifyQuery:
    """The query parameters of the ``verify`` endpoints (a FastAPI dependency)."""

    include_title: IncludeTitle = True
    re_rank: ReRank = True
    filter_nei: FilterNei = True


VerifyQuery = Annotated[_VerifyQuery, Depends()]


def _add_routes(granularity: Granularity) -> None:
    """Register the four routes of one granularity (the reference's operation ids).

    It runs when the module is imported, so mutation testing (which switches mutants per
    call, after the import) could not change the handlers it defines: they are excluded from
    it; the compatible API's tests call every route.
    """
    # pragma: no mutate block

    async def get_evidences_batch(
        claims: Claims, request: Request, services: ServicesDep, re_rank: ReRank = True
    ) -> list[list[EvidenceOutput]]:
        options = _options(claims, granularity, re_rank)
        work = afind_evidence(services, claims.claims, **options)
        return await guarded(request, work, seconds=services.settings.max_request_seconds)

    async def get_evidences(
        claim: Claim, request: Request, services: ServicesDep, re_rank: ReRank = True
    ) -> list[EvidenceOutput]:
        return (await get_evidences_batch(_batch_of(claim), request, services, re_rank))[0]

    async def verify_batch(
        claims: Claims, request: Request, services: ServicesDep, query: VerifyQuery
    ) -> list[list[VerifiedEvidenceOutput]]:
        options = _options(claims, granularity, query.re_rank)
        work = averify_claims(
            services,
            claims.claims,
            include_title=query.include_title,
            filter_nei=query.filter_nei,
            **options,
        )
        return await guarded(request, work, seconds=services.settings.max_request_seconds)

    async def verify(
        claim: Claim, request: Request, services: ServicesDep, query: VerifyQuery
    ) -> list[VerifiedEvidenceOutput]:
        return (await verify_batch(_batch_of(claim), request, services, query))[0]

    base = f"/api/{granularity}"
    evidence_doc = _EVIDENCE_DESCRIPTION.format(granularity)
    for path, endpoint, name, description in (
        (f"{base}/evidence", get_evidences, "get_evidences", evidence_doc),
        (f"{base}/evidence/batch", get_evidences_batch, "get_evidences", evidence_doc),
        (f"{base}/verify", verify, "verify", _VERIFY_DESCRIPTION),
        (f"{base}/verify/batch", verify_batch, "verify", _VERIFY_DESCRIPTION),
    ):
        router.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            name=name,
            summary=name.replace("_", " ").title(),
            description=description,
        )


_add_routes("abstract")
_add_routes("phrase")


@router.post("/api/split")
async def split(text: TextToSplit, services: ServicesDep) -> list[str]:
    """Split a text into sentences."""
    services.settings.check_article(text.text)
    return await run_cpu_bound(split_sentences, text.text)


@router.get("/healthcheck")
async def healthcheck() -> str:
    """Say the service is up."""
    return HEALTHCHECK_TEXT
