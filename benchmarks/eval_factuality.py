"""FactReasoner FR1 / FR2 / FR3 on the Flaherty example, with the offline judge.

The Flaherty record (IBM FactReasoner's ``data/flaherty_wikipedia.json``: a biography of
Lanny Flaherty written by an LLM, 26 atoms with FActScore-style labels, 7 "S" / 19 "NS", and
53 retrieved Wikipedia contexts) is scored by the long-form factuality evaluator with each graph
version. Per version it prints the factual precision against the gold precision (7/26), the
confusion counts (S = positive class), accuracy and macro-F1 next to those of the always-NS
and majority-class baselines on the same labels, average entropy and Brier score; then the
posterior ``P(true)`` of every atom under each version.

``--snippets-only`` first gives every context the shape of FactReasoner's Google-search files
(``data/*_google.jsonl``: a search snippet, an empty ``text``): the snippet is the first
``--snippet-chars`` characters of the text, cut at a word and ended with " ...", as Serper
snippets are. ``--write-data`` saves the record as scored (to re-run it elsewhere).

Judges: ``heuristic`` (default: the offline HeuristicJudge with MiniLM similarity; weak, not an
NLI model), ``heuristic-lexical``, ``gold`` (entails the atoms labelled S and contradicts the
others: the ceiling of the graph + inference with a perfect judge), ``llm:PROVIDER:MODEL``.

    .venv/bin/python benchmarks/eval_factuality.py
    .venv/bin/python benchmarks/eval_factuality.py --judge gold
    .venv/bin/python benchmarks/eval_factuality.py --snippets-only
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

from langchain_core.runnables import RunnableConfig

from langchain_references.cli._errors import CLIError
from langchain_references.cli._models import build_judge
from langchain_references.factuality import FactualityInput, load_inputs
from langchain_references.factuality.io import input_to_dict
from langchain_references.factuality.pipeline import FactualityResult, create_factuality_evaluator
from langchain_references.judges import Judge, Judgement, Label

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "factreasoner_flaherty_wikipedia.json"


class GoldAtomJudge(Judge):
    """Entails (0.9) every atom labelled S, contradicts (0.9) every atom labelled NS."""

    judge_kind = "gold"

    def __init__(self, record: FactualityInput) -> None:
        self.labels = {a.text: a.label for a in record.atoms}

    def _judge(self, statement: str, passage: str, *, config: RunnableConfig) -> Judgement:
        label = self.labels.get(statement)
        if label == "S":
            return Judgement(label=Label.ENTAILS, confidence=0.9)
        if label == "NS":
            return Judgement(label=Label.CONTRADICTS, confidence=0.9)
        return Judgement(label=Label.UNKNOWN, confidence=0.5)


def search_snippet(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters of ``text``, cut at a word, ``" ..."`` if cut."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " ..."


def as_search_results(record: FactualityInput, max_chars: int) -> FactualityInput:
    """The record with FactReasoner's Google-search context shape: snippet only, no text."""
    contexts = tuple(
        replace(c, snippet=search_snippet(c.text, max_chars), text="") for c in record.contexts
    )
    return replace(record, contexts=contexts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--judge", default="heuristic")
    parser.add_argument("--versions", type=int, nargs="+", default=[1, 2, 3], choices=(1, 2, 3))
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument(
        "--snippets-only", action="store_true", help="Google-search shape: snippet, no text"
    )
    parser.add_argument("--snippet-chars", type=int, default=300)
    parser.add_argument("--write-data", type=Path, help="save the record as scored (JSON)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    if not args.data.is_file():
        print(f"data file not found: {args.data}", file=sys.stderr)
        return 2
    (record,) = load_inputs(args.data).records
    if args.snippets_only:
        record = as_search_results(record, args.snippet_chars)
    if args.write_data is not None:
        args.write_data.write_text(json.dumps(input_to_dict(record), ensure_ascii=False) + "\n")
    if args.judge == "gold":
        judge: Judge | object = GoldAtomJudge(record)
        description = "gold-label judge (perfect pair labels; ceiling of graph + inference)"
    else:
        try:
            judge, _ = build_judge(args.judge)
        except CLIError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        description = f"{type(judge).__name__} ({args.judge})"
    shape = ", snippets only (Google-search shape)" if args.snippets_only else ""
    print(
        f"data: {args.data.name}{shape}: {len(record.atoms)} atoms, {len(record.contexts)} contexts"
    )
    print(f"judge: {description}")
    print(
        "baselines (same labels): always-NS predicts every atom NS, majority the most "
        "frequent gold label; F1 = macro-F1 over S and NS"
    )
    print()

    results: dict[int, FactualityResult] = {}
    header = (
        f"{'version':<8}{'pairs':>6}{'factors':>8}{'S pred':>7}{'precision':>10}{'gold':>7}"
        f"{'TP':>4}{'TN':>4}{'FP':>4}{'FN':>4}{'accuracy':>9}{'always-NS':>10}{'majority':>12}"
        f"{'F1':>7}{'F1 NS':>7}{'entropy':>8}{'brier':>7}{'time s':>8}"
    )
    print(header)
    print("-" * len(header))
    for version in args.versions:
        evaluator = create_factuality_evaluator(
            judge=judge,  # type: ignore[arg-type]
            version=version,
            max_concurrency=args.max_concurrency,
        )
        start = time.perf_counter()
        result = evaluator.invoke(record)
        elapsed = time.perf_counter() - start
        results[version] = result
        s = result.scores
        if s is None or s.gold is None:
            print(f"FR{version}: no scores ({result.failures})", file=sys.stderr)
            return 1
        g = s.gold
        ns, major = g.always_ns, g.majority
        majority = f"{major.accuracy:.3f} ({major.label})"
        print(
            f"{'FR' + str(version):<8}{result.num_judged_pairs:>6}{len(result.relations):>8}"
            f"{s.num_true_atoms:>7}{s.factuality_score:>10.3f}{g.gold_factuality_score:>7.3f}"
            f"{g.true_positive:>4}{g.true_negative:>4}{g.false_positive:>4}{g.false_negative:>4}"
            f"{g.accuracy:>9.3f}{ns.accuracy:>10.3f}{majority:>12}{g.macro_f1:>7.3f}"
            f"{ns.macro_f1:>7.3f}{s.avg_entropy:>8.3f}{g.avg_brier:>7.3f}{elapsed:>8.2f}"
        )
    print()
    print("per atom: gold label and P(true) per version")
    cols = "".join(f"{'FR' + str(v):>7}" for v in args.versions)
    print(f"{'atom':<5}{'gold':>5}{cols}  text")
    for atom in record.atoms:
        probs = "".join(
            f"{results[v].scores.probabilities[atom.id]:>7.3f}"  # type: ignore[union-attr]
            for v in args.versions
        )
        text = atom.text if len(atom.text) <= 70 else atom.text[:69] + "…"
        print(f"{atom.id:<5}{atom.label or '-':>5}{probs}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
