from __future__ import annotations

import sys
import unicodedata
from html.parser import HTMLParser
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_references import (
    EmptyReferenceStyle,
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    ReferenceStyle,
    TextReferenceStyle,
)
from langchain_references.core.rewriter import ReferenceRewriter
from langchain_references.core.styles import (
    MAX_TITLE_CHARS,
    UnsupportedClaim,
    clean_text,
    clean_title,
    is_safe_url,
    safe_url,
)

A = Document("a", metadata={"source": "https://a.org/x", "title": "Alpha"})
B = Document("b", metadata={"source": "https://b.org"})
EVIL = Document(
    "e",
    metadata={"source": 'https://e.org/?q="><script>alert(1)</script>', "title": "<b>T</b> & co"},
)
JS = Document("j", metadata={"source": "javascript:alert(1)", "title": "click"})


def render(style: ReferenceStyle, text: str, docs: list[Document]) -> str:
    rewriter = ReferenceRewriter(docs, style)
    return rewriter.feed(text) + rewriter.finish()


def test_markdown_exact_forms() -> None:
    out = render(MarkdownReferenceStyle(deep_links=False), "x [1](id=1) y [2](id=2).", [A, B])
    assert out == (
        "x <sup>[[1](https://a.org/x)]</sup> y <sup>[[2](https://b.org)]</sup>."
        "\n\n- **1** [Alpha](https://a.org/x)\n- **2** [https://b.org](https://b.org)"
    )


def test_text_exact_forms() -> None:
    out = render(TextReferenceStyle(), "x [1](id=2) y [5](id=1).", [A, B])
    assert out == "x [1] y [2].\n\n- [1] https://b.org\n- [2] Alpha (https://a.org/x)"


def test_html_exact_forms() -> None:
    out = render(HTMLReferenceStyle(deep_links=False), "x [1](id=1)", [A])
    assert out == (
        'x <sup><a href="https://a.org/x">1</a></sup>'
        '\n\n<ol><li><a href="https://a.org/x">Alpha</a></li></ol>'
    )


def test_html_escapes_quotes_in_urls_and_labels_exactly() -> None:
    doc = Document("d", metadata={"source": "https://a.org/it's", "title": "Say \"hi\" & 'bye'"})
    out = render(HTMLReferenceStyle(deep_links=False), "x [1](id=1)", [doc])
    assert out == (
        'x <sup><a href="https://a.org/it&#x27;s">1</a></sup>\n\n<ol><li><a '
        'href="https://a.org/it&#x27;s">Say &quot;hi&quot; &amp; &#x27;bye&#x27;</a></li></ol>'
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://x.org/a\u00a0b", "https://x.org/a%C2%A0b"),  # two bytes, two escapes
        ("https://x.org/a\u200bb c", "https://x.org/a%E2%80%8Bb%20c"),
        ("https://x.org/a\ud800b", "https://x.org/a%3Fb"),  # a lone surrogate is replaced
        ('https://x.org/<"x">', "https://x.org/%3C%22x%22%3E"),
    ],
)
def test_safe_url_percent_encodes_each_utf8_byte(url: str, expected: str) -> None:
    safe_url.cache_clear()  # computed here, not remembered from another test
    assert safe_url(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/a:b", "/a:b"),  # a colon after the first segment
        ("a/b:c", "a/b:c"),
        ("a?b:c", "a?b:c"),
        ("a#b:c", "a#b:c"),
        ("1x:y", None),  # a colon in the first segment of a relative reference
        (":x", None),
    ],
)
def test_a_colon_only_in_the_first_segment_refuses_a_relative_url(
    url: str, expected: str | None
) -> None:
    safe_url.cache_clear()
    assert safe_url(url) == expected


def test_empty_style_removes_citations_and_list() -> None:
    # the removed citation takes the blank before it along: no double space
    assert render(EmptyReferenceStyle(), "x [1](id=1) y.", [A]) == "x y."
    assert render(EmptyReferenceStyle(), "x [1](id=1).", [A]) == "x."


def test_no_citation_means_no_list() -> None:
    for style in (MarkdownReferenceStyle(), TextReferenceStyle(), HTMLReferenceStyle()):
        assert render(style, "plain [1] text", [A]) == "plain [1] text"
        assert render(style, "", [A]) == ""


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.hrefs: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack.append(tag)
        self.tags.append(tag)
        self.hrefs += [v or "" for k, v in attrs if k == "href"]

    def handle_endtag(self, tag: str) -> None:
        assert self.stack, f"unbalanced </{tag}>"
        assert self.stack[-1] == tag, f"unbalanced </{tag}>"
        self.stack.pop()


def test_html_escapes_titles_and_urls_and_is_well_formed() -> None:
    out = render(HTMLReferenceStyle(deep_links=False), "x [1](id=1) y [2](id=2)", [EVIL, JS])
    checker = _Checker()
    checker.feed(out)
    checker.close()
    assert checker.stack == []
    assert "script" not in checker.tags
    assert "<b>" not in out
    assert "&lt;b&gt;T&lt;/b&gt; &amp; co" in out
    assert checker.hrefs == ["https://e.org/?q=%22%3E%3Cscript%3Ealert%281%29%3C/script%3E"] * 2
    assert "javascript:" not in " ".join(checker.hrefs)
    assert "<li>click</li>" in out  # the unsafe source is shown as text, not linked


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "\x01javascript:x",
        "data:text/html;base64,PHNjcmlwdD4=",
        "vbscript:msgbox",
        "file:///etc/passwd",
        "",
        "javascript&#58;alert(1)",
        "javascript&#58alert(1)",
        "javascript&#00000000000058;alert(1)",
        "javascript&#x3A;alert(1)",
        "javascript&#X3a alert(1)",
        "javascript&colon;alert(1)",
        "javascript&colonalert(1)",
        "java&Tab;script:alert(1)",
        "&#106;avascript:alert(1)",
        "&amp;#106;avascript:alert(1)",
        "%6Aavascript:alert(1)",
        "%256Aavascript:alert(1)",
        "&#37;6Aavascript:alert(1)",
        "javascript%3Aalert(1)",
        "\u202ejavascript:alert(1)",
        "jav\u200bascript:alert(1)",
        "%25252525252525252525252525256A",  # too deeply encoded to tell
    ],
)
def test_unsafe_urls(url: str) -> None:
    assert not is_safe_url(url)
    doc = Document("d", metadata={"source": url})
    for style in (MarkdownReferenceStyle(), HTMLReferenceStyle()):
        out = render(style, "[1](id=1)", [doc])
        assert "](" + url not in out
        assert 'href="' + url not in out


@pytest.mark.parametrize("url", ["https://x.org", "http://x", "mailto:a@b.c", "a.html#chap1", "/p"])
def test_safe_urls(url: str) -> None:
    assert is_safe_url(url)
    assert safe_url(url) == url


def test_safe_url_percent_encodes_what_breaks_out_of_a_link() -> None:
    url = 'https://x.org/a b\n# h\t[x]: (y) <z> "q" `c` \\ \x1b\u202e&amp;'
    assert safe_url(url) == (
        "https://x.org/a%20b%0A#%20h%09%5Bx%5D:%20%28y%29%20%3Cz%3E%20%22q%22%20%60c%60%20%5C"
        "%20%1B%E2%80%AE&amp;"
    )


@pytest.mark.parametrize(
    ("url", "title"),
    [
        ("https://x.org/a\n# Forged", "T"),
        ("https://x.org/a\n\n[x]: https://evil.example\n", "T"),
        ("https://x.org/a]: (b", "T"),
        ("https://x.org/a", "T\n# Forged"),
    ],
)
def test_markdown_links_cannot_be_broken_out_of(url: str, title: str) -> None:
    out = render(
        MarkdownReferenceStyle(),
        "[1](id=1)",
        [Document("d", metadata={"source": url, "title": title})],
    )
    assert out.count("\n") == 2  # the citation, a blank line and one list line
    assert "\n#" not in out
    assert "\n[" not in out


def test_markdown_citation_check_cannot_forge_a_heading() -> None:
    claims = [UnsupportedClaim("# Forged\n## heading", (1,), supported=False)]
    note = MarkdownReferenceStyle().format_citation_check(claims)
    assert "- \\# Forged ## heading **1**" in note


def test_text_style_strips_terminal_escapes_bidi_and_newlines() -> None:
    doc = Document(
        "d",
        metadata={
            "source": "https://x.org/\x1b[2J\u202eevil\nline",
            "title": "Ti\x1b]8;;https://e.example\x07tle\u2066\u061c\u200b\r\nnext",
        },
    )
    out = render(TextReferenceStyle(), "[1](id=1)", [doc])
    assert out == "[1]\n\n- [1] Title next (https://x.org/evil line)"


def test_clean_text_removes_every_control_format_and_surrogate_character() -> None:
    unsafe = [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in {"Cc", "Cf", "Cs"}
    ]
    assert len(unsafe) > 2000
    for char in unsafe:
        assert clean_text(f"a{char}b") in {"a", "ab", "a b"}, hex(ord(char))


def test_markdown_escapes_link_text_and_destination() -> None:
    doc = Document("d", metadata={"source": "https://x.org/a b(c)", "title": "T] <i>x</i> [y"})
    out = render(MarkdownReferenceStyle(deep_links=False), "[1](id=1)", [doc])
    assert out.startswith("<sup>[[1](https://x.org/a%20b%28c%29)]</sup>\n\n")
    assert out.endswith("(https://x.org/a%20b%28c%29)")
    assert "[T\\] &lt;i&gt;x&lt;/i&gt; \\[y]" in out


def test_document_without_source_is_listed_by_title() -> None:
    doc = Document("d", metadata={"title": "Only a title"})
    assert render(TextReferenceStyle(), "[1](id=1)", [doc]).endswith("- [1] Only a title")
    assert render(MarkdownReferenceStyle(), "[1](id=1)", [doc]) == (
        "<sup>[1]</sup>\n\n- **1** Only a title"
    )


def by_url(doc: Document) -> str:
    return str(doc.metadata["url"])


class FunctionKey(TextReferenceStyle):
    source_id_key = by_url  # type: ignore[assignment]  # a plain function, not a method


class StaticKey(TextReferenceStyle):
    source_id_key = staticmethod(by_url)


def test_source_id_key_callables() -> None:
    docs = [Document("a", metadata={"url": "u1"}), Document("b", metadata={"url": "u1"})]
    instance = TextReferenceStyle()
    instance.source_id_key = lambda d: d.metadata["url"]
    for style in (FunctionKey(), StaticKey(), instance):
        assert render(style, "[1](id=1)[2](id=2)", docs) == "[1][1]\n\n- [1] u1"


def test_source_id_key_metadata_key() -> None:
    class ByPage(TextReferenceStyle):
        source_id_key = "page"

    docs = [Document("a", metadata={"page": 3}), Document("b", metadata={"page": 3})]
    assert render(ByPage(), "[1](id=2)[1](id=1)", docs) == "[1][1]\n\n- [1] 3"


@pytest.mark.parametrize(("key", "kind"), [(42, "int"), (b"source", "bytes")])
def test_invalid_source_id_key_is_named_by_its_type(key: object, kind: str) -> None:
    style = TextReferenceStyle()
    style.source_id_key = key  # type: ignore[assignment]
    with pytest.raises(TypeError) as raised:
        style.get_source_id(A)
    assert str(raised.value) == (f"source_id_key must be a metadata key or a callable, not {kind}")


def test_an_empty_source_id_is_no_source_id() -> None:
    """An empty source is none (listed by title); a falsy but non-empty one is a source."""
    style = TextReferenceStyle()
    empty = Document("e", metadata={"source": "", "title": "Untitled source"})
    zero = Document("z", metadata={"source": 0})
    assert [style.get_source_id(doc) for doc in (empty, zero, A)] == [None, "0", "https://a.org/x"]
    assert render(style, "[1](id=1)[2](id=2)", [empty, zero]) == (
        "[1][2]\n\n- [1] Untitled source\n- [2] 0"
    )


class FieldKey(TextReferenceStyle):
    """A style whose metadata key is chosen per instance, through a property."""

    def __init__(self, field: str) -> None:
        super().__init__()
        self.field = field

    @property
    def source_id_key(self) -> str:  # type: ignore[override]
        return self.field


def test_a_property_source_id_key_reads_the_metadata_key_it_returns() -> None:
    docs = [Document("a", metadata={"url": "u1"}), Document("b", metadata={"url": "u1"})]
    assert FieldKey("url").get_source_id(docs[0]) == "u1"
    assert render(FieldKey("url"), "[1](id=1)[2](id=2)", docs) == "[1][1]\n\n- [1] u1"


class Tracer(EmptyReferenceStyle):
    def __init__(self) -> None:
        self.calls: list[list[tuple[int, Any]]] = []

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        self.calls.append(refs)
        return ""


def test_format_all_references_called_once_with_a_real_list() -> None:
    tracer = Tracer()
    assert render(tracer, "a [1](id=2) b [2](id=1) [3](id=2)", [A, B]) == "a b"
    assert tracer.calls == [[(1, B), (2, A)]]
    assert isinstance(tracer.calls[0], list)


class ClassKey(TextReferenceStyle):
    @classmethod
    def source_id_key(cls, doc: Document) -> str:  # type: ignore[override]
        assert cls is ClassKey
        return str(doc.metadata["url"])


def test_a_classmethod_source_id_key_is_bound_to_the_style_class() -> None:
    docs = [Document("a", metadata={"url": "u1"}), Document("b", metadata={"url": "u2"})]
    assert render(ClassKey(), "[1](id=2)[2](id=1)", docs) == "[1][2]\n\n- [1] u2\n- [2] u1"


def test_other_instance_attributes_leave_the_class_source_id_key() -> None:
    style = StaticKey(deep_links=False)
    style.title_key = "name"
    docs = [Document("a", metadata={"url": "u1"}), Document("b", metadata={"url": "u1"})]
    assert render(style, "[1](id=1)[2](id=2)", docs) == "[1][1]\n\n- [1] u1"


CHECKED = [
    UnsupportedClaim("Both are wrong.", (2, 3), supported=False),
    UnsupportedClaim("Half right.", (1,), supported=True),
    UnsupportedClaim("No number left.", (), supported=True),
]


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (
            TextReferenceStyle(),
            '\n\nCitation check:\n- "Both are wrong." [2][3] (not supported by its citations)\n'
            '- "Half right." [1] (some citations do not support it)\n'
            '- "No number left." (some citations do not support it)',
        ),
        (
            MarkdownReferenceStyle(),
            "\n\n**Citation check**\n\n- Both are wrong. **2** **3** *(not supported by its "
            "citations)*\n- Half right. **1** *(some citations do not support it)*\n"
            "- No number left. *(some citations do not support it)*",
        ),
        (
            HTMLReferenceStyle(),
            '\n\n<aside class="citation-check"><p>Citation check</p><ul><li>Both are wrong.'
            "<sup>2</sup><sup>3</sup> <em>(not supported by its citations)</em></li><li>Half "
            "right.<sup>1</sup> <em>(some citations do not support it)</em></li><li>No number "
            "left. <em>(some citations do not support it)</em></li></ul></aside>",
        ),
    ],
)
def test_citation_check_lists_every_number_and_reason_in_order(
    style: ReferenceStyle, expected: str
) -> None:
    assert style.format_citation_check(CHECKED) == expected
    assert style.format_citation_check([]) == ""


# -- titles: cleaned and capped ---------------------------------------------------------------

#: Bidi embeddings, overrides, isolates and marks, C0 and C1 controls, then 100 KB.
HOSTILE_TITLE = (
    "\u202aA\u202b\u202c\u202dB\u202e \u2066C\u2067\u2068\u2069 \u200eD\u200f"
    "\x00\x07\x1b\x7f\x80\x9f E " + "x" * 100_000
)


def test_clean_title_removes_bidi_and_control_characters_and_caps_the_length() -> None:
    assert clean_title("\u202egnp.exe\u202c  Report\u2066\u2069\u200e") == "gnp.exe Report"
    assert clean_title("A very long title", max_chars=10) == "A very lo…"
    assert clean_title("Exactly ten", max_chars=11) == "Exactly ten"
    assert clean_title("Tab\there\nand\x85there") == "Tab here and there"
    shown = clean_title(HOSTILE_TITLE)
    assert shown == "AB C D E " + "x" * (MAX_TITLE_CHARS - 10) + "…"
    assert len(shown) == MAX_TITLE_CHARS == 300


@pytest.mark.parametrize(
    "style", [MarkdownReferenceStyle(), TextReferenceStyle(), HTMLReferenceStyle()]
)
def test_reference_lists_show_clean_capped_titles(style: ReferenceStyle) -> None:
    document = Document("d", metadata={"source": "https://d.org/", "title": HOSTILE_TITLE})
    assert style.get_title(document) == clean_title(HOSTILE_TITLE)
    listing = render(style, "Cited [1](id=1).", [document])
    assert "x" * (MAX_TITLE_CHARS - 10) + "…" in listing
    assert "x" * (MAX_TITLE_CHARS - 9) not in listing
    assert "\u202e" not in listing


def test_clean_title_cuts_before_the_ellipsis_without_a_trailing_blank() -> None:
    assert clean_title("A very long title", max_chars=8) == "A very…"
    assert clean_title("Ab cd ef", max_chars=4) == "Ab…"


def test_clean_title_reads_only_four_times_max_chars_plus_64_characters() -> None:
    # The window is 4 * 10 + 64 = 104 characters: a title after 104 blanks is never read.
    assert clean_title(" " * 104 + "Title", max_chars=10) == ""
    assert clean_title(" " * 103 + "Title", max_chars=10) == "T"
    assert clean_title("\u200b" * 1264 + "Title") == ""
    assert clean_title("\u200b" * 1263 + "Title") == "T"


#: A label with a bidi override, Markdown emphasis, a newline and HTML.
HOSTILE_LABEL = "\u202e*not*\n<b>backed</b>"


class _HostileText(TextReferenceStyle):
    unsupported_label = HOSTILE_LABEL


class _HostileMarkdown(MarkdownReferenceStyle):
    unsupported_label = HOSTILE_LABEL


class _HostileHTML(HTMLReferenceStyle):
    unsupported_label = HOSTILE_LABEL


@pytest.mark.parametrize(
    ("style", "flag"),
    [
        (TextReferenceStyle(), " (unsupported)"),
        (MarkdownReferenceStyle(), " *(unsupported)*"),
        (HTMLReferenceStyle(), ' <em class="unsupported">(unsupported)</em>'),
        (_HostileText(), " (*not* <b>backed</b>)"),
        (_HostileMarkdown(), " *(\\*not\\* &lt;b&gt;backed&lt;/b&gt;)*"),
        (_HostileHTML(), ' <em class="unsupported">(*not* &lt;b&gt;backed&lt;/b&gt;)</em>'),
    ],
    ids=["text", "markdown", "html", "hostile-text", "hostile-markdown", "hostile-html"],
)
def test_the_unsupported_flag_is_each_styles_form_its_label_cleaned_and_escaped(
    style: ReferenceStyle, flag: str
) -> None:
    assert style.format_unsupported() == flag
