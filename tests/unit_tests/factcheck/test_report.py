"""Rendering fact-check results through the reference styles."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_references.core.styles import (
    EmptyReferenceStyle,
    HTMLReferenceStyle,
    MarkdownReferenceStyle,
    TextReferenceStyle,
    safe_url,
)
from langchain_references.factcheck.report import (
    REPORT_SEPARATORS,
    ReportFormat,
    ReportOptions,
    render_json,
    render_report,
    render_reports,
)
from langchain_references.factcheck.result import Evidence, FactCheckCounts, FactCheckResult
from langchain_references.factcheck.verdict import Verdict
from langchain_references.failures import Failure
from langchain_references.judges import Label

MOON = "https://example.org/moon"
EUROPA = "https://example.org/europa"


def evidence(
    text: str,
    url: str,
    *,
    title: str = "",
    label: Label = Label.ENTAILS,
    confidence: float = 0.9,
    rationale: str = "",
    rank: int = 0,
) -> Evidence:
    return Evidence(
        text=text,
        url=url,
        title=title or f"Title of {url.rsplit('/', 1)[-1]}",
        rank=rank,
        relevance_rank=0,
        similarity=0.5,
        label=label,
        confidence=confidence,
        rationale=rationale,
    )


def result(
    supporting: list[Evidence] | None = None,
    contradicting: list[Evidence] | None = None,
    *,
    statement: str = "The Moon is closer to Earth than Europa is to Jupiter",
    failures: list[Failure] | None = None,
    neutral: int = 2,
    verdict: Verdict = Verdict.SUPPORTED,
) -> FactCheckResult:
    return FactCheckResult(
        statement=statement,
        verdict=verdict,
        confidence=0.75,
        score=0.75,
        supporting=supporting or [],
        contradicting=contradicting or [],
        neutral_count=neutral,
        failed_sources=failures or [],
        counts=FactCheckCounts(neutral=neutral),
    )


TWO_FROM_ONE_URL = result(
    [
        evidence("The Moon orbits at about 384,400 km.", MOON, rationale="distance given"),
        evidence("Europa orbits Jupiter at 671,000 km.", EUROPA),
        evidence("The Moon is Earth's only natural satellite.", MOON),
    ],
    [evidence("Europa is closer.", EUROPA, label=Label.CONTRADICTS, confidence=0.6)],
    failures=[
        Failure(url="http://dead.example/", stage="fetch", reason="HTTP 404", rank=3),
        Failure(url="", stage="search", reason="quota exceeded", query="moon europa"),
    ],
)


def test_text_report_exact_form_with_one_number_per_url() -> None:
    expected = """\
Fact check: The Moon is closer to Earth than Europa is to Jupiter
Verdict: SUPPORTED (confidence 75%, score +0.75)

Supporting evidence (3):
  1. "The Moon orbits at about 384,400 km." [1]
     confidence 90%: distance given
  2. "Europa orbits Jupiter at 671,000 km." [2]
     confidence 90%
  3. "The Moon is Earth's only natural satellite." [1]
     confidence 90%

Contradicting evidence (1):
  1. "Europa is closer." [2]
     confidence 60%

2 passages said nothing about the statement.

Sources that could not be used (2):
  - http://dead.example/ (fetch): HTTP 404
  - search for 'moon europa' (search): quota exceeded

References:
- [1] Title of moon (https://example.org/moon)
- [2] Title of europa (https://example.org/europa)"""
    assert render_report(TWO_FROM_ONE_URL, TextReferenceStyle()) == expected


def test_markdown_report_cites_with_the_markdown_style_forms() -> None:
    report = render_report(TWO_FROM_ONE_URL, MarkdownReferenceStyle(deep_links=False))

    assert report.startswith(
        "### Fact check: The Moon is closer to Earth than Europa is to Jupiter\n\n"
        "**Verdict: Supported** (confidence 75%, score +0.75)\n"
    )
    assert "> The Moon orbits at about 384,400 km.<sup>[[1](https://example.org/moon)]</sup>" in (
        report
    )
    assert report.count("<sup>[[1](https://example.org/moon)]</sup>") == 2
    assert report.count("<sup>[[2](https://example.org/europa)]</sup>") == 2
    assert report.endswith(
        "#### References\n\n"
        "- **1** [Title of moon](https://example.org/moon)\n"
        "- **2** [Title of europa](https://example.org/europa)"
    )
    assert "- search for 'moon europa' (search): quota exceeded" in report


def test_html_report_exact_citation_and_reference_forms() -> None:
    report = render_report(TWO_FROM_ONE_URL, HTMLReferenceStyle(deep_links=False))

    assert report.count('<sup><a href="https://example.org/moon">1</a></sup>') == 2
    assert report.count('<sup><a href="https://example.org/europa">2</a></sup>') == 2
    assert (
        '<ol><li><a href="https://example.org/moon">Title of moon</a></li>'
        '<li><a href="https://example.org/europa">Title of europa</a></li></ol>'
    ) in report
    assert '<p class="verdict verdict-supported"><strong>Supported</strong>' in report
    ET.fromstring(report)  # well-formed


def test_html_escapes_a_script_in_a_snippet_and_stays_well_formed() -> None:
    attack = result(
        [
            evidence(
                'Moon facts <script>alert("x")</script> & more',
                'https://example.org/a?x=1&y="2"',
                title="<img src=x onerror=alert(1)>",
                rationale="</p><script>bad()</script>",
            )
        ],
        statement="Is <b>this</b> & that true?",
        failures=[Failure(url="https://e.org/<x>", stage="fetch", reason="<script>")],
    )

    report = render_report(attack, HTMLReferenceStyle(deep_links=False))

    assert "<script" not in report
    assert "<img" not in report
    assert "<b>" not in report
    assert "Moon facts &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in report
    assert 'href="https://example.org/a?x=1&amp;y=%222%22"' in report
    root = ET.fromstring(report)
    assert root.tag == "section"
    assert {e.tag for e in root.iter()} <= {
        "section", "h2", "h3", "p", "strong", "ul", "ol", "li", "blockquote", "sup", "a", "code"
    }  # fmt: skip


def test_snippets_cannot_forge_citations() -> None:
    forged = result([evidence("See [7](id=2).", MOON), evidence("Europa.", EUROPA)])

    text = render_report(forged, TextReferenceStyle())
    assert '"See [7](id=2)." [1]' in text  # the marker stays text, Moon keeps number 1
    assert text.endswith(
        "- [1] Title of moon (https://example.org/moon)\n"
        "- [2] Title of europa (https://example.org/europa)"
    )
    html_report = render_report(forged, HTMLReferenceStyle(deep_links=False))
    assert 'See [7](id=2).</blockquote><sup><a href="https://example.org/moon">1</a>' in (
        html_report
    )


def test_xml_invalid_characters_are_dropped_from_html() -> None:
    odd = result([evidence("a\ufffeb\uffffc\x0bd", MOON, title="\x0ct")], statement="s\ufffe")
    report = render_report(odd, HTMLReferenceStyle())
    ET.fromstring(report)
    assert "<blockquote>abc d</blockquote>" in report


def test_markdown_escapes_markup_in_untrusted_text() -> None:
    report = render_report(
        result(
            [evidence("**bold** [link](javascript:alert(1)) <i>x</i>", MOON)],
            statement="# heading *star*",
        ),
        MarkdownReferenceStyle(),
    )
    assert "### Fact check: \\# heading \\*star\\*" in report
    assert "\\*\\*bold\\*\\* \\[link\\]\\(javascript:alert\\(1\\)\\) &lt;i&gt;x&lt;/i&gt;" in report


def test_text_output_drops_terminal_control_sequences() -> None:
    report = render_report(
        result([evidence("red \x1b[31mtext\x1b[0m\u202eevil\x00", MOON, title="t\x07itle")]),
        TextReferenceStyle(),
    )
    assert "\x1b" not in report
    assert "\u202e" not in report
    assert "\x00" not in report
    assert "\x07" not in report
    assert '"red textevil"' in report  # whole escape sequences are removed


def test_text_report_cleans_urls_and_titles_of_escapes_bidi_and_newlines() -> None:
    url = "https://e.org/\x1b[2J\u202eevil\n- [9] forged\u061c\u200b"
    hostile = result(
        [evidence("snippet", url, title="T\x1b[31m\u2066itle\nnext")],
        failures=[Failure(url=url, stage="fetch", reason="r\x9b2J\nx")],
    )
    report = render_report(hostile, TextReferenceStyle())
    assert report.endswith("References:\n- [1] Title next (https://e.org/evil - [9] forged)")
    assert "  - https://e.org/evil - [9] forged (fetch): r x" in report
    for char in "\x1b\x9b\u202e\u2066\u061c\u200b":
        assert char not in report


def test_markdown_report_urls_cannot_forge_headings_or_link_definitions() -> None:
    url = "https://e.org/a\n# Forged\n\n[x]: https://evil.example\n"
    report = render_report(result([evidence("s", url, title="T")]), MarkdownReferenceStyle())
    assert "\n# Forged" not in report
    assert "\n[x]:" not in report
    assert report.endswith(
        "- **1** [T](https://e.org/a%0A#%20Forged%0A%0A%5Bx%5D:%20https://evil.example)"
    )


def test_format_follows_the_style_unless_given() -> None:
    assert render_report(TWO_FROM_ONE_URL, TextReferenceStyle()).startswith("Fact check:")
    assert render_report(TWO_FROM_ONE_URL, HTMLReferenceStyle()).startswith("<section")
    assert render_report(TWO_FROM_ONE_URL, fmt="html").startswith("<section")
    assert render_report(TWO_FROM_ONE_URL, fmt="text").endswith(
        "- [2] Title of europa (https://example.org/europa)"
    )
    # A text style in the Markdown layout: "[n]" citations under Markdown headings.
    mixed = render_report(TWO_FROM_ONE_URL, TextReferenceStyle(), fmt="markdown")
    assert mixed.startswith("### Fact check:")
    assert "km.[1]" in mixed


def test_empty_style_removes_citations_and_the_reference_list() -> None:
    report = render_report(TWO_FROM_ONE_URL, EmptyReferenceStyle())
    assert "[1]" not in report
    assert "References" not in report
    assert '"The Moon orbits at about 384,400 km."' in report


def test_a_result_without_evidence_says_so() -> None:
    empty = result(neutral=0, verdict=Verdict.NOT_ENOUGH_EVIDENCE)
    text = render_report(empty, fmt="text")
    assert "Verdict: NOT ENOUGH EVIDENCE" in text
    assert "Supporting evidence: none found." in text
    assert "References" not in text
    assert "0 passages said nothing" in text
    ET.fromstring(render_report(empty, fmt="html"))


def test_long_snippets_are_shortened() -> None:
    long = result([evidence("word " * 200, MOON)])
    report = render_report(long, fmt="text", max_snippet_chars=60)
    [line] = [line for line in report.splitlines() if line.startswith("  1.")]
    snippet = line.split('"')[1]
    assert len(snippet) <= 60
    assert snippet.endswith("…")
    assert len(render_report(long, fmt="text", max_snippet_chars=None)) > 900


def test_judge_failures_are_mentioned() -> None:
    failed = result(neutral=1).model_copy(update={"counts": FactCheckCounts(judge_errors=2)})
    assert "1 passage said nothing about the statement; the judge failed on 2." in render_report(
        failed, fmt="text"
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"fmt": "pdf"}, ValueError),
        ({"max_snippet_chars": 3}, ValueError),
        ({"style": "markdown"}, TypeError),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        render_report(TWO_FROM_ONE_URL, **kwargs)


def test_render_report_refuses_other_objects() -> None:
    with pytest.raises(TypeError, match="FactCheckResult"):
        render_report({"verdict": "supported"})  # type: ignore[arg-type]


def test_several_reports_are_separated_and_numbered_independently() -> None:
    other = result([evidence("Europa has an ocean.", EUROPA)], statement="Europa has an ocean")
    text = render_reports([TWO_FROM_ONE_URL, other], fmt="text")
    first, second = text.split(REPORT_SEPARATORS["text"])
    assert first == render_report(TWO_FROM_ONE_URL, fmt="text")
    assert '"Europa has an ocean." [1]' in second  # numbering restarts per report
    html_reports = render_reports([TWO_FROM_ONE_URL, other], fmt="html")
    assert len(ET.fromstring(f"<div>{html_reports}</div>")) == 2


def test_json_is_the_result_for_programs() -> None:
    data = json.loads(render_json(TWO_FROM_ONE_URL))
    assert data["verdict"] == "supported"
    assert [e["url"] for e in data["supporting"]] == [MOON, EUROPA, MOON]
    assert data["failed_sources"][0] == {
        "url": "http://dead.example/",
        "stage": "fetch",
        "reason": "HTTP 404",
        "item": None,
        "rank": 3,
        "query": None,
    }
    assert FactCheckResult.model_validate_json(TWO_FROM_ONE_URL.to_json()) == TWO_FROM_ONE_URL


urls = st.sampled_from([MOON, EUROPA, "https://example.org/a?b=1&c=<d>", "javascript:alert(1)"])
texts = st.text(min_size=1, max_size=60)


@st.composite
def random_results(draw: st.DrawFn) -> FactCheckResult:
    def items(label: Label) -> list[Evidence]:
        return [
            evidence(
                draw(texts),
                draw(urls),
                title=draw(texts),
                label=label,
                rationale=draw(texts),
                rank=draw(st.integers(0, 9)),
            )
            for _ in range(draw(st.integers(0, 4)))
        ]

    return result(
        items(Label.ENTAILS),
        items(Label.CONTRADICTS),
        statement=draw(texts.filter(lambda s: bool(s.strip()))),
        failures=[
            Failure(url=draw(texts), stage="fetch", reason=draw(texts))
            for _ in range(draw(st.integers(0, 2)))
        ],
    )


@settings(max_examples=60, deadline=None)
@given(random_results())
def test_html_is_always_well_formed_and_numbers_follow_urls(report_input: FactCheckResult) -> None:
    report = render_report(report_input, HTMLReferenceStyle())
    root = ET.fromstring(report)
    assert "<script" not in report.lower()
    # One reference per distinct URL, numbered in order of first citation.
    first_seen = list(dict.fromkeys(e.url for e in report_input.evidence))
    citations = [
        sup for li in root.iter("li") for sup in li.findall("sup")
    ]  # one <sup> per evidence item
    assert len(citations) == len(report_input.evidence)
    numbers = ["".join(sup.itertext()) for sup in citations]
    assert numbers == [str(first_seen.index(e.url) + 1) for e in report_input.evidence]
    for sup, item in zip(citations, report_input.evidence, strict=True):
        links = sup.findall("a")
        if item.url.startswith("javascript:"):
            assert links == []  # unsafe URLs are never linked
        else:
            # inline links are deep links to the snippet; the page is the source's
            assert [a.get("href", "").split("#:~:")[0] for a in links] == [safe_url(item.url)]


@settings(max_examples=60, deadline=None)
@given(random_results())
def test_text_report_one_number_per_url(report_input: FactCheckResult) -> None:
    report = render_report(report_input, TextReferenceStyle())
    reference_lines = [line for line in report.splitlines() if re.match(r"- \[\d+\] ", line)]
    assert len(reference_lines) == len({e.url for e in report_input.evidence})


def test_several_reports_take_the_options_of_one_report() -> None:
    other = result([evidence("Europa has an ocean.", EUROPA)], statement="Europa has an ocean")
    options: ReportOptions = {"fmt": "text", "max_snippet_chars": 12}
    text = render_reports([TWO_FROM_ONE_URL, other], **options)
    assert text.split(REPORT_SEPARATORS["text"]) == [
        render_report(TWO_FROM_ONE_URL, **options),
        render_report(other, **options),
    ]
    # The format follows the style when none is given, as for one report.
    html_reports = render_reports([other], HTMLReferenceStyle())
    assert html_reports == render_report(other, HTMLReferenceStyle())
    with pytest.raises(ValueError, match="max_snippet_chars"):
        render_reports([other], max_snippet_chars=3)


@pytest.mark.parametrize(
    ("verdict", "score", "shown"),
    [
        # not enough evidence: the score beside its threshold and no confidence
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.299, "(score +0.299 < 0.30)"),  # not a rounded +0.30
        (Verdict.NOT_ENOUGH_EVIDENCE, -0.29999, "(score -0.29999 > -0.30)"),
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.0, "(score +0.00 < 0.30)"),
        (Verdict.NOT_ENOUGH_EVIDENCE, 0.12, "(score +0.12 < 0.30)"),
        (Verdict.NOT_ENOUGH_EVIDENCE, -0.12, "(score -0.12 > -0.30)"),
        # the other verdicts: their confidence, then the score
        (Verdict.SUPPORTED, 0.3, "(confidence 50%, score +0.30 ≥ 0.30)"),
        (Verdict.SUPPORTED, 0.7512, "(confidence 50%, score +0.75 ≥ 0.30)"),
        (Verdict.REFUTED, -0.45, "(confidence 50%, score -0.45 ≤ -0.30)"),
        (Verdict.DISPUTED, 0.1, "(confidence 50%, score +0.10)"),
    ],
)
def test_the_score_is_shown_beside_its_threshold_never_contradicting_the_verdict(
    verdict: Verdict, score: float, shown: str
) -> None:
    checked = TWO_FROM_ONE_URL.model_copy(
        update={
            "verdict": verdict,
            "score": score,
            "confidence": 0.5,
            "verdict_details": {"threshold": 0.3},
        }
    )
    first = render_report(checked, TextReferenceStyle()).splitlines()[1]
    assert first.endswith(f" {shown}")
    assert first.count("(") == 1


def _nothing_leaning(score: float = 0.0) -> FactCheckResult:
    """A *not enough evidence* result as the weighted vote gives it: confidence
    ``1 - |score| / threshold`` (1.0 when no passage leans either way)."""
    return result(verdict=Verdict.NOT_ENOUGH_EVIDENCE).model_copy(
        update={
            "confidence": 1.0 - abs(score) / 0.3,
            "score": score,
            "verdict_details": {"threshold": 0.3},
        }
    )


@pytest.mark.parametrize(
    ("fmt", "header"),
    [
        ("markdown", "**Verdict: Not enough evidence** (score +0.00 < 0.30)"),
        ("text", "Verdict: NOT ENOUGH EVIDENCE (score +0.00 < 0.30)"),
        (
            "html",
            '<p class="verdict verdict-not-enough-evidence"><strong>Not enough evidence</strong> '
            "(score +0.00 &lt; 0.30)</p>",
        ),
    ],
)
def test_not_enough_evidence_shows_no_confidence_in_any_format(
    fmt: ReportFormat, header: str
) -> None:
    """Its confidence is 100% when nothing leans either way: a certainty the evidence does
    not carry, so the report shows the score beside the threshold instead."""
    nothing = _nothing_leaning()
    assert nothing.confidence == 1.0
    report = render_report(nothing, fmt=fmt)
    assert header in report.splitlines()
    assert "confidence" not in report
    assert "100%" not in report
    if fmt == "html":
        ET.fromstring(report)  # the "<" is escaped: still well-formed


def test_not_enough_evidence_with_a_leaning_score_shows_no_confidence_either() -> None:
    for score, shown in ((0.12, "+0.12 < 0.30"), (-0.12, "-0.12 > -0.30")):
        report = render_report(_nothing_leaning(score), fmt="text")
        assert report.splitlines()[1] == f"Verdict: NOT ENOUGH EVIDENCE (score {shown})"
        markdown = render_report(_nothing_leaning(score), fmt="markdown")
        assert f"**Verdict: Not enough evidence** (score {shown})" in markdown.splitlines()


def test_supported_still_shows_its_confidence_in_every_format() -> None:
    supported = TWO_FROM_ONE_URL.model_copy(update={"verdict_details": {"threshold": 0.3}})
    note = "(confidence 75%, score +0.75 ≥ 0.30)"
    assert f"**Verdict: Supported** {note}" in render_report(supported, fmt="markdown")
    assert render_report(supported, fmt="text").splitlines()[1] == f"Verdict: SUPPORTED {note}"
    assert f"<strong>Supported</strong> {note}</p>" in render_report(supported, fmt="html")


def test_an_aggregator_without_a_threshold_shows_the_score_alone() -> None:
    checked = TWO_FROM_ONE_URL.model_copy(update={"verdict_details": {"threshold": True}})
    assert render_report(checked, TextReferenceStyle()).splitlines()[1] == (
        "Verdict: SUPPORTED (confidence 75%, score +0.75)"
    )
