"""Does a statement keep the polarity of a passage? Direction, negation, quantities, dates.

Sans-IO helper of :class:`~langchain_references.judges.heuristic.HeuristicJudge`: word overlap
cannot tell "sea ice has grown by 13 percent" from "sea ice has declined by 13 percent", so the
judge asks :func:`compare` whether the statement reverses the passage on

* *direction*: a lexicon of opposites in a few axes (amount: increase / decrease, rise / fall,
  grow / decline, gain / loss, expand / shrink...; degree: more / less, higher / lower, larger /
  smaller, above / below...; temperature: warming / cooling, hot / cold; speed, strength,
  thickness, melting / freezing, better / worse, true / false, before / after; and the
  comparatives and superlatives of distance, hardness, length, depth, weight, age and
  brightness: closer / farther, harder / softer, longest / shortest...). Each
  direction word is an :class:`Event` with the content words around it in its clause, its
  *anchors* (what rises or falls; "temperatures rose" is also a warming). A statement event is
  compared with the passage events of its axis that share the most (and nearest) anchors with
  it, each passage event counting only for the statement events it matches best: it is
  *reversed* when they all state the opposite direction ("grown" vs "declined", "is not
  melting" vs "is melting"). A statement that states both directions on an axis ("X rose while
  Y fell") is not read as reversed on it. Melting or thawing ice, glaciers, snow or permafrost
  is also a loss of them ("sea ice grew" vs "sea ice is melting"), and "CO2" anchors as
  "carbon dioxide". A statement direction that no passage word of its own axis states is
  compared with the passage's words of the *magnitude* class (amount, degree, temperature:
  "will decrease" vs a passage that only says "more", "higher", "warmer"): stated only the
  other way, it is unsupported;
* *negation*: ``not``, ``no``, ``never``, ``n't``... negate the next words of their clause (at
  most two content words), ``it is not true that ...`` the clause it introduces, and two
  negations cancel ("it is not true that ice is not melting" = "ice is melting"). A negated
  direction word flips its event ("has not declined" agrees with "has increased"). Any other
  negation of the statement must meet a negation of the passage on a nearby word; otherwise it
  is reversed when the passage asserts the negated word ("does not cause" vs "causes"), and
  *unsupported* when the passage does not mention it. A negation of the passage reverses the
  statement when it negates a word the statement asserts, next to another word of the statement;
* *quantities*: numbers are values with their unit (``13 %`` = ``13 percent``, ``20 cm`` =
  ``200 mm``, ``2 °C``, ``1.5 billion tonnes``), precision (``13`` covers 12.5 up to 13.5) and
  comparison (``more than 13 %`` is the interval above 13, ``about 13`` within 15 %); a
  four-digit integer from 1000 to 2100 is a year, ``1990s`` a decade. A statement quantity is
  reversed when the passage has quantities of the same unit next to a shared word (for years,
  after the same preposition) and none of them is compatible with it ("13 percent" vs "31 %",
  "since 1979" vs "since 1997", "more than 50 %" vs "less than 50 %").

Each text is cut at :data:`MAX_CHARS` characters and the work is linear in its length: the
tokenizer's regular expression has no nested quantifier, every token looks at a bounded window,
and the comparison looks at most at :data:`MAX_ITEMS` items of the statement against bounded
lists of the passage. It is a heuristic: it misses reversals phrased outside its lexicon or
about words the two texts do not share, and can misread a direction word that is about
something else.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from langchain_references.text.words import ANCHOR_STOPWORDS, is_negation, stem

__all__ = [
    "MAX_CHARS",
    "MAX_ITEMS",
    "MIN_MATCH",
    "NEGATION_SCOPE",
    "WINDOW",
    "Conflict",
    "Event",
    "PolarityCheck",
    "Quantity",
    "TextPolarity",
    "Unsupported",
    "analyze",
    "compare",
    "is_polarity_word",
]

#: Characters of a text that are read; the rest is ignored (the input is untrusted).
MAX_CHARS: Final = 20_000
#: Direction words, quantities and negations of the statement that are compared (the first ones).
MAX_ITEMS: Final = 64
#: Content words on each side of a direction word, a number or a negation that are its anchors.
WINDOW: Final = 5
#: Lowest :func:`match` of two events read as about the same thing: one shared anchor at most
#: two content words from both direction words.
MIN_MATCH: Final = 0.5
#: Content words a negation negates (the first is its *head*, the predicate it negates).
NEGATION_SCOPE: Final = 2

_WINDOW_REACH: Final = 4 * WINDOW  # tokens scanned on each side for the anchors
_NEGATION_REACH: Final = 4  # tokens after a negation that it may negate
_WRAPPER_REACH: Final = 12  # tokens after "not true that" searched for a negation or a verb
_PER_KEY: Final = 32  # passage events kept per (axis, anchor), quantities per unit

_TOKEN = re.compile(
    r"[a-z][a-z0-9]*'[a-z]+|[a-z][a-z0-9]*|[0-9][0-9.,]*[a-z]*|[%°±]|[.;!?]|[,:()]|[-–—]"
)
_SENTENCE_END: Final = frozenset(".;!?")
_CLAUSE_WORDS: Final = frozenset(
    {"but", "while", "whereas", "although", "though", "however", "yet", "unlike"}
)
_AUXILIARY_TEXT: Final = """
    is are was were be been has have had will would can could should may might must does do did
"""
_AUXILIARIES: Final = frozenset(_AUXILIARY_TEXT.split())
_AUXILIARY_ENDINGS: Final = ("'ll", "'re", "'ve", "'d", "'m", "it's", "that's", "there's")
#: A negation word followed by these negates nothing ("not only", "no doubt").
_NOT_NEGATIONS: Final = frozenset(
    {
        ("not", "only"),
        ("not", "just"),
        ("not", "merely"),
        ("not", "least"),
        ("not", "to"),
        ("no", "doubt"),
        ("no", "matter"),
        ("nothing", "but"),
    }
)
#: After a negation: a sentence-wide negation ("it is not true that ...").
_WRAPPERS: Final = (("true", "that"), ("correct", "that"), ("the", "case", "that"))
#: Anchors that make a change of amount a change of temperature ("temperatures rose").
_TEMPERATURE_WORDS: Final = ("temperatur", "heat")
#: Anchors that make melting a loss and freezing a gain ("melting ice" = less ice).
_FROZEN_WORDS: Final = ("ice", "glaci", "glacier", "snow", "snowpack", "permafrost")
#: Axes of one *magnitude* class: more, an increase, a warming all say "up". A statement
#: direction that no passage word of its own axis states is compared with the passage's
#: directions of the class ("sea ice is growing" vs a passage that says only "higher", "warmer",
#: "more").
_MAGNITUDE: Final = frozenset({"amount", "degree", "temperature"})
#: Anchor roots read as another ("CO2" is carbon dioxide).
_SAME_ROOT: Final = {"co2": "dioxid"}
#: "CO 2" (a subscript lost in extraction, as in Wikipedia's text) and "CO₂" are "co2".
_CO2: Final = re.compile(r"\bco(?: ?2|₂)(?!\w|\.\d)")

# ------------------------------------------------------------------------------ the lexicon

_AXES: Final = (
    (
        "amount",
        """increase increases increased increasing rise rises rising rose risen grow grows
        growing grew grown growth gain gains gained gaining expand expands expanded expanding
        expansion climb climbs climbed climbing soar soars soared soaring surge surges surged
        surging raise raises raised raising boost boosts boosted doubled doubling tripled
        advance advances advanced advancing upward upwards""",
        """decrease decreases decreased decreasing decline declines declined declining fall
        falls falling fell fallen drop drops dropped dropping shrink shrinks shrinking shrank
        shrunk shrinkage loss losses lose loses losing lost reduce reduces reduced reducing
        reduction diminish diminishes diminished diminishing dwindle dwindles dwindled
        dwindling plummet plummets plummeted plummeting plunge plunges plunged plunging
        contract contracts contracted contracting contraction halved halving retreat
        retreats retreated retreating recede recedes receded receding downward downwards""",
    ),
    (
        "degree",
        """more most higher highest high larger largest bigger biggest greater greatest above
        exceed exceeds exceeded exceeding maximum increasingly""",
        """less least fewer fewest lower lowest low smaller smallest lesser below minimum
        decreasingly""",
    ),
    (
        "temperature",
        "warm warms warmed warming warmer warmest hot hotter hottest heating",
        "cool cools cooled cooling cooler coolest cold colder coldest chill chilling",
    ),
    (
        "speed",
        """accelerate accelerates accelerated accelerating acceleration faster fastest
        quicken quickens quickened quickening""",
        """slow slows slowed slowing slower slowest slowdown decelerate decelerates
        decelerated decelerating deceleration""",
    ),
    (
        "strength",
        """strong stronger strongest strengthen strengthens strengthened strengthening
        intensify intensifies intensified intensifying""",
        "weak weaker weakest weaken weakens weakened weakening",
    ),
    (
        "thickness",
        "thick thicker thickest thicken thickens thickened thickening",
        "thin thinner thinnest thins thinned thinning",
    ),
    (
        "phase",
        "melt melts melted melting thaw thaws thawed thawing",
        "freeze freezes freezing froze frozen refreeze refreezes refreezing refroze",
    ),
    (
        "quality",
        "better best improve improves improved improving improvement",
        """worse worst worsen worsens worsened worsening deteriorate deteriorates
        deteriorated deteriorating deterioration""",
    ),
    ("truth", "true correct accurate", "false untrue incorrect wrong inaccurate"),
    ("sign", "positive", "negative"),
    ("safety", "safe safer safest harmless", "dangerous unsafe harmful hazardous"),
    ("order", "before earlier earliest", "after later latest"),
    ("likelihood", "likely probable", "unlikely improbable"),
    ("agreement", "agree agrees agreed agreement", "disagree disagrees disagreed disagreement"),
    ("wetness", "wet wetter wettest", "dry drier driest dryer"),
    ("distance", "farther farthest furthest", "closer closest nearer nearest"),
    ("hardness", "harder hardest", "softer softest"),
    ("length", "longer longest", "shorter shortest"),
    ("depth", "deeper deepest", "shallower shallowest"),
    ("weight", "heavier heaviest", "lighter lightest"),
    ("age", "older oldest", "younger youngest newer newest"),
    ("brightness", "brighter brightest", "dimmer dimmest darker darkest"),
)
#: Each direction word -> (axis, +1 or -1).
_LEXICON: Final[dict[str, tuple[str, int]]] = {
    word: (axis, sign)
    for axis, up, down in _AXES
    for sign, words in ((1, up), (-1, down))
    for word in words.split()
}


def is_polarity_word(word: str) -> bool:
    """Whether a lower-case word is a direction word of the lexicon or a negation.

    Args:
        word: A lower-case word.

    Returns:
        ``True`` if the polarity check reads the word as a direction or a negation.
    """
    return word in _LEXICON or is_negation(word)


# ----------------------------------------------------------------- quantities: units and ops

_UNITS: Final[dict[str, tuple[str, float]]] = {
    "%": ("%", 1.0),
    "percent": ("%", 1.0),
    "pct": ("%", 1.0),
    "percentage": ("%", 1.0),
    "ppm": ("ppm", 1.0),
    "ppmv": ("ppm", 1.0),
    "ppb": ("ppb", 1.0),
    "c": ("°C", 1.0),
    "celsius": ("°C", 1.0),
    "f": ("°F", 1.0),
    "fahrenheit": ("°F", 1.0),
    "k": ("K", 1.0),
    "kelvin": ("K", 1.0),
    "mm": ("m", 0.001),
    "millimetre": ("m", 0.001),
    "millimetres": ("m", 0.001),
    "millimeter": ("m", 0.001),
    "millimeters": ("m", 0.001),
    "cm": ("m", 0.01),
    "centimetre": ("m", 0.01),
    "centimetres": ("m", 0.01),
    "centimeter": ("m", 0.01),
    "centimeters": ("m", 0.01),
    "m": ("m", 1.0),
    "metre": ("m", 1.0),
    "metres": ("m", 1.0),
    "meter": ("m", 1.0),
    "meters": ("m", 1.0),
    "km": ("m", 1000.0),
    "kilometre": ("m", 1000.0),
    "kilometres": ("m", 1000.0),
    "kilometer": ("m", 1000.0),
    "kilometers": ("m", 1000.0),
    "inch": ("m", 0.0254),
    "inches": ("m", 0.0254),
    "ft": ("m", 0.3048),
    "foot": ("m", 0.3048),
    "feet": ("m", 0.3048),
    "mile": ("m", 1609.344),
    "miles": ("m", 1609.344),
    "kg": ("t", 0.001),
    "t": ("t", 1.0),
    "ton": ("t", 1.0),
    "tons": ("t", 1.0),
    "tonne": ("t", 1.0),
    "tonnes": ("t", 1.0),
    "mt": ("t", 1e6),
    "gt": ("t", 1e9),
    "gigaton": ("t", 1e9),
    "gigatons": ("t", 1e9),
    "gigatonne": ("t", 1e9),
    "gigatonnes": ("t", 1e9),
    "year": ("yr", 1.0),
    "years": ("yr", 1.0),
    "yr": ("yr", 1.0),
    "yrs": ("yr", 1.0),
    "decade": ("yr", 10.0),
    "decades": ("yr", 10.0),
    "century": ("yr", 100.0),
    "centuries": ("yr", 100.0),
    "month": ("month", 1.0),
    "months": ("month", 1.0),
    "day": ("day", 1.0),
    "days": ("day", 1.0),
    "times": ("times", 1.0),
    "fold": ("times", 1.0),
}
#: Multipliers after a number ("1.5 billion").
_MULTIPLIERS: Final = {
    "thousand": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "trillion": 1e12,
}
_DEGREE_WORDS: Final = frozenset({"°", "degree", "degrees"})
#: Units read only glued to the number ("2C", "5t") or after "degrees", never as a word.
_SUFFIX_ONLY_UNITS: Final = frozenset({"c", "f", "k", "t"})
#: Phrases before a number, longest first: ">" a lower bound, "<" an upper bound, "~" roughly.
_COMPARATORS: Final = (
    ("no more than", "<"),
    ("not more than", "<"),
    ("no less than", ">"),
    ("not less than", ">"),
    ("no fewer than", ">"),
    ("more than", ">"),
    ("greater than", ">"),
    ("higher than", ">"),
    ("larger than", ">"),
    ("at least", ">"),
    ("upwards of", ">"),
    ("in excess of", ">"),
    ("less than", "<"),
    ("fewer than", "<"),
    ("lower than", "<"),
    ("smaller than", "<"),
    ("at most", "<"),
    ("up to", "<"),
    ("as much as", "<"),
    ("as many as", "<"),
    ("over", ">"),
    ("above", ">"),
    ("exceeding", ">"),
    ("under", "<"),
    ("below", "<"),
    ("nearly", "~<"),
    ("almost", "~<"),
    ("about", "~"),
    ("around", "~"),
    ("roughly", "~"),
    ("approximately", "~"),
    ("some", "~"),
    ("circa", "~"),
    ("c", "~"),
    ("ca", "~"),
    ("an estimated", "~"),
    ("estimated", "~"),
)
#: The phrases of :data:`_COMPARATORS` as word tuples, by their last word (longest first).
_COMPARATORS_BY_LAST: Final[dict[str, list[tuple[tuple[str, ...], str]]]] = defaultdict(list)
for _phrase, _op in _COMPARATORS:
    _COMPARATORS_BY_LAST[_phrase.split()[-1]].append((tuple(_phrase.split()), _op))
#: Words between a comparison and its number that keep the comparison ("more than about 13").
_APPROXIMATORS: Final = frozenset({"about", "around", "roughly", "approximately", "nearly"})
#: Temperature scales after "degrees".
_SCALES: Final = frozenset({"c", "celsius", "f", "fahrenheit", "k", "kelvin"})
_YEAR_PREPOSITIONS: Final = {
    "since": "since",
    "from": "from",
    "after": "from",
    "in": "in",
    "during": "in",
    "of": "in",
    "by": "by",
    "until": "by",
    "till": "by",
    "to": "by",
    "through": "by",
    "before": "by",
    "between": "from",
}
#: Relative tolerance of a number read as approximate ("about 13").
_APPROXIMATE: Final = 0.15
#: Tolerance, in years, of an approximate year ("c. 950").
_YEAR_APPROXIMATE: Final = 10.0

# ------------------------------------------------------------------------------ data types


@dataclass(frozen=True)
class Event:
    """A direction word in its clause.

    Attributes:
        axis: The lexicon's axis (``"amount"``, ``"degree"``, ``"temperature"``...).
        sign: ``1`` for the axis's up word (increase, more, warming...), ``-1`` for its down word.
        negated: Whether a negation covers the word (an odd number of them).
        word: The word as written (lower case).
        anchors: The content words and numbers around it in its clause, what it is about:
            root -> distance (1 for the nearest content word on its side, up to :data:`WINDOW`).
    """

    axis: str
    sign: int
    negated: bool
    word: str
    anchors: dict[str, int]


@dataclass(frozen=True)
class Quantity:
    """A number as the interval of values it allows, with its unit.

    Attributes:
        low: Lower end of the interval.
        high: Upper end.
        low_open: Whether ``low`` itself is excluded ("more than 13").
        high_open: Whether ``high`` itself is excluded ("less than 13").
        unit: The normalised unit (``"%"``, ``"m"``, ``"t"``, ``"°C"``, ``"°"`` for degrees of
            no stated scale, ``"year"``...) or ``"~"`` and the root of the word after the number
            ("5 species": ``"~speci"``).
        text: The number as written, with its comparison and unit (for rationales).
        anchors: The roots of the content words and numbers around it in its clause, and for a
            year its preposition (``"@since"``).
    """

    low: float
    high: float
    low_open: bool
    high_open: bool
    unit: str
    text: str
    anchors: frozenset[str]

    def compatible(self, other: Quantity) -> bool:
        """Whether the two intervals overlap (the units are not checked).

        Args:
            other: Another quantity.

        Returns:
            ``True`` if some value lies in both intervals.
        """
        if self.low > other.low or (self.low == other.low and self.low_open):
            low, low_open = self.low, self.low_open
        else:
            low, low_open = other.low, other.low_open
        if self.high < other.high or (self.high == other.high and self.high_open):
            high, high_open = self.high, self.high_open
        else:
            high, high_open = other.high, other.high_open
        return low < high or (low == high and not low_open and not high_open)


@dataclass(frozen=True)
class Negation:
    """A negation that survives (is not cancelled by another) and what it negates.

    Attributes:
        word: The negation as written (``"not"``, ``"isn't"``...).
        head: The root of the first content word it negates (the predicate: "does not
            *cause*").
        scope: The roots of all the content words it negates.
        window: The roots of the content words around it, with its scope.
    """

    word: str
    head: str
    scope: frozenset[str]
    window: frozenset[str]


@dataclass(frozen=True)
class TextPolarity:
    """What :func:`analyze` found in a text.

    Attributes:
        events: Direction words, in text order.
        quantities: Numbers with a unit, in text order.
        negations: Negations that survive, with what they negate (a negated direction word is
            left to its event).
        positive: Roots of the content words not under a negation.
        negated: Roots of the content words under a negation.
    """

    events: tuple[Event, ...]
    quantities: tuple[Quantity, ...]
    negations: tuple[Negation, ...]
    positive: frozenset[str]
    negated: frozenset[str]


ConflictKind = Literal["direction", "negation", "number"]


@dataclass(frozen=True)
class Conflict:
    """A place where the statement reverses the passage.

    Attributes:
        kind: ``"direction"`` (opposite direction words), ``"negation"`` (negated in one text,
            asserted in the other) or ``"number"`` (incompatible values, dates or comparisons).
        text: What differs, e.g. ``"grown vs declined"``.
    """

    kind: ConflictKind
    text: str


UnsupportedKind = Literal["negation", "direction", "silent"]


@dataclass(frozen=True)
class Unsupported:
    """Polarity the statement asserts and the passage does not state.

    Attributes:
        kind: ``"negation"`` (the statement negates something the passage does not negate),
            ``"direction"`` (the passage has direction words of the axis, all opposite to the
            statement's, but about other words) or ``"silent"`` (the passage has no direction
            word of the axis that agrees or disagrees).
        text: What is unsupported, e.g. ``"not: cause"``.
    """

    kind: UnsupportedKind
    text: str


@dataclass(frozen=True)
class PolarityCheck:
    """What :func:`compare` found.

    Attributes:
        conflicts: Where the statement reverses the passage.
        unsupported: Polarity the statement asserts that the passage does not state.
    """

    conflicts: tuple[Conflict, ...]
    unsupported: tuple[Unsupported, ...]


# ------------------------------------------------------------------------------ words


def _root(word: str) -> str:
    """A crude root for matching ("temperature", "temperatures" -> "temperatur")."""
    if word[0].isdigit():
        return word
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    word = stem(word)
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def _is_content(word: str) -> bool:
    return (
        word[0].isalpha()
        and len(word) > 1
        and word not in ANCHOR_STOPWORDS
        and not is_negation(word)
    )


def _negates(word: str) -> bool:
    """A negation for the polarity check ("without" is too often about something else)."""
    return word != "without" and is_negation(word)


def _is_year(value: float, digits: str) -> bool:
    return digits.isdigit() and 1000 <= value <= 2100


_Kind = Literal["word", "number", "symbol", "clause", "sentence"]


def _tokenize(text: str) -> tuple[list[str], list[_Kind]]:
    """The tokens of the first :data:`MAX_CHARS` characters, lower case, and their kinds."""
    words: list[str] = []
    kinds: list[_Kind] = []
    end = -1
    lowered = _CO2.sub("co2", text[:MAX_CHARS].lower().replace("’", "'"))
    for match in _TOKEN.finditer(lowered):
        tok = match.group()
        attached, end = match.start() == end, match.end()
        first = tok[0]
        if first.isdigit():
            number = tok.rstrip(".,")
            words.append(number)
            kinds.append("number")
            if len(number) < len(tok):  # "in 1979." / "1979, when"
                period = "." in tok[len(number) :]
                words.append("." if period else ",")
                kinds.append("sentence" if period else "clause")
        elif first.isalpha():
            words.append(tok)
            kinds.append("clause" if tok in _CLAUSE_WORDS else "word")
        elif tok in _SENTENCE_END:
            if tok == "." and attached and words and len(words[-1]) == 1:
                continue  # "c. 950", "e.g.", "U.S.": an abbreviation, not a sentence end
            words.append(tok)
            kinds.append("sentence")
        elif tok in "%°±-–—":
            words.append("-" if tok in "-–—" else tok)
            kinds.append("symbol")
        else:
            words.append(tok)
            kinds.append("clause")
    return words, kinds


def _parse_number(token: str) -> tuple[float, float, str] | None:
    """Value, precision (half the unit of the last digit) and letter suffix of a number token."""
    digits = token.rstrip("abcdefghijklmnopqrstuvwxyz")
    suffix = token[len(digits) :]
    if digits.count(".") > 1:
        return None
    if "," in digits:  # thousands separators only: "2,850,000"
        head, *groups = digits.split(",")
        if "." in head or not all(len(g.split(".")[0]) == 3 for g in groups):
            return None
        digits = head + "".join(groups)
    try:
        value = float(digits)
    except ValueError:
        return None
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return value, 0.5 * 10.0**-decimals, suffix


def _interval(
    low: float, high: float, precision: tuple[float, float], op: str, year: bool
) -> tuple[float, float, bool, bool]:
    """The values a number allows: ``(low, high, low_open, high_open)``.

    A rounded number covers half a unit of its last digit on each side, its upper edge
    excluded ("2" is 1.5 up to 2.5, "1" is 0.5 up to 1.5: they do not meet).
    """
    if op == ">":
        return low, math.inf, True, False
    if op == "<":
        return -math.inf, high, False, True
    lo, hi = low - precision[0], high + precision[1]
    if op.startswith("~"):
        if year:
            lo, hi = min(lo, low - _YEAR_APPROXIMATE), max(hi, high + _YEAR_APPROXIMATE)
        else:
            lo, hi = (
                min(lo, low - abs(low) * _APPROXIMATE),
                max(hi, high + abs(high) * _APPROXIMATE),
            )
        if op == "~<":  # "nearly 13": a little below
            hi = high + precision[1]
    return lo, hi, False, precision[1] > 0


# ------------------------------------------------------------------------------ analysis


class _Reader:
    """One pass over the tokens of a text (see :func:`analyze`)."""

    def __init__(self, text: str) -> None:
        self.words, self.kinds = _tokenize(text)
        self.consumed = [False] * len(self.words)  # part of a quantity or a wrapper
        self.parity = [0] * len(self.words)  # 1 where an odd number of negations apply

    def _content(self, i: int) -> bool:
        """A content word that may anchor: not a direction word, not part of a quantity."""
        word = self.words[i]
        return (
            self.kinds[i] == "word"
            and not self.consumed[i]
            and word not in _LEXICON
            and _is_content(word)
        )

    def _at(self, i: int, phrase: Sequence[str]) -> bool:
        return tuple(self.words[i : i + len(phrase)]) == tuple(phrase)

    def window(self, start: int, end: int) -> dict[str, int]:
        """The anchors around the tokens ``start`` to ``end``: root -> distance.

        Up to :data:`WINDOW` content words on each side, in the same clause, and the numbers
        among them; the distance is 1 for the nearest content word on its side.
        """
        found: dict[str, int] = {}
        n = len(self.words)
        for step, origin in ((-1, start - 1), (1, end + 1)):
            i, seen, limit = origin, 0, origin + step * _WINDOW_REACH
            while 0 <= i < n and i != limit and seen < WINDOW:
                kind = self.kinds[i]
                if kind in ("clause", "sentence"):
                    break
                if kind == "number" or self._content(i):
                    seen += kind != "number"
                    root = _root(self.words[i])
                    root = _SAME_ROOT.get(root, root)
                    found[root] = min(found.get(root, WINDOW), max(seen, 1))
                i += step
        return found

    # .................................................................... quantities

    def quantities(self) -> list[Quantity]:
        """Read the numbers with a unit (or a year), marking their tokens consumed."""
        out: list[Quantity] = []
        words, kinds, n = self.words, self.kinds, len(self.words)
        i = 0
        while i < n:
            parsed = _parse_number(words[i]) if kinds[i] == "number" else None
            if parsed is None:
                i += 1
                continue
            quantity, end = self._quantity(i, parsed)
            if quantity is not None:
                out.append(quantity)
            i = end + 1
        return out

    def _quantity(self, i: int, parsed: tuple[float, float, str]) -> tuple[Quantity | None, int]:
        """The quantity of the number at ``i`` (None: no unit), and the index of its last token.

        The quantity's tokens are marked consumed.
        """
        words = self.words
        value, precision, suffix = parsed
        start, op = self._comparator(i)
        low, high, high_precision, end, suffix = self._range(i, value, precision, suffix)
        unit, scale, end = self._unit(end, suffix)
        year = False
        if not unit:
            unit, year, high = self._unitless(i, value, suffix, high, end)
        if not unit:  # "5th", a bare number
            return None, end
        interval = _interval(
            low * scale,
            high * scale,
            (0.0, 0.0) if year else (precision * scale, high_precision * scale),
            op,
            year,
        )
        anchors = frozenset(self.window(start, end))
        if year and i > 0 and words[i - 1] in _YEAR_PREPOSITIONS:
            anchors |= {"@" + _YEAR_PREPOSITIONS[words[i - 1]]}
        text = " ".join(words[start : end + 1])
        for k in range(start, end + 1):
            self.consumed[k] = True
        return Quantity(*interval, unit=unit, text=text, anchors=anchors), end

    def _range(
        self, i: int, value: float, precision: float, suffix: str
    ) -> tuple[float, float, float, int, str]:
        """The values written from the number at ``i`` on: one, ``a ± b`` or a range.

        Returns:
            The low and high values, the high value's precision, the index of the last token
            and the letter suffix of the last number.
        """
        words, kinds, n = self.words, self.kinds, len(self.words)
        low, high, high_precision, end = value, value, precision, i
        second = _parse_number(words[i + 2]) if i + 2 < n and kinds[i + 2] == "number" else None
        if second is not None and words[i + 1] == "±":  # "0.93 ± 0.07 °C"
            low, high, end, suffix = value - second[0], value + second[0], i + 2, second[2]
        elif (
            second is not None
            and words[i + 1] in ("to", "and", "-")
            and (second[0] >= value or (_is_year(value, words[i]) and second[0] < 100))
        ):
            end, suffix = i + 2, second[2]  # "1.1 to 6.4 °C", "1979-2012", "1990-95"
            high, high_precision = second[0], second[1]
            if high < value:
                high += value - value % 100
        return low, high, high_precision, end, suffix

    def _unitless(
        self, i: int, value: float, suffix: str, high: float, end: int
    ) -> tuple[str, bool, float]:
        """The unit of a number written without one: a year, a decade, or the next word's.

        Returns:
            The unit (``""`` if none), whether it is a year, and the high value.
        """
        word = self.words[i]
        if suffix == "s" and _is_year(value, word[:-1]) and value % 10 == 0:
            return "year", True, value + 9  # "the 1990s"
        if suffix:
            return "", False, high
        if _is_year(value, word):
            return "year", True, high
        return self._context_unit(end), False, high

    def _comparator(self, i: int) -> tuple[int, str]:
        """Where the comparison before the number at ``i`` starts, and its op.

        The op is ``"="`` without one, else ``">"``, ``"<"``, ``"~"`` or ``"~<"``; "more than
        about 13" is ``">"``.
        """
        gaps = (1, 0) if i > 0 and self.words[i - 1] in _APPROXIMATORS else (0,)
        for gap in gaps:
            last = i - gap - 1
            for phrase, op in _COMPARATORS_BY_LAST.get(self.words[last], ()) if last >= 0 else ():
                j = last + 1 - len(phrase)
                if j >= 0 and self._at(j, phrase):
                    return j, op
        return i, "="

    def _unit(self, end: int, suffix: str) -> tuple[str, float, int]:
        """The unit after the number at ``end``: (unit, scale, index of its last token)."""
        if suffix:  # "2c", "10km", "1990s"
            unit, factor = _UNITS.get(suffix, ("", 1.0))
            return unit, factor, end
        words, n = self.words, len(self.words)
        scale, j = 1.0, end + 1
        if j < n and words[j] in _MULTIPLIERS:
            scale, j = _MULTIPLIERS[words[j]], j + 1
        if j < n and words[j] in _DEGREE_WORDS:
            k = j + 1 if j + 1 < n and words[j + 1] in _DEGREE_WORDS else j
            if k + 1 < n and words[k + 1] in _SCALES:
                return _UNITS[words[k + 1]][0], scale, k + 1
            return "°", scale, k
        if j + 1 < n and (words[j], words[j + 1]) in (("per", "cent"), ("percentage", "points")):
            return "%", scale, j + 1
        if j < n and words[j] in _UNITS and words[j] not in _SUFFIX_ONLY_UNITS:
            unit, factor = _UNITS[words[j]]
            return unit, scale * factor, j
        if scale != 1.0:
            return self._context_unit(j - 1), scale, j - 1
        return "", 1.0, end

    def _context_unit(self, end: int) -> str:
        """``"~"`` and the root of the content word right after ``end``, or ``""``."""
        for k in range(end + 1, min(end + 3, len(self.words))):
            if self.kinds[k] != "word":
                return ""
            if _is_content(self.words[k]):
                return "~" + _root(self.words[k])
        return ""

    # .................................................................... negations

    def negations(self) -> list[tuple[int, int, int]]:
        """Mark the parity of the negated tokens.

        Returns:
            Each negation as (its index, its scope's first index, its scope's last index).
        """
        words, kinds, n = self.words, self.kinds, len(self.words)
        found: list[tuple[int, int, int]] = []
        i = 0
        while i < n:
            if kinds[i] != "word" or self.consumed[i]:
                i += 1
                continue
            wrapped = self._wrapper(i)
            if wrapped:
                i = self._unwrap(i, wrapped, found)
            else:
                if _negates(words[i]) and not self._not_a_negation(i):
                    found.append(self._negate(i))
                i += 1
        return found

    def _not_a_negation(self, i: int) -> bool:
        """Whether the negation word at ``i`` negates nothing ("not only", "no doubt")."""
        nxt = self.words[i + 1] if i + 1 < len(self.words) else ""
        return (self.words[i], nxt) in _NOT_NEGATIONS

    def _negate(self, i: int) -> tuple[int, int, int]:
        """Flip the parity of the scope of the negation at ``i``."""
        words, kinds, n = self.words, self.kinds, len(self.words)
        start = i + 2 if words[i] == "no" and self._at(i + 1, ("longer",)) else i + 1
        end, content = start, 0
        while end < n and end - start < _NEGATION_REACH and content < NEGATION_SCOPE:
            if kinds[end] in ("clause", "sentence"):
                break
            content += kinds[end] == "word" and _is_content(words[end])
            self.parity[end] ^= 1
            end += 1
        return i, start, end - 1

    def _wrapper(self, i: int) -> int:
        """Where the clause of a sentence-wide negation at ``i`` starts ("not true that"), or 0."""
        word = self.words[i]
        if _negates(word):
            for phrase in _WRAPPERS:
                if self._at(i + 1, phrase):
                    return i + 1 + len(phrase)
        elif word in ("false", "untrue") and self._at(i + 1, ("that",)):
            return i + 2
        return 0

    def _unwrap(self, i: int, start: int, found: list[tuple[int, int, int]]) -> int:
        """Apply "it is not true that ..." at ``i`` to its clause, starting at ``start``.

        It cancels the first negation of the clause ("it is not true that ice is not melting" =
        "ice is melting"); without one, it negates after the clause's first auxiliary verb
        ("... that ice is melting" = "ice is not melting"); without one either (within a few
        words), the rest of the sentence.

        Returns:
            Where to go on reading.
        """
        words, kinds, n = self.words, self.kinds, len(self.words)
        for k in range(i, start):
            self.consumed[k] = True
        near = []
        for k in range(start, min(n, start + _WRAPPER_REACH)):
            if kinds[k] in ("clause", "sentence"):
                break
            near.append(k)
        for k in near:
            if not self.consumed[k] and _negates(words[k]) and not self._not_a_negation(k):
                self.consumed[k] = True
                return start
        for k in near:
            if words[k] in _AUXILIARIES or words[k].endswith(_AUXILIARY_ENDINGS):
                found.append(self._negate(k))
                return k + 1
        end = start
        while end < n and kinds[end] != "sentence":
            self.parity[end] ^= 1
            end += 1
        found.append((i, start, end - 1))
        return end

    # .................................................................... all of it

    def analyze(self) -> TextPolarity:
        quantities = self.quantities()
        spans = self.negations()
        events, positive, negated = self._events()
        negations = [n for n in (self._negation(*span) for span in spans) if n is not None]
        return TextPolarity(
            events=tuple(events),
            quantities=tuple(quantities),
            negations=tuple(negations),
            positive=frozenset(positive),
            negated=frozenset(negated),
        )

    def _events(self) -> tuple[list[Event], set[str], set[str]]:
        """The direction events, and the roots of the other content words, asserted or negated."""
        kinds, parity = self.kinds, self.parity
        events: list[Event] = []
        positive: set[str] = set()
        negated: set[str] = set()
        for i, word in enumerate(self.words):
            if kinds[i] != "word" or self.consumed[i]:
                continue
            if word in _LEXICON:
                events.extend(self._word_events(i, word))
            elif _is_content(word):
                (negated if parity[i] else positive).add(_root(word))
        return events, positive, negated

    def _word_events(self, i: int, word: str) -> list[Event]:
        """The events of the direction word at ``i``: its own, and those it implies.

        More or less near a temperature word is a warming or a cooling; melting or freezing
        near ice is a loss or a gain of it.
        """
        axis, sign = _LEXICON[word]
        anchors = self.window(i, i)
        negated = bool(self.parity[i])
        events = [Event(axis, sign, negated, word, anchors)]
        if axis in ("amount", "degree") and any(
            anchors.get(a, WINDOW) <= 2 for a in _TEMPERATURE_WORDS
        ):
            events.append(Event("temperature", sign, negated, word, anchors))
        if axis == "phase" and any(anchors.get(a, WINDOW) <= 2 for a in _FROZEN_WORDS):
            events.append(Event("amount", -sign, negated, word, anchors))
        return events

    def _negation(self, at: int, start: int, end: int) -> Negation | None:
        """The negation at ``at`` of the tokens ``start`` to ``end``; None if it has no head."""
        words, kinds, parity = self.words, self.kinds, self.parity
        scope = [k for k in range(start, end + 1) if parity[k] and self._content(k)]
        # The head is the first negated content word that is no adverb; a negated
        # direction word is its event's business.
        heads = [
            k
            for k in range(start, end + 1)
            if parity[k]
            and kinds[k] == "word"
            and not self.consumed[k]
            and _is_content(words[k])
            and not (words[k].endswith("ly") and len(words[k]) > 4)  # "fly" is no adverb
        ]
        if not heads or words[heads[0]] in _LEXICON:
            return None
        roots = frozenset(_root(words[k]) for k in scope)
        window = frozenset(self.window(at, end)) | roots
        return Negation(words[at], _root(words[heads[0]]), roots, window)


def analyze(text: str) -> TextPolarity:
    """Read the direction words, negations and quantities of a text.

    Only the first :data:`MAX_CHARS` characters are read; the work is linear in their number.

    Args:
        text: The text.

    Returns:
        What was found.
    """
    return _Reader(text).analyze()


# ------------------------------------------------------------------------------ comparison

_State = tuple[int, bool]


def _agrees(statement: _State, passage: _State) -> bool | None:
    """Whether the passage's (sign, negated) agrees with the statement's.

    ``True``, ``False`` (reversed), or ``None`` (neither: "increased" vs "did not decrease").
    """
    (s1, n1), (s2, n2) = statement, passage
    if s1 == s2:
        return n1 == n2
    if not n1 and not n2:
        return False
    if n1 and not n2:
        return True  # "has not declined" vs "has increased"
    return None


def match(statement: Event, passage: Event) -> float:
    """How surely two events of an axis are about the same thing.

    Args:
        statement: An event of the statement.
        passage: An event of the passage.

    Returns:
        The sum over their shared anchors of 1 / the anchor's larger distance to the two
        direction words (1, 1/2, 1/3...).
    """
    return math.fsum(
        1.0 / max(d, passage.anchors[a])
        for a, d in statement.anchors.items()
        if a in passage.anchors
    )


def _said(event: Event) -> str:
    """The event as its text states it: ``"not melting"`` for a negated ``"melting"``."""
    return f"not {event.word}" if event.negated else event.word


@dataclass(frozen=True, slots=True)
class _PassageEvents:
    """The passage's direction events, looked up by axis and anchor.

    Attributes:
        events: The events.
        by_anchor: The indexes of the events of each (axis, anchor), the first
            :data:`_PER_KEY`.
        states: The (sign, negated) states stated on each axis.
        magnitude: The states stated on the axes of the magnitude class.
    """

    events: Sequence[Event]
    by_anchor: dict[tuple[str, str], list[int]]
    states: dict[str, set[_State]]
    magnitude: set[_State]

    @classmethod
    def of(cls, passage: Sequence[Event]) -> _PassageEvents:
        """Index a passage's events."""
        by_anchor: dict[tuple[str, str], list[int]] = defaultdict(list)
        states: dict[str, set[_State]] = defaultdict(set)
        magnitude: set[_State] = set()
        for k, event in enumerate(passage):
            states[event.axis].add((event.sign, event.negated))
            if event.axis in _MAGNITUDE:
                magnitude.add((event.sign, event.negated))
            for anchor in event.anchors:
                keyed = by_anchor[(event.axis, anchor)]
                if len(keyed) < _PER_KEY:
                    keyed.append(k)
        return cls(passage, by_anchor, states, magnitude)

    def scores(self, statement: Sequence[Event]) -> tuple[list[dict[int, float]], dict[int, float]]:
        """How well each statement event matches the passage events of its axis.

        Args:
            statement: The statement's events.

        Returns:
            For each statement event, the :func:`match` of each passage event of its axis that
            shares an anchor with it (by index); and each passage event's best score.
        """
        scores: list[dict[int, float]] = []
        best_for: dict[int, float] = defaultdict(float)
        for event in statement:
            candidates = {k for a in event.anchors for k in self.by_anchor.get((event.axis, a), ())}
            scored = {k: match(event, self.events[k]) for k in candidates}
            scores.append(scored)
            for k, score in scored.items():
                best_for[k] = max(best_for[k], score)
        return scores, best_for

    def best_matches(self, scored: dict[int, float], best_for: dict[int, float]) -> list[Event]:
        """The passage events a statement event matches best, none if it matches too little.

        A passage event counts only for the statement events it matches best ("rising sea
        levels will reduce land area" vs "rising sea levels": that "rising" is not about
        "reduce").
        """
        mine = {k: v for k, v in scored.items() if v >= best_for[k] - 1e-9}
        best = max(mine.values(), default=0.0)
        if best < MIN_MATCH:
            return []
        return [self.events[k] for k, score in mine.items() if score >= best - 1e-9]

    def stated(self, axis: str) -> set[_State]:
        """The states of an axis in the passage; for a magnitude axis without, the class's."""
        return self.states.get(axis) or (self.magnitude if axis in _MAGNITUDE else set())


def _contrasted_axes(statement: Sequence[Event]) -> set[str]:
    """The axes on which a statement states both directions ("X rose while Y fell").

    It contrasts two things there: its direction words of that axis are not read as reversed
    by an opposite one.
    """
    signs: dict[str, set[int]] = defaultdict(set)
    for event in statement:
        signs[event.axis].add(-event.sign if event.negated else event.sign)
    return {axis for axis, seen in signs.items() if len(seen) > 1}


def _reversed(event: Event, top: Sequence[Event], contrasted: bool) -> Conflict | None:
    """The conflict of a statement event that its best matches all state the other way."""
    other = "/".join(sorted({_said(p) for p in top}))
    if event.word in {p.word for p in top}:  # the same word, negated in one text only
        return Conflict("negation", f"{_said(event)} vs {other}")
    if not contrasted:
        return Conflict("direction", f"{_said(event)} vs {other}")
    return None


def _unmatched(event: Event, passage: _PassageEvents, contrasted: bool) -> Unsupported | None:
    """A statement event without an agreeing match: supported by its axis, or unsupported."""
    said = _said(event)
    if event.negated:  # a negation needs a passage event that agrees with it
        return Unsupported("negation", said)
    seen = {_agrees((event.sign, event.negated), other) for other in passage.stated(event.axis)}
    if True in seen:
        return None
    kind: UnsupportedKind = "direction" if False in seen and not contrasted else "silent"
    return Unsupported(kind, said)


def _direction(
    statement: Sequence[Event], passage: Sequence[Event]
) -> tuple[list[Conflict], list[Unsupported]]:
    indexed = _PassageEvents.of(passage)
    scores, best_for = indexed.scores(statement)
    contrasted_axes = _contrasted_axes(statement)
    conflicts: list[Conflict] = []
    unsupported: list[Unsupported] = []
    for event, scored in zip(statement, scores, strict=True):
        contrasted = event.axis in contrasted_axes
        top = indexed.best_matches(scored, best_for)
        verdicts = {_agrees((event.sign, event.negated), (p.sign, p.negated)) for p in top}
        if True in verdicts:
            continue
        if verdicts == {False}:
            conflict = _reversed(event, top, contrasted)
            if conflict is not None:
                conflicts.append(conflict)
                continue
        missing = _unmatched(event, indexed, contrasted)
        if missing is not None:
            unsupported.append(missing)
    return conflicts, unsupported


def _related(statement: Quantity, passage: Quantity) -> bool:
    """Whether two quantities are about the same thing.

    They share a word, and years also their preposition ("since 1979" vs "since 1997", not "in
    1998" vs "since 1979").
    """
    shared = statement.anchors & passage.anchors
    if statement.unit != "year":
        return bool(shared)
    return any(a[0] == "@" for a in shared) and any(a[0] != "@" for a in shared)


def _numbers(statement: Sequence[Quantity], passage: Sequence[Quantity]) -> list[Conflict]:
    by_unit: dict[str, list[Quantity]] = defaultdict(list)
    for q in passage:
        keyed = by_unit[q.unit]
        if len(keyed) < _PER_KEY:
            keyed.append(q)
    degrees = by_unit["°C"] + by_unit["°F"] + by_unit["°"]
    conflicts = []
    for q in statement:
        if q.unit == "°":
            same = degrees
        elif q.unit in ("°C", "°F"):
            same = by_unit[q.unit] + by_unit["°"]
        else:
            same = by_unit[q.unit]
        if not same or any(q.compatible(p) for p in same):
            continue
        related = [p.text for p in same if _related(q, p)]
        if related:
            conflicts.append(Conflict("number", f"{q.text} vs {'/'.join(dict.fromkeys(related))}"))
    return conflicts


def _negations(
    statement: TextPolarity, passage: TextPolarity
) -> tuple[list[Conflict], list[Unsupported]]:
    """Negations on one side only.

    Reversed when the other side asserts the negated word, unsupported when the passage does
    not mention it.
    """
    p_scopes = frozenset().union(*(n.scope for n in passage.negations))
    p_windows = frozenset().union(*(n.window for n in passage.negations))
    s_scopes = frozenset().union(*(n.scope for n in statement.negations[:MAX_ITEMS]))
    s_windows = frozenset().union(*(n.window for n in statement.negations[:MAX_ITEMS]))
    conflicts: list[Conflict] = []
    unsupported: list[Unsupported] = []
    for neg in statement.negations[:MAX_ITEMS]:
        if neg.head in passage.negated or neg.scope & p_windows or neg.window & p_scopes:
            continue  # the passage negates it too, or something next to it
        if neg.head in passage.positive:
            conflicts.append(Conflict("negation", f"{neg.word} {neg.head} vs {neg.head}"))
        else:
            unsupported.append(Unsupported("negation", f"{neg.word}: {neg.head}"))
    words = statement.positive | statement.negated
    for neg in passage.negations:
        if neg.head not in statement.positive or neg.head in statement.negated:
            continue
        if (neg.window - {neg.head}) & words and not (
            neg.scope & s_windows or neg.window & s_scopes
        ):
            conflicts.append(Conflict("negation", f"{neg.head} vs {neg.word} {neg.head}"))
    return conflicts, unsupported


def compare(statement: TextPolarity, passage: TextPolarity) -> PolarityCheck:
    """Where the statement reverses the passage, and what polarity it asserts unsupported.

    Only the first :data:`MAX_ITEMS` events, quantities and negations of the statement are
    compared.

    Args:
        statement: :func:`analyze` of the statement.
        passage: :func:`analyze` of the passage.

    Returns:
        The conflicts (direction, negation, number) and the unsupported polarity.
    """
    direction, unsupported_direction = _direction(statement.events[:MAX_ITEMS], passage.events)
    negation, unsupported_negation = _negations(statement, passage)
    numbers = _numbers(statement.quantities[:MAX_ITEMS], passage.quantities)
    # A word read on two axes ("melting": phase and amount) is reported once.
    return PolarityCheck(
        conflicts=tuple(dict.fromkeys(direction + negation + numbers)),
        unsupported=tuple(dict.fromkeys(unsupported_negation + unsupported_direction)),
    )
