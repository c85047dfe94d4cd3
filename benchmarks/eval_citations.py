"""Citation recall / precision estimated by a judge vs known gold, on Climate-FEVER claims.

No labelled verifiability judgements (Liu et al., 2023) are available offline, so this builds
answers whose gold support is known. Each Climate-FEVER claim becomes one sentence of an
answer (four claims per answer), cited with evidence sentences of that claim chosen by one
scenario (seeded):

* ``support``: one SUPPORTS evidence;
* ``two-supports``: two SUPPORTS evidences;
* ``support+nei``: one SUPPORTS and one NOT_ENOUGH_INFO evidence;
* ``refute``: one REFUTES evidence;
* ``nei``: one NOT_ENOUGH_INFO evidence;
* ``uncited``: no citation.

A cited evidence "fully supports" its claim iff its label is SUPPORTS, so the gold is: a
sentence is supported iff it cites a SUPPORTS evidence; a citation is precise iff its evidence
is SUPPORTS (a NOT_ENOUGH_INFO citation next to a SUPPORTS one is redundant). Markers go before
or after the final period at random, documents are shuffled. Claims are capitalised (a few
start in lower case, which the sentence splitter would read as the continuation of the
previous sentence); claims that the splitter cuts into several sentences, shorter than four
words or questions are skipped.

Judges: ``gold`` answers with the evidence labels (a concatenation entails if one of its parts
SUPPORTS): it checks the bookkeeping (sentence splitting, marker attachment, document ids, the
recall / precision rules), so it must reproduce the gold exactly. ``heuristic`` (MiniLM) and
``heuristic-lexical`` are the weak offline baselines; ``llm:PROVIDER:MODEL`` an LLM judge.
HeuristicJudge's thresholds were tuned on the *first* half of these claims, so the default
split is the second half.

    .venv/bin/python benchmarks/eval_citations.py
    .venv/bin/python benchmarks/eval_citations.py --judges gold heuristic --write-answers a.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from climate_fever import ClaimRecord, load_climate_fever, split_claims
from langchain_core.runnables import RunnableConfig

from langchain_references.citations import AnswerRecord, CitationReport, evaluate_answers
from langchain_references.citations.evaluation import parse_answer_record
from langchain_references.citations.sentences import (
    is_verification_worthy,
    split_cited_sentences,
)
from langchain_references.citations.verifier import DEFAULT_SEPARATOR
from langchain_references.cli._errors import CLIError
from langchain_references.cli._models import build_judge
from langchain_references.judges import Judge, Judgement, Label

REPO = Path(__file__).resolve().parents[1]
_END = re.compile(r"[.!?…]+[\"'”’)\]]*$")
_DOUBLE_END = re.compile(r"([.!?][\"'”’)\]]+)\.$")  # 'said "stop.".' -> 'said "stop."'
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "climate-fever-dev.jsonl"
SCENARIOS = ("support", "two-supports", "support+nei", "refute", "nei", "uncited")


def normalize(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Cited:
    """One sentence of a synthetic answer and its gold."""

    claim: str
    evidences: tuple[tuple[str, str], ...]  # (text, label)
    scenario: str

    @property
    def supported(self) -> bool:
        return any(label == "SUPPORTS" for _, label in self.evidences)


def usable(claim: ClaimRecord) -> str | None:
    """The claim as one sentence ending with a period, or None if it is not one claim."""
    text = _DOUBLE_END.sub(r"\1", normalize(claim.claim).rstrip())
    if not _END.search(text):
        text += "."
    # Some claims start in lower case; after a period the splitter reads a lower-case word as
    # the continuation of the sentence ("approx. five"), so capitalise as an answer would.
    text = text[:1].upper() + text[1:]
    sentences = split_cited_sentences(text)
    if len(sentences) != 1 or not is_verification_worthy(sentences[0]):
        return None
    return text


def choose(claim: ClaimRecord, text: str, rng: random.Random) -> Cited:
    by_label: dict[str, list[str]] = {"SUPPORTS": [], "REFUTES": [], "NOT_ENOUGH_INFO": []}
    for ev in claim.evidences:
        if normalize(ev.evidence) not in by_label[ev.evidence_label]:
            by_label[ev.evidence_label].append(normalize(ev.evidence))
    s, r, n = by_label["SUPPORTS"], by_label["REFUTES"], by_label["NOT_ENOUGH_INFO"]
    feasible = {
        "support": len(s) >= 1,
        "two-supports": len(s) >= 2,
        "support+nei": len(s) >= 1 and len(n) >= 1,
        "refute": len(r) >= 1,
        "nei": len(n) >= 1,
        "uncited": True,
    }
    scenario = rng.choice([name for name in SCENARIOS if feasible[name]])
    picks: list[tuple[str, str]]
    if scenario == "support":
        picks = [(rng.choice(s), "SUPPORTS")]
    elif scenario == "two-supports":
        picks = [(e, "SUPPORTS") for e in rng.sample(s, 2)]
    elif scenario == "support+nei":
        picks = [(rng.choice(s), "SUPPORTS"), (rng.choice(n), "NOT_ENOUGH_INFO")]
    elif scenario == "refute":
        picks = [(rng.choice(r), "REFUTES")]
    elif scenario == "nei":
        picks = [(rng.choice(n), "NOT_ENOUGH_INFO")]
    else:
        picks = []
    return Cited(text, tuple(picks), scenario)


def build_answers(
    claims: Sequence[ClaimRecord], *, per_answer: int, seed: int
) -> tuple[list[dict[str, object]], list[list[Cited]], int]:
    rng = random.Random(seed)
    cited: list[Cited] = []
    skipped = 0
    for claim in claims:
        text = usable(claim)
        if text is None:
            skipped += 1
            continue
        cited.append(choose(claim, text, rng))
    records: list[dict[str, object]] = []
    groups: list[list[Cited]] = []
    for start in range(0, len(cited), per_answer):
        group = cited[start : start + per_answer]
        docs = list(dict.fromkeys(text for c in group for text, _ in c.evidences))
        rng.shuffle(docs)
        doc_id = {text: i for i, text in enumerate(docs, start=1)}
        sentences = []
        for c in group:
            markers = "".join(f"[{k}](id={doc_id[t]})" for k, (t, _) in enumerate(c.evidences, 1))
            end = _END.search(c.claim)
            if markers and end is not None and rng.random() < 0.5:
                sentences.append(f"{c.claim[: end.start()]} {markers}{end.group()}")
            else:
                sentences.append(f"{c.claim} {markers}".rstrip())
        records.append(
            {
                "question": f"synthetic answer #{len(records)}",
                "answer": " ".join(sentences),
                "documents": [
                    {"page_content": d, "metadata": {"source": "climate-fever"}} for d in docs
                ],
            }
        )
        groups.append(group)
    return records, groups, skipped


class GoldEvidenceJudge(Judge):
    """Entails iff a part of the passage is a SUPPORTS evidence of the statement's claim;
    contradicts iff a part REFUTES it (and none supports); unknown otherwise."""

    judge_kind = "gold"

    def __init__(self, groups: Sequence[Sequence[Cited]]) -> None:
        self.gold: dict[tuple[str, str], str] = {}
        for group in groups:
            for c in group:
                for text, label in c.evidences:
                    self.gold[(c.claim, text)] = label

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        labels = {self.gold.get((statement, part)) for part in passage.split(DEFAULT_SEPARATOR)}
        if "SUPPORTS" in labels:
            return Judgement(label=Label.ENTAILS, confidence=1.0, rationale="gold")
        if "REFUTES" in labels:
            return Judgement(label=Label.CONTRADICTS, confidence=1.0, rationale="gold")
        return Judgement(label=Label.UNKNOWN, confidence=1.0, rationale="gold")


@dataclass
class Agreement:
    """Judge-vs-gold agreement on the sentences and citations that could be compared.

    ``sentences_supported`` / ``citations_precise`` count the gold positives among them, for
    the majority-class baseline on exactly those labels (:meth:`majority`).
    """

    sentences: int = 0
    sentences_agree: int = 0
    sentences_supported: int = 0
    citations: int = 0
    citations_agree: int = 0
    citations_precise: int = 0
    misaligned: int = 0

    @staticmethod
    def _majority(positives: int, total: int) -> float:
        return max(positives, total - positives) / total if total else 0.0

    def majority(self) -> tuple[float, float]:
        """Majority-class agreement of the sentences and of the citations compared."""
        return (
            self._majority(self.sentences_supported, self.sentences),
            self._majority(self.citations_precise, self.citations),
        )


def compare(report: CitationReport, groups: Sequence[Sequence[Cited]]) -> Agreement:
    out = Agreement()
    for answer, group in zip(report.answers, groups, strict=True):
        worthy = answer.worthy
        if len(worthy) != len(group):
            out.misaligned += 1
            continue
        for verdict, c in zip(worthy, group, strict=True):
            out.sentences += 1
            out.sentences_agree += verdict.supported == c.supported
            out.sentences_supported += c.supported
            labels = [label for _, label in c.evidences]
            for cv, label in zip(verdict.citations, labels, strict=False):
                out.citations += 1
                out.citations_agree += cv.precise == (label == "SUPPORTS")
                out.citations_precise += label == "SUPPORTS"
    return out


def gold_figures(groups: Sequence[Sequence[Cited]]) -> tuple[float, float, int, int]:
    sentences = [c for g in groups for c in g]
    citations = [label for c in sentences for _, label in c.evidences]
    recall = sum(c.supported for c in sentences) / len(sentences)
    precision = sum(label == "SUPPORTS" for label in citations) / len(citations)
    return recall, precision, len(sentences), len(citations)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", choices=("all", "first", "second"), default="second")
    parser.add_argument("--per-answer", type=int, default=4)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--judges", nargs="+", default=["gold", "heuristic-lexical", "heuristic"])
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument("--write-answers", type=Path, help="also write the answers (JSONL)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    if not args.data.is_file():
        print(f"data file not found: {args.data}", file=sys.stderr)
        return 2
    claims = split_claims(load_climate_fever(args.data), args.split)
    records, groups, skipped = build_answers(claims, per_answer=args.per_answer, seed=args.seed)
    if args.write_answers is not None:
        with args.write_answers.open("w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    answers: list[AnswerRecord] = [parse_answer_record(r) for r in records]
    recall, precision, n_sentences, n_citations = gold_figures(groups)
    scenarios = {name: sum(c.scenario == name for g in groups for c in g) for name in SCENARIOS}
    print(
        f"{args.data.name} ({args.split} half): {len(claims)} claims, {skipped} skipped "
        f"(several sentences, short or a question), {n_sentences} cited sentences in "
        f"{len(records)} answers, {n_citations} citations"
    )
    print("scenarios: " + ", ".join(f"{k} {v}" for k, v in scenarios.items()))
    print(f"gold: citation recall {recall:.3f}, citation precision {precision:.3f}")
    print(
        "majority-class agreement (every sentence unsupported, every citation imprecise): "
        f"sentences {max(recall, 1 - recall):.3f}, citations {max(precision, 1 - precision):.3f}"
    )
    print()
    print(
        "agreement columns: the judge's agreement with the gold, then (maj.) the majority-class "
        "agreement on the same compared sentences / citations"
    )
    header = (
        f"{'judge':<20}{'recall':>8}{'gold':>7}{'precision':>10}{'gold':>7}"
        f"{'sent. agree':>12}{'maj.':>7}{'cit. agree':>11}{'maj.':>7}{'misaligned':>11}"
        f"{'failed':>7}{'time s':>8}"
    )
    print(header)
    print("-" * len(header))
    for spec in args.judges:
        if spec == "gold":
            judge: object = GoldEvidenceJudge(groups)
        else:
            try:
                judge, _ = build_judge(spec)
            except CLIError as exc:
                print(f"{spec}: {exc}", file=sys.stderr)
                continue
        start = time.perf_counter()
        report = evaluate_answers(answers, judge, max_concurrency=args.max_concurrency)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - start
        agree = compare(report, groups)
        sentence_major, citation_major = agree.majority()
        print(
            f"{spec:<20}{report.citation_recall or 0:>8.3f}{recall:>7.3f}"
            f"{report.citation_precision or 0:>10.3f}{precision:>7.3f}"
            f"{agree.sentences_agree / max(agree.sentences, 1):>12.3f}{sentence_major:>7.3f}"
            f"{agree.citations_agree / max(agree.citations, 1):>11.3f}{citation_major:>7.3f}"
            f"{agree.misaligned:>11}{report.failed_judgements:>7}{elapsed:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
