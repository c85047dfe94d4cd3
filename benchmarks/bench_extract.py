"""Page extraction in worker processes against trafilatura in the calling process, in one run.

Since trafilatura crashes now and then when threads of one process call it at once, every HTML
page is parsed in a worker process (``langchain_references.services._isolation``). This measures
what that costs, on the saved pages of ``../shared/data/html_fixtures`` repeated ``--pages`` times:

* ``in process, one thread``: ``extract_page`` in a loop (the safe in-process alternative);
* ``workers, cold``: the first ``extract_all`` of the process (its workers start and import
  the package);
* ``workers, warm``: later ``extract_all`` calls (the median of ``--runs``);

and the resident memory of one idle worker.

    python benchmarks/bench_extract.py [--data PATH] [--pages 24] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from langchain_references.factcheck.extract import extract_all, extract_page
from langchain_references.factcheck.types import FetchedPage
from langchain_references.services import _isolation


def _pages(folder: Path, count: int) -> list[FetchedPage]:
    files = sorted(folder.glob("*.html"))
    if not files:
        raise SystemExit(f"no HTML pages in {folder}")
    pages = []
    for rank in range(count):
        path = files[rank % len(files)]
        url = f"https://example.org/{rank}/{path.name}"
        body = path.read_text(encoding="utf-8", errors="replace")
        pages.append(
            FetchedPage(
                url=url,
                final_url=url,
                status=200,
                content_type="text/html",
                body=body,
                elapsed_s=0.0,
                rank=rank,
                hit=None,
            )
        )
    return pages


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "html_fixtures"
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    pages = _pages(args.data, args.pages)

    started = time.perf_counter()
    cold = extract_all(pages)
    cold_s = time.perf_counter() - started
    warm = []
    for _ in range(args.runs):
        started = time.perf_counter()
        report = extract_all(pages)
        warm.append(time.perf_counter() - started)
    assert [p.text for p in report.pages] == [p.text for p in cold.pages]
    here = []
    for _ in range(args.runs):
        started = time.perf_counter()
        local = [extract_page(page) for page in pages]
        here.append(time.perf_counter() - started)
    assert [getattr(p, "text", None) for p in local] == [p.text for p in report.pages]

    base = statistics.median(here)
    print(f"{len(pages)} pages, {_isolation.MAX_WORKERS} workers at most\n")
    print("| extraction | seconds | / in process |")
    print("|---|---:|---:|")
    print(f"| in process, one thread (median of {args.runs}) | {base:.2f} | 1.00 |")
    print(f"| workers, cold (first call) | {cold_s:.2f} | {cold_s / base:.2f} |")
    warm_s = statistics.median(warm)
    print(f"| workers, warm (median of {args.runs}) | {warm_s:.2f} | {warm_s / base:.2f} |")
    idle = [w.pid for w in _isolation._idle]
    if idle:
        sizes = ", ".join(f"{_rss_mb(pid):.0f}" for pid in idle)
        print(f"\nresident memory of the idle workers (MB): {sizes}")


if __name__ == "__main__":
    main()
