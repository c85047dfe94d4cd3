"""Does the offline judge respect polarity? Reversed Climate-FEVER claims, before and after.

Every SUPPORTS pair of the Climate-FEVER data is judged twice more: with its claim reversed by
a negation ("is" -> "is not") and, when the claim has a direction word, with that word swapped
for its opposite ("grown" -> "shrunk", "more" -> "less"); see ``polarity_reversal.py``
(deterministic, ``--seed``). A judge that respects polarity does not call a reversed claim
*entails*. The same run also scores the unreversed data, so that respecting polarity is not
bought with the rest: the SUPPORTS pairs still judged *entails*, the pair macro-F1 and the claim
accuracy (weighted vote, as ``eval_climate_fever.py``) beside the majority baseline.

BEFORE is the heuristic judge of an earlier revision (``--before``; by default the revision
before the polarity check was added), loaded from git into a module of its own with the
``_words.py`` and ``_polarity.py`` of that revision; AFTER is the current one. With
``--embeddings minilm`` the texts are embedded once and both judges decide on the same cosines.
The defaults of the judge were tuned on the *first* half of the claims (the calibration half);
the *second* half is held out.

    .venv/bin/python benchmarks/eval_polarity.py                      # lexical and MiniLM
    .venv/bin/python benchmarks/eval_polarity.py --embeddings none --before main
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _old_code import today_imports
from climate_fever import (
    EVIDENCE_TO_LABEL,
    PAIR_LABELS,
    ClaimRecord,
    ConfusionMatrix,
    evaluate,
    load_climate_fever,
    split_claims,
)
from eval_climate_fever import majority_baselines
from polarity_reversal import ReversedPair, reversed_pairs

from langchain_references.factcheck.verdict import WeightedVoteAggregator
from langchain_references.judges.base import Judgement, Label
from langchain_references.judges.heuristic import HeuristicJudge

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "climate-fever-dev.jsonl"
HEURISTIC = "langchain_references/judges/heuristic.py"
POLARITY = "langchain_references/judges/_polarity.py"
#: Helpers of the judge loaded from the BEFORE revision with it, in import order (the word
#: helpers moved from judges/ to the package's text rules; a revision has one of the two).
HELPERS = (
    "langchain_references/judges/_words.py",
    "langchain_references/text/words.py",
    POLARITY,
    "langchain_references/judges/_coverage.py",
)

Decide = Callable[[str, str, float | None], Judgement]


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def before_revision(spec: str) -> str:
    """The revision whose judge is BEFORE: ``spec``, or for ``auto`` the parent of the commit
    that added the polarity check (``HEAD`` while it is not committed)."""
    if spec != "auto":
        return spec
    added = _git("log", "--format=%H", "--diff-filter=A", "-1", "--", POLARITY)
    return f"{added}^" if added else "HEAD"


def load_heuristic(revision: str) -> types.ModuleType:
    """The judges/heuristic.py of ``revision`` as a module of its own.

    Its helpers ``text/words.py`` (once ``judges/_words.py``) and ``judges/_polarity.py`` are loaded
    from ``revision`` too (when they exist there), so that BEFORE is the whole judge of that
    revision; its other imports resolve to the current package."""
    tag = revision.replace("^", "_parent").replace("~", "_back")
    renames: dict[str, str] = {}
    module = types.ModuleType("unused")
    for path in (*HELPERS, HEURISTIC):
        done = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{revision}:{path}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            if path == HEURISTIC:
                raise SystemExit(f"git show {revision}:{path} failed: {done.stderr.strip()}")
            continue  # not there yet: the current one is used
        source = today_imports(done.stdout)  # modules moved since: today's, at today's path
        for current, alias in renames.items():
            source = source.replace(current, alias)
        name = path.removesuffix(".py").replace("/", ".")
        alias = f"{Path(path).stem.lstrip('_')}_at_{tag}"
        module = types.ModuleType(alias)
        module.__file__ = f"{revision}:{path}"
        sys.modules[alias] = module  # dataclasses look their module up
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        renames[name] = alias
    return module


@dataclass(frozen=True)
class Row:
    """One judge on one half: the columns of the table."""

    half: str
    embeddings: str
    judge: str
    reversed_entails: float
    swap_entails: float
    negation_entails: float
    stay_entails: float
    reversed_contradicts: float
    supports_entails: float
    pair_macro_f1: float
    claim_accuracy: float


def score(
    name: str,
    judge: HeuristicJudge,
    half: str,
    embeddings: str,
    claims: Sequence[ClaimRecord],
    reversals: Sequence[ReversedPair],
    cosines: dict[tuple[str, str], float | None],
) -> Row:
    """Judge the half's pairs and its reversed pairs with ``judge.decide`` on ``cosines``."""
    decide: Decide = judge.decide
    grouped = [
        [decide(c.claim, e.evidence, cosines.get((c.claim, e.evidence))) for e in c.evidences]
        for c in claims
    ]
    aggregator = WeightedVoteAggregator(threshold=0.3, disputed_threshold=0.5)
    report = evaluate(judge, claims, aggregator, judgements=grouped)  # judge not called
    supports = [
        j.label
        for c, js in zip(claims, grouped, strict=True)
        for e, j in zip(c.evidences, js, strict=True)
        if e.evidence_label == "SUPPORTS"
    ]
    original = [
        decide(r.original, r.evidence, cosines.get((r.original, r.evidence))) for r in reversals
    ]
    flipped = [
        decide(r.reversal.text, r.evidence, cosines.get((r.reversal.text, r.evidence)))
        for r in reversals
    ]

    def share(labels: Sequence[Label], label: Label = Label.ENTAILS) -> float:
        return sum(x is label for x in labels) / len(labels) if labels else 0.0

    labels = [j.label for j in flipped]
    by_kind = {
        kind: [j.label for j, r in zip(flipped, reversals, strict=True) if r.reversal.kind == kind]
        for kind in ("swap", "negation")
    }
    stayed = [b.label for a, b in zip(original, flipped, strict=True) if a.label is Label.ENTAILS]
    pair_matrix = ConfusionMatrix.from_pairs(
        [EVIDENCE_TO_LABEL[e.evidence_label].value for c in claims for e in c.evidences],
        [j.label.value for js in grouped for j in js],
        PAIR_LABELS,
    )
    return Row(
        half=half,
        embeddings=embeddings,
        judge=name,
        reversed_entails=share(labels),
        swap_entails=share(by_kind["swap"]),
        negation_entails=share(by_kind["negation"]),
        stay_entails=share(stayed),
        reversed_contradicts=share(labels, Label.CONTRADICTS),
        supports_entails=share(supports),
        pair_macro_f1=pair_matrix.macro_f1,
        claim_accuracy=report.claims.accuracy,
    )


def _cosines(
    judge: HeuristicJudge, pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], float | None]:
    unique = list(dict.fromkeys(pairs))
    return dict(zip(unique, judge.similarities(unique), strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--before", default="auto", help="git revision of the BEFORE judge (default: auto)"
    )
    parser.add_argument("--embeddings", default="none,minilm", help="none, minilm or both")
    parser.add_argument("--seed", type=int, default=0, help="seed of the reversals")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not args.data.is_file():
        print(f"data file not found: {args.data}", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.embeddings.split(",") if m.strip()]
    if not modes or set(modes) - {"none", "minilm"}:
        raise SystemExit(f"--embeddings takes none, minilm or both, not {args.embeddings!r}")
    revision = before_revision(args.before)
    old: Any = load_heuristic(revision)
    claims = load_climate_fever(args.data)
    halves = {
        "first (calibration)": split_claims(claims, "first"),
        "second (held out)": split_claims(claims, "second"),
    }
    reversals = {half: reversed_pairs(subset, seed=args.seed) for half, subset in halves.items()}
    started = time.perf_counter()
    rows: list[Row] = []
    for mode in modes:
        embeddings = None
        if mode == "minilm":
            from langchain_references.services.embeddings import MiniLMEmbeddings

            embeddings = MiniLMEmbeddings()
        after = HeuristicJudge(embeddings)
        before = old.HeuristicJudge(embeddings)
        pairs = [
            pair
            for half, subset in halves.items()
            for pair in [(c.claim, e.evidence) for c in subset for e in c.evidences]
            + [(r.reversal.text, r.evidence) for r in reversals[half]]
        ]
        cosines = _cosines(after, pairs) if embeddings is not None else {}
        for half, subset in halves.items():
            for name, judge in (("before", before), ("after", after)):
                rows.append(score(name, judge, half, mode, subset, reversals[half], cosines))

    kinds = {
        half: {k: sum(r.reversal.kind == k for r in rs) for k in ("swap", "negation")}
        for half, rs in reversals.items()
    }
    print(f"# Polarity of the offline heuristic judge: {args.data.name}\n")
    print(
        f"BEFORE: heuristic judge at `{revision}`; AFTER: this checkout. Reversals: seed "
        f"{args.seed}; "
        + "; ".join(
            f"{half}: {len(halves[half])} claims, {sum(k.values())} reversed SUPPORTS pairs "
            f"({k['negation']} negated, {k['swap']} swapped)"
            for half, k in kinds.items()
        )
        + f". {time.perf_counter() - started:.0f} s.\n"
    )
    base = {half: majority_baselines(subset) for half, subset in halves.items()}
    print(
        "| half | embeddings | judge | reversed → entails (target ≤ 5 %) | swapped → entails "
        "| negated → entails | still entails after reversal | reversed → contradicts "
        "| SUPPORTS → entails (target ≥ 50 %) | pair macro-F1 (majority) "
        "| claim accuracy (majority) |"
    )
    print("|---" * 11 + "|")
    for row in rows:
        b = base[row.half]
        print(
            f"| {row.half} | {row.embeddings} | {row.judge} | {row.reversed_entails:.1%} "
            f"| {row.swap_entails:.1%} | {row.negation_entails:.1%} | {row.stay_entails:.1%} "
            f"| {row.reversed_contradicts:.1%} | {row.supports_entails:.1%} "
            f"| {row.pair_macro_f1:.3f} ({b.pair_macro_f1:.3f}) "
            f"| {row.claim_accuracy:.3f} ({b.claim_accuracy:.3f}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
