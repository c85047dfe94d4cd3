"""``benchmarks/bench_cli_import.py`` runs end to end with one run per row and prints every row.

The figures are not checked (performance is measured, never asserted): a row per command, the
bare interpreter first, each with a median time and a module count.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_cli_import.py"


def test_bench_cli_import_prints_every_row() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.splitlines()
    assert header.split() == ["command", "median", "modules"]
    row = re.compile(r"^(.+?)\s+(\d+\.\d{3})s\s+(\d+)$")
    matches = [row.match(line) for line in rows]
    assert all(matches), rows
    labels = [m.group(1) for m in matches if m]
    commands = [
        "factcheck",
        "factuality",
        "citations",
        "demo",
        "index",
        "index build",
        "index add",
        "serve",
    ]
    assert labels == ["python -c pass", "--version", "--help", *(f"{c} --help" for c in commands)]
    counts = [int(m.group(3)) for m in matches if m]
    assert all(count > counts[0] for count in counts[1:])  # the program imports more than python
