"""An offline, extractive stand-in for a chat model that answers with citations.

:class:`ExtractiveAnswerer` lets the demo (and tests) run the whole citation pipeline without an
LLM, an API key or a network. It does not generate language: it copies the sentences of the
prompt's documents that best match the question and cites each one.

Prompt contract
---------------
* Documents are blocks ``<document id=N>TEXT</document>`` (``N`` a positive integer, quotes
  around it allowed) anywhere in the prompt's messages, as written by
  :func:`langchain_references.format_documents`. If two blocks carry the same id, the last one
  wins (so an example block in the instructions is superseded by the real documents that follow).
* The question is in the **last human message**, after the document blocks are removed from it:
  the text after the last line starting with ``Question:`` if there is one, else the whole
  remaining text.

Answer format
-------------
Up to ``max_sentences`` sentences, most relevant first, each followed by a citation
``[n](id=k)`` placed before its final punctuation, where ``k`` is the id of the document the
sentence comes from and ``n`` numbers the cited documents in order of first citation. Citation
look-alikes inside the documents are removed first, so copied text cannot forge a citation.
When no sentence is relevant the answer is exactly :data:`NOT_FOUND_ANSWER`, without a
citation.

Questions that ask for a quantity (``how tall / high / long / far / many / much / old ...``,
``when``, ``what year``) come first to the sentences that *state* it: a relevant sentence with
a number and a fitting unit (or a date) beats one that merely mentions the subject
(:func:`states_asked_quantity`).

Bounded work: the answerer reads at most ``max_document_chars`` characters of each document
(from its start, cut at a blank) and ``max_prompt_chars`` in all, in document order, so that its
time is linear in what it reads and bounded whatever the documents' size. The asynchronous
paths (:meth:`~ExtractiveAnswerer.ainvoke`, :meth:`~ExtractiveAnswerer.astream`) do the
CPU-bound steps (parsing the prompt, splitting and scoring the sentences) in a worker thread,
never on the event loop, and stop when the call is cancelled: the worker thread checks a flag
before each document, and the sentences are embedded ``embedding_batch_size`` at a time, so
that a cancelled answer (a request past its time budget, a client gone) leaves at most one
document's splitting or one batch's embedding running.

Streaming emits one word per chunk (each chunk carries the whitespace before its word, so the
chunks join to the exact text of :meth:`invoke`); citations are sometimes split across chunks
(``[1](`` / ``id=3`` / ``)``), deterministically, as a real model's tokens would be.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from langchain_references.citations.sentences import sentence_segmenter, sentence_spans
from langchain_references.errors import LangchainReferencesError
from langchain_references.services._vectors import cosines
from langchain_references.text.sentences import LATIN_TERMINALS, char_class
from langchain_references.text.words import QUESTION_STOPWORDS, words

sentence_segmenter()  # without pysbd, importing the module fails here

__all__ = [
    "EMBEDDING_BATCH_SIZE",
    "MAX_DOCUMENT_CHARS",
    "MAX_PROMPT_CHARS",
    "NOT_FOUND_ANSWER",
    "AnswerCancelledError",
    "ExtractiveAnswerer",
    "ParsedPrompt",
    "PromptDocument",
    "lexical_scores",
    "parse_prompt",
    "split_sentences",
    "states_asked_quantity",
]

#: The whole answer when no sentence of the documents is relevant to the question.
NOT_FOUND_ANSWER: Final = "I could not find this in the documents."

#: Characters of one document the answerer reads by default (a long abstract; the rest of a
#: longer document is not read).
MAX_DOCUMENT_CHARS: Final = 10_000
#: Characters of all the documents the answerer reads by default, in document order.
MAX_PROMPT_CHARS: Final = 100_000
#: Sentences embedded per call on the async paths by default.
EMBEDDING_BATCH_SIZE: Final = 32


class AnswerCancelledError(LangchainReferencesError):
    """The answer's asynchronous call was cancelled; its worker thread stopped early."""


_DOCUMENT_RE: Final = re.compile(
    r"<document\s+id=([\"']?)(?P<id>[0-9]{1,9})\1\s*>(?P<text>.*?)</document\s*>",
    re.DOTALL | re.IGNORECASE,
)
_QUESTION_LINE_RE: Final = re.compile(r"^[ \t]*question[ \t]*:[ \t]*(?P<q>.*)$", re.I | re.M)
# The answer's streamed chunks (a word and the blanks before it), not words: see text.words.words.
_TOKEN_RE: Final = re.compile(r"\s*\S+")
# A sentence's closing punctuation, which its citation goes before. Latin sentence ends only
# (text.sentences.LATIN_TERMINALS): kept so that answers stay the same (an ellipsis stays in
# the body).
_END_PUNCT_RE: Final = re.compile(
    rf"^(?P<body>.*?)(?P<punct>{char_class(LATIN_TERMINALS)}+)$", re.DOTALL
)
# Citation look-alikes inside document text: copied verbatim they would forge citations.
_CITATION_LIKE_RE: Final = re.compile(r"\s*\[(?:[0-9]+|NUMBER)\]\(id=[0-9]+\)")

# What a question asks for, and what a sentence stating it contains.
_NUMBER: Final = (
    r"(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"fifteen|twenty|thirty|forty|fifty|hundred|hundreds|thousand|thousands|million|"
    r"millions|billion|billions|dozen|dozens|half|single)"
)
_UNITS: Final = {
    "length": r"feet|foot|ft|inch(?:es)?|yards?|miles?|meters?|metres?|m|km|kilomet(?:er|re)s?|"
    r"centimet(?:er|re)s?|cm|mm|stor(?:e)?ys?|stories|floors|light[- ]years?",
    "time": r"seconds?|minutes?|hours?|days?|weeks?|months?|years?|decades?|centuries|century",
    "mass": r"kg|kilograms?|grams?|g|pounds?|lbs?|tons?|tonnes?|ounces?",
    "temperature": r"degrees?|°[cf]?",
    "money": r"dollars?|euros?|pounds?|cents?|[$€£]",
}
_MONTHS: Final = (
    r"january|february|march|april|may|june|july|august|september|october|november|december"
)
_DATE_RE: Final = re.compile(
    rf"\b(?:1[0-9]{{3}}|20[0-9]{{2}})s?\b|\b(?:{_MONTHS})\b|\b\d{{1,2}}(?:st|nd|rd|th) century\b",
    re.I,
)


def _quantity_re(*kinds: str) -> re.Pattern[str]:
    units = "|".join(_UNITS[kind] for kind in kinds)
    return re.compile(
        rf"(?:[$€£]\s?\d|\b{_NUMBER}\b[\s-]*(?:\(|of\s+)?(?:{units})(?:\b|\s|$))", re.I
    )


class _Dimension:
    """A quantity of ``kinds`` in a sentence that also names the dimension (e.g. "tall")."""

    def __init__(self, kinds: tuple[str, ...], words: str) -> None:
        self.quantity = _quantity_re(*kinds)
        self.words = re.compile(rf"\b(?:{words})\b", re.I)

    def search(self, sentence: str) -> bool:
        return bool(self.quantity.search(sentence) and self.words.search(sentence))


def _dimension(*kinds_and_words: str) -> _Dimension:
    *kinds, words = kinds_and_words
    return _Dimension(tuple(kinds), words)


_ANY_NUMBER_RE: Final = re.compile(rf"\b{_NUMBER}\b", re.I)
_ALL_UNITS: Final = tuple(_UNITS)
# (what the question asks, the patterns any one of which a sentence stating it matches)
_ASKED: Final[tuple[tuple[re.Pattern[str], tuple[re.Pattern[str] | _Dimension, ...]], ...]] = (
    (
        re.compile(r"\bhow (?:tall|high)\b", re.I),
        (_dimension("length", "tall|taller|tallest|height|high|higher|highest"),),
    ),
    (
        re.compile(r"\bhow far\b", re.I),
        (_dimension("length", "far|farther|further|distance|away"),),
    ),
    (re.compile(r"\bhow wide\b", re.I), (_dimension("length", "wide|width|across|diameter"),)),
    (re.compile(r"\bhow deep\b", re.I), (_dimension("length", "deep|depth|below|beneath"),)),
    (re.compile(r"\bhow long\b", re.I), (_quantity_re("length", "time"),)),
    (re.compile(r"\bhow (?:big|large|small|fast|quick)\b", re.I), (_quantity_re(*_ALL_UNITS),)),
    (re.compile(r"\bhow (?:heavy|light)\b", re.I), (_quantity_re("mass"),)),
    (re.compile(r"\bhow (?:hot|cold|warm)\b", re.I), (_quantity_re("temperature"),)),
    (re.compile(r"\bhow (?:many|much)\b", re.I), (_ANY_NUMBER_RE,)),
    (re.compile(r"\bhow old\b", re.I), (_quantity_re("time"), _DATE_RE)),
    (
        re.compile(r"\bwhen\b|\b(?:what|which) (?:year|date|day|month|century|decade)\b", re.I),
        (_DATE_RE,),
    ),
)
# Okapi BM25 parameters (the usual defaults).
_BM25_K1: Final = 1.2
_BM25_B: Final = 0.75


@dataclass(frozen=True, slots=True)
class PromptDocument:
    """A document block found in the prompt.

    Attributes:
        id: The number in ``<document id=N>``.
        text: The text between the tags, stripped.
    """

    id: int
    text: str


@dataclass(frozen=True, slots=True)
class ParsedPrompt:
    """What :class:`ExtractiveAnswerer` reads from a prompt.

    Attributes:
        question: The question to answer.
        documents: The document blocks, in prompt order, one per id.
    """

    question: str
    documents: tuple[PromptDocument, ...]


@dataclass(frozen=True, slots=True)
class _Candidate:
    """One sentence of one document."""

    doc_id: int
    doc_rank: int
    sentence_rank: int
    text: str


def parse_prompt(messages: Sequence[BaseMessage]) -> ParsedPrompt:
    """Find the document blocks and the question in chat messages.

    See the module docstring for the contract.

    Args:
        messages: The prompt messages.

    Returns:
        The question and the documents.

    Raises:
        ValueError: If there is no human message or no question in the last one.
    """
    by_id: dict[int, str] = {}
    for message in messages:
        for match in _DOCUMENT_RE.finditer(message.text):
            doc_id = int(match.group("id"))
            by_id.pop(doc_id, None)  # the last block with an id wins, at its own position
            by_id[doc_id] = match.group("text").strip()
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    if not humans:
        msg = "the prompt has no human message: ExtractiveAnswerer reads the question there"
        raise ValueError(msg)
    remaining = _DOCUMENT_RE.sub(" ", humans[-1].text)
    question_lines = list(_QUESTION_LINE_RE.finditer(remaining))
    question = question_lines[-1].group("q") if question_lines else remaining
    question = " ".join(question.split())
    if not question:
        msg = "the last human message holds no question (after removing document blocks)"
        raise ValueError(msg)
    documents = tuple(PromptDocument(id=k, text=v) for k, v in by_id.items())
    return ParsedPrompt(question=question, documents=documents)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with pysbd, whitespace inside each sentence collapsed.

    The splitter is :func:`~langchain_references.citations.sentences.sentence_spans`.

    Args:
        text: The text to split.

    Returns:
        The non-empty sentences, in order.
    """
    return [" ".join(text[start:end].split()) for start, end in sentence_spans(text)]


def _terms(text: str) -> list[str]:
    return words(text, stopwords=QUESTION_STOPWORDS)


def lexical_scores(question: str, sentences: Sequence[str]) -> list[float]:
    """Score sentences against a question with Okapi BM25 (content words only).

    The inverse document frequency is Lucene's ``ln(1 + (N - n + 0.5) / (n + 0.5))``, which
    stays positive even for the handful of sentences of one prompt (the classic formula turns
    negative for a word in more than half of them). Stop words are ignored, so a sentence
    scores 0 exactly when it shares no content word with the question.

    Args:
        question: The question.
        sentences: The sentences to score (the collection for the statistics).

    Returns:
        One non-negative score per sentence.
    """
    query = set(_terms(question))
    documents = [Counter(_terms(s)) for s in sentences]
    if not query or not documents:
        return [0.0] * len(documents)
    lengths = [sum(d.values()) for d in documents]
    average_length = sum(lengths) / len(lengths) or 1.0
    count = len(documents)
    idf: dict[str, float] = {}
    for term in query:
        containing = sum(1 for d in documents if term in d)
        idf[term] = math.log(1.0 + (count - containing + 0.5) / (containing + 0.5))
    scores: list[float] = []
    for document, length in zip(documents, lengths, strict=True):
        norm = _BM25_K1 * (1.0 - _BM25_B + _BM25_B * length / average_length)
        scores.append(
            sum(
                idf[term] * document[term] * (_BM25_K1 + 1.0) / (document[term] + norm)
                for term in query
                if term in document
            )
        )
    return scores


def states_asked_quantity(question: str, sentence: str) -> bool | None:
    """Whether a sentence states the quantity a question asks for.

    Questions like "How tall ...?" want a number with a length unit, "How many ...?" a number,
    "When ...?" or "What year ...?" a date; a compound question accepts any of its kinds.

    Args:
        question: The question.
        sentence: A candidate sentence.

    Returns:
        ``None`` if the question asks for no quantity, else whether ``sentence`` states one
        of the kind asked.

    Examples:
        >>> states_asked_quantity("How tall is it?", "The tower is 605 feet (184 meters) tall.")
        True
        >>> states_asked_quantity("How tall is it?", "The tower is in Seattle.")
        False
        >>> states_asked_quantity("Who built it?", "Seattle built it in 1962.") is None
        True
    """
    wanted = [patterns for asked, patterns in _ASKED if asked.search(question)]
    if not wanted:
        return None
    return any(p.search(sentence) for patterns in wanted for p in patterns)


def _head(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` at most, cut at a blank when there is one."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # a blank right after the limit cuts there
    cut = max(head.rfind(blank) for blank in " \n\t\r")
    return head[:cut] if cut > 0 else head[:limit]


def _candidates(
    prompt: ParsedPrompt,
    *,
    max_document_chars: int,
    max_prompt_chars: int,
    stop: threading.Event | None = None,
) -> list[_Candidate]:
    """The sentences of the documents' first characters (see the module docs' bounds).

    Raises:
        AnswerCancelledError: If ``stop`` is set before a document.
    """
    candidates: list[_Candidate] = []
    left = max_prompt_chars
    for doc_rank, doc in enumerate(prompt.documents):
        if stop is not None and stop.is_set():
            raise AnswerCancelledError("the answer was cancelled")
        if left <= 0:
            break
        head = _head(doc.text, min(max_document_chars, left))
        left -= len(head)
        text = _CITATION_LIKE_RE.sub("", head)
        for sentence_rank, sentence in enumerate(split_sentences(text)):
            candidates.append(_Candidate(doc.id, doc_rank, sentence_rank, sentence))
    return candidates


def _tokens_of(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def _citation_tokens(label: int, doc_id: int, punct: str, ordinal: int) -> list[str]:
    """Write `` [label](id=doc_id)`` + punct, cut into tokens in one of three fixed ways."""
    variant = ordinal % 3
    if variant == 0:
        return [f" [{label}](id={doc_id})", *([punct] if punct else [])]
    if variant == 1:
        return [f" [{label}](", f"id={doc_id}", f"){punct}"]
    return [" [", f"{label}](id", f"={doc_id}){punct}"]


def _compose(selected: Sequence[_Candidate]) -> list[str]:
    """Turn the chosen sentences into answer tokens with citations."""
    if not selected:
        return _tokens_of(NOT_FOUND_ANSWER)
    labels: dict[int, int] = {}
    tokens: list[str] = []
    for ordinal, candidate in enumerate(selected):
        label = labels.setdefault(candidate.doc_id, len(labels) + 1)
        match = _END_PUNCT_RE.match(candidate.text)
        body, punct = (match["body"], match["punct"]) if match else (candidate.text, ".")
        words = _tokens_of(body)
        if ordinal and words:
            words[0] = " " + words[0]
        tokens.extend(words)
        tokens.extend(_citation_tokens(label, candidate.doc_id, punct, ordinal))
    return tokens


def _cut_at_stop(tokens: list[str], stop: Sequence[str] | None) -> list[str]:
    """Drop the text from the first stop sequence on, as a model would."""
    if not stop:
        return tokens
    text = "".join(tokens)
    positions = [text.find(s) for s in stop if s]
    positions = [p for p in positions if p >= 0]
    if not positions:
        return tokens
    limit = min(positions)
    kept: list[str] = []
    used = 0
    for token in tokens:
        if used + len(token) >= limit:
            if limit > used:
                kept.append(token[: limit - used])
            break
        kept.append(token)
        used += len(token)
    return kept


class ExtractiveAnswerer(BaseChatModel):
    """An extractive stand-in for an LLM: it cites sentences, it does not write an answer.

    **This is not a generative language model.** It exists so that the citation pipeline
    (prompt with numbered documents -> answer with ``[n](id=k)`` citations -> rewritten
    references) can be demonstrated and tested offline. It reads ``<document id=N>`` blocks
    and the question from the prompt (see the module docstring for the exact contract), scores
    every sentence of every document against the question, and answers with the best few
    sentences copied verbatim, each followed by a citation of its document. It cannot
    paraphrase, combine facts, reason or follow instructions; any other text of the prompt is
    ignored.

    Scoring uses ``embeddings`` (cosine similarity between the question and each sentence, e.g.
    with :class:`~langchain_references.services.embeddings.MiniLMEmbeddings`) when given, else an
    Okapi BM25 lexical score (:func:`lexical_scores`). A sentence is kept if it passes the absolute
    threshold (``min_similarity`` for embeddings, at least one shared content word for BM25)
    and scores at least ``relative_threshold`` times the best sentence. Exact duplicate
    sentences are kept once. When nothing passes, the answer is :data:`NOT_FOUND_ANSWER`.

    Examples:
        .. code-block:: python

            from langchain_core.messages import HumanMessage, SystemMessage

            model = ExtractiveAnswerer()
            model.invoke(
                [
                    SystemMessage("<document id=1>Bees make honey.</document>"),
                    HumanMessage("What do bees make?"),
                ]
            ).content
            # 'Bees make honey [1](id=1).'
    """

    embeddings: Embeddings | None = Field(default=None, exclude=True)
    """Embeddings for semantic scoring; ``None`` uses BM25."""
    max_sentences: int = Field(default=3, ge=1, le=50)
    """The most sentences in an answer."""
    min_similarity: float = Field(default=0.3, ge=-1.0, le=1.0)
    """Smallest cosine similarity a sentence needs (embeddings only)."""
    relative_threshold: float = Field(default=0.75, ge=0.0, le=1.0)
    """A kept sentence scores at least this fraction of the best sentence's score."""
    answer_relative_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    """A sentence stating the quantity the question asks for (:func:`states_asked_quantity`)
    is kept, ahead of the others, if it scores at least this fraction of the best score (and
    passes the absolute threshold)."""
    max_document_chars: int = Field(default=MAX_DOCUMENT_CHARS, ge=1)
    """Characters of one document read (from its start, cut at a blank); the rest is not."""
    max_prompt_chars: int = Field(default=MAX_PROMPT_CHARS, ge=1)
    """Characters of all the documents read, in document order."""
    embedding_batch_size: int = Field(default=EMBEDDING_BATCH_SIZE, ge=1)
    """Sentences embedded per call on the async paths (a cancelled answer stops between)."""

    @property
    def _llm_type(self) -> str:
        return "extractive-answerer"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "embeddings": type(self.embeddings).__name__ if self.embeddings else None,
            "max_sentences": self.max_sentences,
            "min_similarity": self.min_similarity,
            "relative_threshold": self.relative_threshold,
            "answer_relative_threshold": self.answer_relative_threshold,
            "max_document_chars": self.max_document_chars,
            "max_prompt_chars": self.max_prompt_chars,
        }

    def _select(
        self, question: str, candidates: list[_Candidate], scores: Sequence[float]
    ) -> list[_Candidate]:
        floor = self.min_similarity if self.embeddings is not None else 0.0
        ranked = sorted(
            zip(scores, candidates, strict=True),
            key=lambda pair: (-pair[0], pair[1].doc_rank, pair[1].sentence_rank),
        )
        if not ranked or ranked[0][0] <= 0.0 or ranked[0][0] < floor:
            return []
        best = ranked[0][0]
        cutoff = max(floor, self.relative_threshold * best)
        answer_cutoff = max(floor, self.answer_relative_threshold * best)
        # Sentences that state the asked quantity first, then the others, each by score.
        usable = [
            (score, candidate)
            for score, candidate in ranked
            if self.embeddings is not None or score > 0.0
        ]
        answering = [
            candidate
            for score, candidate in usable
            if score >= answer_cutoff and states_asked_quantity(question, candidate.text)
        ]
        others = [candidate for score, candidate in usable if score >= cutoff]
        selected: list[_Candidate] = []
        seen: set[str] = set()
        for candidate in [*answering, *others]:
            key = candidate.text.casefold()
            if key in seen:
                continue
            seen.add(key)
            selected.append(candidate)
            if len(selected) == self.max_sentences:
                break
        return selected

    def _draft(self, messages: list[BaseMessage], stop: threading.Event | None = None) -> _Draft:
        prompt = parse_prompt(messages)
        candidates = _candidates(
            prompt,
            max_document_chars=self.max_document_chars,
            max_prompt_chars=self.max_prompt_chars,
            stop=stop,
        )
        draft = _Draft(prompt.question, candidates)
        if not candidates:
            draft.scores = []
        elif self.embeddings is None:
            draft.scores = lexical_scores(prompt.question, draft.sentences)
        else:
            draft.embeddings = self.embeddings
        return draft

    def _tokens(self, draft: _Draft, stop: list[str] | None) -> list[str]:
        if draft.scores is None:
            raise RuntimeError("the driver did not score the candidate sentences")
        selected = self._select(draft.question, draft.candidates, draft.scores)
        return _cut_at_stop(_compose(selected), stop)

    def _answer_tokens(self, messages: list[BaseMessage], stop: list[str] | None) -> list[str]:
        draft = self._draft(messages)
        if (embeddings := draft.embeddings) is not None:
            query = embeddings.embed_query(draft.question)
            draft.score(query, embeddings.embed_documents(draft.sentences))
        return self._tokens(draft, stop)

    async def _aanswer_tokens(
        self, messages: list[BaseMessage], stop: list[str] | None
    ) -> list[str]:
        """The answer's tokens, the CPU-bound steps in a worker thread (not on the loop).

        Cancelled, the worker thread stops before its next document and no further batch of
        sentences is embedded.
        """
        cancelled = threading.Event()
        try:
            draft = await asyncio.to_thread(self._draft, messages, cancelled)
            if (embeddings := draft.embeddings) is not None:
                query = await embeddings.aembed_query(draft.question)
                sentences = draft.sentences
                size = self.embedding_batch_size
                vectors: list[list[float]] = []
                for start in range(0, len(sentences), size):
                    vectors.extend(
                        await embeddings.aembed_documents(sentences[start : start + size])
                    )
                draft.score(query, vectors)
            return await asyncio.to_thread(self._tokens, draft, stop)
        finally:  # cancelled: the thread's work stops at its next check
            cancelled.set()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return _result(self._answer_tokens(messages, stop))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return _result(await self._aanswer_tokens(messages, stop))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for token, chunk in _chunks(self._answer_tokens(messages, stop)):
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for token, chunk in _chunks(await self._aanswer_tokens(messages, stop)):
            if run_manager:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


@dataclass
class _Draft:
    """An answer in the making, shared by the sync and async drivers (sans-IO).

    Attributes:
        question: The question.
        candidates: Every sentence of the documents.
        scores: One score per candidate; ``None`` until the driver has embedded the question
            and :attr:`sentences` with :attr:`embeddings` and called :meth:`score`.
        embeddings: The embeddings the driver must call, or ``None`` when the scores are in.
    """

    question: str
    candidates: list[_Candidate]
    scores: Sequence[float] | None = None
    embeddings: Embeddings | None = None

    @property
    def sentences(self) -> list[str]:
        """The candidate texts."""
        return [c.text for c in self.candidates]

    def score(self, query: Sequence[float], vectors: Sequence[Sequence[float]]) -> None:
        """Score the candidates by the cosine similarity of their vectors to the question's."""
        self.scores = cosines(query, vectors)


def _result(tokens: Sequence[str]) -> ChatResult:
    text = "".join(tokens)
    return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def _chunks(tokens: Sequence[str]) -> Iterator[tuple[str, ChatGenerationChunk]]:
    """Each token with its chunk (the last chunk is marked ``last``)."""
    for index, token in enumerate(tokens):
        yield token, _chunk(token, last=index == len(tokens) - 1)


def _chunk(token: str, *, last: bool) -> ChatGenerationChunk:
    message = AIMessageChunk(content=token, chunk_position="last" if last else None)
    return ChatGenerationChunk(message=message)
