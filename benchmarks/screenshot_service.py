"""Screenshot of the service's web page, for the docs: docs/images/service-page.png.

Builds a small evidence index from ``tests/unit_tests/server/data/native_corpus.jsonl`` in a
temporary directory (offline MiniLM embeddings), serves the application with uvicorn on
127.0.0.1 with the offline judge, drives Debian's Chromium through Playwright: pastes an
article, waits until every claim has its verdict, opens the evidence of the first claim, asks
a question and waits for the cited answer, then saves a full-page screenshot.

    python benchmarks/screenshot_service.py [--out PATH]

The verdicts are the offline heuristic judge's (weak; not an NLI model).
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from langchain_references.judges import offline_judge
from langchain_references.server.app import create_app
from langchain_references.server.index import EvidenceIndex, parse_evidence_record
from langchain_references.server.services import Services
from langchain_references.server.settings import ServerSettings
from langchain_references.services.loading import load_records

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "unit_tests" / "server" / "data" / "native_corpus.jsonl"
OUT = ROOT / "docs" / "images" / "service-page.png"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTICLE = (
    "Famous towers\n"
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889 for "
    "the World's Fair. Is it the most visited monument?\n\n"
    "The Space Needle is 300 metres tall. The Great Wall of China is visible from the Moon "
    "with the naked eye."
)
QUESTION = "How tall is the Space Needle?"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the PNG")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        index = EvidenceIndex.open("landmarks", persist_dir=directory, create=True)
        index.add_records(load_records(CORPUS, parse_evidence_record).records)
        settings = ServerSettings(index_name="landmarks", persist_dir=Path(directory))
        services = Services(settings=settings, index=index, judge=offline_judge())
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(settings, services=services),
                host="127.0.0.1",
                port=port,
                log_level="warning",
            )
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
                )
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.goto(f"http://127.0.0.1:{port}/")
                page.click("details.settings summary")
                page.fill("#top-k", "3")
                page.click("details.settings summary")
                page.fill("#article-text", ARTICLE)
                page.click("#article-submit")
                page.wait_for_selector("#article-view[data-done='true']", timeout=120_000)
                page.locator("#article-view span.claim").first.click()
                page.fill("#question", QUESTION)
                page.click("#answer-submit")
                page.wait_for_selector("#answer[data-done='true']", timeout=120_000)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out), full_page=True)
                browser.close()
        finally:
            server.should_exit = True
            thread.join(timeout=30)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
