"""Throughput of manage_references() against a bare stream and two do-nothing baselines.

For a synthetic answer of N tokens with a citation about every 30 tokens (citations cut across
tokens), measured in one run, the runs interleaved:

* (a) the bare source stream (one traced layer: the source's own);
* (b) the source piped into an identity ``RunnableGenerator``: the per-chunk cost any LCEL
  layer pays (a sequence and a generator: two traced layers more than (a));
* (d) the source wrapped by :class:`DoNothing`, a runnable built exactly like
  ``ReferencedRunnable`` (same ``Runnable`` methods, same ``_transform_stream_with_config``
  / ``_call_with_config`` callback and tracing path, same input merging) that passes the
  chunks through untouched: one traced layer more than (a), like (c). It is the floor of any
  wrapper of this shape;
* (c) the source wrapped by ``manage_references`` with ``MarkdownReferenceStyle(
  deep_links=False)``;
* (c0) the same, with ``manage_references`` as it was at commit ``--before`` (the rewriter,
  parser and manager modules of that commit, loaded from git as separate modules; the
  column is left out when git or the commit is not available);
* (cd) the source wrapped by ``manage_references`` with its default style, Markdown with deep
  links: each citation then quotes the cited chunk's sentence closest to the citing one.

Prints the median tokens/s of each run over ``--repeat`` rounds and the ratios c/b, c/d, c0/d,
cd/d (median of the per-round ratios, with their range), the peak memory of (c) (tracemalloc, a
separate pass) and the scaling from the smallest to the largest size, for ``str`` and
``AIMessageChunk`` sources.

    python benchmarks/bench_streaming.py [--sizes 50000,100000,200000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
import types
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import Runnable, RunnableConfig, RunnableGenerator
from langchain_core.runnables.config import ensure_config

from langchain_references import MarkdownReferenceStyle, manage_references

REPO = Path(__file__).resolve().parents[1]
#: The last commit before the per-chunk path was reworked (issue 11).
BEFORE = "0fbb6db037daa020b9eee8e4c4503ea0a48bd2d7"
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


async def _once(value: Any) -> AsyncIterator[Any]:
    yield value


def _merge(final: Any, chunk: Any) -> Any:
    if final is None:
        return chunk
    try:
        return final + chunk
    except TypeError:
        return chunk


class DoNothing(Runnable[Mapping[str, Any], Any]):
    """A wrapper of ``ReferencedRunnable``'s shape that passes the chunks through untouched.

    The same overrides (``invoke``, ``ainvoke``, ``transform``, ``atransform``, ``stream``,
    ``astream``) going through the same ``Runnable`` helpers: one traced run, a child config
    and callbacks for the wrapped runnable, the input chunks merged before it starts.
    """

    def __init__(self, bound: Runnable[Any, Any]) -> None:
        self.bound = bound
        self.name = f"DoNothing[{bound.get_name()}]"

    def _invoke(
        self,
        input: Mapping[str, Any],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        return self.bound.invoke(input, config)

    async def _ainvoke(
        self,
        input: Mapping[str, Any],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        return await self.bound.ainvoke(input, config)

    def _transform(
        self,
        inputs: Iterator[Mapping[str, Any]],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[Any]:
        input = None
        for item in inputs:
            input = _merge(input, item)
        yield from self.bound.stream(input, config)

    async def _atransform(
        self,
        inputs: AsyncIterator[Mapping[str, Any]],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[Any]:
        input = None
        async for item in inputs:
            input = _merge(input, item)
        async for chunk in self.bound.astream(input, config):
            yield chunk

    def invoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        return self._call_with_config(self._invoke, input, ensure_config(config), **kwargs)

    async def ainvoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        return await self._acall_with_config(self._ainvoke, input, ensure_config(config), **kwargs)

    def transform(
        self,
        input: Iterator[Mapping[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        return self._transform_stream_with_config(input, self._transform, config, **kwargs)

    def stream(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        return self.transform(iter((input,)), config, **kwargs)

    def atransform(
        self,
        input: AsyncIterator[Mapping[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        return self._atransform_stream_with_config(input, self._atransform, config, **kwargs)

    def astream(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return self.atransform(_once(input), config, **kwargs)


def load_before(rev: str) -> Callable[..., Runnable[Any, Any]] | None:
    """``manage_references`` as of commit ``rev`` (its parser, rewriter and manager), or None.

    The three modules are read with ``git show`` and executed as ``_before_*`` modules, each
    importing the others' old versions; every other module is today's.
    """
    names = ("_parser", "rewriter", "manager")
    loaded: list[str] = []
    module = None
    for short in names:
        try:
            code = subprocess.run(
                ["git", "show", f"{rev}:langchain_references/{short}.py"],
                capture_output=True,
                text=True,
                check=True,
                cwd=REPO,
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        for done in loaded:
            code = code.replace(
                f"from langchain_references.{done} import", f"from _before_{done} import"
            )
        module = types.ModuleType(f"_before_{short}")
        sys.modules[module.__name__] = module
        exec(compile(code, f"{rev[:7]}:{short}.py", "exec"), module.__dict__)
        loaded.append(short)
    return None if module is None else module.manage_references


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


def ratio(times: dict[str, list[float]], num: str, den: str) -> str:
    """Throughput ratio num/den: median of the per-round ratios and their range."""
    per_round = [d / n for n, d in zip(times[num], times[den], strict=True)]
    return f"{statistics.median(per_round):.2f} ({min(per_round):.2f}-{max(per_round):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50000,100000,200000")
    parser.add_argument("--repeat", type=int, default=9, help="rounds of interleaved runs")
    parser.add_argument("--kinds", default="str,AIMessageChunk")
    parser.add_argument("--before", default=BEFORE, help="commit of the (c0) column")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    docs = [Document(f"doc {i}", metadata={"source": f"https://e.org/{i % 12}"}) for i in range(20)]
    inp = {"documents": docs}
    before = load_before(args.before)
    if before is None:
        print(f"(c0) left out: commit {args.before} not readable with git")

    cols = ["a", "b", "d", "c"] + (["c0"] if before is not None else []) + ["cd"]
    header = (
        f"{'source':<15}{'tokens':>7}"
        + "".join(f"{f'({k}) tok/s':>13}" for k in cols)
        + f"{'c/b':>18}{'c/d':>18}"
        + (f"{'c0/d':>18}" if before is not None else "")
        + f"{'cd/d':>18}{'peak MiB c':>12}"
    )
    print(f"median of {args.repeat} interleaved rounds; ratios: median (min-max) of the rounds")
    print(header)
    print("-" * len(header))
    scaling: dict[str, list[tuple[int, float]]] = {}
    for kind in args.kinds.split(","):
        for n in sizes:
            src = source(make_tokens(n), kind)
            runnables: dict[str, Runnable[Any, Any]] = {
                "a": src,
                "b": src | RunnableGenerator(identity),
                "d": DoNothing(src),
                "c": manage_references(src, style=MarkdownReferenceStyle(deep_links=False)),
            }
            if before is not None:
                runnables["c0"] = before(src, style=MarkdownReferenceStyle(deep_links=False))
            runnables["cd"] = manage_references(src)
            runs = {k: (lambda r=r: r.stream(inp)) for k, r in runnables.items()}
            times: dict[str, list[float]] = {k: [] for k in runs}
            for _ in range(args.repeat):  # interleaved: load on the machine hits all alike
                for k, run in runs.items():
                    times[k].append(drain(run))
            median = {k: statistics.median(t) for k, t in times.items()}
            peak_c = peak_memory(runs["c"]) / 2**20
            scaling.setdefault(kind, []).append((n, median["c"]))
            print(
                f"{kind:<15}{n:>7}"
                + "".join(f"{n / median[k]:>13,.0f}" for k in cols)
                + f"{ratio(times, 'c', 'b'):>18}{ratio(times, 'c', 'd'):>18}"
                + (f"{ratio(times, 'c0', 'd'):>18}" if before is not None else "")
                + f"{ratio(times, 'cd', 'd'):>18}{peak_c:>12.1f}"
            )
    print()
    print("Scaling of (c): time per token relative to the smallest size (1.0 = linear)")
    for kind, rows in scaling.items():
        n0, t0 = rows[0]
        cells = ", ".join(f"{n}: {(t / n) / (t0 / n0):.2f}" for n, t in rows)
        print(f"  {kind:<15} {cells}")


if __name__ == "__main__":
    main()
