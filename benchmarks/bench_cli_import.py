"""Start-up cost of the small commands: ``--version``, ``--help`` and each command's ``--help``.

Run: ``python benchmarks/bench_cli_import.py [--runs N]``. Each row runs a fresh interpreter
``N`` times (``python -c`` calling :func:`langchain_references.cli.main` with the arguments,
its output thrown away) and prints the median wall time and the number of modules in
``sys.modules`` at the end; the first row, ``python -c pass``, is the interpreter alone.
Compare a row with it: the difference is what the command costs before doing anything.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The rows: a label and the arguments of ``main`` (``None``: the bare interpreter).
COMMANDS: list[tuple[str, list[str] | None]] = [
    ("python -c pass", None),
    ("--version", ["--version"]),
    ("--help", ["--help"]),
    *(
        (f"{command} --help", [*command.split(), "--help"])
        for command in (
            "factcheck",
            "factuality",
            "citations",
            "demo",
            "index",
            "index build",
            "index add",
            "serve",
        )
    ),
]

#: Marks the module count on stderr.
MARK = "MODULES="


def code(argv: list[str] | None) -> str:
    """The ``python -c`` program of a row: run ``main(argv)``, then report ``len(sys.modules)``."""
    body = "" if argv is None else f"from langchain_references.cli import main; main({argv!r}); "
    return f"import sys; {body}sys.stderr.write('\\n{MARK}%d\\n' % len(sys.modules))"


def run_once(argv: list[str] | None) -> tuple[float, int]:
    """Seconds of one fresh interpreter running the row, and the modules it had imported."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", code(argv)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        check=True,
    )
    seconds = time.perf_counter() - start
    (count,) = (int(line[len(MARK) :]) for line in result.stderr.splitlines() if MARK in line)
    return seconds, count


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--runs", type=int, default=7, help="median of this many runs per row")
    args = cli.parse_args()
    width = max(len(label) for label, _ in COMMANDS)
    print(f"{'command':<{width}}  {'median':>8}  {'modules':>7}")
    for label, argv in COMMANDS:
        runs = [run_once(argv) for _ in range(args.runs)]
        median = statistics.median(seconds for seconds, _ in runs)
        modules = max(count for _, count in runs)
        print(f"{label:<{width}}  {median:>7.3f}s  {modules:>7d}", flush=True)


if __name__ == "__main__":
    main()
