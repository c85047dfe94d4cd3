"""How the URL sanitiser decodes HTML character references, value by value.

``safe_url`` refuses a URL when any form a renderer may decode it to has an unsafe scheme;
these tests pin each decoded form, so the decoding cannot drift without a test noticing.
"""

from __future__ import annotations

import pytest

from langchain_references.core.styles import _decodings, safe_url

REPLACEMENT = "\ufffd"


@pytest.mark.parametrize(
    ("text", "decoded"),
    [
        ("&#106;", "j"),
        ("&#x6A;", "j"),
        ("&#X6a", "j"),  # no semicolon, upper-case X
        ("&#x41;", "A"),  # hexadecimal, not decimal 41
        ("&#0;", "\x00"),
        ("&#000;", "\x00"),  # only zeros
        ("&#x100;", "\u0100"),  # leading, not trailing, zeros are dropped
        ("&#x000000000041;", "A"),  # any number of leading zeros
        ("&#x10FFFF;", "\U0010ffff"),  # the last code point
        ("&#x110000;", REPLACEMENT),  # past it
        ("&#xD800;", REPLACEMENT),  # surrogates
        ("&#xD801;", REPLACEMENT),
        ("&#xDFFF;", REPLACEMENT),
        ("&#xE000;", "\ue000"),  # the first code point after them
        ("&#1234567890;", REPLACEMENT),  # too many digits
        ("&#" + "1" * 5000 + ";", REPLACEMENT),  # past int()'s digit limit: no error
        ("&colonx", ":x"),  # the longest known entity prefix
        ("&lt;x", "<x"),
    ],
)
def test_each_character_reference_decodes_to_its_value(text: str, decoded: str) -> None:
    assert _decodings(text) == [text, decoded]


def test_unknown_entities_are_left_as_written() -> None:
    assert _decodings("&foo; &x") == ["&foo; &x"]


def test_blanks_inside_a_scheme_are_ignored_when_it_is_judged() -> None:
    assert safe_url("ht\ttps://x.org") == "ht%09tps://x.org"
    assert safe_url("java\tscript:alert(1)") is None


def test_a_url_encoded_past_the_decoding_rounds_is_refused() -> None:
    url = "javascript:alert(1)"
    for _ in range(9):  # each round turns one "%25" back into "%"
        url = url.replace("%", "%25") if "%" in url else url.replace("j", "%6A", 1)
    with pytest.raises(ValueError, match=r"^too deeply encoded$"):
        _decodings(url)
    safe_url.cache_clear()
    assert safe_url(url) is None
