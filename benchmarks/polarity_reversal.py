"""Reverse the polarity of Climate-FEVER claims: the data of ``benchmarks/eval_polarity.py``.

Each claim is reversed twice, deterministically: a negation inserted after one of its auxiliary
verbs ("is" -> "is not"; "It is not true that ..." when it has none) and, when it has a
direction word, that word swapped for its opposite ("grown" -> "shrunk", "more" -> "less",
"warming" -> "cooling") wherever it occurs in the claim. The auxiliary and the direction
word are drawn from a ``random.Random`` seeded with the seed and the claim id, so a run is
reproducible and a claim gets the same reversals with each of its evidences. "grow up" (to be
a child) is not a direction and is not swapped. A claim that already has a negation can be
negated twice ("does not not cause"): that reverses it too.

The swap list below is the benchmark's own, written apart from the judge's lexicon
(``langchain_references/judges/_polarity.py``); the two overlap by design (both list the usual
opposites), so the share of swapped claims the judge catches is an upper bound on what it
catches in natural text. The REFUTES pairs, in the pair macro-F1, are the natural check."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from climate_fever import ClaimRecord

__all__ = ["SWAPS", "Reversal", "ReversedPair", "reversals", "reversed_pairs"]

_PAIRS: Final = """
increase decrease, increases decreases, increased decreased, increasing decreasing,
rise fall, rises falls, rising falling, rose fell, risen fallen,
grow shrink, grows shrinks, growing shrinking, grew shrank, grown shrunk, growth decline,
more less, higher lower, highest lowest, high low, larger smaller, largest smallest,
bigger smaller, greater smaller, warming cooling, warmer cooler, warm cool, warmed cooled,
warmest coolest, hotter colder, hot cold, gain loss, gains losses, gained lost,
expand shrink, expanding shrinking, expanded shrunk, above below, faster slower,
accelerating slowing, accelerate slow, stronger weaker, strengthen weaken,
positive negative, thicker thinner, thickening thinning, melting freezing, melt freeze,
worse better, worst best, most least, maximum minimum, before after, earlier later,
increasingly decreasingly
"""
#: Each direction word and its opposite (both ways), lower case.
SWAPS: Final[dict[str, str]] = {}
for _pair in _PAIRS.replace("\n", " ").split(","):
    _a, _b = _pair.split()
    SWAPS.setdefault(_a, _b)
    SWAPS.setdefault(_b, _a)

_AUXILIARY_TEXT: Final = (
    "is are was were has have had will would can could should may might must does do did"
)
_AUXILIARIES: Final = frozenset(_AUXILIARY_TEXT.split())
_WORD = re.compile(r"[A-Za-z]+")
#: "grow up" (to be a child) has no opposite: these are not swapped before "up".
_PHRASAL_GROW: Final = frozenset({"grow", "grows", "grew", "grown", "growing"})

Kind = Literal["swap", "negation"]


@dataclass(frozen=True)
class Reversal:
    """A claim with its polarity reversed.

    Attributes:
        text: The reversed claim.
        kind: ``"swap"`` (a direction word replaced) or ``"negation"`` (a negation inserted).
        change: What changed, e.g. ``"grown -> shrunk"`` or ``"is -> is not"``.
    """

    text: str
    kind: Kind
    change: str


def _cased(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word.capitalize() if like[:1].isupper() else word


def reversals(claim: str, rng: random.Random) -> list[Reversal]:
    """The reversals of one claim: a negation inserted, and a direction word swapped if any.

    The negation goes after an auxiliary verb drawn from ``rng`` among the claim's ("is" ->
    "is not"); a claim without one is prefixed with "It is not true that". The swapped word is
    drawn from ``rng`` among the claim's direction words (:data:`SWAPS`; not "grow" before
    "up") and swapped wherever it occurs, so that the claim no longer asserts its direction.

    Args:
        claim: The claim.
        rng: The random source (seeded by the caller).

    Returns:
        The negation, then the swap when the claim has a direction word.
    """
    words = list(_WORD.finditer(claim))
    auxiliaries = [m for m in words if m.group().lower() in _AUXILIARIES]
    if auxiliaries:
        m = rng.choice(auxiliaries)
        out = [
            Reversal(
                claim[: m.end()] + " not" + claim[m.end() :],
                "negation",
                f"{m.group()} -> {m.group()} not",
            )
        ]
    else:
        text = "It is not true that " + claim[:1].lower() + claim[1:]
        out = [Reversal(text, "negation", "-> It is not true that")]
    swaps = [
        m
        for k, m in enumerate(words)
        if m.group().lower() in SWAPS
        and not (
            m.group().lower() in _PHRASAL_GROW
            and k + 1 < len(words)
            and words[k + 1].group().lower() == "up"
        )
    ]
    if swaps:
        word = rng.choice(swaps).group().lower()
        # Every occurrence of the word is swapped, or the claim would still assert its
        # direction ("planetary warming: Martian warming" -> "planetary cooling: Martian
        # cooling", not "planetary cooling: Martian warming").
        text, end, changes = "", 0, []
        for m in words:
            if m.group().lower() == word:
                new = _cased(SWAPS[word], m.group())
                text += claim[end : m.start()] + new
                end = m.end()
                changes.append(f"{m.group()} -> {new}")
        text += claim[end:]
        out.append(Reversal(text, "swap", ", ".join(dict.fromkeys(changes))))
    return out


@dataclass(frozen=True)
class ReversedPair:
    """A SUPPORTS (claim, evidence) pair and the same evidence with the reversed claim.

    Attributes:
        claim_id: The claim's id.
        original: The claim.
        reversal: The reversed claim.
        evidence: The evidence sentence (labelled SUPPORTS for the original claim).
    """

    claim_id: str
    original: str
    reversal: Reversal
    evidence: str


def reversed_pairs(claims: Sequence[ClaimRecord], *, seed: int = 0) -> list[ReversedPair]:
    """Every SUPPORTS pair of ``claims``, with its claim reversed (once per claim).

    Args:
        claims: The claims.
        seed: The seed; the same seed gives the same reversals.

    Returns:
        The pairs, claim by claim, in evidence order.
    """
    out = []
    for claim in claims:
        evidences = [e for e in claim.evidences if e.evidence_label == "SUPPORTS"]
        if not evidences:
            continue
        for reversal in reversals(claim.claim, random.Random(f"{seed}:{claim.claim_id}")):
            out.extend(
                ReversedPair(claim.claim_id, claim.claim, reversal, e.evidence) for e in evidences
            )
    return out
