"""Print the mutation score per module from mutmut's results (``make mutation``).

mutmut writes one ``mutants/<path>.meta`` JSON file per mutated module, mapping each mutant's
name to the exit code of the tests run against it. This script turns those into one table
row per module, then lists the surviving mutants that ``.ci/mutation_equivalents.txt`` does
not explain (a line ``<mutant name>  <why it is equivalent>``). It exits 1 when a mutant
survives unexplained or was not checked, so ``make mutation`` fails until each survivor is
killed by a test or explained.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
EQUIVALENTS = ROOT / ".ci" / "mutation_equivalents.txt"

KILLED = {1, 3}
TIMEOUT = {36, 24, -24, 152, 255}
SURVIVED = {0}
NO_TESTS = {5, 33}


def _equivalents() -> dict[str, str]:
    explained: dict[str, str] = {}
    for number, line in enumerate(EQUIVALENTS.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, why = line.partition(" ")
        if not why.strip():
            sys.exit(f"{EQUIVALENTS.name}:{number}: {name} has no explanation")
        explained[name] = why.strip()
    return explained


def main() -> int:
    """Print the table and the unexplained survivors; return the exit status."""
    metas = sorted(MUTANTS.glob("langchain_references/**/*.py.meta"))
    if not metas:
        print("no mutmut results under mutants/: run `make mutation`", file=sys.stderr)
        return 2
    explained = _equivalents()
    rows = []
    unexplained: list[str] = []
    unchecked = 0
    for meta in metas:
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        module = meta.relative_to(MUTANTS).as_posix().removesuffix(".meta")
        killed = sum(code in KILLED for code in codes.values())
        timeout = sum(code in TIMEOUT for code in codes.values())
        no_tests = [name for name, code in codes.items() if code in NO_TESTS]
        survived = [name for name, code in codes.items() if code in SURVIVED]
        not_checked = sum(code is None for code in codes.values())
        other = len(codes) - killed - timeout - len(no_tests) - len(survived) - not_checked
        equivalent = [name for name in survived + no_tests if name in explained]
        left = [name for name in survived + no_tests if name not in explained]
        unexplained += left
        unchecked += not_checked
        judged = killed + timeout + len(survived) + len(no_tests) - len(equivalent)
        score = (killed + timeout) / judged if judged else None
        rows.append(
            (
                module,
                len(codes),
                killed,
                timeout,
                len(survived) + len(no_tests),
                len(equivalent),
                not_checked + other,
                score,
            )
        )
    header = (
        "module",
        "mutants",
        "killed",
        "timeout",
        "survived",
        "equivalent",
        "unchecked",
        "score",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for module, *numbers, score in rows:
        cells = [module, *map(str, numbers), "n/a" if score is None else f"{score:.1%}"]
        print("| " + " | ".join(cells) + " |")
    totals = [sum(row[i] for row in rows) for i in range(1, 7)]
    judged = totals[1] + totals[2] + totals[3] - totals[4]
    total = f"{(totals[1] + totals[2]) / judged:.1%}" if judged else "n/a"
    print("| **all** | " + " | ".join(map(str, totals)) + f" | {total} |")
    stale = sorted(set(explained) - _all_names(metas))
    if stale:
        print(
            f"\n{len(stale)} explained mutants no longer exist (remove them):", *stale, sep="\n  "
        )
    if unexplained:
        print(
            f"\n{len(unexplained)} surviving mutants neither killed nor explained:",
            *unexplained,
            sep="\n  ",
        )
    if unchecked:
        print(f"\n{unchecked} mutants not checked yet")
    return 1 if unexplained or unchecked or stale else 0


def _all_names(metas: list[Path]) -> set[str]:
    names: set[str] = set()
    for meta in metas:
        names.update(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
    return names


if __name__ == "__main__":
    sys.exit(main())
