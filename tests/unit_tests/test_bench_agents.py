"""``benchmarks/bench_agents.py`` runs end to end on a tiny size and prints its table.

The figures are not checked (performance is measured, never asserted): one row per size, with
the three agents' times and the wrapper's and the middleware's own cost.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_agents.py"


@pytest.mark.slow
def test_bench_agents_prints_a_row_per_size() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "30,60", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    header, _rule, *rows = run.stdout.splitlines()
    assert header.startswith("| tokens | bare ms | wrapper ms | middleware ms |")
    number = r"-?[\d,]+"
    cost = rf"{number} \({number} to {number}\)"
    row = re.compile(rf"^\| (30|60) \| [\d,.]+ \| [\d,.]+ \| [\d,.]+ \| {cost} \| {cost} \|$")
    assert [row.match(line).group(1) for line in rows] == ["30", "60"]  # type: ignore[union-attr]
