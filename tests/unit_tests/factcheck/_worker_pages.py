"""Page extractors run in the extraction worker processes by the tests (module-level: pickled).

A page's body decides: ``PID <path>`` writes the worker's pid to ``<path>``; ``SLOW`` then
sleeps for a minute; ``CRASH`` aborts the worker (SIGABRT, as libxml2 does on a heap error);
any other page is extracted as usual.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from langchain_references.factcheck.extract import _extract_in_worker
from langchain_references.factcheck.types import ExtractedPage, FetchedPage
from langchain_references.failures import Failure


def hostile(page: FetchedPage, min_main_chars: int, max_chars: int) -> ExtractedPage | Failure:
    if found := re.search(r"PID ([^<\s]+)", page.body):
        Path(found.group(1)).write_text(str(os.getpid()), encoding="utf-8")
    if "SLOW" in page.body:
        time.sleep(60)
    if "CRASH" in page.body:
        os.abort()
    return _extract_in_worker(page, min_main_chars, max_chars)
