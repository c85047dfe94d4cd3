"""Does the passage cover what the statement asserts? Names, values, slots, content words.

Sans-IO helper of :class:`~langchain_references.judges.heuristic.HeuristicJudge`: a passage on
the statement's topic is not evidence for it ("Sea otters use rocks as tools" against "Sea otters
live along the northern Pacific coasts"), and a passage that puts another name or value in the
statement's place refutes it ("Paris is the capital of Germany" against "Berlin is the capital
of Germany"). :func:`coverage` reads, with their case,

* *names*: runs of capitalised words ("Guido van Rossum", "Pacific Ocean"; a sentence's first word
  only when no form of it, "honeybee" for "Honeybees", is written in lower case anywhere in either
  text, and no function or direction word). A name of the statement is covered when all its words
  are in the passage, or when a name of the passage is a part of it that keeps its last word
  ("Armstrong" for "Neil Armstrong", not "Atlantic Ocean" for "Pacific Ocean");
* *values*: names, years (a four-digit number from 1000 to 2100) and words of a few closed classes
  (compass points, organs, colours, seasons, chemical elements): each has a *slot*, the nearest
  content word on its left and on its right in its clause ("Paris is the capital": right slot
  ``capital``; "created by James Gosling": left slot ``created``). A statement value is *swapped*
  when the passage has another value of its class in the same slot and not the statement's own
  ("rises in the west" against "rises in the east"), or, for a name or a year the passage lacks,
  when the passage has other names or years (a name only if it stands next to one of the statement's
  words; never one of the statement's own) and covers all the statement's other content words; and a
  comparison of two names is swapped when the passage makes it the other way round ("Saturn is
  denser than Jupiter" against "Jupiter is denser than Saturn");
* *content words*: the share of the statement's other content words (not names, numbers,
  compass points, negations, direction words or prepositions: the polarity check reads the
  directions and negations, with their synonyms) found in the passage, after crude suffix
  stripping and a short list of irregular forms;
* *denials*: the passage's negations whose clause has two or more of the statement's content
  words, when the statement negates nothing ("goldfish do not have a three-second memory").

Each text is cut at :data:`MAX_CHARS` characters and the work is linear in its length (the
tokenizer's regular expression has no ambiguous repetition; every slot looks at most
:data:`SLOT_REACH` tokens away; the statement's first :data:`MAX_VALUES` values are compared
against sets and dictionaries of the passage).

Known limits: it has no synonyms ("won" is not "win", "delimit" is not "mark") and stems unevenly
("migrate" is not "migration"), so a paraphrase can look uncovered; a name in a non-functional slot
("Lyon is a city in France" against "Marseille is a city in France") reads as swapped; a lower-case
entity outside its closed classes ("the liver" against "the pancreas") is a plain content word; a
capitalised common word at the start of a sentence can be read as a name; word numbers ("two") are
not values.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Final

from langchain_references.judges._polarity import MAX_CHARS, is_polarity_word
from langchain_references.text.words import STOPWORDS, is_negation, stem

__all__ = ["MAX_VALUES", "SLOT_REACH", "Coverage", "coverage"]

#: Tokens scanned on each side of a value for its slot words.
SLOT_REACH: Final = 4
#: Values of the statement that are compared (the first ones).
MAX_VALUES: Final = 64

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:['’][A-Za-z]+)?|[0-9]+(?:[.,][0-9]+)*|[.;!?:]|[,()\"]")
_SENTENCE_END: Final = frozenset('.;!?:"(')
_CLAUSE_END: Final = frozenset(',()"')
#: Lower-case words inside a name ("Guido van Rossum", "Rio de Janeiro", "Gulf of Mexico").
_CONNECTORS: Final = frozenset(
    {"van", "von", "de", "da", "del", "der", "di", "du", "la", "le", "of"}
)
_FUNCTION_TEXT: Final = """
    since per than very just only even still much many also yet however while whereas although
    though because due according said says say such same most least like well one two three
    between during until within across among through against its it's there's after before
    most many one every another each under beneath inside outside toward towards onto upon
    via into
"""
_FUNCTION: Final = STOPWORDS | frozenset(_FUNCTION_TEXT.split())
_MONTH_TEXT: Final = """
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
"""
_MONTHS: Final = frozenset(_MONTH_TEXT.split())
_CLASS_TEXT: Final = (
    ("compass", "north south east west northeast northwest southeast southwest"),
    (
        "organ",
        """heart liver lung lungs kidney kidneys pancreas brain stomach spleen skin bladder
        intestine gallbladder thyroid""",
    ),
    ("colour", "red orange yellow green blue purple violet black white brown pink grey gray"),
    ("season", "spring summer autumn fall winter"),
    (
        "element",
        """hydrogen helium carbon nitrogen oxygen sodium iron copper silver gold lead zinc tin
        aluminium aluminum uranium calcium potassium mercury methane""",
    ),
)
#: Classes whose words are only values, not content words to cover (a compass point's slot
#: decides; an element or an organ is also the topic: "carbon dioxide", "the heart").
_VALUE_ONLY: Final = frozenset({"compass"})
#: Lower-case words of closed classes read as values, word -> class.
_CLASSES: Final[dict[str, str]] = {
    word: name for name, words in _CLASS_TEXT for word in words.split()
}


_IRREGULAR_TEXT: Final = """
    made:make won:win began:begin begun:begin built:build wrote:write written:write took:take
    taken:take gave:give given:give knew:know known:know saw:see seen:see led:lead held:hold
    threw:throw thrown:throw sold:sell brought:bring taught:teach caught:catch thought:think
    fought:fight went:go gone:go came:come became:become become:become ran:run chose:choose
    chosen:choose spoke:speak spoken:speak ate:eat eaten:eat drove:drive driven:drive flew:fly
    flown:fly swam:swim sang:sing stood:stand understood:understand paid:pay laid:lay met:meet
    sent:send spent:spend told:tell felt:feel kept:keep left:leave meant:mean found:find
    children:child people:person men:man women:woman mice:mouse teeth:tooth feet:foot
"""
#: Irregular forms read as their base form ("won" is "win").
_IRREGULAR: Final[dict[str, str]] = dict(pair.split(":") for pair in _IRREGULAR_TEXT.split())


@dataclass(frozen=True)
class Coverage:
    """What :func:`coverage` found.

    Attributes:
        missing: Names, years and numbers of the statement that the passage lacks.
        swapped: Values of the statement whose slot the passage fills with another value
            (``"Paris vs Berlin"``).
        words: The share of the statement's other content words found in the passage, in
            ``[0, 1]`` (1 when it has none).
        uncovered: Those content words the passage lacks (roots).
        items: How many distinct content words, names' words and numbers the statement has
            (its size: an atomic statement has few).
    """

    missing: tuple[str, ...]
    swapped: tuple[str, ...]
    words: float
    uncovered: tuple[str, ...]
    items: int = 0
    denied: tuple[str, ...] = ()


@dataclass
class _Text:
    """A tokenized text: its tokens, their lower-case roots and which are values."""

    tokens: list[str]
    roots: list[str]
    kinds: list[str]  # "word", "number", "sentence", "clause"

    @classmethod
    def read(cls, text: str) -> _Text:
        tokens = _TOKEN.findall(text[:MAX_CHARS].replace("’", "'"))  # isn’t = isn't
        roots, kinds = [], []
        for token in tokens:
            if token in _SENTENCE_END:
                kinds.append("sentence")
            elif token in _CLAUSE_END:
                kinds.append("clause")
            elif token[0].isdigit():
                kinds.append("number")
            else:
                kinds.append("word")
            roots.append(_root(token))
        return cls(tokens, roots, kinds)

    def initial(self, i: int) -> bool:
        return i == 0 or self.kinds[i - 1] == "sentence"


def _root(token: str) -> str:
    """The lower-case root of a token of :class:`_Text` (its apostrophes are straight)."""
    word = token.lower()
    if word.endswith("'s"):
        word = word[:-2]
    word = _IRREGULAR.get(word, word)
    if word[0].isdigit():
        return word.replace(",", "")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    word = stem(word)
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def _content(word: str) -> bool:
    return len(word) > 1 and word not in _FUNCTION and not is_negation(word)


def _year(token: str) -> bool:
    return token.isdigit() and len(token) == 4 and 1000 <= int(token) <= 2100


def _names(text: _Text, lower: set[str]) -> list[tuple[int, int]]:
    """The spans ``[start, end)`` of the names of a text."""

    def capital(i: int) -> bool:
        token = text.tokens[i]
        if text.kinds[i] != "word" or not token[0].isupper():
            return False
        word = token.lower()
        if word in _FUNCTION or is_polarity_word(word) or word in _MONTHS:
            return False
        # A sentence's first word is a name only if no form of it is written in lower case.
        forms = {word, word.removesuffix("s"), text.roots[i]}
        return not text.initial(i) or not forms & lower

    spans: list[tuple[int, int]] = []
    i, n = 0, len(text.tokens)
    while i < n:
        if not capital(i):
            i += 1
            continue
        end = i + 1
        while end < n:
            if capital(end) and not text.initial(end):
                end += 1
            elif text.tokens[end] in _CONNECTORS and end + 1 < n and capital(end + 1):
                end += 2
            else:
                break
        spans.append((i, end))
        i = end
    return spans


def _slots(text: _Text, start: int, end: int) -> list[tuple[str, str]]:
    """The slots of ``text.tokens[start:end]``: its nearest content words in the clause.

    Returns:
        ``("l", root)`` for the nearest content word on the left, then ``("r", root)`` for the
        one on the right, each only if there is one within :data:`SLOT_REACH` tokens.
    """
    found = []
    for side, step, first in (("l", -1, start - 1), ("r", 1, end)):
        k = first
        while 0 <= k < len(text.tokens) and abs(k - first) < SLOT_REACH:
            if text.kinds[k] in ("sentence", "clause"):
                break
            word = text.tokens[k].lower()
            if text.kinds[k] == "word" and _content(word) and word not in _MONTHS:
                found.append((side, text.roots[k]))
                break
            k += step
    return found


def _values(text: _Text, spans: list[tuple[int, int]]) -> list[tuple[str, str, int, int]]:
    """Each value as (class, value, start, end): names, years and closed-class words."""
    values = [("name", " ".join(text.roots[a:b]), a, b) for a, b in spans]
    for i, token in enumerate(text.tokens):
        if text.kinds[i] == "number" and _year(token):
            values.append(("year", token, i, i + 1))
        elif text.kinds[i] == "word" and token.lower() in _CLASSES:
            values.append((_CLASSES[token.lower()], text.roots[i], i, i + 1))
    return values


def _orders(text: _Text, spans: list[tuple[int, int]]) -> set[tuple[str, str, str]]:
    """Comparisons of two names: (first name, comparative, second name) of "A is C than B"."""
    found: set[tuple[str, str, str]] = set()
    starts = {a: b for a, b in spans}
    for a, b in spans:
        for k in range(b, min(b + SLOT_REACH, len(text.tokens))):
            if text.tokens[k].lower() != "than" or k == b:
                continue
            comparative = text.roots[k - 1]
            for m in range(k + 1, min(k + SLOT_REACH, len(text.tokens))):
                if m in starts:
                    first, second = " ".join(text.roots[a:b]), " ".join(text.roots[m : starts[m]])
                    found.add((first, comparative, second))
                    break
            break
    return found


def _same(kind: str, value: str, other: str) -> bool:
    """Whether two values of a class can be the same thing ("Armstrong", "neil armstrong")."""
    if kind != "name":
        return value == other
    mine, theirs = set(value.split()) - _CONNECTORS, set(other.split()) - _CONNECTORS
    return mine <= theirs or theirs <= mine


def _denied(s: _Text, p: _Text, roots: set[str]) -> tuple[str, ...]:
    """The passage's negations whose clause has two or more of the statement's content words.

    Only when the statement has no negation ("goldfish do not have a three-second memory"
    against "Goldfish have a memory span of three seconds"): the passage denies what it shares.
    """
    if any(is_negation(t.lower()) for t in s.tokens):
        return ()
    found: list[str] = []
    start = 0
    for k in range(len(p.tokens) + 1):
        if k < len(p.tokens) and p.kinds[k] not in ("sentence", "clause"):
            continue
        clause = range(start, k)
        negations = [p.tokens[i] for i in clause if is_negation(p.tokens[i].lower())]
        if negations and len({p.roots[i] for i in clause} & roots) >= 2:
            found.append(negations[0])
        start = k + 1
    return tuple(found)


@dataclass(frozen=True, slots=True)
class _Passage:
    """What the statement's values are compared with: the passage's, by class and by slot."""

    roots: frozenset[str]
    names: list[frozenset[str]]
    classes: dict[str, set[str]]  # class -> the passage's values of it
    by_slot: dict[tuple[str, str], set[str]]  # (class, side + slot word) -> values there
    neighbours: dict[str, set[str]]  # value -> its slot words

    @classmethod
    def read(cls, p: _Text, spans: list[tuple[int, int]]) -> _Passage:
        by_slot: dict[tuple[str, str], set[str]] = defaultdict(set)
        classes: dict[str, set[str]] = defaultdict(set)
        neighbours: dict[str, set[str]] = defaultdict(set)
        for kind, value, a, b in _values(p, spans):
            classes[kind].add(value)
            for side, slot in _slots(p, a, b):
                by_slot[(kind, side + slot)].add(value)
                neighbours[value].add(slot)
        names = [frozenset(p.roots[a:b]) - _CONNECTORS for a, b in spans]
        return cls(frozenset(p.roots), names, classes, by_slot, neighbours)


def _rest(s: _Text, name_words: set[str]) -> set[str]:
    """The roots of the statement's content words, names and values left out.

    Numbers, closed-class values, negations and direction words are not counted either.
    """
    return {
        s.roots[k]
        for k, token in enumerate(s.tokens)
        if s.kinds[k] == "word"
        and s.roots[k] not in name_words
        and _content(token.lower())
        and not is_polarity_word(token.lower())
        and _CLASSES.get(token.lower()) not in _VALUE_ONLY
    }


def _present(s: _Text, kind: str, value: str, a: int, b: int, p: _Passage) -> bool:
    """Whether the passage states the statement's value ``s.tokens[a:b]``."""
    if kind == "name":
        parts = frozenset(s.roots[a:b]) - _CONNECTORS
        return parts <= p.roots or any(
            name and name <= parts and s.roots[b - 1] in name for name in p.names
        )
    # a year of the statement may be a count the passage writes "1,000"
    return value in p.classes[kind] or (kind == "year" and value in p.roots)


def _slot_rivals(s: _Text, kind: str, value: str, a: int, b: int, p: _Passage) -> set[str]:
    """The passage's other values in the slots of the statement's value (not the same one)."""
    others: set[str] = set()
    for side, slot in _slots(s, a, b):
        filled = p.by_slot.get((kind, side + slot), set())
        if not any(_same(kind, value, other) for other in filled):
            others |= filled
    return others


def _rivals(kind: str, own: set[tuple[str, str]], s_roots: set[str], p: _Passage) -> set[str]:
    """The passage's values of the class that may stand for a missing name or year.

    A rival fills the statement's slot only if it stands next to one of the statement's words
    ("Orbiting spacecraft" does not put "Apollo" in the place of "Earth" in "The Moon orbits
    the Earth"), and it is none of the statement's own values.
    """
    return {
        v
        for v in p.classes[kind]
        if not any(_same(kind, mine, v) for k, mine in own if k == kind)
        and (kind != "name" or p.neighbours[v] & s_roots)
    }


def _reversed_orders(
    s: _Text, s_spans: list[tuple[int, int]], p: _Text, p_spans: list[tuple[int, int]]
) -> list[str]:
    """'Saturn is denser than Jupiter' against 'Jupiter is denser than Saturn'."""
    p_orders = _orders(p, p_spans)
    return [
        f"{first} {comparative} than {second} vs the reverse"
        for first, comparative, second in _orders(s, s_spans)
        if (second, comparative, first) in p_orders and (first, comparative, second) not in p_orders
    ]


def _compare_values(
    s: _Text, s_spans: list[tuple[int, int]], p: _Passage, has_rest: bool, uncovered: int
) -> tuple[list[str], list[str]]:
    """The statement's values the passage lacks (missing) and fills with another (swapped).

    Args:
        s: The statement.
        s_spans: Its names.
        p: The passage's values.
        has_rest: Whether the statement has content words besides its names and values.
        uncovered: How many of those the passage lacks.

    Returns:
        ``(missing, swapped)``, in the statement's order.
    """
    missing: list[str] = []
    swapped: list[str] = []
    s_values = _values(s, s_spans)[:MAX_VALUES]
    own = {(kind, value) for kind, value, _, _ in s_values}
    s_roots = set(s.roots)
    for kind, value, a, b in s_values:
        text = " ".join(s.tokens[a:b])
        present = _present(s, kind, value, a, b, p)
        compared = kind not in ("name", "year") or not present
        others = _slot_rivals(s, kind, value, a, b, p) if compared else set()
        if others:
            swapped.append(f"{text} vs {'/'.join(sorted(others))}")
        elif not present and kind in ("name", "year"):
            rivals = _rivals(kind, own, s_roots, p)
            if rivals and has_rest and uncovered <= (kind == "year"):
                swapped.append(f"{text} vs {'/'.join(sorted(rivals))}")
            else:
                missing.append(text)
    return missing, swapped


def _items(s: _Text) -> int:
    """How many distinct content items (words and numbers) the statement has."""
    return len(
        {
            s.roots[k]
            for k, token in enumerate(s.tokens)
            if s.kinds[k] == "number" or (s.kinds[k] == "word" and _content(token.lower()))
        }
    )


def coverage(statement: str, passage: str) -> Coverage:
    """Compare what the statement asserts with what the passage covers.

    Only the first :data:`~langchain_references.judges._polarity.MAX_CHARS` characters of each
    text are read; the work is linear in their number.

    Args:
        statement: The statement.
        passage: The passage.

    Returns:
        The statement's missing and swapped values and its content-word coverage.
    """
    s, p_text = _Text.read(statement), _Text.read(passage)
    # Words written in lower case somewhere, and their roots ("honeybee" for "Honeybees").
    lower = {t for t in s.tokens + p_text.tokens if t[0].islower()}
    lower |= {_root(t) for t in lower}
    s_spans, p_spans = _names(s, lower), _names(p_text, lower)
    p = _Passage.read(p_text, p_spans)
    s_name_words = {s.roots[k] for a, b in s_spans for k in range(a, b)}
    rest = _rest(s, s_name_words)
    uncovered = sorted(rest - p.roots)

    missing, swapped = _compare_values(s, s_spans, p, bool(rest), len(uncovered))
    swapped += _reversed_orders(s, s_spans, p_text, p_spans)
    return Coverage(
        denied=_denied(s, p_text, rest | s_name_words),
        missing=tuple(dict.fromkeys(missing)),
        swapped=tuple(dict.fromkeys(swapped)),
        words=1.0 - len(uncovered) / len(rest) if rest else 1.0,
        uncovered=tuple(uncovered),
        items=_items(s),
    )
