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
