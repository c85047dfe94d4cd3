"""Time the span-based native adapters (Gemini, Cohere, v1) against the number of citations.

Each answer repeats one sentence ``n`` times with one citation per sentence (Gemini: UTF-8
byte spans over ten web chunks; Cohere: one request document per citation; v1: ``citation``
annotations on one text block). The adapters once read the whole answer for each citation
(quadratic time: 10^5 citations took 102 s); they now read it once. The table gives seconds
per answer and microseconds per citation, all measured in this run: with linear time the
per-citation figure stays flat as ``n`` grows tenfold.

    python benchmarks/bench_native_citations.py [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from langchain_core.messages import AIMessage

from langchain_references.native.cohere import CohereAdapter
from langchain_references.native.gemini import GeminiAdapter
from langchain_references.native.v1 import V1Adapter


def gemini(n: int) -> int:
    """Run the Gemini adapter over an answer with ``n`` grounding supports."""
    sentence = "Zoë ran far. "
    size = len(sentence.encode())
    metadata = {
        "grounding_chunks": [{"web": {"uri": f"https://a.org/{i}"}} for i in range(10)],
        "grounding_supports": [
            {
                "segment": {
                    "start_index": i * size,
                    "end_index": (i + 1) * size - 1,
                    "text": sentence.strip(),
                },
                "grounding_chunk_indices": [i % 10],
            }
            for i in range(n)
        ],
    }
    adapter = GeminiAdapter()
    adapter.feed(AIMessage(sentence * n, response_metadata={"grounding_metadata": metadata}))
    return len(adapter.finish())


def cohere(n: int) -> int:
    """Run the Cohere adapter over an answer with ``n`` citations of ``n`` documents."""
    sentence = "Cats nap a lot. "
    documents = [{"id": f"doc-{i}", "data": {"text": "x"}} for i in range(n)]
    citations = [
        {
            "start": i * len(sentence),
            "end": (i + 1) * len(sentence) - 1,
            "text": sentence.strip(),
            "sources": [{"type": "document", "id": f"doc-{i}", "document": {"id": f"doc-{i}"}}],
        }
        for i in range(n)
    ]
    message = AIMessage(
        sentence * n, additional_kwargs={"citations": citations, "documents": documents}
    )
    adapter = CohereAdapter()
    return len(adapter.feed(message) + adapter.finish())


def v1(n: int) -> int:
    """Run the v1 adapter over one text block with ``n`` citation annotations."""
    sentence = "Paris is big. "
    annotations = [
        {
            "type": "citation",
            "url": f"https://a.org/{i % 10}",
            "start_index": i * len(sentence),
            "end_index": (i + 1) * len(sentence) - 1,
        }
        for i in range(n)
    ]
    message = AIMessage(
        content=[{"type": "text", "text": sentence * n, "annotations": annotations}],
        response_metadata={"output_version": "v1"},
    )
    adapter = V1Adapter()
    return len(adapter.feed(message) + adapter.finish())


ADAPTERS: dict[str, Callable[[int], int]] = {"gemini": gemini, "cohere": cohere, "v1": v1}


def main() -> None:
    """Print one row per adapter and size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    sizes = [int(size) for size in parser.parse_args().sizes.split(",")]
    print("| adapter | citations | seconds | µs per citation |")
    print("|---|---:|---:|---:|")
    for name, run in ADAPTERS.items():
        for n in sizes:
            started = time.perf_counter()
            pieces = run(n)
            elapsed = time.perf_counter() - started
            assert pieces == 2 * n + 1, (name, n, pieces)
            print(f"| {name} | {n:,} | {elapsed:.2f} | {elapsed / n * 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
