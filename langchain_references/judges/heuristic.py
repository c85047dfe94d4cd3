"""An offline baseline judge: a lexical / embedding heuristic, **not** an NLI model, and weak.

:class:`HeuristicJudge` needs no model download. It decides in two steps:

1. *Relevance*: the share of the statement's content words found in the passage (crude suffix
   stripping, no real stemmer), averaged with the cosine similarity of the two texts when an
   :class:`~langchain_core.embeddings.Embeddings` is given (e.g.
   :class:`~langchain_references.embeddings.MiniLMEmbeddings`, which runs offline). Below the
   relevance threshold the answer is *unknown*.
2. *Contradiction cues* on a relevant passage: negation asymmetry (``not``, ``no``, ``never``,
   ``n't``... in one text but not the other), antonyms (``increase`` / ``decrease``,
   ``warming`` / ``cooling``...), numbers that differ next to the same word (``2 degrees`` vs
   ``4 degrees``) and, off by default because it did not help in tuning, refutation markers in
   the passage only (``false``, ``myth``, ``no evidence``, ``contrary``...). A cue gives
   *contradicts*, no cue *entails*.

Similarity finds passages on the same topic; it cannot tell support from contradiction, and the
cues miss most real contradictions. The default thresholds and cues were tuned (best pair-level
macro-F1) on the first half of the Climate-FEVER dev claims, the only labelled data available
offline, with ``benchmarks/eval_climate_fever.py --tune``. On the held-out second half (1,920
pairs, 384 claims):

=========================  =============  =============  ==============
judge                      pair accuracy  pair macro-F1  claim accuracy
=========================  =============  =============  ==============
majority class             0.641          0.260          0.419
heuristic, lexical only    0.542          0.427          0.419
heuristic + MiniLM cosine  0.571          0.472          0.424
=========================  =============  =============  ==============

So it finds related passages better than chance but is no better than the majority class at
the claim level; expect no better on other data. Use
:class:`~langchain_references.judges.LLMJudge` or
:class:`~langchain_references.judges.CrossEncoderNLIJudge` for real fact-checking.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from langchain_references._vectors import cosine
from langchain_references.judges.base import Judge, JudgeInput, Judgement, Label

__all__ = ["CUES", "HeuristicJudge", "LexicalFeatures", "lexical_features"]

#: Names of the contradiction cues.
CUES: Final = ("negation", "refutation", "antonym", "number")

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?(?:'[a-z]+)?")
_NUMBER = re.compile(r"^[0-9]+(?:[.,][0-9]+)?$")
_NEGATIONS: Final = frozenset(
    {"not", "no", "never", "none", "nothing", "nobody", "nor", "neither", "cannot", "without"}
)
_REFUTATION_WORDS: Final = frozenset(
    {
        "false",
        "myth",
        "myths",
        "contrary",
        "misconception",
        "debunked",
        "incorrect",
        "hoax",
        "unfounded",
        "disproved",
        "refuted",
        "wrong",
    }
)
_REFUTATION_PHRASES: Final = ("no evidence", "not true", "no scientific basis", "not supported")
_ANTONYM_PAIRS: Final = (
    ("increase increases increased increasing", "decrease decreases decreased decreasing"),
    ("rise rises rising rose risen", "fall falls falling fell fallen decline declines declining"),
    ("warm warms warmer warmed warming", "cool cools cooler cooled cooling"),
    ("more", "less fewer"),
    ("higher", "lower"),
    ("larger bigger", "smaller"),
    ("gain gains gained gaining", "loss losses lose loses lost losing"),
    ("grow grows growing grew grown growth", "shrink shrinks shrinking shrank shrunk"),
    ("accelerate accelerates accelerating accelerated", "slow slows slowing slowed decelerate"),
    ("above", "below"),
    ("positive", "negative"),
    ("strong stronger strengthen strengthens", "weak weaker weaken weakens"),
    ("thick thicker thicken thickening", "thin thinner thinning"),
    ("melt melts melting melted", "freeze freezes freezing froze frozen"),
    ("hot hotter", "cold colder"),
    ("safe safer", "dangerous harmful"),
    ("true", "false"),
)
_ANTONYMS: Final = tuple((frozenset(a.split()), frozenset(b.split())) for a, b in _ANTONYM_PAIRS)
_STOPWORD_TEXT: Final = """
    a an the of to in and or is are was were be been being for on at by with as that this
    these those it its from has have had do does did but if than then so such can could
    will would may might shall should must about into over under also which who whom whose
    what when where why how all any both each few other some our their there they them we
    you he she his her i me my us your
"""
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
_SUFFIXES: Final = ("ing", "ed", "es", "s", "ly", "er", "ation")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _is_negation(word: str) -> bool:
    return word in _NEGATIONS or word.endswith("n't")


def _numbers_by_context(tokens: Sequence[str]) -> dict[str, set[str]]:
    """Map each content word right after a number to the numbers seen before it."""
    out: dict[str, set[str]] = {}
    for i, tok in enumerate(tokens[:-1]):
        if _NUMBER.match(tok):
            for nxt in tokens[i + 1 : i + 3]:
                if not _NUMBER.match(nxt) and nxt not in _STOPWORDS:
                    out.setdefault(_stem(nxt), set()).add(tok.replace(",", ""))
                    break
    return out


@dataclass(frozen=True)
class LexicalFeatures:
    """What :func:`lexical_features` found in a (statement, passage) pair.

    Attributes:
        overlap: Share of the statement's content words present in the passage, in ``[0, 1]``.
        negation: Negation asymmetry (odd number of negations in one text vs the other).
        refutation: The passage has refutation markers that the statement lacks.
        antonym: A word of the statement meets its antonym in the passage.
        number: A number next to a word differs from the passage's number next to that word.
        cue_words: The words that triggered cues (for the rationale).
    """

    overlap: float
    negation: bool
    refutation: bool
    antonym: bool
    number: bool
    cue_words: tuple[str, ...] = ()

    def cues(self, enabled: Collection[str]) -> list[str]:
        """Names of the enabled cues that fired.

        Args:
            enabled: Cue names to consider (see :data:`CUES`).

        Returns:
            The fired cue names.
        """
        return [name for name in CUES if name in enabled and getattr(self, name)]


def lexical_features(statement: str, passage: str) -> LexicalFeatures:
    """Compute word overlap and contradiction cues of a pair.

    Args:
        statement: The statement.
        passage: The passage.

    Returns:
        The features.
    """
    s_tok, p_tok = _tokens(statement), _tokens(passage)
    s_content = {_stem(w) for w in s_tok if w not in _STOPWORDS and not _is_negation(w)}
    p_content = {_stem(w) for w in p_tok if w not in _STOPWORDS and not _is_negation(w)}
    overlap = len(s_content & p_content) / len(s_content) if s_content else 0.0
    words: list[str] = []

    s_neg = [w for w in s_tok if _is_negation(w)]
    p_neg = [w for w in p_tok if _is_negation(w)]
    negation = len(s_neg) % 2 != len(p_neg) % 2
    if negation:
        words.extend(s_neg or p_neg)

    s_lower, p_lower = statement.lower(), passage.lower()
    p_markers = [w for w in p_tok if w in _REFUTATION_WORDS and w not in s_tok]
    p_markers += [ph for ph in _REFUTATION_PHRASES if ph in p_lower and ph not in s_lower]
    words.extend(p_markers)

    s_set, p_set = set(s_tok), set(p_tok)
    antonym = False
    for a, b in _ANTONYMS:
        s_a, s_b, p_a, p_b = bool(s_set & a), bool(s_set & b), bool(p_set & a), bool(p_set & b)
        if (s_a and p_b and not s_b and not p_a) or (s_b and p_a and not s_a and not p_b):
            antonym = True
            words.extend(sorted((s_set | p_set) & (a | b)))

    s_nums, p_nums = _numbers_by_context(s_tok), _numbers_by_context(p_tok)
    number = False
    for context, values in s_nums.items():
        other = p_nums.get(context)
        if other and not (values & other):
            number = True
            words.append(f"{'/'.join(sorted(values))} vs {'/'.join(sorted(other))} {context}")
    return LexicalFeatures(
        overlap=overlap,
        negation=negation,
        refutation=bool(p_markers),
        antonym=antonym,
        number=number,
        cue_words=tuple(words),
    )


class HeuristicJudge(Judge):
    """Lexical / embedding heuristic judge: **not an NLI model; weak** (see module docs).

    Args:
        embeddings: Optional LangChain embeddings for the cosine part of the relevance
            (e.g. ``MiniLMEmbeddings()``); without, relevance is the word overlap alone.
        relevance_threshold: Minimum relevance for entails / contradicts. Defaults to the
            value tuned on Climate-FEVER: 0.38 with embeddings, 0.25 without.
        embedding_weight: Weight of the cosine in the relevance (the overlap gets the rest).
        cues: Contradiction cues to use, among :data:`CUES`. Defaults to the tuned set.
        batch_size: Pairs per ``embed_documents`` call in ``batch``.
        raise_errors: Re-raise errors instead of recording them in ``Judgement.error``.

    Raises:
        ValueError: If a parameter is out of range or a cue name unknown.
    """

    # Tuned for pair-level macro-F1 on the first half of the Climate-FEVER dev claims
    # (benchmarks/eval_climate_fever.py --tune); see the module docstring for held-out numbers.
    DEFAULT_THRESHOLD_WITH_EMBEDDINGS: Final = 0.38
    DEFAULT_THRESHOLD_LEXICAL: Final = 0.25
    DEFAULT_EMBEDDING_WEIGHT: Final = 0.5
    DEFAULT_CUES: Final = ("negation", "antonym", "number")

    def __init__(
        self,
        embeddings: Embeddings | None = None,
        *,
        relevance_threshold: float | None = None,
        embedding_weight: float = DEFAULT_EMBEDDING_WEIGHT,
        cues: Iterable[str] | None = None,
        batch_size: int = 64,
        raise_errors: bool = False,
    ) -> None:
        if embeddings is not None and not isinstance(embeddings, Embeddings):
            raise TypeError(f"embeddings must be an Embeddings, not {type(embeddings).__name__}")
        if relevance_threshold is None:
            relevance_threshold = (
                self.DEFAULT_THRESHOLD_LEXICAL
                if embeddings is None
                else self.DEFAULT_THRESHOLD_WITH_EMBEDDINGS
            )
        if not 0.0 <= relevance_threshold <= 1.0:
            raise ValueError(f"relevance_threshold must be in [0, 1], got {relevance_threshold}")
        if not 0.0 <= embedding_weight <= 1.0:
            raise ValueError(f"embedding_weight must be in [0, 1], got {embedding_weight}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        chosen = tuple(self.DEFAULT_CUES if cues is None else cues)
        unknown = set(chosen) - set(CUES)
        if unknown:
            raise ValueError(f"unknown cues {sorted(unknown)}; choose among {CUES}")
        self.embeddings = embeddings
        self.relevance_threshold = relevance_threshold
        self.embedding_weight = embedding_weight if embeddings is not None else 0.0
        self.cues = frozenset(chosen)
        self.batch_size = batch_size
        self.raise_errors = raise_errors

    def decide(self, statement: str, passage: str, cosine: float | None) -> Judgement:
        """Decide from the texts and an already computed cosine similarity.

        Args:
            statement: The statement.
            passage: The passage.
            cosine: Cosine similarity of their embeddings, or ``None`` (lexical only).

        Returns:
            The judgement. For entails / contradicts the confidence grows from 0.5 at the
            threshold to 1 at relevance 1; for unknown from 0.5 at the threshold to 1 at
            relevance 0.
        """
        return self.decide_features(lexical_features(statement, passage), cosine)

    def decide_features(self, features: LexicalFeatures, cosine: float | None) -> Judgement:
        """Decide from precomputed :func:`lexical_features` and a cosine similarity.

        Args:
            features: The pair's lexical features.
            cosine: Cosine similarity of the embeddings, or ``None``.

        Returns:
            The judgement.
        """
        if cosine is None or self.embedding_weight == 0.0:
            relevance = features.overlap
            how = f"word overlap {features.overlap:.2f}"
        else:
            w = self.embedding_weight
            relevance = w * max(0.0, cosine) + (1 - w) * features.overlap
            how = f"cosine {cosine:.2f}, word overlap {features.overlap:.2f}"
        t = self.relevance_threshold
        if relevance < t:
            confidence = 0.5 + 0.5 * (t - relevance) / t if t > 0 else 0.5
            return Judgement(
                label=Label.UNKNOWN,
                confidence=min(1.0, confidence),
                rationale=f"Heuristic: relevance {relevance:.2f} ({how}) is below {t:.2f}.",
            )
        confidence = 0.5 + 0.5 * (relevance - t) / (1 - t) if t < 1 else 1.0
        fired = features.cues(self.cues)
        if fired:
            return Judgement(
                label=Label.CONTRADICTS,
                confidence=min(1.0, confidence),
                rationale=(
                    f"Heuristic: relevant ({relevance:.2f}; {how}) with contradiction cues "
                    f"{', '.join(fired)}: {'; '.join(features.cue_words)}."
                ),
            )
        return Judgement(
            label=Label.ENTAILS,
            confidence=min(1.0, confidence),
            rationale=f"Heuristic: relevant ({relevance:.2f}; {how}), no contradiction cue.",
        )

    def similarities(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """Embedding cosine similarity of each (statement, passage) pair.

        Texts are embedded once each, in one ``embed_documents`` call.

        Args:
            pairs: ``(statement, passage)`` tuples.

        Returns:
            One cosine per pair, or ``None`` for each pair when no embeddings are used.

        Raises:
            ValueError: If the embeddings return the wrong number of vectors.
        """
        if self.embeddings is None or self.embedding_weight == 0.0:
            return [None] * len(pairs)
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        vectors = self.embeddings.embed_documents(texts)
        if len(vectors) != len(texts):
            raise ValueError(f"embeddings returned {len(vectors)} vectors for {len(texts)} texts")
        index = dict(zip(texts, vectors, strict=True))
        return [cosine(index[s], index[p]) for s, p in pairs]

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        (cosine,) = self.similarities([(statement, passage)])
        return self.decide(statement, passage, cosine)

    def _judge_batch(
        self, items: Sequence[JudgeInput], *, config: RunnableConfig
    ) -> list[Judgement]:
        pairs = [(item.statement, item.passage) for item in items]
        return [
            self.decide(s, p, cos)
            for (s, p), cos in zip(pairs, self.similarities(pairs), strict=True)
        ]
