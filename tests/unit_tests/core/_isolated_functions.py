"""Module-level functions that the isolation tests run in worker processes (pickled by name)."""

from __future__ import annotations

import os
import time


def pid_and_sum(a: int, b: int) -> tuple[int, int]:
    return os.getpid(), a + b


def fail(message: str) -> None:
    raise KeyError(message)


def sleep(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def shout(text: str) -> str:
    print("noise on standard output")
    return text.upper()


def niceness_of(module: str) -> int | None:
    """The niceness the worker had when ``module`` was imported (``None``: not imported)."""
    import sys

    loaded = sys.modules.get(module)
    return None if loaded is None else int(loaded.NICENESS_AT_IMPORT)


def niceness() -> int:
    return os.nice(0)
