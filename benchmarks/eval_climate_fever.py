"""Evaluate a judge and the verdict aggregation on Climate-FEVER (or any file in its format).

(a) pair level, 3-way: SUPPORTS -> entails, REFUTES -> contradicts, NOT_ENOUGH_INFO -> unknown;
(b) claim level: the five judgements of a claim (rank = evidence position) aggregated into a
    verdict (DISPUTED = strong support and refutation both present), against claim_label.

Judges: ``heuristic`` (offline, lexical; add ``--embeddings minilm`` for MiniLM cosine), ``gold``
(the gold evidence labels: measures the aggregation alone), ``llm:<provider:model>`` (needs the
provider's LangChain package and API key), ``nli[:<hub repo>]`` (downloads an ONNX
cross-encoder from the Hugging Face Hub).

``--tune`` grid-searches the heuristic's relevance threshold, embedding weight and cues for the
best pair-level macro-F1 on the *first* half of the claims, then its contradiction threshold
(in steps of 0.05 from the relevance threshold), and reports the best setting on the *second*
half (the defaults of HeuristicJudge come from this run).

Reference point: a FEVER-trained entailment model reaches 38.8 % claim-label accuracy on
Climate-FEVER (Diggelmann et al., 2020).

    .venv/bin/python benchmarks/eval_climate_fever.py --judge gold
    .venv/bin/python benchmarks/eval_climate_fever.py --judge heuristic --split second
    .venv/bin/python benchmarks/eval_climate_fever.py --judge heuristic --embeddings minilm --tune
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from calibrate_heuristic import expected_calibration_error
from climate_fever import (
    CLAIM_LABELS,
    EVIDENCE_TO_LABEL,
    PAIR_LABELS,
    ClaimRecord,
    ConfusionMatrix,
    EvaluationReport,
    GoldLabelJudge,
    evaluate,
    load_climate_fever,
    split_claims,
)

from langchain_references.factcheck.verdict import WeightedVoteAggregator
from langchain_references.judges import Judge
from langchain_references.judges.heuristic import CUES, HeuristicJudge, lexical_features

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "climate-fever-dev.jsonl"
PUBLISHED_CLAIM_ACCURACY = 0.388


def make_embeddings(name: str):  # type: ignore[no-untyped-def]
    if name == "none":
        return None
    if name == "minilm":
        from langchain_references.services.embeddings import MiniLMEmbeddings

        return MiniLMEmbeddings()
    raise SystemExit(f"unknown --embeddings {name!r}")


def make_judge(spec: str, claims: Sequence[ClaimRecord], embeddings_name: str) -> Judge:
    if spec == "gold":
        return GoldLabelJudge(claims)
    if spec == "heuristic":
        return HeuristicJudge(make_embeddings(embeddings_name))
    if spec.startswith("llm:"):
        from langchain_references.judges import LLMJudge

        model = spec.removeprefix("llm:")
        try:
            init_chat_model = importlib.import_module("langchain.chat_models").init_chat_model
        except ImportError:
            provider, _, name = model.partition(":")
            if provider != "openai":
                raise SystemExit("llm:<provider:model> needs `pip install langchain`") from None
            from langchain_openai import ChatOpenAI

            return LLMJudge(ChatOpenAI(model=name, temperature=0))
        return LLMJudge(init_chat_model(model, temperature=0))
    if spec == "nli" or spec.startswith("nli:"):
        from langchain_references.judges import CrossEncoderNLIJudge

        repo = spec.removeprefix("nli").removeprefix(":")
        return (
            CrossEncoderNLIJudge.from_pretrained(repo)
            if repo
            else CrossEncoderNLIJudge.from_pretrained()
        )
    raise SystemExit(f"unknown --judge {spec!r}")


@dataclass(frozen=True)
class MajorityBaselines:
    """Always the most frequent gold label, for pairs and for claims (same labels)."""

    pair_label: str
    pair_accuracy: float
    pair_macro_f1: float
    claim_label: str
    claim_accuracy: float
    claim_macro_f1: float


def majority_baselines(claims: Sequence[ClaimRecord]) -> MajorityBaselines:
    """Accuracy and macro-F1 of predicting the majority label, on ``claims``' own labels."""
    pairs = [EVIDENCE_TO_LABEL[e.evidence_label].value for c in claims for e in c.evidences]
    pair_major, _ = Counter(pairs).most_common(1)[0]
    pair_cm = ConfusionMatrix.from_pairs(pairs, [pair_major] * len(pairs), PAIR_LABELS)
    gold = [c.claim_label for c in claims]
    claim_major, _ = Counter(gold).most_common(1)[0]
    claim_cm = ConfusionMatrix.from_pairs(gold, [claim_major] * len(gold), CLAIM_LABELS)
    return MajorityBaselines(
        pair_major,
        pair_cm.accuracy,
        pair_cm.macro_f1,
        claim_major,
        claim_cm.accuracy,
        claim_cm.macro_f1,
    )


def print_report(
    title: str, report: EvaluationReport, seconds: float, claims: Sequence[ClaimRecord]
) -> None:
    n_claims = len(claims)
    base = majority_baselines(claims)
    print(f"\n## {title}\n")
    print(
        f"{n_claims} claims, {report.pairs.total} pairs, {report.failed_judgements} failed "
        f"judgements, {seconds:.1f} s\n"
    )
    print(
        f"**Pairs (3-way)**: accuracy {report.pairs.accuracy:.3f} "
        f"(always {base.pair_label!r}: {base.pair_accuracy:.3f}), "
        f"macro-F1 {report.pairs.macro_f1:.3f} (always {base.pair_label!r}: "
        f"{base.pair_macro_f1:.3f})\n"
    )
    print(report.pairs.to_markdown())
    confidences = [j.confidence for js in report.judgements for j in js]
    correct = [
        j.label is EVIDENCE_TO_LABEL[ev.evidence_label]
        for claim, js in zip(claims, report.judgements, strict=True)
        for ev, j in zip(claim.evidences, js, strict=True)
    ]
    ece = expected_calibration_error(confidences, correct)
    print(
        f"\n**Pair confidence calibration**: ECE {ece:.3f} "
        "(10 bins; see benchmarks/calibrate_heuristic.py)"
    )
    print(
        f"\n**Claims**: accuracy {report.claims.accuracy:.3f} "
        f"(always {base.claim_label}: {base.claim_accuracy:.3f}), "
        f"macro-F1 {report.claims.macro_f1:.3f} (always {base.claim_label}: "
        f"{base.claim_macro_f1:.3f}) "
        f"(published FEVER-trained entailment model: {PUBLISHED_CLAIM_ACCURACY:.1%})\n"
    )
    print(report.claims.to_markdown())


def tune(claims: Sequence[ClaimRecord], embeddings_name: str, agg: WeightedVoteAggregator) -> None:
    """Grid search on the first half, report the best setting on the second half."""
    first, second = split_claims(claims, "first"), split_claims(claims, "second")
    embeddings = make_embeddings(embeddings_name)
    probe = HeuristicJudge(embeddings)
    start = time.perf_counter()
    cache = {}
    for subset in (first, second):
        pairs = [(c.claim, e.evidence) for c in subset for e in c.evidences]
        cosines = probe.similarities(pairs)
        feats = [lexical_features(s, p) for s, p in pairs]
        cache[id(subset)] = list(zip(feats, cosines, strict=True))
    print(f"features of {len(claims)} claims in {time.perf_counter() - start:.1f} s")

    def run(subset: Sequence[ClaimRecord], judge: HeuristicJudge) -> EvaluationReport:
        decided = iter([judge.decide_features(f, cos) for f, cos in cache[id(subset)]])
        grouped = [[next(decided) for _ in c.evidences] for c in subset]
        return evaluate(judge, subset, agg, judgements=grouped)

    weights = (0.25, 0.5, 0.75, 1.0) if embeddings is not None else (0.0,)
    cue_sets = [combo for k in range(len(CUES) + 1) for combo in itertools.combinations(CUES, k)]
    results = []
    for w in weights:
        for t in [x / 100 for x in range(5, 81)]:
            for cues in cue_sets:
                judge = HeuristicJudge(
                    embeddings, relevance_threshold=t, embedding_weight=w, cues=cues
                )
                report = run(first, judge)
                results.append((report.pairs.macro_f1, report.claims.accuracy, w, t, cues))
    results.sort(key=lambda r: (r[0], r[1]), reverse=True)
    base = majority_baselines(first)
    print(
        "\n## Tuning on the first half (pair macro-F1, claim accuracy, weight, threshold, cues)\n"
    )
    print(
        f"majority baselines on the first half: pair macro-F1 {base.pair_macro_f1:.3f} "
        f"(always {base.pair_label!r}), claim accuracy {base.claim_accuracy:.3f} "
        f"(always {base.claim_label})\n"
    )
    for r in results[:8]:
        print(f"- {r[0]:.3f} {r[1]:.3f} w={r[2]} t={r[3]:.2f} cues={r[4]}")
    _, _, w, t, cues = results[0]
    # Then the contradiction threshold (a reversed polarity is contradicts only when the rest
    # of the statement is this relevant; below t it is the same as t), in steps of 0.05: finer
    # differences are a pair or two of the half's ~200 contradictions.
    by_ct = []
    for ct in [round(t + x / 20, 2) for x in range(int((0.8 - t) * 20) + 1)]:
        judge = HeuristicJudge(
            embeddings,
            relevance_threshold=t,
            contradiction_threshold=ct,
            embedding_weight=w,
            cues=cues,
        )
        report = run(first, judge)
        by_ct.append((report.pairs.macro_f1, report.claims.accuracy, ct))
    by_ct.sort(key=lambda r: (r[0], r[1]), reverse=True)
    print("\n## Contradiction threshold (pair macro-F1, claim accuracy, threshold)\n")
    for r in by_ct[:5]:
        print(f"- {r[0]:.3f} {r[1]:.3f} ct={r[2]:.2f}")
    ct = by_ct[0][2]
    best = HeuristicJudge(
        embeddings,
        relevance_threshold=t,
        contradiction_threshold=ct,
        embedding_weight=w,
        cues=cues,
    )
    print_report(
        f"Best setting on the held-out second half (w={w}, t={t:.2f}, ct={ct:.2f}, cues={cues})",
        run(second, best),
        0.0,
        second,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge", default="heuristic", help="heuristic | gold | llm:<p:m> | nli")
    parser.add_argument("--embeddings", default="none", choices=["none", "minilm"])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=None, help="first N claims of the file")
    parser.add_argument("--split", default="all", choices=["all", "first", "second"])
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument("--threshold", type=float, default=0.3)
    parser.add_argument("--exponent", type=float, default=1.0)
    parser.add_argument("--count-unknown", action="store_true")
    parser.add_argument(
        "--disputed-threshold",
        type=float,
        default=0.5,
        help="confidence for a DISPUTED verdict (negative: never disputed)",
    )
    parser.add_argument("--tune", action="store_true", help="tune the heuristic (see above)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    if not args.data.is_file():
        print(f"data file not found: {args.data}", file=sys.stderr)
        return 2
    claims = load_climate_fever(args.data, limit=args.limit)
    agg = WeightedVoteAggregator(
        threshold=args.threshold,
        exponent=args.exponent,
        count_unknown=args.count_unknown,
        disputed_threshold=args.disputed_threshold if args.disputed_threshold >= 0 else None,
    )
    print(f"# Climate-FEVER evaluation: {args.data.name}\n")
    print(f"aggregator: {agg}")
    if args.tune:
        tune(claims, args.embeddings, agg)
        return 0

    claims = split_claims(claims, args.split)
    base = majority_baselines(claims)
    print(
        f"majority baselines on split {args.split!r}: pairs all {base.pair_label!r} accuracy "
        f"{base.pair_accuracy:.3f} macro-F1 {base.pair_macro_f1:.3f}; claims all "
        f"{base.claim_label} accuracy {base.claim_accuracy:.3f} macro-F1 "
        f"{base.claim_macro_f1:.3f}"
    )
    judge = make_judge(args.judge, claims, args.embeddings)
    start = time.perf_counter()
    report = evaluate(judge, claims, agg, config={"max_concurrency": args.max_concurrency})
    name = args.judge + (f" + {args.embeddings}" if args.judge == "heuristic" else "")
    print_report(f"{name}, split {args.split}", report, time.perf_counter() - start, claims)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
