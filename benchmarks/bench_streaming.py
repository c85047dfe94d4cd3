"""Throughput of manage_references() against a bare stream and an identity LCEL layer.

For a synthetic answer of N tokens with a citation about every 30 tokens (citations cut across
tokens), measured in one run:

* (a) the bare source stream,
* (b) the source piped into an identity ``RunnableGenerator`` (the per-chunk cost any LCEL
  layer pays),
* (c) the source wrapped by ``manage_references``.

Prints tokens/s, the ratios (c)/(b) and (c)/(a), the peak memory of (c) (tracemalloc, a
separate pass) and the scaling from 50k to 200k tokens, for ``str`` and ``AIMessageChunk``
sources. Usage: ``python benchmarks/bench_streaming.py [--sizes 50000,100000,200000]``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import Runnable, RunnableGenerator

from langchain_references import manage_references

WORDS = "the space needle is in seattle and it was built for the world fair of 1962"


def make_tokens(n: int, seed: int = 0) -> list[str]:
    """N tokens of text, with a citation about every 30 tokens split over 1 to 5 tokens."""
    rng = random.Random(seed)
    tokens: list[str] = []
    while len(tokens) < n:
        tokens.extend(" " + rng.choice(WORDS.split(" ")) for _ in range(rng.randint(25, 35)))
        cite = f"[{rng.randint(1, 9)}](id={rng.randint(1, 20)})"
        cuts = sorted(rng.sample(range(1, len(cite)), rng.randint(0, 4)))
        bounds = [0, *cuts, len(cite)]
        tokens.extend(cite[a:b] for a, b in itertools.pairwise(bounds))
    return tokens[:n]


def source(tokens: list[str], kind: str) -> Runnable[Any, Any]:
    """A runnable streaming the given tokens as ``str`` or ``AIMessageChunk``."""
    if kind == "str":

        def gen_str(_: Iterator[Any]) -> Iterator[str]:
            yield from tokens

        return RunnableGenerator(gen_str)
    chunks = [AIMessageChunk(content=t, id="run-1") for t in tokens]

    def gen_msg(_: Iterator[Any]) -> Iterator[AIMessageChunk]:
        yield from chunks

    return RunnableGenerator(gen_msg)


def identity(chunks: Iterator[Any]) -> Iterator[Any]:
    """The identity layer."""
    yield from chunks


def drain(run: Callable[[], Iterator[Any]]) -> float:
    """Time one full pass over a stream."""
    gc.collect()
    start = time.perf_counter()
    for _ in run():
        pass
    return time.perf_counter() - start


def peak_memory(run: Callable[[], Iterator[Any]]) -> int:
    """Peak traced memory (bytes) of one pass, the output not kept by the consumer."""
    gc.collect()
    tracemalloc.start()
    for _ in run():
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="50000,100000,200000")
    parser.add_argument("--repeat", type=int, default=5, help="best of N timings")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    docs = [Document(f"doc {i}", metadata={"source": f"https://e.org/{i % 12}"}) for i in range(20)]
    inp = {"documents": docs}

    header = (
        f"{'source':<14}{'tokens':>8}{'(a) bare tok/s':>16}{'(b) +identity':>15}"
        f"{'(c) wrapper':>13}{'c/b':>7}{'c/a':>7}{'peak MiB (a)':>14}{'peak MiB (c)':>14}"
    )
    print(header)
    print("-" * len(header))
    scaling: dict[str, list[tuple[int, float]]] = {}
    for kind in ("str", "AIMessageChunk"):
        for n in sizes:
            tokens = make_tokens(n)
            src = source(tokens, kind)
            layered = src | RunnableGenerator(identity)
            wrapped = manage_references(src)
            runs: dict[str, Callable[[], Iterator[Any]]] = {
                "a": lambda s=src: s.stream(inp),
                "b": lambda s=layered: s.stream(inp),
                "c": lambda s=wrapped: s.stream(inp),
            }
            # Interleave the three runs so that load on the machine hits them alike.
            times: dict[str, list[float]] = {k: [] for k in runs}
            for _ in range(args.repeat):
                for k, r in runs.items():
                    times[k].append(drain(r))
            best = {k: min(t) for k, t in times.items()}
            rate = {k: n / t for k, t in best.items()}
            peak_a = peak_memory(runs["a"]) / 2**20
            peak_c = peak_memory(runs["c"]) / 2**20
            scaling.setdefault(kind, []).append((n, best["c"]))
            print(
                f"{kind:<14}{n:>8}{rate['a']:>16,.0f}{rate['b']:>15,.0f}{rate['c']:>13,.0f}"
                f"{rate['c'] / rate['b']:>7.2f}{rate['c'] / rate['a']:>7.2f}"
                f"{peak_a:>14.1f}{peak_c:>14.1f}"
            )
    print()
    print("Scaling of the wrapper (time per token relative to the smallest size; 1.0 = linear)")
    for kind, rows in scaling.items():
        n0, t0 = rows[0]
        cells = ", ".join(f"{n}: {(t / n) / (t0 / n0):.2f}" for n, t in rows)
        print(f"  {kind:<14} {cells}")


if __name__ == "__main__":
    main()
