"""Cost of citations inside a ``create_agent`` agent: the wrapper and the middleware.

One agent turn, as a chat UI streams it (``stream_mode="messages"``): the scripted model calls
a retriever tool (20 documents, as ``content_and_artifact``), then streams an answer of N tokens
of 3 characters (``tests/unit_tests/fakes.AgentChatModel``) citing ``[n](id=k)`` about every 30
tokens (citations cut across tokens). Three agents, measured in one run, interleaved
round by round:

* (bare) ``create_agent(model, tools)``: the answer's raw markers reach the reader;
* (wrapper) ``create_agent(manage_references(model, style=...), tools)``;
* (middleware) ``create_agent(model, tools, middleware=[ReferencesMiddleware(style=...)])``.

Prints the median time per round of each, and the citation layer's own time, (wrapper) -
(bare) and (middleware) - (bare), in microseconds per 1,000 answer tokens (median of the
per-round differences, with their range). The middleware wraps each call's model in the same
``ReferencedChatModel``: its figure should be the wrapper's, plus its per-call work (the ids of
the conversation's documents, read and kept in the state), which does not grow with N.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import create_retriever_tool

from langchain_references import ReferencesMiddleware, TextReferenceStyle, manage_references

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripted model of the tests
from tests.unit_tests.fakes import AgentChatModel

DOCUMENTS = [
    Document(f"Fact {i} about the Space Needle.", metadata={"source": f"https://s{i % 7}.example"})
    for i in range(20)
]


class Retriever(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return DOCUMENTS


def answer(tokens: int) -> str:
    """An answer of exactly ``tokens`` tokens of 3 characters, a citation about every 30."""
    words: list[str] = []
    length = 0
    i = 0
    while length < 3 * tokens:
        word = f"[{i % 5 + 1}](id={i % 20 + 1})" if i % 10 == 9 else "word"
        words.append(word)
        length += len(word) + 1
        i += 1
    return " ".join(words)[: 3 * tokens]


def script(tokens: int) -> list[AIMessage]:
    call = {"name": "search", "args": {"query": "needle"}, "id": "c1"}
    return [AIMessage("", tool_calls=[call]), AIMessage(answer(tokens))]


def agents(tokens: int) -> dict[str, Callable[[], int]]:
    tool = create_retriever_tool(
        Retriever(), "search", "Search.", response_format="content_and_artifact"
    )
    style = TextReferenceStyle()

    def run(build: Callable[[AgentChatModel], Any]) -> Callable[[], int]:
        def once() -> int:
            model = AgentChatModel(script=script(tokens))
            agent = build(model)
            inputs = {"messages": [HumanMessage("q")]}
            return sum(1 for _ in agent.stream(inputs, stream_mode="messages"))

        return once

    return {
        "bare": run(lambda model: create_agent(model, tools=[tool])),
        "wrapper": run(lambda model: create_agent(manage_references(model, style=style), [tool])),
        "middleware": run(
            lambda model: create_agent(
                model, tools=[tool], middleware=[ReferencesMiddleware(style=style)]
            )
        ),
    }


def measure(tokens: int, rounds: int) -> dict[str, list[float]]:
    runs = agents(tokens)
    for once in runs.values():  # warm up
        once()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, once in runs.items():
            start = time.perf_counter()
            once()
            times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000", help="answer tokens")
    parser.add_argument("--repeat", type=int, default=9, help="interleaved rounds")
    args = parser.parse_args()
    print(
        "| tokens | bare ms | wrapper ms | middleware ms | wrapper − bare µs/1k tokens "
        "| middleware − bare µs/1k tokens |"
    )
    print("|---:|---:|---:|---:|---|---|")
    for tokens in map(int, args.sizes.split(",")):
        times = measure(tokens, args.repeat)
        cells = [f"{statistics.median(times[n]) * 1e3:,.1f}" for n in times]
        own = []
        for name in ("wrapper", "middleware"):
            per_1k = [
                (t - b) / tokens * 1e9 for t, b in zip(times[name], times["bare"], strict=True)
            ]
            own.append(
                f"{statistics.median(per_1k):,.0f} ({min(per_1k):,.0f} to {max(per_1k):,.0f})"
            )
        print(f"| {tokens:,} | " + " | ".join(cells + own) + " |")


if __name__ == "__main__":
    main()
