"""Batch throughput on this machine: the local engine and Ray at 1 and 2 workers.

    python benchmarks/bench_scale.py [--records 400] [--statements 24] [--repeat 1]

Runs the CLI as a user does (one subprocess per run, so each Ray run starts and stops its own
local Ray on 127.0.0.1, and pays for it):

* ``index build`` of abstract-length records (the evidence sentences of
  ``../shared/data/climate-fever-dev.jsonl`` grouped by article, or the demo corpus's chunks when
  the data is absent) into an embedded Chroma store;
* ``factcheck --file`` of statements against the offline demo site (search, fetch over HTTP on
  127.0.0.1, extract, passages, relevance, the offline judge).

The limit is the raw embedding throughput of the same model (all-MiniLM-L6-v2, int8 ONNX) in
one process using every core, on the same texts: ``texts/s`` of each run (the texts it
embedded per second) is compared with it. Ray's fixed cost (start and stop of a local Ray, the
actors loading their model) is measured on its own and given beside each run; ``items/s`` is
what the user waits for, start-up included.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from langchain_references.server.index import parse_evidence_record
from langchain_references.server.index.records import entries_of
from langchain_references.services.embeddings import MiniLMEmbeddings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data" / "climate-fever-dev.jsonl"
DEMO = ROOT / "langchain_references" / "_data" / "demo_corpus.json"
CLI = [sys.executable, "-m", "langchain_references.cli"]


def corpus(limit: int) -> list[dict[str, Any]]:
    """Abstract-length records: evidence sentences grouped by article (or the demo chunks)."""
    if DATA.is_file():
        by_article: dict[str, list[str]] = defaultdict(list)
        for line in DATA.read_text(encoding="utf-8").splitlines():
            claim = json.loads(line)
            for evidence in claim["evidences"]:
                sentences = by_article[evidence["article"]]
                if evidence["evidence"] not in sentences:
                    sentences.append(evidence["evidence"])
        records = []
        for number, (article, sentences) in enumerate(sorted(by_article.items())):
            for part in range(0, len(sentences), 6):  # about an abstract: 6 sentences
                text = " ".join(sentences[part : part + 6])
                records.append(
                    {"id": f"r{number}-{part}", "title": article, "text": text, "year": 2020}
                )
        source = "climate-fever-dev evidence, 6 sentences per record"
    else:
        print(f"note: {DATA} is absent; using the demo corpus's chunks", file=sys.stderr)
        articles = json.loads(DEMO.read_text(encoding="utf-8"))["articles"]
        chunks = [c for a in articles for c in a["chunks"]]
        records = [
            {"id": f"r{i}", "title": "demo", "text": str(c)}
            for i, c in zip(range(limit), itertools.cycle(chunks), strict=False)
        ]
        source = "demo corpus chunks (repeated)"
    records = records[:limit]
    print(f"corpus: {len(records)} records ({source})")
    return records


def entry_texts(records: list[dict[str, Any]]) -> list[str]:
    """The distinct texts an index build embeds: each record's abstract and its sentences."""
    texts: dict[str, None] = {}
    for raw in records:
        for entry in entries_of(parse_evidence_record(raw)):
            texts.setdefault(entry.text, None)
    return list(texts)


def raw_embedding(texts: list[str], batch: int = 256) -> float:
    """Texts/s of MiniLM's embed_documents in this process (every core), the limit."""
    model = MiniLMEmbeddings()
    model.embed_documents(texts[:32])  # load and warm up
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        model.embed_documents(texts[start : start + batch])
    return len(texts) / (time.perf_counter() - started)


def store_writes(count: int = 20_000, batch: int = 1_000) -> tuple[float, float]:
    """Entries/s upserted with precomputed 384-d vectors: (embedded Chroma, `chroma run`)."""
    import random

    import chromadb
    from bench_index_build import chroma_server
    from chromadb.config import Settings

    rng = random.Random(0)
    vectors = [[rng.uniform(-1, 1) for _ in range(384)] for _ in range(count)]
    ids = [f"e{i}" for i in range(count)]
    docs = [f"sentence number {i} of the benchmark corpus" for i in range(count)]
    rates = []
    with tempfile.TemporaryDirectory() as tmp, chroma_server(Path(tmp)) as url:
        if url is None:
            raise SystemExit("the `chroma` command is not installed")
        settings = Settings(anonymized_telemetry=False)
        port = int(url.rsplit(":", 1)[1])
        clients = [
            chromadb.PersistentClient(path=f"{tmp}/embedded", settings=settings),
            chromadb.HttpClient(host="127.0.0.1", port=port, settings=settings),
        ]
        for client in clients:
            collection = client.create_collection(
                "bench", configuration={"hnsw": {"space": "cosine"}}
            )
            started = time.perf_counter()
            for start in range(0, count, batch):
                end = start + batch
                collection.upsert(
                    ids=ids[start:end], embeddings=vectors[start:end], documents=docs[start:end]
                )
            rates.append(count / (time.perf_counter() - started))
    return rates[0], rates[1]


def ray_overhead() -> float:
    """Seconds a Ray run pays before and after its work: start, two actors, stop."""
    code = (
        "import time;from langchain_core.runnables import RunnableLambda;"
        "from langchain_references.services.engine import RayOptions, map_runnable;"
        "t=time.perf_counter();"
        "list(map_runnable(range(4), lambda: RunnableLambda(lambda x: x), RayOptions(workers=2)));"
        "print(time.perf_counter()-t)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return float(done.stdout.strip().splitlines()[-1])


def timed(argv: list[str]) -> tuple[float, str]:
    """Run the CLI; return its wall time and stdout (exit status must be 0)."""
    started = time.perf_counter()
    done = subprocess.run([*CLI, *argv], capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, done.stdout


ENGINES = [("local", []), ("ray, 1 worker", ["--engine", "ray", "--workers", "1"])]
ENGINES.append(("ray, 2 workers", ["--engine", "ray", "--workers", "2"]))


def bench_index(records: list[dict[str, Any]], texts: int, limit: float) -> list[list[str]]:
    """Rows of the index build table."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.jsonl"
        corpus_file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        for number, (engine, options) in enumerate(ENGINES):
            store = Path(tmp) / f"store{number}"
            argv = ["index", "build", "--input", str(corpus_file), "--name", "bench"]
            argv += ["--persist-dir", str(store), "--quiet", *options]
            seconds, _ = timed(argv)
            rows.append(row(engine, len(records), texts, seconds, limit))
    return rows


def demo_passages() -> list[str]:
    """The demo site's paragraphs: the passages a demo fact-check embeds."""
    articles = json.loads(DEMO.read_text(encoding="utf-8"))["articles"]
    return [str(chunk) for article in articles for chunk in article["chunks"]] * 4


def statements() -> list[str]:
    """The first sentence of each demo chunk: statements the demo site has evidence for."""
    articles = json.loads(DEMO.read_text(encoding="utf-8"))["articles"]
    found = []
    for article in articles:
        for chunk in article["chunks"]:
            first = str(chunk).split(". ")[0].strip().rstrip(".") + "."
            if len(first) > 30:
                found.append(first)
    return found


def bench_factcheck(count: int, limit: float) -> tuple[list[list[str]], float, float]:
    """Rows of the fact-check table, and the mean passages judged and pages fetched."""
    chosen = list(itertools.islice(itertools.cycle(statements()), count))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "statements.txt"
        file.write_text("\n".join(chosen) + "\n", encoding="utf-8")
        for engine, options in ENGINES:
            argv = ["factcheck", "--search", "demo", "--file", str(file), "--json", "--quiet"]
            argv += ["--no-cache", *options]
            seconds, out = timed(argv)
            results = [json.loads(line) for line in out.splitlines() if line.strip()]
            if len(results) != count or any(r["error"] for r in results):
                raise SystemExit(f"factcheck ({engine}): {len(results)} results, some failed")
            texts = sum(r["counts"]["passages"] + 1 for r in results)  # passages + statement
            rows.append(row(engine, count, texts, seconds, limit))
            judged = sum(r["counts"]["judged"] for r in results) / count
            fetched = sum(r["counts"]["fetched"] for r in results) / count
    return rows, judged, fetched


HTML = ROOT / ".." / "shared" / "data" / "html_fixtures"
#: gpt-4o-mini's list price, USD per million tokens (input, output), as OpenAI publishes it
#: (standard tier, not the Batch API's half price): change here when it changes.
PRICE_IN, PRICE_OUT = 0.15, 0.60
JUDGE = "openai:gpt-4o-mini"
#: Tokens of a JudgeReply tool call (label, confidence, a one- or two-sentence rationale).
REPLY_TOKENS = 60


def judge_tokens() -> tuple[float, float, int]:
    """Tokens of one LLM-judge call: (prompt, passage, pages measured), counted in cl100k.

    The prompt is the LLM judge's real one (system message, delimited statement and passage)
    plus its tool schema; the passages are the PassageSplitter's over real web pages.
    """
    import tiktoken
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from langchain_references.core.prompting import delimit
    from langchain_references.factcheck.extract import extract_html
    from langchain_references.factcheck.passages import DEFAULT_ENCODING, PassageSplitter
    from langchain_references.factcheck.types import ExtractedPage
    from langchain_references.judges.llm import DEFAULT_JUDGE_PROMPT, JudgeReply

    pages = []
    for number, path in enumerate(sorted(HTML.glob("*.html")) if HTML.is_dir() else []):
        text, title = extract_html(path.read_text(encoding="utf-8", errors="replace"))
        url = f"https://{path.stem}/"
        pages.append(
            ExtractedPage(
                url=url,
                final_url=url,
                title=title or url,
                text=text,
                rank=number,
                content_type="text/html",
            )
        )
    passages = PassageSplitter().split(pages) if pages else []
    encoding = tiktoken.get_encoding(DEFAULT_ENCODING)
    statement = "Arctic summer sea ice has declined by about 13 percent per decade since 1979."
    sample = passages[0].text if passages else "x"
    messages = DEFAULT_JUDGE_PROMPT.format_messages(
        statement=delimit("statement", statement), passage=delimit("passage", sample)
    )
    tool = json.dumps(convert_to_openai_tool(JudgeReply))
    fixed = sum(len(encoding.encode(str(m.content))) for m in messages) + len(encoding.encode(tool))
    fixed -= len(encoding.encode(sample))
    mean_passage = (
        sum(len(encoding.encode(p.text)) for p in passages) / len(passages) if passages else 256.0
    )
    return fixed, mean_passage, len(pages)


def plan(texts_per_core_s: float, judged_per_claim: float, fetched_per_claim: float) -> str:
    """The plan's figures for 1M claims and a 10M-sentence index, from this run's measures."""
    fixed, passage, pages = judge_tokens()
    tokens_in = fixed + passage
    per_claim = judged_per_claim * (tokens_in * PRICE_IN + REPLY_TOKENS * PRICE_OUT) / 1e6
    claims = 1_000_000
    embed_texts = claims * (judged_per_claim + 1)
    core_hours = embed_texts / texts_per_core_s / 3600
    calls = claims * judged_per_claim
    lines = [
        f"judge call ({JUDGE}): {fixed:.0f} prompt + {passage:.0f} passage tokens in "
        f"(passages of {pages} real web pages), {REPLY_TOKENS} out (assumed)",
        f"per claim: {judged_per_claim:.1f} passages judged, {fetched_per_claim:.1f} pages "
        f"fetched (this run's mean)",
        f"cost per 1,000 claims at ${PRICE_IN}/${PRICE_OUT} per M tokens: ${per_claim * 1000:.2f}",
        f"1M claims: {calls / 1e6:.1f}M judge calls, {calls * tokens_in / 1e9:.2f}B tokens in, "
        f"${per_claim * claims:,.0f}; {claims * fetched_per_claim / 1e6:.1f}M page fetches; "
        f"{embed_texts / 1e6:.1f}M texts embedded = {core_hours:,.0f} core-hours at this "
        f"machine's {texts_per_core_s:.0f} texts/s per core",
    ]
    return "\n".join(lines)


def row(engine: str, items: int, texts: int, seconds: float, limit: float) -> list[str]:
    """One table row: items/s, texts embedded per second and its share of the limit."""
    return [
        engine,
        str(items),
        f"{seconds:.1f}",
        f"{items / seconds:.2f}",
        f"{texts / seconds:.0f}",
        f"{texts / seconds / limit:.2f}",
    ]


def table(rows: list[list[str]]) -> str:
    """A GitHub Markdown table."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--statements", type=int, default=24)
    args = parser.parse_args()
    records = corpus(args.records)
    texts = entry_texts(records)
    limit = raw_embedding(texts)
    sentences = [t for t in texts if len(t) < 300]
    sentence_rate = raw_embedding(sentences)
    passage_limit = raw_embedding(demo_passages())
    embedded_writes, server_writes = store_writes()
    overhead = ray_overhead()
    print(f"machine: {os.cpu_count()} cores")
    print(f"raw MiniLM embedding, one process, every core: {limit:.0f} texts/s (the limit)")
    print(f"raw MiniLM embedding of single sentences: {sentence_rate:.0f} sentences/s")
    print(f"raw MiniLM embedding of the demo site's passages: {passage_limit:.0f} texts/s")
    print(
        f"Chroma writes, precomputed vectors: embedded {embedded_writes:.0f} entries/s, "
        f"`chroma run` server {server_writes:.0f} entries/s"
    )
    print(f"Ray's fixed cost (start, 2 actors, stop): {overhead:.1f} s per run\n")
    header = ["engine", "items", "seconds", "items/s", "texts/s", "of the limit"]
    print(f"index build: {len(records)} records, {len(texts)} distinct texts embedded")
    print(table([header, *bench_index(records, len(texts), limit)]) + "\n")
    print(
        f"factcheck --file: {args.statements} statements, offline demo site (limit: the "
        "demo passages' raw rate)"
    )
    checks, mean_judged, mean_fetched = bench_factcheck(args.statements, passage_limit)
    print(table([header, *checks]) + "\n")
    print("plan inputs (docs/scaling.md)")
    print(plan(limit / (os.cpu_count() or 1), mean_judged, mean_fetched))


if __name__ == "__main__":
    main()
