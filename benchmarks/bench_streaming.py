"""Throughput of manage_references() against a bare stream and two do-nothing baselines.

For a synthetic answer of N tokens with a citation about every 30 tokens (citations cut across
tokens), measured in one run, the runs interleaved pass by pass:

* (a) the bare source stream (one traced layer: the source's own);
* (b) the source piped into an identity ``RunnableGenerator``: the per-chunk cost any LCEL
  layer pays (a sequence and a generator: two traced layers more than (a));
* (d) the source wrapped by :class:`DoNothing`, a runnable built exactly like
  ``ReferencedRunnable`` (same ``Runnable`` methods, same ``_transform_stream_with_config``
  / ``_call_with_config`` callback and tracing path, same input merging) that passes the
  chunks through untouched: one traced layer more than (a), like (c). It is the floor of any
  wrapper of this shape;
* (t) the source wrapped by :class:`TestOnly`: (d) plus one inline test of each chunk's text
  (``chunk.__class__ is str and "[" not in chunk``), every chunk passed through unchanged
  whatever the answer: the least any wrapper of this shape that must look at each chunk's
  text adds to (d), whatever it then does with a citation (``manage_references`` runs a test
  of this kind in its rewriter, behind the per-chunk step ``_Session.step``);
* (c) the source wrapped by ``manage_references`` with ``MarkdownReferenceStyle(
  deep_links=False)``;
* (c0) the same, with ``manage_references`` and the style as they were at commit ``--before``
  (by default 05a129b, the last commit before the per-chunk step was made one method with
  thin drivers; the parser, styles, rewriter, native run and manager modules of that commit,
  loaded from git as separate modules; the column is left out when git or the commit is not
  available);
* (cd) the source wrapped by ``manage_references`` with its default style, Markdown with deep
  links: each citation then quotes the cited chunk's sentence closest to the citing one (the
  20 documents hold six sentences each, from a pool of 12 about the Space Needle).

Prints the langchain-core version, the median tokens/s of each run over ``--repeat`` rounds
(each timing covers about 100k tokens, ``--budget``: a short stream is passed several times),
the throughput ratios c/b, t/d, c/d, c0/d, cd/d (median of the per-round ratios, with their
range), the wrapper's own time (c) - (d), and (c0) - (d) for the ``--before`` commit, in
microseconds per 1,000 tokens (median of the rounds: the figure this benchmark tracks), the
peak memory of (c) (tracemalloc, a separate pass) and the scaling of (a), (d) and (c) from the
smallest to the largest size, for ``str`` and ``AIMessageChunk`` sources. With ``--ablate`` it
also prints what the wrapper's own time is made of (see :func:`ablation`).

The floor is langchain-core's own per-chunk cost, which depends on its version: from 1.7.7 on,
each traced layer adds every output chunk to the run's output with ``self._value + chunk``,
a copy of the whole text so far for ``str`` chunks (quadratic in the answer's length: see the
(a) scaling line), where 1.7.3 and earlier extended a local string in place.
``bench_core_versions.py`` runs this script against several langchain-core versions.

Native-citation rows (``--native-sizes`` / ``--anthropic-sizes``) stream the chunk shapes
``langchain-anthropic`` and ``langchain-openai`` (Responses API) yield for an answer citing web
search results, a cited span about every 30 tokens, the sources cycling over 12 URLs:

* ``anthropic-native``: one ``[{"type": "text", "text": ..., "index": i}]`` chunk per text
  delta, uncited blocks alternating with short cited blocks each followed by one or two
  ``citations_delta`` chunks (``web_search_result_location``), then the ``stop_reason`` chunk
  (``chunk_position="last"``);
* ``openai-native``: one output text part of text-delta chunks holding the model's inline links
  ``([domain](url))``, each followed by its ``url_citation`` annotation chunk, then the
  ``output_text.done`` chunk (the part's ``id``) and the ``response.completed`` one.

The tokens column counts text-delta chunks only; the metadata, tool and citation chunks come on
top. The Anthropic rows default to small sizes (``--anthropic-sizes``): every traced layer of
``langchain-core`` merges its output chunks into one ``AIMessageChunk`` (1.7.3 and earlier as
each chunk comes, 1.7.7 and later once at the end), and merging content lists of one block per
content index costs O(blocks) per chunk, so a stream with a new block every ~15 tokens is
quadratic in every layer, the bare source (a) included (on 1.7.2 about 9 minutes for one pass of
(a) at 200k tokens; on 1.8.3 (a) runs at 79k / 43k / 22k tokens/s at 4k / 8k / 16k tokens).

The native rows measure (a), (b), (d) and (c) (``native="auto"``, the default); before timing,
one pass of (c) is checked to render one ``<sup>`` marker per citation generated.

Agent rows (``--agent-sizes``; left out when ``langchain`` is not installed) time one whole
agent turn, model -> tool -> model, of ``create_agent(model, tools=[search])`` (p) and
``create_agent(manage_references(model, style=MarkdownReferenceStyle(deep_links=False)),
tools=[search])`` (r) on the same scripted chat model (:class:`ScriptedAgentModel`): its first
call asks for the ``search`` retriever tool (``create_retriever_tool``, documents as the
artifact: the 20 documents above), its second streams the N-token answer above as
``AIMessageChunk`` s. Row ``agent invoke`` times ``agent.invoke``, row ``agent messages`` a
full pass over ``agent.stream(..., stream_mode="messages")``. Columns: milliseconds per turn
of (p) and (r), the throughput ratio r/p, and the wrapper's own time (r) - (p) per turn and
per 1,000 answer tokens (both include its fixed cost per model call: the conversation's
documents numbered and shown, a session, the wrapped model's run under the wrapper's own).
Each timing covers about ``--agent-budget`` answer tokens. Before timing, (r)'s answer is
checked to render one ``<sup>`` marker per citation and its messages stream to carry that same
rewritten text. There is no (c0) here: the chat-model wrapper is new since 05a129b.

    python benchmarks/bench_streaming.py [--sizes 1000,5000,50000] [--repeat 9]
        [--native-sizes 50000,200000] [--anthropic-sizes 4000,8000,16000]
        [--agent-sizes 1000,5000] [--only all|text|native|agent] [--budget 100000]
        [--agent-budget 10000] [--before COMMIT] [--ablate]
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import itertools
import json
import platform
import random
import re
import statistics
import sys
import time
import tracemalloc
import types
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from _old_code import git_show, today_imports
from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
    CallbackManagerForLLMRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableGenerator
from langchain_core.runnables.config import ensure_config
from langchain_core.tools import create_retriever_tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_references import MarkdownReferenceStyle, manage_references
from langchain_references.core._code import CodeAwareParser
from langchain_references.manager import _merge_input

#: The last commit before the per-chunk step was made one method with thin drivers (issue 20).
BEFORE = "05a129bfd5554de1a58bce93eeeea1891ec4cacb"
WORDS = "the space needle is in seattle and it was built for the world fair of 1962"
#: The sentences the benchmark's documents are made of (six each), for deep links to quote.
SENTENCES = [
    "The Space Needle is an observation tower in Seattle, Washington.",
    "It was built in the Seattle Center for the 1962 World's Fair.",
    "The tower is 605 feet high and 138 feet wide at its widest point.",
    "Its observation deck is at 520 feet and has a rotating glass floor.",
    "The needle was designed by Edward E. Carlson and John Graham Jr.",
    "Construction took 400 days and the tower opened on April 21, 1962.",
    "The fair drew almost 10 million visitors over six months.",
    "It was declared a city landmark by Seattle in 1999.",
    "The SkyCity restaurant at the top was replaced by a glass floor in 2018.",
    "Elevators reach the top house in 41 seconds.",
    "The tower can withstand winds of up to 200 miles per hour.",
    "It is a symbol of the city and of the Pacific Northwest.",
]


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


#: The sources native citations cycle over: (domain, title).
NATIVE_SITES = [
    ("en.wikipedia.org", "Space Needle - Wikipedia"),
    ("www.spaceneedle.com", "History | Space Needle"),
    ("www.britannica.com", "Space Needle | Britannica"),
    ("www.seattletimes.com", "The Space Needle at 60 | The Seattle Times"),
    ("www.historylink.org", "Century 21 Exposition | HistoryLink.org"),
    ("www.nps.gov", "Seattle World's Fair | National Park Service"),
    ("www.visitseattle.org", "Space Needle | Visit Seattle"),
    ("www.seattle.gov", "Seattle Center history | seattle.gov"),
    ("www.smithsonianmag.com", "How the Space Needle Got Built | Smithsonian"),
    ("www.nytimes.com", "Seattle Opens a World's Fair | The New York Times"),
    ("www.asce.org", "Space Needle | ASCE landmarks"),
    ("www.king5.com", "Space Needle facts | KING 5"),
]
RUN_ID = "lc_run--0a1b2c3d-4e5f-6789-abcd-ef0123456789"


def native_url(site: int, provider: str) -> str:
    """The URL of source ``site`` as a provider cites it (with its ``utm_source``)."""
    domain = NATIVE_SITES[site][0]
    return f"https://{domain}/wiki/space-needle-{site}?utm_source={provider}"


def _words(rng: random.Random, k: int) -> list[str]:
    return [" " + rng.choice(WORDS.split(" ")) for _ in range(k)]


def _cut(text: str, rng: random.Random) -> list[str]:
    """``text`` cut into tokens of 1 to 5 characters."""
    pieces: list[str] = []
    i = 0
    while i < len(text):
        step = rng.randint(1, 5)
        pieces.append(text[i : i + step])
        i += step
    return pieces


def anthropic_chunks(n: int, seed: int = 0) -> tuple[list[AIMessageChunk], int]:
    """The chunks ``ChatAnthropic.stream`` yields for an N-token answer citing web results.

    Uncited text blocks of 18 to 28 tokens alternate with cited blocks of 4 to 10 tokens, each
    followed by one (or, one time in four, two) ``citations_delta`` chunks; a new block index
    closes the block before it, the ``stop_reason`` chunk the last one.

    Returns:
        The chunks and the number of citations in them.
    """
    rng = random.Random(seed)

    def chunk(content: list[Any], **metadata: Any) -> AIMessageChunk:
        return AIMessageChunk(
            content=content,
            response_metadata={**metadata, "model_provider": "anthropic"},
            id=RUN_ID,
        )

    query = {"query": "space needle seattle world fair"}
    results = [
        {
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1",
            "page_age": None,
            "title": title,
            "type": "web_search_result",
            "url": native_url(site, "claude"),
        }
        for site, (_, title) in enumerate(NATIVE_SITES)
    ]
    tool_id = "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"
    chunks = [
        chunk([], model_name="claude-sonnet-5"),
        chunk(
            [
                {
                    "id": tool_id,
                    "input": {},
                    "name": "web_search",
                    "type": "server_tool_use",
                    "index": 0,
                }
            ]
        ),
        chunk([{"partial_json": json.dumps(query), "type": "input_json_delta", "index": 0}]),
        chunk(
            [
                {
                    "content": results,
                    "tool_use_id": tool_id,
                    "type": "web_search_tool_result",
                    "index": 1,
                }
            ]
        ),
    ]
    tokens = citations = 0
    index = 2
    site = 0
    while tokens < n:
        for cited, low, high in ((False, 18, 28), (True, 4, 10)):
            k = min(rng.randint(low, high), n - tokens)
            if k <= 0:
                break
            chunks.extend(
                chunk([{"text": t, "type": "text", "index": index}]) for t in _words(rng, k)
            )
            tokens += k
            for _ in range(2 if cited and rng.random() < 0.25 else 1 if cited else 0):
                title = NATIVE_SITES[site][1]
                raw = {
                    "cited_text": f"The Space Needle was built for the 1962 World's Fair ({site}).",
                    "encrypted_index": "EqoBCioIAhgB",
                    "title": title,
                    "type": "web_search_result_location",
                    "url": native_url(site, "claude"),
                }
                chunks.append(chunk([{"type": "text", "index": index, "citations": [raw]}]))
                citations += 1
                site = (site + 1) % len(NATIVE_SITES)
            index += 1
    chunks.append(
        AIMessageChunk(
            content=[],
            response_metadata={
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "model_provider": "anthropic",
            },
            id=RUN_ID,
            chunk_position="last",
        )
    )
    return chunks, citations


def openai_chunks(n: int, seed: int = 0) -> tuple[list[AIMessageChunk], int]:
    """The chunks ``ChatOpenAI(use_responses_api=True).stream`` yields for an N-token answer.

    One output text part (content index 1, after the web search call): 25 to 35 word tokens,
    then the model's inline link `` ([domain](url))`` and a ``.`` cut into tokens of 1 to 5
    characters, its ``url_citation`` annotation (``start_index``/``end_index`` over the link)
    in the chunk right after the link's last token; the part's ``output_text.done`` chunk and
    the ``response.completed`` chunk end the stream.

    Returns:
        The chunks and the number of citations in them.
    """
    rng = random.Random(seed)

    def chunk(content: list[Any], **metadata: Any) -> AIMessageChunk:
        return AIMessageChunk(
            content=content,
            response_metadata={**metadata, "model_provider": "openai"},
            id=RUN_ID,
        )

    response_id = "resp_68c1f2a3f1a881909e7f6d5c4b3a2918"
    chunks = [
        AIMessageChunk(
            content=[],
            response_metadata={"model_provider": "openai", "id": response_id},
            id=response_id,
        ),
        chunk(
            [
                {
                    "id": "ws_68c1f2a4b0d48190a3e1c2d4e5f60718",
                    "action": {"type": "search", "query": "space needle seattle world fair"},
                    "status": "completed",
                    "type": "web_search_call",
                    "index": 0,
                }
            ]
        ),
        chunk([]),
    ]
    tokens = citations = length = 0
    site = 0

    def text(t: str) -> None:
        nonlocal length
        chunks.append(chunk([{"type": "text", "text": t, "index": 1}]))
        length += len(t)

    while tokens < n:
        words = _words(rng, rng.randint(25, 35))
        url = native_url(site, "openai")
        link = f"([{NATIVE_SITES[site][0]}]({url}))"
        link_tokens = _cut(" " + link, rng)
        if tokens + len(words) + len(link_tokens) + 1 > n:  # the rest: words only
            for t in _words(rng, n - tokens):
                text(t)
            break
        for t in words:
            text(t)
        start = length + 1
        for t in link_tokens:
            text(t)
        annotation = {
            "end_index": start + len(link),
            "start_index": start,
            "title": NATIVE_SITES[site][1],
            "type": "url_citation",
            "url": url,
        }
        chunks.append(chunk([{"type": "text", "annotations": [annotation], "index": 1}]))
        text(".")
        tokens += len(words) + len(link_tokens) + 1
        citations += 1
        site = (site + 1) % len(NATIVE_SITES)
    chunks.append(
        chunk(
            [{"type": "text", "text": "", "id": "msg_68c1f2a7c5f08190b7e2d3c4a5b6c7d8", "index": 1}]
        )
    )
    chunks.append(
        AIMessageChunk(
            content=[],
            response_metadata={
                "created_at": 1763884800.0,
                "model": "gpt-5.1",
                "object": "response",
                "status": "completed",
                "model_provider": "openai",
                "model_name": "gpt-5.1",
            },
            id=RUN_ID,
            chunk_position="last",
        )
    )
    return chunks, citations


def chunk_source(chunks: list[AIMessageChunk]) -> Runnable[Any, Any]:
    """A runnable streaming the given (prebuilt) chunks."""

    def gen(_: Iterator[Any]) -> Iterator[AIMessageChunk]:
        yield from chunks

    return RunnableGenerator(gen)


def output_text(chunks: Iterator[Any]) -> str:
    """The answer text of a stream of ``str`` or message chunks (text blocks joined)."""
    parts: list[str] = []
    for chunk in chunks:
        content = chunk if isinstance(chunk, str) else chunk.content
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
    return "".join(parts)


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


def _merged(inputs: Iterator[Any]) -> Any:
    """The input of a run, its chunks merged as ``ReferencedRunnable`` merges them."""
    input = None
    for item in inputs:
        input = _merge_input(input, item)
    return input


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
        yield from self.bound.stream(_merged(inputs), config)

    async def _atransform(
        self,
        inputs: AsyncIterator[Mapping[str, Any]],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[Any]:
        input = None
        async for item in inputs:
            input = _merge_input(input, item)
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


class TestOnly(DoNothing):
    """:class:`DoNothing` plus one inline test of each chunk's text, acting on nothing (t).

    A wrapper that rewrites citations must at least look at every ``str`` chunk for a ``[``
    before it can pass it through; this probe runs that test inline in its ``_transform``
    loop (one generator, as ``ReferencedRunnable._run`` is) and yields every chunk unchanged.
    (t) - (d) is the least such a wrapper adds; t/d bounds c/d from above.
    """

    def _transform(
        self,
        inputs: Iterator[Mapping[str, Any]],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[Any]:
        for chunk in self.bound.stream(_merged(inputs), config):
            if chunk.__class__ is str and "[" not in chunk:
                yield chunk
                continue
            yield chunk


class _TestStep:
    """The least a per-chunk step can do: the rewriter's own plain-text test, then return."""

    __slots__ = ("special",)

    def __init__(self) -> None:
        self.special = CodeAwareParser().special  # the regex the rewriter's fast path runs

    def feed(self, text: str) -> str:
        """Test ``text`` for a character that may begin a citation or code; return it."""
        if not self.special(text):
            return text
        return text

    def rewrite(self, chunk: Any) -> Any:
        """Return a message chunk as it is."""
        return chunk


class OneCall(DoNothing):
    """:class:`DoNothing` plus one call per chunk, as the drivers make it, to a bare step (s).

    Each chunk goes through a table by class (``steps[chunk.__class__](chunk)``, as
    ``ReferencedRunnable``'s drivers call the run's step) to a method that runs the rewriter's
    plain-text test (the parser's special-character regex) and returns the chunk. (s) - (d)
    is the least any wrapper adds that keeps every decision about a chunk behind one call, as
    issue 31 asks (no copy of the test in the drivers); (c) - (s) is what the rewriter does
    beyond that test: its state checks, the citations and the reference list.
    """

    def _transform(
        self,
        inputs: Iterator[Mapping[str, Any]],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[Any]:
        step = _TestStep()
        steps = {str: step.feed, AIMessageChunk: step.rewrite}
        for chunk in self.bound.stream(_merged(inputs), config):
            if out := steps[chunk.__class__](chunk):
                yield out


class Replay(DoNothing):
    """:class:`DoNothing` that yields given chunks instead of its source's (r).

    It reads its source to the end and yields the given chunks as it goes (one per source
    chunk, the rest at the end): given (c)'s own output, its traced layer accumulates the
    same output as (c)'s does. langchain-core adds every chunk to its run's output (a copy of
    the text so far for ``str``), so a wrapper whose output is longer than its source's
    (Markdown links for ``[n](id=k)``) pays more there: (r) - (d) is that part of (c) - (d),
    and (c) - (r) is the wrapper's own work without it.
    """

    def __init__(self, bound: Runnable[Any, Any], outputs: list[Any]) -> None:
        super().__init__(bound)
        self.outputs = outputs

    def _transform(
        self,
        inputs: Iterator[Mapping[str, Any]],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[Any]:
        outputs = iter(self.outputs)
        for _ in self.bound.stream(_merged(inputs), config):
            if (out := next(outputs, None)) is not None:
                yield out
        yield from outputs


class NoListStyle(MarkdownReferenceStyle):
    """(c)'s style without its reference list (the ablation's "no list" column)."""

    def format_all_references(self, refs: list[tuple[int, Document]]) -> str:
        """Append nothing."""
        return ""


def ablation(
    tokens: list[str],
    kind: str,
    inp: Any,
    repeat: int,
    passes: int,
    before: Callable[[Runnable[Any, Any]], Runnable[Any, Any]] | None,
) -> dict[str, str]:
    """The wrapper's own time, (x) - (d), in µs per 1,000 tokens, for what it is made of.

    Columns: (t), the per-chunk test alone; (s), one call per chunk to that test
    (:class:`OneCall`); (r), a do-nothing layer yielding (c)'s output (:class:`Replay`); (c);
    (c) - (r), against (r) instead of (d); (c) with :class:`NoListStyle`; (c) and
    (c0) on the same answer with every ``[`` made a ``<`` (same tokens, no citation), each
    against (d) on that answer. All runs of one row take turns pass by pass.
    """
    plain = [token.replace("[", "<") for token in tokens]
    src, src_plain = source(tokens, kind), source(plain, kind)
    style = MarkdownReferenceStyle(deep_links=False)
    runnables: dict[str, Runnable[Any, Any]] = {
        "d": DoNothing(src),
        "t": TestOnly(src),
        "s": OneCall(src),
        "c": manage_references(src, style=style),
        "no list": manage_references(src, style=NoListStyle(deep_links=False)),
        "d plain": DoNothing(src_plain),
        "no citations": manage_references(src_plain, style=style),
    }
    runnables["r"] = Replay(src, list(runnables["c"].stream(inp)))
    if before is not None:
        runnables["c0 no citations"] = before(src_plain)
    times = measure(runnables, inp, repeat, passes)
    n = len(tokens)

    def own(key: str, floor: str) -> str:
        per_round = [(x - d) / n * 1e9 for x, d in zip(times[key], times[floor], strict=True)]
        return f"{statistics.median(per_round):.0f}"

    cells = {key: own(key, "d") for key in ("t", "s", "r", "c", "no list")}
    cells["c - r"] = own("c", "r")
    cells.update({key: own(key, "d plain") for key in runnables if "citations" in key})
    return cells


class ScriptedAgentModel(BaseChatModel):
    """A scripted streaming chat model for one agent turn: model -> tool -> model.

    Shown a conversation that does not end with a tool result, it asks for the ``search`` tool
    (one tool-call chunk); shown one that does, it streams ``tokens`` as ``AIMessageChunk`` s
    (built at each call, as a provider integration builds them). ``bind_tools`` binds the
    tools' schemas, as a provider integration does. (A minimal copy of the tests'
    ``AgentChatModel``: benchmarks do not import the tests.)
    """

    tokens: list[str]

    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind the tools' OpenAI schemas to the model."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _chunks(self, messages: list[BaseMessage]) -> Iterator[ChatGenerationChunk]:
        if not isinstance(messages[-1], ToolMessage):
            call = {"name": "search", "args": '{"query": "space needle"}', "id": "call_1"}
            yield ChatGenerationChunk(
                message=AIMessageChunk(content="", tool_call_chunks=[{**call, "index": 0}])
            )
            return
        for token in self.tokens:
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return generate_from_stream(self._chunks(messages))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from self._chunks(messages)


class ListRetriever(BaseRetriever):
    """Returns the same documents for every query."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents


def agent_runs(
    n: int, docs: list[Document], create_agent: Callable[..., Any]
) -> tuple[dict[str, dict[str, Callable[[], Iterator[Any]]]], str]:
    """The agent rows' runs, (p) and (r) for each mode, after checking (r)'s output.

    Returns:
        The runs by mode (``invoke``, ``messages``) and a note on what (r) rendered.

    Raises:
        SystemExit: If (p) does not answer the scripted text, or (r) does not render one
            marker per citation in its answer and the same text in its messages stream.
    """
    tokens = make_tokens(n)
    search = create_retriever_tool(
        ListRetriever(documents=docs),
        "search",
        "Search the documents about the Space Needle.",
        response_format="content_and_artifact",
    )
    model = ScriptedAgentModel(tokens=tokens)
    agents = {
        "p": create_agent(model, tools=[search]),
        "r": create_agent(
            manage_references(model, style=MarkdownReferenceStyle(deep_links=False)),
            tools=[search],
        ),
    }
    inp = {"messages": [HumanMessage("Tell me about the Space Needle.")]}
    raw = "".join(tokens)
    if agents["p"].invoke(inp)["messages"][-1].text != raw:
        raise SystemExit(f"agent {n}: the plain agent did not answer the scripted text")
    answer = agents["r"].invoke(inp)["messages"][-1].text
    citations = len(re.findall(r"\[\d+\]\(id=\d+\)", raw))
    rendered = answer.count("<sup>")
    streamed = "".join(
        chunk.text
        for chunk, _ in agents["r"].stream(inp, stream_mode="messages")
        if isinstance(chunk, AIMessageChunk)
    )
    if rendered != citations or streamed != answer:  # a pass-through would measure nothing
        raise SystemExit(
            f"agent {n}: {rendered} markers rendered for {citations} citations; messages "
            f"stream {'equal to' if streamed == answer else 'unlike'} the answer"
        )
    note = (
        f"agent {n}: {citations:,} citations, {rendered:,} <sup> markers in (r)'s answer and "
        "its messages stream"
    )
    runs = {
        "invoke": {k: (lambda a=a: iter((a.invoke(inp),))) for k, a in agents.items()},
        "messages": {
            k: (lambda a=a: a.stream(inp, stream_mode="messages")) for k, a in agents.items()
        },
    }
    return runs, note


def load_before(rev: str) -> Callable[[Runnable[Any, Any]], Runnable[Any, Any]] | None:
    """(c) as of commit ``rev``: its parser, styles, rewriter, native run, manager (and factory).

    None if unreadable. The five modules, and ``factory`` where ``manage_references`` had
    moved to it, are read with ``git show`` (at their path then, in the package or in its
    ``core`` subpackage) and executed as ``_before_*`` modules, each importing the others' old
    versions; every other module is today's.

    Returns:
        A function wrapping a source as (c) did at ``rev``: ``manage_references`` with that
        commit's ``MarkdownReferenceStyle(deep_links=False)``.
    """
    names = ("_parser", "styles", "rewriter", "native/stream", "manager", "factory")
    loaded: list[str] = []  # the paths read, as "core/_parser" or "_parser"
    module = None
    for name in names:
        short = name.replace("/", "_")
        path, code = name, git_show(rev, f"langchain_references/{name}.py")
        if code is None:
            path = f"core/{name}"
            code = git_show(rev, f"langchain_references/{path}.py")
        if code is None and name == "factory":  # before manage_references moved there
            break
        if code is None:
            return None
        for done in loaded:
            code = code.replace(
                f"from langchain_references.{done.replace('/', '.')} import",
                f"from _before_{done.removeprefix('core/').replace('/', '_')} import",
            )
        code = today_imports(code)  # modules that moved since: today's, at today's path
        module = types.ModuleType(f"_before_{short}")
        sys.modules[module.__name__] = module
        exec(compile(code, f"{rev[:7]}:{short}.py", "exec"), module.__dict__)
        loaded.append(path)
    if module is None:
        return None
    manage, style = module.manage_references, sys.modules["_before_styles"].MarkdownReferenceStyle
    if "deep_links" not in vars(style):  # a commit before deep links: its style had none
        return lambda src: manage(src, style=style())
    return lambda src: manage(src, style=style(deep_links=False))


def drain(run: Callable[[], Iterator[Any]]) -> float:
    """Time one full pass over a stream (seconds)."""
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


def own_cost(
    times: dict[str, list[float]], n: int, key: str = "c", floor: str = "d", per: float = 1e9
) -> str:
    """A wrapper's own time, (key) - (floor), median of the rounds.

    In microseconds per 1,000 tokens by default; ``n=1, per=1e6`` gives microseconds per run.
    """
    per_round = [(x - f) / n * per for x, f in zip(times[key], times[floor], strict=True)]
    return f"{statistics.median(per_round):.0f}"


def measure(
    runnables: dict[str, Runnable[Any, Any]], inp: Any, repeat: int, passes: int = 1
) -> dict[str, list[float]]:
    """Seconds of each runnable's full stream, ``repeat`` rounds interleaved pass by pass."""
    return take_turns(
        {k: (lambda r=r: r.stream(inp)) for k, r in runnables.items()}, repeat, passes
    )


def take_turns(
    runs: dict[str, Callable[[], Iterator[Any]]], repeat: int, passes: int = 1
) -> dict[str, list[float]]:
    """Seconds of each run's full pass, ``repeat`` rounds interleaved pass by pass.

    Each timing is the mean of ``passes`` passes, so that short streams are timed over more
    than a few milliseconds. The runs take turns at every pass (one pass of each, then the
    next pass of each), so that a change in the machine's speed, which on a shared machine
    lasts from milliseconds to seconds, hits them all alike: timing each runnable's passes in
    one block made the per-round ratios of c/d spread over 0.25 to 0.7 here (max - min, 1k to
    50k tokens), pass-by-pass turns over 0.02 to 0.07 at 1k and 5k tokens and up to 0.24 at
    50k (timed over two passes only).
    """
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeat):
        gc.collect()
        spent = dict.fromkeys(runs, 0.0)
        for _ in range(passes):
            for k, run in runs.items():
                spent[k] += drain(run)
        for k in runs:
            times[k].append(spent[k] / passes)
    return times


def passes_for(n: int, budget: int = 100_000) -> int:
    """Passes per timing for an ``n``-token stream: about ``budget`` tokens per timing."""
    return max(1, budget // n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,50000")
    parser.add_argument("--native-sizes", default="50000,200000", help="openai-native sizes")
    parser.add_argument(
        "--anthropic-sizes",
        default="4000,8000,16000",
        help="anthropic-native sizes (every traced layer, the bare source's too, is quadratic "
        "in the number of content blocks there: see the module docstring)",
    )
    parser.add_argument(
        "--agent-sizes", default="1000,5000", help="answer tokens of the agent-turn rows"
    )
    parser.add_argument("--repeat", type=int, default=9, help="rounds of interleaved runs")
    parser.add_argument("--kinds", default="str,AIMessageChunk")
    parser.add_argument(
        "--only",
        choices=("all", "text", "native", "agent"),
        default="all",
        help="text: the [n](id=k) rows only; native: the provider-citation rows only; agent: "
        "the agent-turn rows only",
    )
    parser.add_argument("--before", default=BEFORE, help="commit of the (c0) column")
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="also print the wrapper's own time for the per-chunk test alone, without the "
        "reference list, and on the same answer without citations",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=100_000,
        help="tokens per timing (a short stream is passed several times to reach it)",
    )
    parser.add_argument(
        "--agent-budget",
        type=int,
        default=10_000,
        help="answer tokens per timing of the agent rows (a turn costs far more per token)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    native_sizes = {
        "anthropic-native": [int(s) for s in args.anthropic_sizes.split(",")],
        "openai-native": [int(s) for s in args.native_sizes.split(",")],
    }
    docs = [
        Document(
            " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(6)),
            metadata={"source": f"https://e.org/{i % 12}"},
        )
        for i in range(20)
    ]
    inp = {"documents": docs}
    text_rows = args.only in ("all", "text")
    before = load_before(args.before) if text_rows else None
    if text_rows and before is None:
        print(f"(c0) left out: commit {args.before} not readable with git")

    cols = ["a", "b", "d"] + (["t"] if text_rows else []) + ["c"]
    cols += ["c0"] if before is not None else []
    cols += ["cd"] if text_rows else []
    ratios = [("c", "b")] + ([("t", "d")] if text_rows else []) + [("c", "d")]
    ratios += [("c0", "d")] if before is not None else []
    ratios += [("cd", "d")] if text_rows else []
    owns = ["c"] + (["c0"] if before is not None else [])
    header = (
        f"{'source':<18}{'tokens':>7}"
        + "".join(f"{f'({k}) tok/s':>13}" for k in cols)
        + "".join(f"{f'{num}/{den}':>18}" for num, den in ratios)
        + "".join(f"{f'{k}-d us/1k tok':>16}" for k in owns)
        + f"{'peak MiB c':>12}"
    )
    print(
        f"langchain-core {importlib.metadata.version('langchain-core')}, Python "
        f"{platform.python_version()}"
    )
    if args.only != "agent":
        print(
            f"Median of {args.repeat} rounds, the runs interleaved pass by pass (each timing "
            f"about {args.budget:,} tokens: several passes of a short stream); ratios: "
            "throughput, median (min-max)"
        )
        print(header)
        print("-" * len(header))
    scaling: dict[str, list[tuple[int, dict[str, float]]]] = {}

    def row(label: str, n: int, runnables: dict[str, Runnable[Any, Any]]) -> None:
        times = measure(runnables, inp, args.repeat, passes_for(n, args.budget))
        median = {k: statistics.median(t) for k, t in times.items()}
        peak_c = peak_memory(lambda: runnables["c"].stream(inp)) / 2**20
        scaling.setdefault(label, []).append((n, median))
        print(
            f"{label:<18}{n:>7}"
            + "".join(f"{n / median[k]:>13,.0f}" if k in median else f"{'-':>13}" for k in cols)
            + "".join(
                f"{ratio(times, num, den):>18}" if num in times else f"{'-':>18}"
                for num, den in ratios
            )
            + "".join(f"{own_cost(times, n, k):>16}" if k in times else f"{'-':>16}" for k in owns)
            + f"{peak_c:>12.1f}"
        )

    if text_rows:
        for kind in args.kinds.split(","):
            for n in sizes:
                src = source(make_tokens(n), kind)
                runnables: dict[str, Runnable[Any, Any]] = {
                    "a": src,
                    "b": src | RunnableGenerator(identity),
                    "d": DoNothing(src),
                    "t": TestOnly(src),
                    "c": manage_references(src, style=MarkdownReferenceStyle(deep_links=False)),
                }
                if before is not None:
                    runnables["c0"] = before(src)
                runnables["cd"] = manage_references(
                    src, style=MarkdownReferenceStyle(deep_links=True)
                )
                row(kind, n, runnables)
        if args.ablate:
            columns = ["t", "s", "r", "c", "c - r", "no list", "no citations"]
            columns += ["c0 no citations"] if before is not None else []
            print()
            print(
                "Ablation: the wrapper's own time, (x) - (d), in us per 1,000 tokens (median of "
                "rounds): (t) the per-chunk test alone; (s) one call per chunk to that test; "
                "(r) a do-nothing layer yielding (c)'s output; (c); (c) - (r): (c) against (r); "
                "(c) without the reference list; (c) "
                "and (c0) on the same answer without citations (every [ made a <)"
            )
            print(f"{'source':<18}{'tokens':>7}" + "".join(f"{c:>18}" for c in columns))
            for kind in args.kinds.split(","):
                for n in sizes:
                    own = ablation(
                        make_tokens(n), kind, inp, args.repeat, passes_for(n, args.budget), before
                    )
                    print(f"{kind:<18}{n:>7}" + "".join(f"{own[c]:>18}" for c in columns))
    notes: list[str] = []
    if args.only in ("all", "native"):
        for label, build in (
            ("anthropic-native", anthropic_chunks),
            ("openai-native", openai_chunks),
        ):
            for n in native_sizes[label]:
                chunks, citations = build(n)  # built once, outside the timing
                src = chunk_source(chunks)
                wrapped = manage_references(
                    src, style=MarkdownReferenceStyle(deep_links=False), native="auto"
                )
                rendered = output_text(wrapped.stream(inp)).count("<sup>")
                if rendered != citations:  # a pass-through would measure nothing
                    raise SystemExit(
                        f"{label} {n}: {rendered} markers rendered for {citations} citations"
                    )
                notes.append(
                    f"{label} {n}: {len(chunks):,} chunks, {citations:,} citations (one per "
                    f"{n / citations:.0f} tokens), {rendered:,} <sup> markers in (c)'s output"
                )
                row(
                    label,
                    n,
                    {
                        "a": src,
                        "b": src | RunnableGenerator(identity),
                        "d": DoNothing(src),
                        "c": wrapped,
                    },
                )
    for note in notes:
        print(f"  {note}")
    if scaling:
        print()
        print(
            "Scaling: time per token relative to the smallest size (1.0 = linear), of the bare "
            "source (a), the do-nothing wrapper (d) and manage_references (c)"
        )
    for label, rows in scaling.items():
        n0, m0 = rows[0]
        for k in ("a", "d", "c"):
            cells = ", ".join(f"{n}: {(m[k] / n) / (m0[k] / n0):.2f}" for n, m in rows)
            print(f"  {label:<18} ({k}) {cells}")
    if args.only in ("all", "agent"):
        agent_table(args, docs)


def agent_table(args: argparse.Namespace, docs: list[Document]) -> None:
    """Print the agent-turn rows (see the module docstring), or why they are left out."""
    print()
    try:
        from langchain.agents import create_agent
    except ImportError:
        print("Agent rows left out: langchain (create_agent) is not installed")
        return
    print(
        "Agent turn, model -> tool -> model (langchain "
        f"{importlib.metadata.version('langchain')}, langgraph "
        f"{importlib.metadata.version('langgraph')}): create_agent over the scripted model (p) "
        "and over manage_references(model) (r); median of "
        f"{args.repeat} rounds, (p) and (r) interleaved pass by pass (each timing about "
        f"{args.agent_budget:,} answer tokens); r/p: throughput, median (min-max)"
    )
    header = (
        f"{'agent turn':<18}{'tokens':>7}{'(p) ms/turn':>13}{'(r) ms/turn':>13}{'r/p':>18}"
        f"{'r-p us/turn':>13}{'r-p us/1k tok':>15}"
    )
    print(header)
    print("-" * len(header))
    notes = []
    own: dict[str, list[tuple[int, float]]] = {}  # mode: (tokens, (r) - (p) in us per turn)
    for n in (int(s) for s in args.agent_sizes.split(",")):
        runs, note = agent_runs(n, docs, create_agent)
        notes.append(note)
        for mode, pair in runs.items():
            times = take_turns(pair, args.repeat, passes_for(n, args.agent_budget))
            median = {k: statistics.median(t) * 1e3 for k, t in times.items()}
            own.setdefault(mode, []).append((n, float(own_cost(times, 1, "r", "p", 1e6))))
            print(
                f"{'agent ' + mode:<18}{n:>7}{median['p']:>13.2f}{median['r']:>13.2f}"
                f"{ratio(times, 'r', 'p'):>18}{own_cost(times, 1, 'r', 'p', 1e6):>13}"
                f"{own_cost(times, n, 'r', 'p'):>15}"
            )
    for note in notes:
        print(f"  {note}")
    for mode, points in own.items():
        (n0, us0), (n1, us1) = points[0], points[-1]
        if n1 > n0:  # the wrapper's own time as a fixed part and a part per token
            slope = (us1 - us0) / (n1 - n0)
            print(
                f"  agent {mode}: (r) - (p) from {n0} to {n1} tokens, a line through the two: "
                f"{slope * 1e3:,.0f} us per 1,000 tokens more, {us0 - slope * n0:,.0f} us per "
                "turn at 0 tokens"
            )


if __name__ == "__main__":
    main()
