"""``--engine ray``: the same records as ``--engine local``, in order, failures per item, resume.

One local Ray (127.0.0.1, ``local_ray``: shared with the run's other Ray tests) that the commands
join; the inputs are the offline ones of the commands' other tests (records scored by the lexical
judge, answers, a recorded search of a local site).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from langchain_references.cli import main
from langchain_references.cli._runs import build_limiter
from langchain_references.services.ratelimit import LocalLimiterBackend, RateLimit
from langchain_references.services.runcache import RunCache
from tests.unit_tests.cli.test_interrupts import record, run_main, write_jsonl
from tests.unit_tests.conftest import LocalSite

RAY = ("--engine", "ray", "--workers", "2", "--ray-batch-size", "1")


def without(data: Any, *keys: str) -> Any:
    """``data`` without the timing fields ``keys`` (they differ from run to run)."""
    return {k: v for k, v in data.items() if k not in keys}


# ------------------------------------------------------------------ options (no Ray started)


@pytest.mark.parametrize("command", ["factcheck", "factuality", "citations"])
@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--workers", "3"], "--workers needs"),
        (["--ray-address", "auto"], "--ray-address needs"),
        (["--engine", "local", "--ray-batch-size", "2"], "--ray-batch-size needs"),
        (["--ray-address", "auto", "--workers", "2"], "--ray-address and --workers need"),
    ],
)
def test_ray_options_need_the_ray_engine(
    tmp_path: Path, command: str, options: list[str], named: str
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris")])
    argv = ["X is Y."] if command == "factcheck" else ["--input", str(path)]
    code, out, err = run_main(command, *argv, *options, "--no-cache")
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: {named} --engine ray (the default is local)"]


def test_an_unknown_engine_is_a_usage_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris")])
    code, _, err = run_main("citations", "--input", str(path), "--engine", "spark")
    assert code == 2
    assert "argument --engine: invalid choice: 'spark' (choose from" in err


def test_the_ray_engine_without_ray_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" fails, as without the extra
    path = write_jsonl(tmp_path / "in.jsonl", [record("Paris")])
    code, out, err = run_main("factuality", "--input", str(path), "--engine", "ray")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: --engine ray needs the optional package 'ray' (extra [ray]): "
        'pip install ".[ray]" (in a checkout of this project)'
    ]


def test_the_driver_shares_its_limits_backend_with_every_limiter_of_the_run() -> None:
    backend = LocalLimiterBackend()  # stands in for the run's RayLimiterBackend
    args = argparse.Namespace(rate=[("judge", RateLimit(requests_per_second=2.0))])
    assert build_limiter(args).backend is not build_limiter(args).backend  # each its own
    args.limiter_backend = backend
    limiter = build_limiter(args)
    assert limiter.backend is backend
    assert limiter.limit_for("judge") == RateLimit(requests_per_second=2.0)


# ------------------------------------------------------------------ factuality


def test_factuality_on_ray_writes_what_the_local_engine_writes(
    tmp_path: Path, local_ray: None
) -> None:
    records = [record("Paris"), record("Lyon"), {"response": "Nice is in France."}]
    records += [record("Metz"), record("Brest")]
    path = write_jsonl(tmp_path / "in.jsonl", records)
    runs = {}
    for engine, options in (("local", ["--engine", "local"]), ("ray", list(RAY))):
        output = tmp_path / f"{engine}.jsonl"
        argv = ["--input", str(path), "--judge", "heuristic-lexical", "--output", str(output)]
        code, out, err = run_main("factuality", *argv, *options, "--no-cache")
        lines = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
        runs[engine] = code, out.replace(str(output), "OUT"), err, lines
    (lcode, lout, lerr, local), (rcode, rout, rerr, on_ray) = runs["local"], runs["ray"]
    assert (rcode, lcode) == (1, 1)  # the record without atoms (and no --llm) failed...
    assert rout == lout  # ...and the table is the same, row for row
    assert [r["topic"] for r in on_ray] == ["Paris", "Lyon", "Metz", "Brest"]
    timing = ("elapsed_time", "timings")
    assert [without(r, *timing) for r in on_ray] == [without(r, *timing) for r in local]
    failure = f"error: {path}:3: the input has no atoms"
    for err in (lerr, rerr):  # reported for that record only, in its place
        assert [line.startswith(failure) for line in err.splitlines()].count(True) == 1
        tagged = [line for line in err.splitlines() if line.startswith("[3/5] ")]
        assert tagged[-1].endswith(": error")  # the record's name is its (shortened) location
        assert "scored 4 of 5 record(s)" in err
    done = [line.split()[0] for line in rerr.splitlines() if line.startswith("[")]
    assert done == [f"[{i}/5]" for i in range(1, 6)]  # one line per record, as they arrive


def test_factuality_resume_on_ray_sends_only_the_unfinished_records(
    tmp_path: Path, local_ray: None
) -> None:
    cache = tmp_path / "run.sqlite3"
    first = write_jsonl(tmp_path / "two.jsonl", [record("Paris"), record("Lyon")])
    argv = ["--judge", "heuristic-lexical", "--cache", str(cache)]
    assert run_main("factuality", "--input", str(first), *argv)[0] == 0  # local
    path = write_jsonl(tmp_path / "three.jsonl", [record("Paris"), record("Nice"), record("Lyon")])
    output = tmp_path / "out.jsonl"
    code, _, err = run_main(
        "factuality", "--input", str(path), *argv, "--output", str(output), *RAY, "--resume"
    )
    assert code == 0
    assert f"resumed: reused 2 of 3 record(s) from {cache}" in err.splitlines()
    progress = {line[:5]: line for line in err.splitlines() if line.startswith("[")}
    assert sorted(progress) == ["[1/3]", "[2/3]", "[3/3]"]  # the reused first, then Nice
    for tag, topic in (("[1/3]", "Paris"), ("[3/3]", "Lyon")):
        assert progress[tag].startswith(f"{tag} {topic}: 1 atom(s)")
        assert progress[tag].endswith("reused from the run cache")
    assert progress["[2/3]"].startswith("[2/3] Nice: 1 atom(s), precision 0.000 in ")
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["topic"] for r in written] == ["Paris", "Nice", "Lyon"]
    assert RunCache(cache).count("factuality") == 3  # the driver stored Nice as it arrived


# ------------------------------------------------------------------ citations

ANSWERS = [
    {
        "answer": f"{city} gets a lot of rain every single year [1](id=1).",
        "documents": [{"page_content": text}],
    }
    for city, text in (
        ("Seattle", "Seattle gets a lot of rain every single year."),
        ("Bergen", "Bergen is a dry town."),
        ("Galway", "Galway gets a lot of rain every single year."),
    )
]


def test_citations_on_ray_report_what_the_local_engine_reports(
    tmp_path: Path, local_ray: None
) -> None:
    path = write_jsonl(tmp_path / "answers.jsonl", [*ANSWERS, {"answer": "no documents"}])
    cache = ["--cache", str(tmp_path / "run.sqlite3")]
    argv = ["--input", str(path), "--judge", "heuristic-lexical", "--json", *cache]
    lcode, local, _ = run_main("citations", *argv)
    rcode, on_ray, err = run_main("citations", *argv, *RAY, "--resume")
    assert (lcode, rcode) == (1, 1)  # the record without documents is skipped, on both
    assert on_ray == local  # the same report, byte for byte
    report = json.loads(on_ray)
    assert [a["citation_recall"] for a in report["answers"]] == [1.0, 0.0, 1.0]
    assert f"error: {path}:4: documents" in err
    assert "resumed: reused 3 of 3 answer(s)" in err  # the actors read the local run's judgements
    assert err.count("reused from the run cache") == 3


# ------------------------------------------------------------------ factcheck --file

STATEMENTS = [f"The {name} page is about {name}" for name in ("alpha", "beta", "gamma")]
UNKNOWN = "The delta page is nowhere to be found"


def _factcheck_argv(tmp_path: Path, site: LocalSite) -> list[str]:
    recording = tmp_path / "recording.json"
    results: dict[str, Any] = {
        s: [{"title": s, "snippet": "", "link": site.url(f"/page/{s.split()[1]}")}]
        for s in STATEMENTS
    }
    results[UNKNOWN] = [{"title": "gone", "snippet": "", "link": site.url("/404")}]
    recording.write_text(json.dumps(results), encoding="utf-8")
    argv = ["--search", f"recorded:{recording}", "--allow-private", "--json", "--k", "2"]
    return [*argv, "--judge", "heuristic-lexical", "--cache", str(tmp_path / "run.sqlite3")]


TIMINGS = ("timings", "total_s")


def test_factcheck_file_on_ray_writes_what_the_local_engine_writes(
    tmp_path: Path, local_site: LocalSite, local_ray: None
) -> None:
    statements = tmp_path / "statements.txt"
    statements.write_text("\n".join([STATEMENTS[0], UNKNOWN, *STATEMENTS[1:]]) + "\n")
    argv = ["--file", str(statements), *_factcheck_argv(tmp_path, local_site), "--no-cache"]
    lcode, lout, _ = run_main("factcheck", *argv)
    rcode, rout, rerr = run_main("factcheck", *argv, *RAY)
    assert (lcode, rcode) == (1, 1)  # the statement whose page is gone could not be checked
    local = [without(json.loads(line), *TIMINGS) for line in lout.splitlines()]
    on_ray = [without(json.loads(line), *TIMINGS) for line in rout.splitlines()]
    assert on_ray == local
    assert [d["statement"] for d in on_ray] == [STATEMENTS[0], UNKNOWN, *STATEMENTS[1:]]
    assert [d["verdict"] == "error" for d in on_ray] == [False, True, False, False]
    assert "checked 3 of 4 statement(s)" in rerr
    assert "[2/4] error: could not check" in rerr


def test_factcheck_resume_on_ray_checks_only_the_new_statements(
    tmp_path: Path, local_site: LocalSite, local_ray: None
) -> None:
    argv = _factcheck_argv(tmp_path, local_site)
    first_two = tmp_path / "two.txt"
    first_two.write_text("\n".join(STATEMENTS[:2]) + "\n", encoding="utf-8")
    code, out_two, _ = run_main("factcheck", "--file", str(first_two), *argv, *RAY)
    assert code == 0
    assert dict(local_site.requests) == {"/page/alpha": 1, "/page/beta": 1}

    all_three = tmp_path / "three.txt"
    all_three.write_text("\n".join(STATEMENTS) + "\n", encoding="utf-8")
    code, out, err = run_main("factcheck", "--file", str(all_three), *argv, *RAY, "--resume")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [d["statement"] for d in lines] == STATEMENTS
    assert lines[:2] == [json.loads(line) for line in out_two.splitlines()]
    assert dict(local_site.requests) == {"/page/alpha": 1, "/page/beta": 1, "/page/gamma": 1}
    assert "resumed: reused 2 of 3 statement(s)" in err
    assert err.count("reused from the run cache") == 2


class InterruptingOut(io.StringIO):
    """stdout whose second write is a Ctrl-C."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        if self.writes == 2:
            raise KeyboardInterrupt
        return super().write(text)


def test_ctrl_c_during_a_ray_run_keeps_what_was_reported(
    tmp_path: Path, local_site: LocalSite, local_ray: None
) -> None:
    all_three = tmp_path / "three.txt"
    all_three.write_text("\n".join(STATEMENTS) + "\n", encoding="utf-8")
    argv = ["factcheck", "--file", str(all_three), *_factcheck_argv(tmp_path, local_site), *RAY]
    out, err = InterruptingOut(), io.StringIO()
    assert main([*argv, "-q"], out=out, err=err) == 130
    assert [json.loads(line)["statement"] for line in out.getvalue().splitlines()] == [
        STATEMENTS[0]
    ]
    assert err.getvalue().splitlines()[-1] == "error: interrupted; 1 of 3 statement(s) reported"
    # the run was closed cleanly: the next one on the same Ray works
    code, again, _ = run_main(*argv, "--resume")
    assert code == 0
    assert len(again.splitlines()) == 3
