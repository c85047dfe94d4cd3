"""The installed size of each extra: what ``pip install ".[EXTRA]"`` puts in a fresh venv.

For each extra, pip resolves what it would install into an empty environment
(``pip install --dry-run --ignore-installed --report``, no download of what is cached); the
sizes are those of the same distributions installed in this venv (their ``RECORD`` files),
which ``make test`` fills with every extra. Prints one row per extra: the distributions and
megabytes it installs, the core's included (``core``: no extra), and the packages over 20 MB.

Usage: .venv/bin/python benchmarks/extras_size.py [--extras core,factcheck,all+ray,...]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_sizes() -> dict[str, int]:
    """Bytes of each distribution installed here, from its RECORD (normalised names)."""
    sizes: dict[str, int] = {}
    for dist in importlib.metadata.distributions():
        files = dist.files or []
        total = 0
        for file in files:
            if file.size is not None:
                total += file.size
            else:
                path = Path(str(dist.locate_file(file)))
                total += path.stat().st_size if path.is_file() else 0
        sizes[_normal(dist.metadata["Name"])] = total
    return sizes


def resolved(extra: str | None) -> list[str]:
    """The distributions ``pip install ".[extra]"`` installs into an empty environment."""
    target = "." if extra is None else f".[{extra}]"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", "-", target],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout)
    return sorted(_normal(item["metadata"]["name"]) for item in report["install"])


def main() -> None:
    extras = list(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default=",".join(["core", *extras, "all+ray"]))
    args = parser.parse_args()
    sizes = installed_sizes()
    print(f"{'extra':<12}{'dists':>7}{'MB':>9}  largest (MB)")
    print("-" * 78)
    for name in args.extras.split(","):
        extra = None if name == "core" else name.replace("+", ",")  # all+ray: ".[all,ray]"
        dists = [d for d in resolved(extra) if d != "langchain-references"]
        missing = [d for d in dists if d not in sizes]
        total = sum(sizes.get(d, 0) for d in dists) / 1e6
        big = sorted(((sizes.get(d, 0) / 1e6, d) for d in dists), reverse=True)
        largest = ", ".join(f"{d} {mb:.0f}" for mb, d in big if mb >= 20)
        note = f"  (not installed here: {', '.join(missing)})" if missing else ""
        print(f"{name:<12}{len(dists):>7}{total:>9.0f}  {largest}{note}")


if __name__ == "__main__":
    main()
