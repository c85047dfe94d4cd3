"""``--resume`` of the batch commands: what finished is reused, the rest is run, counts said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langchain_references.cli import citations as citations_cli
from langchain_references.cli import factuality as factuality_cli
from langchain_references.factuality.pipeline import create_factuality_evaluator
from langchain_references.services.runcache import RunCache
from tests.unit_tests.cli.test_interrupts import (
    InterruptAt,
    interrupt_factuality_at,
    record,
    run_main,
    write_jsonl,
)
from tests.unit_tests.conftest import LocalSite

# ------------------------------------------------------------------ factuality


def count_factuality_records(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace the evaluator by one that notes the topic of every record it scores."""
    scored: list[str] = []
    build = create_factuality_evaluator

    class Evaluator:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.inner = build(*args, **kwargs)

        def invoke(self, value: Any, config: Any = None) -> Any:
            scored.append(value.topic)
            return self.inner.invoke(value, config)

    monkeypatch.setattr(factuality_cli, "create_factuality_evaluator", Evaluator)
    return scored


def test_factuality_resume_after_ctrl_c_scores_only_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris"), record("Lyon"), record("Nice")])
    output = tmp_path / "out.jsonl"
    cache = tmp_path / "run.sqlite3"
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)]
    argv += ["--cache", str(cache)]
    interrupt_factuality_at(monkeypatch, 3)
    assert run_main("factuality", *argv)[0] == 130
    interrupted = [json.loads(line) for line in output.read_text().splitlines()]

    scored = count_factuality_records(monkeypatch)
    code, out, err = run_main("factuality", *argv, "--resume")
    assert code == 0
    assert scored == ["Nice"]  # Paris and Lyon were finished
    assert f"resumed: reused 2 of 3 record(s) from {cache}" in err.splitlines()
    reused = [line for line in err.splitlines() if line.endswith("reused from the run cache")]
    assert [line.split()[1] for line in reused] == ["Paris:", "Lyon:"]
    written = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["topic"] for r in written] == ["Paris", "Lyon", "Nice"]
    assert written[:2] == interrupted  # the reused lines, exactly as first written
    assert [line.split()[0] for line in out.splitlines()[4:7]] == ["Paris", "Lyon", "Nice"]


def test_factuality_without_resume_recomputes_and_another_judge_reuses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris"), record("Lyon")])
    cache = ["--cache", str(tmp_path / "run.sqlite3")]
    scored = count_factuality_records(monkeypatch)
    run_main("factuality", "--input", str(path), "--judge", "heuristic-lexical", *cache)
    run_main("factuality", "--input", str(path), "--judge", "heuristic-lexical", *cache)
    assert scored == ["Paris", "Lyon"] * 2  # no --resume: everything again
    code, _, err = run_main(
        "factuality", "--input", str(path), "--judge", "heuristic", *cache, "--resume"
    )
    assert code == 0
    assert scored == ["Paris", "Lyon"] * 3  # another judge: nothing reused
    assert "resumed: reused 0 of 2 record(s)" in err


def test_resume_needs_the_cache(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris")])
    code, _, err = run_main("factuality", "--input", str(path), "--no-cache", "--resume")
    assert code == 2
    assert err == "error: --resume needs the run cache: drop --no-cache\n"


def test_no_cache_records_nothing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris")])
    cache = tmp_path / "run.sqlite3"
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--cache", str(cache)]
    assert run_main("factuality", *argv, "--no-cache")[0] == 0
    assert not cache.exists()
    assert run_main("factuality", *argv)[0] == 0
    assert RunCache(cache).count("factuality") == 1


# ------------------------------------------------------------------ citations

ANSWERS = [
    {
        "answer": f"{city} gets a lot of rain every single year [1](id=1).",
        "documents": [{"page_content": f"{city} gets a lot of rain every single year."}],
    }
    for city in ("Seattle", "Bergen", "Galway")
]


def test_citations_resume_after_ctrl_c_judges_only_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--json"]
    argv += ["--cache", str(tmp_path / "run.sqlite3")]
    _, fresh, _ = run_main("citations", *argv, "--no-cache")

    from langchain_references.citations import evaluate_answers

    monkeypatch.setattr(citations_cli, "evaluate_answers", InterruptAt(evaluate_answers, 2))
    assert run_main("citations", *argv)[0] == 130
    monkeypatch.undo()

    code, out, err = run_main("citations", *argv, "--resume")
    assert code == 0
    assert "resumed: reused 1 of 3 answer(s)" in err
    assert "answer 0: recall 1.000, precision 1.000" in err
    assert err.count("reused from the run cache") == 1
    assert json.loads(out) == json.loads(fresh)  # the same report as a run from scratch


def _damage(cache: Path) -> None:
    """Overwrite the cache file's pages but its first two (its schema opens; its data fails)."""
    import gc
    import sqlite3

    gc.collect()  # the runs' connections
    with sqlite3.connect(cache) as connection:
        assert connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    data = bytearray(cache.read_bytes())
    assert len(data) > 8192 * 4
    data[8192:] = b"\xff" * (len(data) - 8192)
    cache.write_bytes(bytes(data))


def test_a_damaged_cache_is_one_line_and_every_answer_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    answers = [
        {
            "answer": f"Town {i} gets a lot of rain every single year [1](id=1).",
            "documents": [{"page_content": f"Town {i} gets a lot of rain every single year."}],
        }
        for i in range(120)
    ]
    path = write_jsonl(tmp_path / "answers.jsonl", answers)
    cache = tmp_path / "run.sqlite3"
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--json"]
    _, fresh, _ = run_main("citations", *argv, "--no-cache")
    assert run_main("citations", *argv, "--cache", str(cache))[0] == 0
    _damage(cache)

    with caplog.at_level("WARNING", logger="langchain_references.services.runcache"):
        code, out, err = run_main("citations", *argv, "--cache", str(cache), "--resume")

    assert code == 0
    assert json.loads(out) == json.loads(fresh)  # all 120 answers, as a run without a cache
    assert "Traceback" not in err
    assert [r.getMessage() for r in caplog.records] == [
        f"cache {cache}: database disk image is malformed; the run goes on without its cache: "
        "what finishes from now on is reported but not recorded for --resume"
    ]


# ------------------------------------------------------------------ factcheck --file

STATEMENTS = [f"The {name} page is about {name}" for name in ("alpha", "beta", "gamma")]


def test_factcheck_file_resume_checks_only_the_new_statements(
    tmp_path: Path, local_site: LocalSite
) -> None:
    recording = tmp_path / "recording.json"
    results = {
        s: [{"title": s, "snippet": "", "link": local_site.url(f"/page/{s.split()[1]}")}]
        for s in STATEMENTS
    }
    recording.write_text(json.dumps(results), encoding="utf-8")
    argv = ["--search", f"recorded:{recording}", "--allow-private", "--json", "--k", "2"]
    argv += ["--judge", "heuristic-lexical", "--cache", str(tmp_path / "run.sqlite3")]
    first_two = tmp_path / "two.txt"
    first_two.write_text("\n".join(STATEMENTS[:2]) + "\n", encoding="utf-8")
    code, out_two, _ = run_main("factcheck", "--file", str(first_two), *argv)
    assert code == 0
    assert sum(local_site.requests.values()) == 2

    all_three = tmp_path / "three.txt"
    all_three.write_text("\n".join(STATEMENTS) + "\n", encoding="utf-8")
    code, out, err = run_main("factcheck", "--file", str(all_three), *argv, "--resume")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [d["statement"] for d in lines] == STATEMENTS
    assert lines[:2] == [json.loads(line) for line in out_two.splitlines()]
    assert dict(local_site.requests) == {"/page/alpha": 1, "/page/beta": 1, "/page/gamma": 1}
    assert "resumed: reused 2 of 3 statement(s)" in err
    assert err.count("reused from the run cache") == 2


def test_rate_option_is_checked(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris")])
    code, _, err = run_main("factuality", "--input", str(path), "--rate", "llm=1")
    assert code == 2
    assert err.splitlines()[-1].endswith(
        "argument --rate: expected KIND=RPS[/CONCURRENT] with KIND one of search, fetch, judge,"
        " got 'llm=1'"
    )
    code, _, err = run_main("factuality", "--input", str(path), "--rate", "judge=fast")
    assert code == 2
    assert "expected RPS[/CONCURRENT] (e.g. 1 or 0.5/2), or none for no limit, got 'fast'" in err
    for spec, message in (
        ("judge=", "or none for no limit, got ''"),
        ("fetch=1e-300", "requests per second must be between 0.001 and 10000"),
    ):
        code, out, err = run_main("factuality", "--input", str(path), "--rate", spec)
        assert (code, out) == (2, "")
        assert message in err.splitlines()[-1]


# ------------------------------------------------------------------ factcheck: every search kind
# A search's identity in the cache keys is its corpus, folder or recording (their contents),
# never the address of the local server the demo and local searches serve their pages from
# (a new port every run).

SEARCH_ITEMS = ("search", "page")


def factcheck_twice(argv: list[str], cache: Path) -> str:
    """Run ``factcheck`` fresh, then with ``--resume`` and the same output: the second's stderr."""
    code, first, err = run_main("factcheck", *argv, "--cache", str(cache))
    assert code == 0, err
    code, second, err = run_main("factcheck", *argv, "--cache", str(cache), "--resume")
    assert code == 0, err
    assert second == first
    return err


def resumed_line(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("resumed: ")]
    return line


def entries(cache: Path) -> dict[str, int]:
    store = RunCache(cache)
    try:
        return {namespace: store.count(namespace) for namespace in SEARCH_ITEMS}
    finally:
        store.close()


DEMO_STATEMENTS = ["Europa has an ocean under its ice", "Honeybees dance to share directions"]
DEMO_ARGS = ["--search", "demo", "--judge", "heuristic-lexical", "--json", "--k", "3"]
DEMO_ARGS += ["--max-results", "3"]


def test_factcheck_demo_search_resumes_every_statement(tmp_path: Path) -> None:
    cache = tmp_path / "run.sqlite3"
    err = factcheck_twice([*DEMO_STATEMENTS, *DEMO_ARGS], cache)
    assert resumed_line(err) == f"resumed: reused 2 of 2 statement(s) from {cache}"
    assert err.count("reused from the run cache") == 2


def test_factcheck_demo_search_unfinished_statements_reuse_searches_and_pages(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "run.sqlite3"
    argv = [*DEMO_STATEMENTS, *DEMO_ARGS, "--cache", str(cache)]
    assert run_main("factcheck", *argv)[0] == 0
    stored = entries(cache)
    assert stored["search"] == 2
    assert stored["page"] >= 3
    store = RunCache(cache)
    assert store.clear("factcheck") == 2  # as if the run had stopped before the verdicts
    store.close()

    code, out, err = run_main("factcheck", *argv, "--resume")
    assert code == 0, err
    assert resumed_line(err) == f"resumed: reused 0 of 2 statement(s) from {cache}"
    assert entries(cache) == stored  # the searches and pages of the first run, under their keys
    # the searches read back link to this run's server, where the pages were fetched from
    [base_url] = [line.split()[-1] for line in err.splitlines() if line.startswith("search: ")]
    urls = [e["url"] for line in out.splitlines() for e in json.loads(line)["supporting"]]
    assert urls
    assert all(url.startswith(base_url) for url in urls)


def write_folder(folder: Path, terns: str) -> Path:
    folder.mkdir()
    (folder / "terns.html").write_text(
        "<html><head><title>Terns</title></head><body><article><p>"
        + terns * 3
        + "</p></article></body></html>",
        encoding="utf-8",
    )
    (folder / "puffins.txt").write_text(
        "Puffins dig burrows on grassy cliffs and come back to them every spring. " * 3,
        encoding="utf-8",
    )
    return folder


TERNS = "Arctic terns fly from pole to pole every year, the longest migration known. "
LOCAL_STATEMENTS = ["Arctic terns migrate pole to pole", "Puffins dig burrows on cliffs"]
LOCAL_ARGS = ["--judge", "heuristic-lexical", "--json", "--k", "3"]


def test_factcheck_local_search_resumes_every_statement_until_a_file_changes(
    tmp_path: Path,
) -> None:
    folder = write_folder(tmp_path / "corpus", TERNS)
    cache = tmp_path / "run.sqlite3"
    argv = [*LOCAL_STATEMENTS, "--search", f"local:{folder}", *LOCAL_ARGS]
    err = factcheck_twice(argv, cache)
    assert resumed_line(err) == f"resumed: reused 2 of 2 statement(s) from {cache}"

    (folder / "terns.html").write_text(
        "<html><body><article><p>" + TERNS.replace("pole to pole", "coast to coast") * 3,
        encoding="utf-8",
    )
    code, _, err = run_main("factcheck", *argv, "--cache", str(cache), "--resume")
    assert code == 0, err
    assert resumed_line(err) == f"resumed: reused 0 of 2 statement(s) from {cache}"


def test_factcheck_local_search_identity_is_the_content_not_the_path(tmp_path: Path) -> None:
    cache = tmp_path / "run.sqlite3"
    one = write_folder(tmp_path / "one", TERNS)
    two = write_folder(tmp_path / "two", TERNS)
    assert (
        run_main(
            "factcheck",
            *LOCAL_STATEMENTS,
            "--search",
            f"local:{one}",
            *LOCAL_ARGS,
            "--cache",
            str(cache),
        )[0]
        == 0
    )
    code, _, err = run_main(
        "factcheck",
        *LOCAL_STATEMENTS,
        "--search",
        f"local:{two}",
        *LOCAL_ARGS,
        "--cache",
        str(cache),
        "--resume",
    )
    assert code == 0, err
    assert resumed_line(err) == f"resumed: reused 2 of 2 statement(s) from {cache}"


def write_recording(path: Path, site: LocalSite, pages: dict[str, str]) -> Path:
    results = {s: [{"title": s, "snippet": "", "link": site.url(p)}] for s, p in pages.items()}
    path.write_text(json.dumps(results), encoding="utf-8")
    return path


RECORDED_ARGS = ["--allow-private", "--json", "--k", "2", "--judge", "heuristic-lexical"]


def test_factcheck_recorded_search_resumes_every_statement_wherever_the_file_is(
    tmp_path: Path, local_site: LocalSite
) -> None:
    pages = {s: f"/page/{s.split()[1]}" for s in STATEMENTS}
    recording = write_recording(tmp_path / "recording.json", local_site, pages)
    cache = ["--cache", str(tmp_path / "run.sqlite3")]
    err = factcheck_twice(
        [*STATEMENTS, "--search", f"recorded:{recording}", *RECORDED_ARGS], tmp_path / "run.sqlite3"
    )
    assert resumed_line(err) == f"resumed: reused 3 of 3 statement(s) from {cache[1]}"

    moved = tmp_path / "moved" / "recording.json"  # the same recording elsewhere
    moved.parent.mkdir()
    moved.write_bytes(recording.read_bytes())
    argv = [*STATEMENTS, "--search", f"recorded:{moved}", *RECORDED_ARGS, *cache, "--resume"]
    code, _, err = run_main("factcheck", *argv)
    assert code == 0, err
    assert resumed_line(err) == f"resumed: reused 3 of 3 statement(s) from {cache[1]}"
    assert sum(local_site.requests.values()) == 3  # each page fetched once, by the first run


def test_factcheck_recorded_search_edited_reuses_no_stale_check(
    tmp_path: Path, local_site: LocalSite
) -> None:
    pages = {s: f"/page/{s.split()[1]}" for s in STATEMENTS}
    recording = write_recording(tmp_path / "recording.json", local_site, pages)
    argv = [*STATEMENTS, "--search", f"recorded:{recording}", *RECORDED_ARGS]
    argv += ["--cache", str(tmp_path / "run.sqlite3")]
    assert run_main("factcheck", *argv)[0] == 0

    # another page for one statement (about the same): the recording replays something else
    pages[STATEMENTS[0]] = "/page/alpha-2"
    write_recording(recording, local_site, pages)
    code, out, err = run_main("factcheck", *argv, "--resume")
    assert code == 0, err
    assert (
        resumed_line(err) == f"resumed: reused 0 of 3 statement(s) from {tmp_path / 'run.sqlite3'}"
    )
    [cited] = [e["url"] for e in json.loads(out.splitlines()[0])["supporting"]]
    assert cited == local_site.url("/page/alpha-2")
    # only the new page is fetched: the pages are keyed by their URLs, which did not change
    assert dict(local_site.requests) == {
        "/page/alpha": 1,
        "/page/beta": 1,
        "/page/gamma": 1,
        "/page/alpha-2": 1,
    }
