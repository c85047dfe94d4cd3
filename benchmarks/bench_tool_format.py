"""What showing an agent's tool results to the model costs, on every model call.

Over a chat model, :class:`~langchain_references.ChatModelWithReferences` (and the
``ReferencesMiddleware``) shows the model the conversation with each tool result's documents
numbered and delimited (:func:`~langchain_references.conversation.number_conversation`), on
every model call of the agent: a turn of five tool calls formats the first result six times.
Each document is neutralized first (:func:`~langchain_references.core.prompting.neutralize`: every
look-alike of a ``<document>`` tag is escaped).

For conversations of ``--results`` tool results of five documents each, at several document
sizes, with prose documents (no ``<``) and with HTML-like ones (a ``<b>`` every 40
characters), this prints the time per character of the documents (ns, median of
``--repeat``) and the peak memory traced while numbering them beyond the result it returns
(tracemalloc, bytes per character of one tool result: what one call holds at once).
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_references.conversation import number_conversation
from langchain_references.core.prompting import FORMAT_REFERENCES

PROSE = "The Space Needle is in Seattle. It was built for the 1962 World's Fair. "
HTML = "The <b>Space Needle</b> is in Seattle, built for the 1962 fair. "


def conversation(results: int, size: int, unit: str) -> list[BaseMessage]:
    """A conversation of ``results`` tool results of five documents of ``size`` characters."""
    text = (unit * (size // len(unit) + 1))[:size]
    messages: list[BaseMessage] = [HumanMessage("Tell me about the Space Needle.")]
    for turn in range(results):
        call = {"name": "search", "args": {"query": "space needle"}, "id": f"call_{turn}"}
        documents = [
            Document(text, metadata={"source": f"https://e.org/{turn}/{i}"}) for i in range(5)
        ]
        messages += [
            AIMessage("", tool_calls=[call]),
            ToolMessage("found", tool_call_id=f"call_{turn}", artifact=documents),
        ]
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="characters per document")
    parser.add_argument("--results", type=int, default=4, help="tool results in the conversation")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'documents':<10} {'size':>8} {'ns/char':>9} {'peak bytes/char':>16}")
    for name, unit in (("prose", PROSE), ("html-like", HTML)):
        for size in (int(s) for s in args.sizes.split(",")):
            messages = conversation(args.results, size, unit)
            chars = args.results * 5 * size
            number_conversation(messages, instruction=FORMAT_REFERENCES)  # warm the caches
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                number_conversation(messages, instruction=FORMAT_REFERENCES)
                times.append(time.perf_counter() - start)
            tracemalloc.start()
            try:
                shown = number_conversation(messages, instruction=FORMAT_REFERENCES).shown
                current, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            del shown
            beyond = (peak - current) / (5 * size)  # held at once, beyond the result
            per_char = statistics.median(times) / chars * 1e9
            print(f"{name:<10} {size:>8,} {per_char:>9.1f} {beyond:>16.1f}")


if __name__ == "__main__":
    main()
