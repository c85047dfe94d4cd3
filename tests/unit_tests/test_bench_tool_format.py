"""``benchmarks/bench_tool_format.py`` runs end to end on tiny sizes and prints every row.

The figures are not checked (performance is measured, never asserted): one row per kind of
document and size, each with a time and a memory figure.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tool_format.py"


def test_bench_tool_format_prints_every_row() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "50,200", "--results", "2", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.splitlines()
    assert header.split()[:3] == ["documents", "size", "ns/char"]
    row = re.compile(r"^(prose|html-like)\s+([\d,]+)\s+\d+\.\d\s+-?\d+\.\d$")
    matches = [row.match(line) for line in rows]
    assert all(matches), rows
    assert [(m.group(1), m.group(2)) for m in matches if m] == [
        ("prose", "50"),
        ("prose", "200"),
        ("html-like", "50"),
        ("html-like", "200"),
    ]
