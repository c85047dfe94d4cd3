"""Scaling of the code-aware citation parser on hostile answers (time per character).

Run: ``python benchmarks/bench_code.py``. Each answer is parsed by a
:class:`~langchain_references.core._code.CodeAwareParser` (the one the rewriter and the citation
check use), whole and as a stream of 4-character tokens. The answers are long runs of what
makes the splitter work: a fence of short lines holding markers, code spans alternating with
prose, and a code span that never closes holding markers. Prints the seconds and the time per
character relative to the smallest size (1.0 = linear).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from langchain_references.core._code import CodeAwareParser

ANSWERS: dict[str, Callable[[int], str]] = {
    "fence of short lines": lambda n: "```\n" + "x [1](id=1)\n" * n,
    "spans and prose": lambda n: "x " + "`a` b [1](id=1) " * n,
    "spans, no marker": lambda n: "x " + "`a` b " * n,
    "a span never closed": lambda n: "`" + "a [1](id=1) " * n,
}


def parse(pieces: list[str]) -> float:
    """Seconds to parse ``pieces`` as one stream."""
    start = time.perf_counter()
    parser = CodeAwareParser()
    for piece in pieces:
        parser.feed(piece)
    parser.close()
    return time.perf_counter() - start


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--sizes", default="5000,10000,20000,40000")
    cli.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = cli.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"{'answer':<22}{'fed':<8}"
        + "".join(f"{n:>12,}" for n in sizes)
        + "   per char vs smallest"
    )
    for name, make in ANSWERS.items():
        for fed in ("whole", "tokens"):
            seconds, per_char = [], []
            for n in sizes:
                text = make(n)
                pieces = (
                    [text] if fed == "whole" else [text[i : i + 4] for i in range(0, len(text), 4)]
                )
                best = min(parse(pieces) for _ in range(args.repeat))
                seconds.append(best)
                per_char.append(best / len(text))
            ratios = ", ".join(f"{p / per_char[0]:.2f}" for p in per_char)
            print(f"{name:<22}{fed:<8}" + "".join(f"{s:>11.3f}s" for s in seconds) + f"   {ratios}")


if __name__ == "__main__":
    main()
