"""Run ``bench_streaming.py`` against other langchain-core versions, each in its own venv.

The floor of the streaming benchmark is langchain-core's own per-chunk cost, and it changes
between releases: from 1.7.7 on, every traced layer adds each output chunk to the run's output
through an accumulator object, and for ``str`` chunks that is a fresh concatenation of the whole
text so far (quadratic in the answer's length); up to 1.7.3 the running output was a local
variable, which CPython extends in place (linear). The same wrapper therefore shows different
ratios against the same do-nothing wrapper depending on the core installed. This script makes
both measurable from one command:

    python benchmarks/bench_core_versions.py --versions 1.7.3,installed -- --only text \\
        --kinds str --sizes 1000,5000,50000

For each version it creates (or reuses) a virtual environment under ``--venvs`` with that
``langchain-core`` and this project's two other core dependencies (``pydantic``,
``typing-extensions``), then runs ``bench_streaming.py`` with the arguments after ``--`` and
this checkout on ``PYTHONPATH``. ``installed`` runs the current interpreter as it is. The runs
are sequential; each prints its own table (ratios are only compared within one run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench_streaming.py"


def interpreter(version: str, root: Path) -> Path:
    """The Python of a venv holding ``langchain-core==version`` (created on first use)."""
    env_dir = root / f"langchain-core-{version}"
    python = env_dir / "bin" / "python"
    stamp = env_dir / ".installed"  # written once the install succeeded
    if not stamp.exists():
        print(f"== creating {env_dir} with langchain-core=={version}", flush=True)
        venv.create(env_dir, with_pip=True, clear=True)
        pip = subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                f"langchain-core=={version}",
                "pydantic>=2.7",
                "typing-extensions>=4.7",
            ],
            capture_output=True,
            text=True,
        )
        if pip.returncode != 0:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise SystemExit(f"pip could not install langchain-core=={version}:\n{pip.stderr}")
        stamp.touch()
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--versions",
        default="1.7.3,installed",
        help="comma-separated langchain-core versions; 'installed' is this interpreter's",
    )
    parser.add_argument(
        "--venvs",
        type=Path,
        default=Path(tempfile.gettempdir()) / "langchain-references-bench-venvs",
        help="where the per-version virtual environments are kept",
    )
    parser.add_argument("bench_args", nargs="*", help="arguments for bench_streaming.py")
    args = parser.parse_args()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    for version in args.versions.split(","):
        python = (
            Path(sys.executable) if version == "installed" else interpreter(version, args.venvs)
        )
        print(f"== bench_streaming.py with {python}", flush=True)
        subprocess.run([str(python), str(BENCH), *args.bench_args], check=True, env=env)
        print(flush=True)


if __name__ == "__main__":
    main()
