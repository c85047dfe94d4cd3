"""The coverage comparison's rules, one by one, with exact values (found by mutation testing).

The heuristic judge's tests check labels; these check what :func:`coverage` and its helpers
read: roots, names, slots, values, comparisons, denials and the resulting :class:`Coverage`.
"""

from __future__ import annotations

import pytest

from langchain_references.judges._coverage import (
    SLOT_REACH,
    Coverage,
    _content,
    _denied,
    _names,
    _orders,
    _root,
    _same,
    _slots,
    _Text,
    _values,
    _year,
    coverage,
)


def _lower(text: _Text) -> set[str]:
    """The words written in lower case and their roots, as :func:`coverage` gives them."""
    lower = {t for t in text.tokens if t[0].islower()}
    return lower | {_root(t) for t in lower}


def _name_texts(text: str) -> list[str]:
    t = _Text.read(text)
    return [" ".join(t.tokens[a:b]) for a, b in _names(t, _lower(t))]


# ------------------------------------------------------------------------------ tokens


@pytest.mark.parametrize(
    ("token", "root"),
    [
        ("Earth's", "earth"),  # possessive
        ("won", "win"),  # irregular form
        ("1,000", "1000"),  # a number loses its separators
        ("2.5", "2.5"),
        ("cities", "city"),
        ("berries", "berry"),
        ("flies", "fly"),  # five letters: "ies" -> "y"
        ("ties", "ties"),  # four letters: left alone
        ("make", "mak"),  # a final "e" goes from four letters on
        ("tree", "tre"),
        ("the", "the"),
        ("farmers", "farmer"),  # one suffix only
    ],
)
def test_roots(token: str, root: str) -> None:
    assert _root(token) == root


def test_tokens_kinds_and_straight_apostrophes() -> None:
    t = _Text.read("Earth’s ice, in 1979; melts.")
    assert t.tokens == ["Earth's", "ice", ",", "in", "1979", ";", "melts", "."]
    assert t.kinds == ["word", "word", "clause", "word", "number", "sentence", "word", "sentence"]
    assert t.roots[0] == "earth"


def test_initial_is_the_first_token_of_a_sentence() -> None:
    t = _Text.read("Rain falls. Snow melts")
    assert [t.initial(i) for i in range(5)] == [True, False, False, True, False]


def test_years_are_four_digits_from_1000_to_2100() -> None:
    assert [_year(y) for y in ("1000", "2100", "0999", "2101", "999", "19.5")] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]


def test_content_words_have_two_letters_or_more() -> None:
    assert (_content("ox"), _content("x"), _content("the"), _content("never")) == (
        True,
        False,
        False,
        False,
    )


# ------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Guido van Rossum created Python.", ["Guido van Rossum", "Python"]),
        ("It is the Gulf of Mexico", ["Gulf of Mexico"]),  # a connector at the end's edge
        ("the Gulf of Mexico and more", ["Gulf of Mexico"]),
        ("in Paris de", ["Paris"]),  # a connector ending the text joins nothing
        ("Paris of old", ["Paris"]),  # nor one before a lower-case word
        ("Paris. Berlin", ["Paris", "Berlin"]),  # a sentence's first word starts a name
        ("New York is big", ["New York"]),
        ("Earth has one moon. The Moon orbits Earth.", ["Earth", "Moon", "Earth"]),
        # a sentence's first word is no name when a form of it is written in lower case
        ("Cats purr. My cat sleeps.", []),
        ("Farmers grow crops. A farmer grows crops.", []),
    ],
)
def test_names(text: str, names: list[str]) -> None:
    assert _name_texts(text) == names


def test_same_name_when_one_holds_the_other() -> None:
    assert _same("name", "armstrong", "neil armstrong")
    assert _same("name", "neil armstrong", "armstrong")
    assert _same("name", "gulf mexico", "gulf of mexico")  # connectors left out
    assert not _same("name", "pacific ocean", "atlantic ocean")
    # other classes: equal values only
    assert _same("year", "1969", "1969")
    assert not _same("compass", "north", "north east")


# ------------------------------------------------------------------------------- slots


@pytest.mark.parametrize(
    ("text", "start", "end", "slots"),
    [
        ("Paris is capital city", 0, 1, [("r", "capital")]),  # the nearest, past "is"
        ("capital is Paris", 2, 3, [("l", "capital")]),  # down to the first token
        ("capital city Paris", 2, 3, [("l", "city")]),  # the nearest, not the first
        ("Paris is the of capital", 0, 1, [("r", "capital")]),  # SLOT_REACH - 1 tokens on
        ("Paris is the of the capital", 0, 1, []),  # SLOT_REACH tokens on: too far
        ("capital. Paris", 2, 3, []),  # not across a sentence
        ("capital, Paris", 2, 3, []),  # nor a clause
        ("big capital Paris is", 2, 3, [("l", "capital")]),
    ],
)
def test_slots(text: str, start: int, end: int, slots: list[tuple[str, str]]) -> None:
    assert SLOT_REACH == 4
    assert _slots(_Text.read(text), start, end) == slots


def test_values_by_class_with_their_spans() -> None:
    t = _Text.read("Neil Armstrong landed in 1969 on the red Moon, north of 2101.")
    assert _values(t, _names(t, _lower(t))) == [
        ("name", "neil armstrong", 0, 2),
        ("name", "moon", 8, 9),
        ("year", "1969", 4, 5),
        ("colour", "red", 7, 8),
        ("compass", "north", 10, 11),
    ]


@pytest.mark.parametrize(
    ("text", "orders"),
    [
        ("Saturn is denser than Jupiter", {("saturn", "dens", "jupit")}),
        # the second name is after "than": a capitalised comparative (a name) is not it
        ("Saturn is Denser than Jupiter", {("saturn", "dens", "jupit")}),
        ("New York is denser than Los Angeles", {("new york", "dens", "los angel")}),
        ("Saturn than Jupiter is big", set()),  # no comparative before "than"
    ],
)
def test_orders(text: str, orders: set[tuple[str, str, str]]) -> None:
    t = _Text.read(text)
    assert _orders(t, _names(t, set())) == orders


# ------------------------------------------------------------------------------ denials


@pytest.mark.parametrize(
    ("passage", "denied"),
    [
        ("Bees do not make honey.", ("not",)),
        ("Bees do not make honey", ("not",)),  # the last clause without its full stop
        ("Never do bees make honey.", ("Never",)),  # the passage's first word
        ("It rains; never do bees make honey.", ("never",)),  # a later clause's first word
        ("Bees do not make wax.", ("not",)),  # two shared words are enough
        ("Bees, not wasps, make honey.", ()),  # the negation's clause shares nothing
        ("Wasps do not; bees make honey.", ()),  # nor does one ending the clause before
        ("Bees make honey. It is not wax.", ()),
    ],
)
def test_denials(passage: str, denied: tuple[str, ...]) -> None:
    s, p = _Text.read("Bees make honey."), _Text.read(passage)
    assert _denied(s, p, {"bees", "mak", "honey"}) == denied


def test_no_denial_when_the_statement_negates() -> None:
    s, p = _Text.read("Bees don’t make honey."), _Text.read("Bees do not make honey.")
    assert _denied(s, p, {"bees", "mak", "honey"}) == ()


# ----------------------------------------------------------------------------- coverage


@pytest.mark.parametrize(
    ("statement", "passage", "expected"),
    [
        pytest.param(
            "The sun rises in the west.",
            "The sun rises in the east.",
            Coverage((), ("west vs east",), 1.0, (), 3),
            id="a compass point is a value, not a word to cover",
        ),
        pytest.param(
            "The river flows west.",
            "The river flows east and the stream flows north.",
            Coverage((), ("west vs east/north",), 1.0, (), 3),
            id="every other value in the slot",
        ),
        pytest.param(
            "The big red car won.",
            "The big blue car and the big green truck won.",
            Coverage((), ("red vs blu/green",), 0.75, ("red",), 4),
            id="the other values of both slots",
        ),
        pytest.param(
            "Bell invented the telephone.",
            "The telephone was invented by Meucci.",
            Coverage((), ("Bell vs meucci",), 1.0, (), 3),
            id="a rival name next to the statement's words",
        ),
        pytest.param(
            "Bell invented the telephone with Thomas Watson.",
            "Watson and Meucci invented the telephone.",
            Coverage((), ("Bell vs meucci",), 1.0, (), 5),
            id="the statement's own names are no rivals",
        ),
        pytest.param(
            "Bell invented the telephone.",
            "Meucci built the telephone.",
            Coverage(("Bell",), (), 0.5, ("invent",), 3),
            id="a name with a word uncovered is missing, not swapped",
        ),
        pytest.param(
            "The treaty was signed in 1979.",
            "The treaty was ratified in 1989.",
            Coverage((), ("1979 vs 1989",), 0.5, ("sign",), 3),
            id="a year with one word uncovered is swapped",
        ),
        pytest.param(
            "The treaty was signed in 1979.",
            "The treaty was drafted in 1985 and ratified in 1989.",
            Coverage((), ("1979 vs 1985/1989",), 0.5, ("sign",), 3),
            id="every other year of the passage",
        ),
        pytest.param(
            "The treaty was signed in 1979.",
            "In 1979 talks began; the treaty was signed in 1989.",
            Coverage((), (), 1.0, (), 3),
            id="a year the passage states is not compared",
        ),
        pytest.param(
            "The lake froze 1000 years ago.",
            "The lake froze 1,000 years ago.",
            Coverage((), (), 1.0, (), 5),
            id="a year-like count written with a separator",
        ),
        pytest.param(
            "Neil Armstrong is the commander.",
            "Neil is the commander.",
            Coverage(("Neil Armstrong",), (), 1.0, (), 3),
            id="a part without the last word is the same name, not a rival, and not it",
        ),
        pytest.param(
            "Neil Armstrong walked on the Moon in 1969.",
            "Armstrong walked on the Moon in 1969.",
            Coverage((), (), 1.0, (), 5),
            id="a part keeping the last word covers the name",
        ),
        pytest.param(
            "Neil Armstrong walked on the Moon.",
            "neil armstrong",
            Coverage(("Moon",), (), 0.5, ("walk",), 4),
            id="a name's words in lower case cover it",
        ),
        pytest.param(
            "They saw Neil Armstrong.",
            "neil armstrong",
            Coverage((), (), 0.0, ("see",), 3),
            id="all of a name's words in lower case cover it",
        ),
        pytest.param(
            "Officials met in Paris.",
            "the paris meeting of officials",
            Coverage((), (), 1.0, (), 3),
            id="only the name's own words",
        ),
        pytest.param(
            "The otters of the sea live near Alaska.",
            "Otters live near Alaska.",
            Coverage((), (), 0.75, ("sea",), 5),
            id="the words before a name still count",
        ),
        pytest.param(
            "Honeybees make honey.",
            "A honeybee makes honey.",
            Coverage((), (), 1 - 1 / 3, ("honeyb",), 3),
            id="a first word written in lower case elsewhere is no name",
        ),
        pytest.param(
            "Farmers grow crops.",
            "A farmer grows crops.",
            Coverage((), (), 0.5, ("farmer",), 3),
            id="nor one written without its s",
        ),
        pytest.param(
            "Berlin.",
            "Berlin.",
            Coverage((), (), 1.0, (), 1),
            id="nothing but a name: all words covered",
        ),
        pytest.param(
            "Goldfish have a three-second memory.",
            "Goldfish do not have a three-second memory.",
            Coverage((), (), 1.0, (), 3, ("not",)),
            id="a denial",
        ),
        pytest.param(
            "Saturn is denser than Jupiter.",
            "Jupiter is denser than Saturn.",
            Coverage((), ("saturn dens than jupit vs the reverse",), 1.0, (), 3),
            id="a comparison the other way round",
        ),
    ],
)
def test_coverage(statement: str, passage: str, expected: Coverage) -> None:
    assert coverage(statement, passage) == expected
