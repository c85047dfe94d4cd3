"""``benchmarks/bench_streaming.py`` runs end to end on tiny sizes and prints every row.

The figures themselves are not checked (performance is measured, never asserted); what is
checked is that the script still runs against today's code, that each kind of source gets its
row with parseable ratios and the wrapper's own µs per 1,000 tokens (today's and the
``--before`` commit's) and its ablation row, that the agent-turn rows (``invoke`` and
``messages``) print their times, ratio and own cost, and that the native and agent rows' own
checks (one marker rendered per citation generated) passed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_streaming.py"
ARGS = ["--sizes", "200,400", "--repeat", "2", "--budget", "2000", "--ablate"]
NATIVE_ARGS = ["--native-sizes", "500", "--anthropic-sizes", "200"]
AGENT_ARGS = ["--agent-sizes", "200,400", "--agent-budget", "1"]  # one pass per timing
RATIO = r"\d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\)"


def test_bench_streaming_prints_every_row() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *ARGS, *NATIVE_ARGS, *AGENT_ARGS],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.startswith("langchain-core ")
    for label, sizes in (
        ("str", (200, 400)),
        ("AIMessageChunk", (200, 400)),
        ("anthropic-native", (200,)),
        ("openai-native", (500,)),
    ):
        for n in sizes:
            row = re.search(rf"^{label} +{n} .*$", out, re.MULTILINE)
            assert row is not None, f"no {label} {n} row in:\n{out}"
            assert re.search(RATIO, row.group(0)), row.group(0)
            # c-d and c0-d us per 1k tokens (c0 is "-" on the native rows), then peak MiB
            assert re.search(r" -?\d+ +(?:-?\d+|-) +\d+\.\d$", row.group(0)), row.group(0)
    assert "c-d us/1k tok" in out
    assert "c0-d us/1k tok" in out, "the --before commit's (c0) column is missing"
    for label, n in (("anthropic-native", 200), ("openai-native", 500)):
        note = re.search(rf"{label} {n}: .* (\d+) citations .* (\d+) <sup> markers", out)
        assert note is not None, out
        assert note.group(1) == note.group(2), note.group(0)
    ablation = out[out.index("Ablation: ") :]
    for label in ("str", "AIMessageChunk"):
        for n in (200, 400):
            row = re.search(rf"^{label} +{n}((?: +-?\d+){{7,8}})$", ablation, re.MULTILINE)
            assert row is not None, f"no {label} {n} ablation row in:\n{ablation}"
    assert "Scaling: time per token" in out
    agent = out[out.index("Agent turn, model -> tool -> model") :]
    for mode in ("invoke", "messages"):
        for n in (200, 400):
            row = re.search(
                rf"^agent {mode} +{n} +\d+\.\d\d +\d+\.\d\d +{RATIO} +-?\d+ +-?\d+$",
                agent,
                re.MULTILINE,
            )
            assert row is not None, f"no agent {mode} {n} row in:\n{agent}"
        assert re.search(
            rf"agent {mode}: \(r\) - \(p\) from 200 to 400 tokens, .* us per turn at 0 tokens",
            agent,
        )
    for n in (200, 400):
        note = re.search(rf"agent {n}: (\d+) citations, (\d+) <sup> markers", agent)
        assert note is not None, agent
        assert note.group(1) == note.group(2), note.group(0)
