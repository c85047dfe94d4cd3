"""The sentence splitter before and after the abbreviation rules (issue 11), in one run.

The gold-label citation judge of ``eval_citations.py`` must reproduce the gold exactly: each
Climate-FEVER claim is one sentence of a synthetic answer, so every sentence boundary the
splitter misses between two claims (``"... (as quoted by Ken Ward Jr.) The ..."``, ``"...
Moberg et al. CO2 ..."``) misaligns an answer. Three measurements, for the splitter of commit
``--before`` (``citations/sentences.py`` of that commit, loaded from git as a separate module)
and today's:

1. ``eval_citations.py``'s gold judge over ``--seeds`` (answers rebuilt per seed; the
   splitter swapped where ``eval_citations`` and ``citations.evaluation`` call it):
   answers whose sentences do not align with their claims, sentence and citation agreement
   with the gold, and the seeds whose recall and precision equal the gold's;
2. every pair of consecutive claims (usable by both splitters), written three ways (no
   marker, a marker before the final period, a marker after it): how often the split is
   exactly the two claims; plus the examples of the issue;
3. time per character on prose and on a text of many periods (``"a.b a.b ..."``), which the
   old splitter handled in quadratic time.

A fourth table (alone with ``--pysbd-only``, which needs no data) is about the pysbd splitter
of whole texts (``sentence_spans``): for texts of N characters, N doubling, of ``"a. "``,
``"【"``, ``"<sup>"`` and long prose, the milliseconds of pysbd's ``segment`` (which finds
every sentence again with ``re.finditer`` over the whole text: the old splitter's inner step),
of pysbd's processor alone on the whole text (what ``sentence_spans`` calls, per window), and
of ``sentence_spans`` (windows of ``SEGMENT_WINDOW``), each with its ratio to the previous N
(2.0 per doubling is linear, 4.0 quadratic).

    python benchmarks/bench_splitter.py [--data PATH] [--seeds 13,14,...] [--pysbd-only]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import eval_citations as ev
from _old_code import git_show, today_imports
from climate_fever import ClaimRecord, load_climate_fever, split_claims

import langchain_references.citations.evaluation as evaluation
from langchain_references.citations import evaluate_answers
from langchain_references.citations.evaluation import parse_answer_record
from langchain_references.citations.sentences import (
    CitedSentence,
    sentence_segmenter,
    sentence_spans,
    split_cited_sentences,
)

BEFORE = "0fbb6db037daa020b9eee8e4c4503ea0a48bd2d7"
Splitter = Callable[[str], list[CitedSentence]]
DOTS_LABEL = '"a.b " repeated'

#: The issue's examples, rebuilt around the quoted fragments (their claims are not in the
#: offline data), and the dev-data boundaries the old splitter missed.
EXAMPLES = [
    (
        "Warming was slower than feared (Roger Pielke Jr.) In those days nobody measured it.",
        2,
    ),
    ("The lake warmed by 20 C. He said the fish would not survive it.", 2),
    ("Ljungqvist's reconstruction was very similar to Moberg et al. CO2 is a gas.", 2),
    ("They were warm from 900–1100 A.D. The Little Ice Age followed.", 2),
    ("The trend reversed in the mid 1970's. The dimming stopped.", 2),
    ("J. R. R. Tolkien lived in the U.S. and Arland D. Williams Jr. Memorial Bridge.", 1),
    ("Use e.g. salt, i.e. sodium, per Smith et al. (2005), at 3.5 percent.", 1),
]


def load_before(rev: str) -> Splitter | None:
    """``split_cited_sentences`` of commit ``rev``, or None without git or the commit."""
    code = git_show(rev, "langchain_references/citations/sentences.py")
    if code is None:
        return None
    code = today_imports(code)  # modules that moved since: today's, at today's path
    module = types.ModuleType("_before_sentences")
    sys.modules[module.__name__] = module
    exec(compile(code, f"{rev[:7]}:sentences.py", "exec"), module.__dict__)
    module.__dict__["CitedSentence"] = CitedSentence  # same fields; the verifier checks the class
    split: Splitter = module.split_cited_sentences
    return split


@contextmanager
def splitting_with(split: Splitter) -> Iterator[None]:
    """Use ``split`` where the gold evaluation splits answers."""
    with (
        mock.patch.object(ev, "split_cited_sentences", split),
        mock.patch.object(evaluation, "split_cited_sentences", split),
    ):
        yield


def gold_judge(split: Splitter, claims: list[ClaimRecord], seeds: list[int]) -> dict[str, float]:
    """The gold judge's agreement with the gold, pooled over the seeds."""
    answers = misaligned = sentences = agree_s = citations = agree_c = exact = 0
    with splitting_with(split):
        for seed in seeds:
            records, groups, _ = ev.build_answers(claims, per_answer=4, seed=seed)
            judge = ev.GoldEvidenceJudge(groups)
            report = evaluate_answers([parse_answer_record(r) for r in records], judge)
            agreement = ev.compare(report, groups)
            recall, precision, _, _ = ev.gold_figures(groups)
            answers += len(records)
            misaligned += agreement.misaligned
            sentences += agreement.sentences
            agree_s += agreement.sentences_agree
            citations += agreement.citations
            agree_c += agreement.citations_agree
            exact += (
                agreement.misaligned == 0
                and abs((report.citation_recall or 0) - recall) < 1e-9
                and abs((report.citation_precision or 0) - precision) < 1e-9
            )
    return {
        "answers": answers,
        "misaligned": misaligned,
        "sentence agreement": agree_s / max(sentences, 1),
        "citation agreement": agree_c / max(citations, 1),
        "seeds reproduced": exact,
    }


def claim_texts(claims: list[ClaimRecord], splitters: list[Splitter]) -> list[str]:
    """The claims ``eval_citations`` would use, with every splitter (one sentence each)."""
    texts = []
    for claim in claims:
        usable = []
        for split in splitters:
            with splitting_with(split):
                usable.append(ev.usable(claim))
        if all(u is not None for u in usable) and len(set(usable)) == 1 and usable[0]:
            texts.append(usable[0])
    return texts


def variants(first: str, second: str) -> list[str]:
    """Two claims as consecutive sentences of an answer, three ways."""
    end = ev._END.search(first)
    cut = end.start() if end is not None else len(first)
    tail = end.group() if end is not None else ""
    return [
        f"{first} {second}",
        f"{first[:cut]} [1](id=1){tail} {second}",
        f"{first} [1](id=1) {second}",
    ]


def pairs_reproduced(split: Splitter, texts: list[str]) -> tuple[int, int, list[str]]:
    """How many consecutive-claim answers split into exactly their two claims."""
    good = total = 0
    misses: list[str] = []
    for first, second in itertools.pairwise(texts):
        expected = [ev.normalize(first), ev.normalize(second)]
        for answer in variants(first, second):
            total += 1
            got = [s.text for s in split(answer)]
            if got == expected:
                good += 1
            elif len(misses) < 3:
                misses.append(answer[-160:])
    return good, total, misses


def ns_per_char(split: Splitter, text: str, repeat: int = 3) -> float:
    """Median time per character of splitting ``text``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        split(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / len(text) * 1e9


#: Texts of the pysbd table: a unit repeated to N characters.
PYSBD_TEXTS = {
    '"a. "': "a. ",
    '"【"': "【",
    '"<sup>"': "<sup>",
    "prose": (
        "Dr. Smith saw 3.5 m of sea ice in the U.S. on Jan. 5, 2020 (he said). "
        'Then it melted! Why? "It is warm," she said. The end is near... '
    ),
}
PYSBD_SIZES = (2_000, 4_000, 8_000, 16_000, 32_000)
#: pysbd's own ``segment`` is quadratic: not timed past this size.
SEGMENT_MAX = 8_000


def ms(call: Callable[[], object], repeat: int = 3) -> float:
    """Median milliseconds of ``call()``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def pysbd_table() -> None:
    """Time of pysbd's segment, its processor and ``sentence_spans`` as N doubles."""
    print("4. pysbd splitter: ms (ratio to the previous N), median of 3")
    columns = ("pysbd segment", "pysbd processor", "sentence_spans")
    header = f"{'text':<10}{'N':>8}" + "".join(f"{c:>22}" for c in columns)
    print(header)
    print("-" * len(header))
    ms(lambda: sentence_spans("Warm up. " * 200))
    for label, unit in PYSBD_TEXTS.items():
        previous: list[float | None] = [None, None, None]
        for size in PYSBD_SIZES:
            text = (unit * (size // len(unit) + 1))[:size]
            calls: list[Callable[[], object] | None] = [
                (lambda t=text: sentence_segmenter().segment(t)) if size <= SEGMENT_MAX else None,
                lambda t=text: sentence_segmenter().processor(t).process(),
                lambda t=text: sentence_spans(t),
            ]
            cells = ""
            for i, call in enumerate(calls):
                if call is None:
                    cells += f"{'(skipped)':>22}"
                    previous[i] = None
                    continue
                took = ms(call)
                before = previous[i]
                ratio = f"({took / before:.2f})" if before else ""
                cells += f"{took:>14,.1f} {ratio:>7}"
                previous[i] = took
            print(f"{label:<10}{size:>8}{cells}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ev.DEFAULT_DATA)
    parser.add_argument("--seeds", default="13,14,15,16,17,18,19,20,21,22")
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument(
        "--pysbd-only", action="store_true", help="only the pysbd table (no data needed)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.pysbd_only:
        pysbd_table()
        return 0
    if not args.data.is_file():
        print(f"data file not found: {args.data}", file=sys.stderr)
        return 2
    before = load_before(args.before)
    if before is None:
        print(f"commit {args.before} not readable with git", file=sys.stderr)
        return 2
    splitters = {"before": before, "after": split_cited_sentences}
    claims = split_claims(load_climate_fever(args.data), "all")
    seeds = [int(s) for s in args.seeds.split(",")]

    print(f"1. gold judge, {args.data.name}, all {len(claims)} claims, seeds {args.seeds}")
    header = (
        f"{'splitter':<10}{'answers':>9}{'misaligned':>12}{'sent. agree':>13}"
        f"{'cit. agree':>12}{'seeds = gold':>14}"
    )
    print(header)
    print("-" * len(header))
    for name, split in splitters.items():
        r = gold_judge(split, claims, seeds)
        print(
            f"{name:<10}{r['answers']:>9.0f}{r['misaligned']:>12.0f}"
            f"{r['sentence agreement']:>13.4f}{r['citation agreement']:>12.4f}"
            f"{'{:.0f}/{}'.format(r['seeds reproduced'], len(seeds)):>14}"
        )

    texts = claim_texts(claims, list(splitters.values()))
    print()
    print(f"2. consecutive claims split into exactly those two ({len(texts)} claims, 3 ways)")
    for name, split in splitters.items():
        good, total, misses = pairs_reproduced(split, texts)
        print(f"{name:<10}{good:>6}/{total} ({good / total:.4f})")
        for miss in misses:
            print(f"{'':<12}missed: ...{miss}")
    print()
    print(f"{'issue example':<88}{'expected':>9}" + "".join(f"{n:>8}" for n in splitters))
    for text, expected in EXAMPLES:
        counts = "".join(f"{len(split(text)):>8}" for split in splitters.values())
        print(f"{text[:86]:<88}{expected:>9}{counts}")

    print()
    print("3. time per character (ns), median of 3")
    prose = " ".join(texts)
    dots = "a.b " * 50_000
    header = f"{'text':<22}{'chars':>9}" + "".join(f"{n:>10}" for n in splitters)
    print(header)
    print("-" * len(header))
    for label, text, sizes in (
        ("claims (prose)", prose, (20_000, 80_000)),
        (DOTS_LABEL, dots, (2_000, 8_000)),
    ):
        for size in sizes:
            cells = "".join(f"{ns_per_char(s, text[:size]):>10,.0f}" for s in splitters.values())
            print(f"{label:<22}{size:>9}{cells}")
    print(f"{DOTS_LABEL:<22}{200_000:>9}{'(skipped)':>10}", end="")
    print(f"{ns_per_char(split_cited_sentences, dots):>10,.0f}")
    print()
    pysbd_table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
