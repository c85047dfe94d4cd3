"""``benchmarks/bench_code.py`` runs end to end on tiny sizes and prints every row.

The figures are not checked (performance is measured, never asserted): each answer gets a row
per way of feeding it, with a time per size and one ratio per size, the first 1.00.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_code.py"


def test_bench_code_prints_every_row() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "20,40", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.splitlines()
    assert header.split()[:2] == ["answer", "fed"]
    answers = ["fence of short lines", "spans and prose", "spans, no marker", "a span never closed"]
    expected = [(answer, fed) for answer in answers for fed in ("whole", "tokens")]
    row = re.compile(r"^(.+?)\s+(whole|tokens)\s+\d+\.\d{3}s\s+\d+\.\d{3}s\s+1\.00, \d+\.\d\d$")
    matches = [row.match(line) for line in rows]
    assert all(matches), rows
    assert [(m.group(1), m.group(2)) for m in matches if m] == expected
