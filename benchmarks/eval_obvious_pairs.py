"""The offline judge on obvious pairs: entity swaps, comparatives, years, numbers, negations...

Reads the labelled (statement, passage) pairs of
``tests/unit_tests/judges/data/obvious_pairs.jsonl`` (kinds: entity swaps, comparatives,
superlatives, years, numbers, negations, directions, plain support, paraphrase, unrelated,
topical-but-silent; the ``source`` field says where each pair comes from) and prints, per kind,
the number of pairs, the exact-label accuracy and the *false entails* (a pair whose gold label
is not *entails*, judged *entails*), for the development pairs, the held-out ones
(``split`` = ``heldout``: not looked at while the rules were written) and all of them.

The judge is :class:`~langchain_references.judges.HeuristicJudge` with MiniLM embeddings (the
offline default, ``--embeddings minilm``) or lexical only (``none``). ``--before REV`` adds the
judge of a git revision (loaded as ``eval_polarity.py`` does), decided on the same cosines.

    .venv/bin/python benchmarks/eval_obvious_pairs.py
    .venv/bin/python benchmarks/eval_obvious_pairs.py --embeddings none,minilm --before 8d7c66f
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_references.judges.base import Judgement, Label
from langchain_references.judges.heuristic import HeuristicJudge

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / "tests" / "unit_tests" / "judges" / "data" / "obvious_pairs.jsonl"
KINDS = (
    "entity_swap",
    "comparative",
    "superlative",
    "year",
    "number",
    "negation",
    "direction",
    "support",
    "paraphrase",
    "unrelated",
    "topical_silent",
)

Decide = Callable[[str, str, float | None], Judgement]


@dataclass(frozen=True)
class Pair:
    """One labelled pair of the file."""

    id: str
    kind: str
    statement: str
    passage: str
    label: Label
    split: str


def load_pairs(path: Path) -> list[Pair]:
    """The pairs of a JSONL file (``id, kind, statement, passage, label, split, source``)."""
    pairs = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                pairs.append(
                    Pair(
                        row["id"],
                        row["kind"],
                        row["statement"],
                        row["passage"],
                        Label(row["label"]),
                        row["split"],
                    )
                )
    return pairs


@dataclass(frozen=True)
class Cell:
    """Counts of one kind: pairs, exact labels, false entails."""

    pairs: int
    right: int
    false_entails: int

    def __str__(self) -> str:
        if not self.pairs:
            return "–"
        return f"{self.pairs} / {self.right / self.pairs:.0%} / {self.false_entails}"


def score(pairs: Sequence[Pair], labels: Sequence[Label]) -> Cell:
    """Exact labels and false entails of ``labels`` against the pairs' gold labels."""
    return Cell(
        pairs=len(pairs),
        right=sum(p.label is got for p, got in zip(pairs, labels, strict=True)),
        false_entails=sum(
            p.label is not Label.ENTAILS and got is Label.ENTAILS
            for p, got in zip(pairs, labels, strict=True)
        ),
    )


def table(pairs: Sequence[Pair], judges: dict[str, list[Label]]) -> list[str]:
    """The markdown rows: per kind and in total, for each judge: dev, held out and all."""
    names = list(judges)
    head = "| kind | " + " | ".join(f"{n}: dev | {n}: held out | {n}: all" for n in names)
    lines = [head + " |", "|---" * (1 + 3 * len(names)) + "|"]
    for kind in (*KINDS, "total"):
        cells = []
        for name in names:
            for split in ("dev", "heldout", None):
                chosen = [
                    (p, got)
                    for p, got in zip(pairs, judges[name], strict=True)
                    if (kind == "total" or p.kind == kind) and (split is None or p.split == split)
                ]
                cells.append(str(score([p for p, _ in chosen], [g for _, g in chosen])))
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embeddings", default="minilm", help="none, minilm or none,minilm")
    parser.add_argument("--before", default=None, help="git revision of a BEFORE judge")
    parser.add_argument("--show", action="store_true", help="list the pairs judged wrong")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"data file not found: {args.data}", file=sys.stderr)
        return 2
    pairs = load_pairs(args.data)
    old: Any = None
    if args.before:
        from eval_polarity import load_heuristic

        old = load_heuristic(args.before)
    print(f"# Obvious pairs: {args.data.name}, {len(pairs)} pairs\n")
    print("Cells: pairs / exact-label accuracy / false entails (gold not entails, judged entails).")
    for mode in [m.strip() for m in args.embeddings.split(",") if m.strip()]:
        embeddings = None
        if mode == "minilm":
            from langchain_references.services.embeddings import MiniLMEmbeddings

            embeddings = MiniLMEmbeddings()
        elif mode != "none":
            raise SystemExit(f"--embeddings takes none or minilm, not {mode!r}")
        after = HeuristicJudge(embeddings)
        texts = [(p.statement, p.passage) for p in pairs]
        cosines = after.similarities(texts)
        judges: dict[str, Decide] = {}
        if old is not None:
            judges[f"before ({args.before})"] = old.HeuristicJudge(embeddings).decide
        judges["after" if old is not None else "judge"] = after.decide
        labels = {
            name: [decide(s, p, c).label for (s, p), c in zip(texts, cosines, strict=True)]
            for name, decide in judges.items()
        }
        print(f"\n## embeddings: {mode}\n")
        print("\n".join(table(pairs, labels)))
        if args.show:
            final = labels[list(labels)[-1]]
            print()
            for p, got, c in zip(pairs, final, cosines, strict=True):
                if got is not p.label:
                    print(f"- {p.id} [{p.split}] gold {p.label.value}, got {got.value}: ")
                    print(f"    S: {p.statement}\n    P: {p.passage[:160]}")
                    print(f"    {judges[list(judges)[-1]](p.statement, p.passage, c).rationale}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
