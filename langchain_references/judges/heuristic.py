"""An offline baseline judge: a lexical / embedding heuristic, **not** an NLI model, and weak.

:class:`HeuristicJudge` needs no model download. It decides in three steps and then
estimates its confidence:

1. *Relevance*: the share of the statement's content words found in the passage (crude suffix
   stripping, no real stemmer), averaged with the cosine similarity of the two texts when an
   :class:`~langchain_core.embeddings.Embeddings` is given (e.g.
   :class:`~langchain_references.services.embeddings.MiniLMEmbeddings`, which runs offline). Below
   the relevance threshold the answer is *unknown*.
2. *Polarity* on a relevant passage (``langchain_references/judges/_polarity.py``): does the
   statement reverse the passage? Cues: *antonym*, a direction word meets its opposite about
   the same words (``grown`` / ``declined``, ``more`` / ``less``, ``warming`` / ``cooling``,
   ``above`` / ``below``...); *negation*, a word negated on one side only, within the
   negation's scope (``is not melting`` / ``is melting``; two negations cancel, a negation of
   something else does not count); *number*, values compared with their units, precision and
   comparison (``13 %`` / ``31 %``, ``since 1979`` / ``since 1997``, ``more than 50 %`` /
   ``less than 50 %``, ``20 cm`` = ``200 mm``); and, off by default because it did not help in
   tuning, refutation markers in the passage only (``false``, ``myth``, ``no evidence``...). A
   cue gives *contradicts* when the rest of the statement (without its direction words and
   negations) is relevant enough (the contradiction threshold), else *unknown*: a reversed
   polarity is never *entails*. The same holds for a negation of the statement that the
   passage does not share; a direction that the passage states only the other way, about other
   words, gives *unknown*.
3. *Coverage* (``langchain_references/judges/_coverage.py``): a relevant passage must cover
   what a short statement asserts. *Swap* cue: in a statement of at most
   :attr:`~HeuristicJudge.DEFAULT_SWAP_ITEMS` (8) content items whose other content words the
   passage has (at least ``min_covered``, 70 %), a passage that puts another name, year or
   closed-class word (compass point, organ, colour, season, element) in the statement's slot,
   or makes a comparison of two names the other way round, *contradicts* it ("Paris is the
   capital of Germany" against "Berlin is the capital of Germany"; "The Berlin Wall fell in
   1979" against "... in 1989"). A name the passage lacks is swapped only for a name of the
   passage that stands next to one of the statement's words ("Orbiting spacecraft" puts no
   "Apollo" in the place of "Earth" in "The Moon orbits the Earth"), never for one of the
   statement's own names. An *atomic* statement (at most
   :attr:`~HeuristicJudge.DEFAULT_ATOMIC_ITEMS`, 7, content items) whose name or year the
   passage lacks, or of whose other content words the passage has less than 70 %, is
   *unknown* ("Sea otters use rocks as tools" against "Sea otters live along the northern
   Pacific coasts"). A statement of at most :attr:`~HeuristicJudge.DEFAULT_POLAR_ITEMS` (10)
   content items is *unknown* too when its direction word (comparative, superlative, change)
   has no counterpart in the passage ("Jupiter's Great Red Spot is shrinking" against a
   passage that only names the spot), or when the passage negates a clause with two or more of
   its words and the statement negates nothing ("goldfish do not have a three-second memory").
   Longer, compound statements are judged on relevance and polarity alone: requiring their
   coverage cost pair macro-F1 on Climate-FEVER, whose SUPPORTS evidence rarely covers a whole
   claim. Otherwise *entails*.
4. *Confidence*: the estimated probability that the label is right, a logistic function of the
   word overlap, the number of shared content words and the cosine, fitted per label
   (:class:`Calibration`, ``benchmarks/calibrate_heuristic.py``). *Entails* and *contradicts*
   never exceed :data:`CONFIDENCE_CAP` (0.6): no lexical cue alone makes the judge sure
   ("Python was created by Guido van Rossum" is not refuted at 92 % because a passage says "not
   from the snake"). Every rationale starts with "Heuristic".

Known limits of the coverage step: a name in a non-unique role reads as swapped ("Lyon is a
city in France" against "Marseille is a city in France"); a sentence's capitalised first word
can be taken for a name ("Methane is ...", "Final data ..."), which then is missing or swapped;
stemming is crude and uneven ("Antarctica" is not "Antarctic"); there are no synonyms, so a
paraphrase ("Glaciers retreat" against "Ice sheets shrink") looks uncovered and is *unknown*;
a lower-case entity outside the closed classes ("the liver" is one, "the Moon's crust" is not)
is a plain content word; word numbers are not values; a number whose unit word is cut off
from its anchor ("605 feet (184 meters) tall") is not compared. On the labelled obvious pairs
of ``tests/unit_tests/judges/data/obvious_pairs.jsonl`` (``benchmarks/eval_obvious_pairs.py``,
lexical) it gets 88 % of the 150 labels exact (91 % of the 46 held out; 61 % before) and
calls no false statement *entails* (57 before).

Similarity finds passages on the same topic; it cannot tell support from contradiction, and the
cues miss most real contradictions. The default thresholds and cues were tuned (best pair-level
macro-F1) on the first half of the Climate-FEVER dev claims, the only labelled data available
offline, with ``benchmarks/eval_climate_fever.py --tune``. On the held-out second half (1,920
pairs, 384 claims):

=========================  =============  =============  ==============  =============
judge                      pair accuracy  pair macro-F1  claim accuracy  pair conf. ECE
=========================  =============  =============  ==============  =============
majority class             0.641          0.260          0.419           n/a
heuristic, lexical only    0.621          0.452          0.466           0.028
heuristic + MiniLM cosine  0.611          0.474          0.479           0.018
=========================  =============  =============  ==============  =============

So it finds related passages better than chance but is barely better than the majority class
at the claim level; expect no better on other data. The calibration changes no label; on the
same held-out half it brings the expected calibration error (10 bins) of the pair confidences
from 0.040 (a linear confidence) to 0.028 (lexical) and from 0.039 to 0.018 (MiniLM); a
*contradicts* is right about a quarter of the time and says so. The coverage step costs claim
accuracy (0.477 -> 0.466 lexical, 0.508 -> 0.479 MiniLM on this half) and SUPPORTS pairs
judged *entails* (45 % -> 31 %, 56 % -> 39 %) for the pair macro-F1 (0.439 -> 0.452, 0.471 ->
0.474) and no false *entails* on the obvious pairs. With the weighted vote of
``eval_climate_fever.py`` the claim macro-F1 is 0.326 / 0.344 against 0.148 for the majority
class: *disputed* needs two judgements at confidence >= 0.5, which the calibrated heuristic
rarely reaches (``--disputed-threshold 0.2`` gives 0.364 lexical). On SUPPORTS claims reversed by
a negation or an opposite word (``benchmarks/eval_polarity.py``, held-out half) it calls about
2 % of the negated claims *entails* (5-6 % before the polarity check) but still 13-18 % of the
swapped ones (22-30 % before melting, CO2 and the magnitude class), nearly all where the
passage states no direction of the claim at all: the original claim is then *entails* on the
same grounds, and calling such claims *unknown* brings the swapped ones to 3-7 % but the
SUPPORTS pairs below 50 % *entails* (33-44 %). Use
:class:`~langchain_references.judges.LLMJudge` or
:class:`~langchain_references.judges.CrossEncoderNLIJudge` for real fact-checking.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from langchain_references.judges._coverage import coverage
from langchain_references.judges._polarity import analyze, compare, is_polarity_word
from langchain_references.judges.base import Judge, JudgeInput, Judgement, Label
from langchain_references.services._vectors import cosine
from langchain_references.services.embedding_cache import shared_cache
from langchain_references.text.words import CLAIM_STOPWORDS, claim_words, is_negation, stem

__all__ = [
    "CONFIDENCE_CAP",
    "CUES",
    "SHARED_SATURATION",
    "UNKNOWN_CAP",
    "Calibration",
    "HeuristicJudge",
    "LexicalFeatures",
    "lexical_features",
    "linear_confidence",
]

#: Names of the contradiction cues.
CUES: Final = ("negation", "refutation", "antonym", "number", "swap")
#: Highest confidence of an *entails* or *contradicts* judgement. Word overlap and the
#: contradiction cues (a negation, an antonym, a different number...) are weak evidence: one
#: cue alone ("not from the snake") must not make the judge sure, whatever the relevance or the
#: calibration, so a heuristic verdict stays moderate. (The fitted calibration stays well below.)
CONFIDENCE_CAP: Final = 0.6
#: Highest confidence of an *unknown* judgement: a passage that shares no word with the
#: statement usually says nothing about it, but a paraphrase can still entail it.
UNKNOWN_CAP: Final = 0.9
#: Shared content words beyond this many do not raise the calibrated confidence further.
SHARED_SATURATION: Final = 6

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
#: Polarity conflict kind -> the cue it fires.
_CONFLICT_CUES: Final = {"negation": "negation", "direction": "antonym", "number": "number"}


@dataclass(frozen=True)
class LexicalFeatures:
    """What :func:`lexical_features` found in a (statement, passage) pair.

    The negation, antonym and number cues come from the polarity check
    (``langchain_references/judges/_polarity.py``): each says that the statement reverses the
    passage on something they share, not merely that a negation or a number is present.

    Attributes:
        overlap: Share of the statement's content words present in the passage, in ``[0, 1]``.
        negation: The statement negates what the passage asserts, or the reverse ("is not
            melting" vs "is melting"; "it is not true that ... not ..." cancels out).
        refutation: The passage has refutation markers that the statement lacks.
        antonym: A direction word of the statement meets its opposite in the passage, about a
            shared word ("grown" vs "declined", "more" vs "less", "warming" vs "cooling").
        number: A value, date or comparison of the statement is incompatible with the
            passage's values of the same unit ("13 %" vs "31 %", "since 1979" vs "since 1997",
            "more than 50 %" vs "less than 50 %").
        cue_words: What triggered the cues (for the rationale).
        shared: Number of the statement's content words present in the passage.
        rest_overlap: The overlap without the statement's direction words and negations (how
            well the rest matches); ``None`` means the same as ``overlap``.
        unsupported_negation: Negations of the statement that the passage does not share
            ("CO2 does *not* cause warming" against a passage that negates nothing about it).
        unsupported_direction: Direction words of the statement whose axis the passage states
            only the other way, about other words ("sea ice grew" against "temperatures fell").
        swapped: Names, years or closed-class words of the statement whose slot the passage
            fills with another value ("Paris vs Berlin" for "Paris is the capital of Germany"
            against "Berlin is the capital of Germany"; ``judges/_coverage.py``).
        missing: Names and years of the statement that the passage does not have.
        covered: Share of the statement's other content words (not names, numbers, negations
            or direction words) found in the passage.
        items: The statement's distinct content words, names' words and numbers.
        silent: Direction words of the statement (comparatives, superlatives, changes) whose
            axis the passage does not state at all ("shrinking", "hotter").
    """

    overlap: float
    negation: bool
    refutation: bool
    antonym: bool
    number: bool
    cue_words: tuple[str, ...] = ()
    shared: int = 0
    rest_overlap: float | None = None
    unsupported_negation: tuple[str, ...] = ()
    unsupported_direction: tuple[str, ...] = ()
    swapped: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    covered: float = 1.0
    items: int = 0
    silent: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()

    @property
    def swap(self) -> bool:
        """Whether the passage fills a slot of the statement with another value (``swapped``)."""
        return bool(self.swapped)

    def cues(self, enabled: Collection[str]) -> list[str]:
        """Names of the enabled cues that fired.

        Args:
            enabled: Cue names to consider (see :data:`CUES`).

        Returns:
            The fired cue names.
        """
        return [name for name in CUES if name in enabled and getattr(self, name)]


def _overlaps(s_tok: Collection[str], p_tok: Collection[str]) -> tuple[float, float, int]:
    """The statement's content words found in the passage.

    Args:
        s_tok: The statement's tokens.
        p_tok: The passage's tokens.

    Returns:
        The overlap (share of the statement's content stems in the passage), the same without
        its direction words and negations (the overlap when nothing is left), and the number
        of shared stems.
    """
    s_content = {stem(w) for w in s_tok if w not in CLAIM_STOPWORDS and not is_negation(w)}
    p_content = {stem(w) for w in p_tok if w not in CLAIM_STOPWORDS and not is_negation(w)}
    shared = s_content & p_content
    overlap = len(shared) / len(s_content) if s_content else 0.0
    s_rest = {stem(w) for w in s_tok if w not in CLAIM_STOPWORDS and not is_polarity_word(w)}
    rest_overlap = len(s_rest & p_content) / len(s_rest) if s_rest else overlap
    return overlap, rest_overlap, len(shared)


def _refutation_markers(
    statement: str, passage: str, s_tok: Collection[str], p_tok: Sequence[str]
) -> list[str]:
    """The refutation words, then phrases, of the passage that the statement does not use."""
    s_lower, p_lower = statement.lower(), passage.lower()
    markers = [w for w in p_tok if w in _REFUTATION_WORDS and w not in s_tok]
    markers += [ph for ph in _REFUTATION_PHRASES if ph in p_lower and ph not in s_lower]
    return markers


def lexical_features(statement: str, passage: str) -> LexicalFeatures:
    """Compute word overlap and contradiction cues of a pair.

    Args:
        statement: The statement.
        passage: The passage.

    Returns:
        The features.
    """
    s_tok, p_tok = claim_words(statement), claim_words(passage)
    overlap, rest_overlap, shared = _overlaps(s_tok, p_tok)
    markers = _refutation_markers(statement, passage, s_tok, p_tok)
    check = compare(analyze(statement), analyze(passage))
    fired = {_CONFLICT_CUES[c.kind] for c in check.conflicts}
    cover = coverage(statement, passage)
    return LexicalFeatures(
        overlap=overlap,
        negation="negation" in fired,
        refutation=bool(markers),
        antonym="antonym" in fired,
        number="number" in fired,
        cue_words=tuple(c.text for c in check.conflicts) + tuple(markers) + cover.swapped,
        shared=shared,
        rest_overlap=rest_overlap,
        unsupported_negation=tuple(u.text for u in check.unsupported if u.kind == "negation"),
        unsupported_direction=tuple(u.text for u in check.unsupported if u.kind == "direction"),
        swapped=cover.swapped,
        missing=cover.missing,
        covered=cover.words,
        items=cover.items,
        silent=tuple(u.text for u in check.unsupported if u.kind == "silent"),
        denied=cover.denied,
    )


def linear_confidence(label: Label, relevance: float, threshold: float) -> float:
    """The uncalibrated confidence of the first versions, kept for comparison.

    For *entails* / *contradicts* it grows from 0.5 at the threshold to 1 at relevance 1; for
    *unknown* from 0.5 at the threshold to 1 at relevance 0. It is badly overconfident (see
    ``benchmarks/calibrate_heuristic.py``).

    Args:
        label: The decided label.
        relevance: The pair's relevance, in ``[0, 1]``.
        threshold: The relevance threshold, in ``[0, 1]``.

    Returns:
        The confidence, in ``[0.5, 1]``.
    """
    if label is Label.UNKNOWN:
        value = 0.5 + 0.5 * (threshold - relevance) / threshold if threshold > 0 else 0.5
    else:
        value = 0.5 + 0.5 * (relevance - threshold) / (1 - threshold) if threshold < 1 else 1.0
    return min(1.0, max(0.5, value))


@dataclass(frozen=True)
class Calibration:
    """Platt scaling of the confidence, per label, on the word overlap, shared words and cosine.

    For a label with parameters ``(a, b, c, d)`` the confidence is
    ``sigmoid(a + b * overlap + c * min(shared, SHARED_SATURATION) / SHARED_SATURATION
    + d * max(0, cosine))`` (``d`` unused without a cosine): the estimated probability that the
    label is right. It is then capped at :data:`CONFIDENCE_CAP` for *entails* / *contradicts*
    and :data:`UNKNOWN_CAP` for *unknown*. The features are kept apart rather than blended
    into the relevance because they predict differently: on Climate-FEVER an *entails* that
    shares one content word with the statement was never right (0 of 21), one that shares six
    or more was right 54-71 % of the time, whatever the overlap share; and a MiniLM cosine below
    0.6 makes *entails* right only about a quarter of the time. An *unknown* that the judge
    *withheld* (a relevant pair whose polarity the statement reverses or the passage does not
    state) has its own parameters: there a high overlap does not make *unknown* less likely
    (right about 73 % of the time on Climate-FEVER, where the *unknown* fit said 56 %).
    ``benchmarks/calibrate_heuristic.py`` fits the parameters.

    Attributes:
        entails: ``(intercept, overlap weight, shared weight, cosine weight)`` for *entails*.
        contradicts: The same for *contradicts*.
        unknown: The same for *unknown*.
        withheld: The same for a withheld *unknown*; ``None``: as *unknown*.
    """

    entails: tuple[float, float, float, float]
    contradicts: tuple[float, float, float, float]
    unknown: tuple[float, float, float, float]
    withheld: tuple[float, float, float, float] | None = None

    def __post_init__(self) -> None:
        for name in (*(label.value for label in Label), "withheld"):
            values = getattr(self, name)
            if values is None and name == "withheld":
                continue
            if len(values) != 4 or not all(math.isfinite(v) for v in values):
                raise ValueError(f"{name} must be four finite numbers, got {values!r}")

    @staticmethod
    def inputs(features: LexicalFeatures, cosine: float | None) -> tuple[float, float, float]:
        """The calibration's inputs: overlap, saturated shared-word count, clipped cosine.

        Args:
            features: The pair's lexical features.
            cosine: The pair's embedding cosine, or ``None`` (lexical only: counts as 0).

        Returns:
            ``(overlap, min(shared, SHARED_SATURATION) / SHARED_SATURATION, max(0, cosine))``.
        """
        shared = min(features.shared, SHARED_SATURATION) / SHARED_SATURATION
        return features.overlap, shared, max(0.0, cosine) if cosine is not None else 0.0

    def confidence(
        self,
        label: Label,
        features: LexicalFeatures,
        cosine: float | None,
        *,
        withheld: bool = False,
    ) -> float:
        """Calibrated, capped confidence of a label.

        Args:
            label: The decided label.
            features: The pair's lexical features.
            cosine: The pair's embedding cosine, or ``None`` (lexical only).
            withheld: An *unknown* the judge withheld from a relevant pair for its polarity
                (uses :attr:`withheld` when set).

        Returns:
            The confidence, in ``[0, CONFIDENCE_CAP]`` (``[0, UNKNOWN_CAP]`` for unknown).
        """
        params = getattr(self, label.value)
        if withheld and label is Label.UNKNOWN and self.withheld is not None:
            params = self.withheld
        a, *weights = params
        z = a + math.fsum(
            w * x for w, x in zip(weights, self.inputs(features, cosine), strict=True)
        )
        p = 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
        return min(UNKNOWN_CAP if label is Label.UNKNOWN else CONFIDENCE_CAP, p)


def _check_unit_interval(name: str, value: float) -> None:
    """Raise ValueError unless ``value`` lies in [0, 1]."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")


def _check_at_least(name: str, value: int, least: int) -> None:
    """Raise ValueError unless ``value >= least``."""
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value}")


class HeuristicJudge(Judge):
    """Lexical / embedding heuristic judge: **not an NLI model; weak** (see module docs).

    Args:
        embeddings: Optional LangChain embeddings for the cosine part of the relevance
            (e.g. ``MiniLMEmbeddings()``); without, relevance is the word overlap alone.
        relevance_threshold: Minimum relevance for entails / contradicts. Defaults to the
            value tuned on Climate-FEVER: 0.38 with embeddings, 0.25 without.
        contradiction_threshold: Minimum relevance of the rest of the statement (without its
            direction words and negations) for *contradicts* when the statement reverses the
            passage's polarity; below it, a reversed pair is *unknown* (never *entails*).
            Defaults to the value tuned on Climate-FEVER: 0.38 with embeddings, 0.30 without.
        embedding_weight: Weight of the cosine in the relevance (the overlap gets the rest).
        cues: Contradiction cues to use, among :data:`CUES`. Defaults to the tuned set.
        min_covered: For *entails*, the lowest share of an atomic statement's content words
            (besides names and numbers) that the passage must have; its names and years it
            must have all.
        atomic_items: Statements of at most this many content items must be covered (see
            ``min_covered``); longer ones are judged on relevance alone.
        swap_items: The swap cue (a passage that fills the statement's slot with another
            value) is read only in statements of at most this many content items, whose other
            content words the passage covers (``min_covered``): the slot reading is reliable
            only in a short, single-frame statement that the passage restates.
        polar_items: A statement of at most this many content items is *unknown* when its
            direction word (comparative, superlative, change) has no counterpart in the
            passage, or when the passage negates a clause with two or more of its words and
            the statement negates nothing.
        calibration: How the confidence follows from the label and the relevance. Defaults to
            the fit on Climate-FEVER for the mode (:attr:`DEFAULT_CALIBRATION_LEXICAL` or
            :attr:`DEFAULT_CALIBRATION_WITH_EMBEDDINGS`); any calibration is capped at
            :data:`CONFIDENCE_CAP` for entails / contradicts.
        batch_size: Pairs per ``embed_documents`` call in ``batch``.
        raise_errors: Re-raise errors instead of recording them in ``Judgement.error``.

    Raises:
        ValueError: If a parameter is out of range or a cue name unknown.
    """

    # Tuned for pair-level macro-F1 on the first half of the Climate-FEVER dev claims
    # (benchmarks/eval_climate_fever.py --tune); see the module docstring for held-out numbers.
    DEFAULT_THRESHOLD_WITH_EMBEDDINGS: Final = 0.38
    DEFAULT_THRESHOLD_LEXICAL: Final = 0.25
    # Tuned for pair-level macro-F1 on the same half with the thresholds above, in steps of
    # 0.05 (eval_climate_fever.py --tune); benchmarks/eval_polarity.py reports the effect on
    # reversed claims.
    DEFAULT_CONTRADICTION_THRESHOLD_WITH_EMBEDDINGS: Final = 0.38
    DEFAULT_CONTRADICTION_THRESHOLD_LEXICAL: Final = 0.30
    DEFAULT_EMBEDDING_WEIGHT: Final = 0.5
    DEFAULT_CUES: Final = ("negation", "antonym", "number", "swap")
    #: Lowest share of the statement's content words (besides names and numbers) that the
    #: passage must have for *entails*.
    DEFAULT_MIN_COVERED: Final = 0.7
    #: Statements of at most this many content items (words, names' words, numbers) must be
    #: covered for *entails*; longer, compound ones are judged on relevance alone (requiring
    #: their coverage cost pair macro-F1 on Climate-FEVER, whose SUPPORTS evidence rarely
    #: covers a whole claim).
    DEFAULT_ATOMIC_ITEMS: Final = 7
    #: The swap cue is read in statements of at most this many content items (whose other
    #: words the passage covers): in longer ones, and in passages that share only the value's
    #: neighbour, it cost pair macro-F1 on Climate-FEVER.
    DEFAULT_SWAP_ITEMS: Final = 8
    #: Statements of at most this many content items whose direction word the passage never
    #: states, or whose shared words the passage negates, are *unknown*: up to 10 items this
    #: cost no pair macro-F1 on Climate-FEVER; in longer ones it cost SUPPORTS pairs.
    DEFAULT_POLAR_ITEMS: Final = 10
    # Confidence calibration (Platt scaling per label, see Calibration) of the judge with the
    # defaults above, fitted on the first half of the Climate-FEVER dev claims (the same half
    # as the tuning) and checked on the second half. The MiniLM one is for MiniLMEmbeddings;
    # other embeddings need their own fit. Refit (and paste the printed values) with:
    #     .venv/bin/python benchmarks/calibrate_heuristic.py [--embeddings minilm]
    DEFAULT_CALIBRATION_LEXICAL: Final = Calibration(
        entails=(-0.874, 0.537, 0.788, 0.0),
        contradicts=(-0.890, 2.842, -2.422, 0.0),
        unknown=(1.769, -3.757, -0.994, 0.0),
        withheld=(1.838, -2.193, -0.742, 0.0),
    )
    DEFAULT_CALIBRATION_WITH_EMBEDDINGS: Final = Calibration(
        entails=(-2.566, 0.031, 1.067, 2.694),
        contradicts=(-0.208, 2.661, -2.189, -1.287),
        unknown=(4.581, -1.948, -0.079, -6.715),
        withheld=(2.620, 1.438, -1.541, -3.522),
    )

    rationale_prefix: ClassVar[str] = "Heuristic: "
    judge_kind = "heuristic"  # Judge.info: "offline heuristic, rough" in every report

    def __init__(
        self,
        embeddings: Embeddings | None = None,
        *,
        relevance_threshold: float | None = None,
        contradiction_threshold: float | None = None,
        embedding_weight: float = DEFAULT_EMBEDDING_WEIGHT,
        cues: Iterable[str] | None = None,
        calibration: Calibration | None = None,
        min_covered: float = DEFAULT_MIN_COVERED,
        atomic_items: int = DEFAULT_ATOMIC_ITEMS,
        swap_items: int = DEFAULT_SWAP_ITEMS,
        polar_items: int = DEFAULT_POLAR_ITEMS,
        batch_size: int = 64,
        raise_errors: bool = False,
    ) -> None:
        if embeddings is not None and not isinstance(embeddings, Embeddings):
            raise TypeError(f"embeddings must be an Embeddings, not {type(embeddings).__name__}")
        lexical = embeddings is None
        if relevance_threshold is None:
            relevance_threshold = (
                self.DEFAULT_THRESHOLD_LEXICAL
                if lexical
                else self.DEFAULT_THRESHOLD_WITH_EMBEDDINGS
            )
        if contradiction_threshold is None:
            contradiction_threshold = (
                self.DEFAULT_CONTRADICTION_THRESHOLD_LEXICAL
                if lexical
                else self.DEFAULT_CONTRADICTION_THRESHOLD_WITH_EMBEDDINGS
            )
        _check_unit_interval("relevance_threshold", relevance_threshold)
        _check_unit_interval("contradiction_threshold", contradiction_threshold)
        _check_unit_interval("embedding_weight", embedding_weight)
        _check_unit_interval("min_covered", min_covered)
        self.min_covered = min_covered
        _check_at_least("atomic_items", atomic_items, 0)
        self.atomic_items = atomic_items
        _check_at_least("swap_items", swap_items, 0)
        self.swap_items = swap_items
        _check_at_least("polar_items", polar_items, 0)
        self.polar_items = polar_items
        _check_at_least("batch_size", batch_size, 1)
        chosen = tuple(self.DEFAULT_CUES if cues is None else cues)
        unknown = set(chosen) - set(CUES)
        if unknown:
            raise ValueError(f"unknown cues {sorted(unknown)}; choose among {CUES}")
        self.embeddings = embeddings
        self.relevance_threshold = relevance_threshold
        self.contradiction_threshold = contradiction_threshold
        self.embedding_weight = embedding_weight if embeddings is not None else 0.0
        self.cues = frozenset(chosen)
        if calibration is None:
            calibration = (
                self.DEFAULT_CALIBRATION_LEXICAL
                if self.embedding_weight == 0.0  # no embeddings, or the cosine is unused
                else self.DEFAULT_CALIBRATION_WITH_EMBEDDINGS
            )
        self.calibration = calibration
        self.batch_size = batch_size
        self.raise_errors = raise_errors

    def decide(self, statement: str, passage: str, cosine: float | None) -> Judgement:
        """Decide from the texts and an already computed cosine similarity.

        Args:
            statement: The statement.
            passage: The passage.
            cosine: Cosine similarity of their embeddings, or ``None`` (lexical only).

        Returns:
            The judgement, its confidence from :attr:`calibration` (see :meth:`decide_features`).
        """
        return self.decide_features(lexical_features(statement, passage), cosine)

    def relevance(self, features: LexicalFeatures, cosine: float | None) -> tuple[float, str]:
        """Relevance of a pair: word overlap, averaged with the cosine when embeddings are used.

        Args:
            features: The pair's lexical features.
            cosine: Cosine similarity of the embeddings, or ``None``.

        Returns:
            The relevance in ``[0, 1]`` and how it was computed (for the rationale).
        """
        return self._relevance(features.overlap, cosine)

    def _relevance(self, overlap: float, cosine: float | None) -> tuple[float, str]:
        if cosine is None or self.embedding_weight == 0.0:
            return overlap, f"word overlap {overlap:.2f}"
        w = self.embedding_weight
        relevance = w * max(0.0, cosine) + (1 - w) * overlap
        return relevance, f"cosine {cosine:.2f}, word overlap {overlap:.2f}"

    def decide_features(self, features: LexicalFeatures, cosine: float | None) -> Judgement:
        """Decide from precomputed :func:`lexical_features` and a cosine similarity.

        Below the relevance threshold the label is *unknown*. Above it, a statement that
        reverses the passage's polarity (an enabled cue: an opposite direction word, a negation
        on one side only, an incompatible number or date) is *contradicts* when the rest of it
        is relevant too (:attr:`contradiction_threshold`, on the overlap without the direction
        words and negations) and *unknown* otherwise; so is a statement that negates what the
        passage does not (negation cue). A statement whose direction the passage states only
        the other way, about other words, is *unknown* (antonym cue). Never *entails* then.
        The confidence is ``calibration.confidence(label, features, cosine)``, never above
        :data:`CONFIDENCE_CAP` for *entails* / *contradicts*.

        Args:
            features: The pair's lexical features.
            cosine: Cosine similarity of the embeddings, or ``None``.

        Returns:
            The judgement.
        """
        relevance, how = self.relevance(features, cosine)
        t = self.relevance_threshold
        if relevance < t:
            label = Label.UNKNOWN
            rationale = f"Heuristic: relevance {relevance:.2f} ({how}) is below {t:.2f}."
        else:
            label, rationale = self._relevant_label(features, cosine, f"{relevance:.2f}; {how}")
        if cosine is None or self.embedding_weight == 0.0:
            cosine = None
        withheld = label is Label.UNKNOWN and relevance >= t
        confidence = self.calibration.confidence(label, features, cosine, withheld=withheld)
        return Judgement(
            label=label,
            confidence=confidence,
            rationale=f"{rationale} Calibrated confidence {confidence:.2f}, weak evidence.",
        )

    def _relevant_label(
        self, features: LexicalFeatures, cosine: float | None, relevant: str
    ) -> tuple[Label, str]:
        """The label of a relevant pair and its rationale (see :meth:`decide_features`).

        Args:
            features: The pair's lexical features.
            cosine: Cosine similarity of the embeddings, or ``None``.
            relevant: The relevance and how it was measured, as the rationale writes it.
        """
        fired = features.cues(self.cues)
        if "swap" in fired and (
            features.items > self.swap_items or features.covered < self.min_covered
        ):
            fired.remove("swap")  # a slot read outside a short statement the passage restates
        unsupported = (features.unsupported_negation if "negation" in self.cues else ()) + (
            features.unsupported_direction if "antonym" in self.cues else ()
        )
        rest = features.overlap if features.rest_overlap is None else features.rest_overlap
        rest_relevance, _ = self._relevance(rest, cosine)
        strong = rest_relevance >= self.contradiction_threshold
        if fired:
            rationale = (
                f"Heuristic: relevant ({relevant}) with contradiction cues "
                f"{', '.join(fired)}: {'; '.join(features.cue_words)}"
            )
            if not strong:
                rationale += (
                    f"; the rest matches weakly ({rest_relevance:.2f} < "
                    f"{self.contradiction_threshold:.2f}), so unknown"
                )
            return (Label.CONTRADICTS if strong else Label.UNKNOWN), rationale + "."
        if unsupported:
            negates = "negation" in self.cues and bool(features.unsupported_negation)
            return (Label.CONTRADICTS if negates and strong else Label.UNKNOWN), (
                f"Heuristic: relevant ({relevant}) but the passage does not state "
                f"the statement's polarity: {'; '.join(unsupported)}."
            )
        gaps = self._coverage_gaps(features)
        if gaps is not None:
            return Label.UNKNOWN, (
                f"Heuristic: relevant ({relevant}) but the passage does not cover "
                f"the statement: {'; '.join(gaps)}."
            )
        return Label.ENTAILS, (
            f"Heuristic: relevant ({relevant}), covers the statement, no contradiction cue."
        )

    def _coverage_gaps(self, features: LexicalFeatures) -> list[str] | None:
        """What the passage leaves out of a short statement, or None if it covers it.

        A statement of at most :attr:`atomic_items` items must have its names and years and
        :attr:`min_covered` of its other words in the passage; one of at most
        :attr:`polar_items` items, its direction stated and its words not negated.
        """
        silent = features.silent if "antonym" in self.cues else ()
        denied = features.denied if "negation" in self.cues else ()
        atomic = features.items <= self.atomic_items
        if not (
            (atomic and (features.missing or features.covered < self.min_covered))
            or (features.items <= self.polar_items and (silent or denied))
        ):
            return None
        lacks = [*(features.missing if atomic else ()), *silent]
        if atomic and features.covered < self.min_covered:
            lacks.append(f"{1 - features.covered:.0%} of its other words")
        gaps = [f"it lacks {'; '.join(lacks)}"] if lacks else []
        if denied:
            gaps.append(f"it negates the statement's words ({', '.join(denied)})")
        return gaps

    def similarities(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """Embedding cosine similarity of each (statement, passage) pair.

        Texts are embedded once each, in one ``embed_documents`` call, through the embeddings'
        :func:`~langchain_references.services.embedding_cache.shared_cache`: texts that another
        component embedded with the same embeddings object (the fact-check relevance stage)
        are not embedded again.

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
        # the relevance stage embedded the passages with the same model: reuse its vectors
        # (the cache raises ValueError when the embeddings return the wrong number of vectors)
        vectors = shared_cache(self.embeddings).embed_documents(texts)
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
