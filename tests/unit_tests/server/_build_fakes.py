"""Embeddings for the build tests: hashed words (deterministic, no model), failing on demand.

``index build --embeddings tests.unit_tests.server._build_fakes:WordHashEmbeddings`` builds
with them. The environment makes a build go wrong after ``LR_TEST_FAIL_AFTER=N`` calls of
``embed_documents`` (one per batch): ``LR_TEST_FAIL_WITH=error`` (the default) raises
``RuntimeError``, ``interrupt`` raises ``KeyboardInterrupt`` (Ctrl-C), ``hang`` creates the
file ``LR_TEST_MARKER`` and sleeps (for a test that kills the process).

``index build --engine ray`` loads the embeddings in Ray workers, which do not see a test's
environment: ``--embeddings tests.unit_tests.server._build_fakes:poisoned`` fails on any batch
holding the word ``poison`` instead.
"""

from __future__ import annotations

import math
import os
import re
import time
import zlib
from pathlib import Path

from langchain_core.embeddings import Embeddings

DIMENSIONS = 64
_WORD = re.compile(r"\w+")


class BuildFailureError(RuntimeError):
    """The failure the environment asked for."""


class WordHashEmbeddings(Embeddings):
    """Each word adds 1 to the dimension its CRC-32 picks; the vector is then normalized.

    Args:
        fail_after: ``embed_documents`` calls that succeed before the failure (``None``: read
            ``LR_TEST_FAIL_AFTER``; unset means never).
        fail_with: ``"error"``, ``"interrupt"`` or ``"hang"`` (``None``: read
            ``LR_TEST_FAIL_WITH``, default ``"error"``).
        fail_on: A word that makes ``embed_documents`` raise when a text holds it.
    """

    def __init__(
        self,
        fail_after: int | None = None,
        fail_with: str | None = None,
        fail_on: str | None = None,
    ) -> None:
        after = os.environ.get("LR_TEST_FAIL_AFTER") if fail_after is None else fail_after
        self.fail_after = None if after is None else int(after)
        self.fail_with = fail_with or os.environ.get("LR_TEST_FAIL_WITH", "error")
        self.fail_on = fail_on
        self.calls = 0

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * DIMENSIONS
        for word in _WORD.findall(text.lower()):
            vector[zlib.crc32(word.encode()) % DIMENSIONS] += 1.0
        vector[0] += 1e-3  # never all zeros
        norm = math.sqrt(sum(v * v for v in vector))
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.fail_after is not None and self.calls >= self.fail_after:
            if self.fail_with == "interrupt":
                raise KeyboardInterrupt
            if self.fail_with == "hang":
                Path(os.environ["LR_TEST_MARKER"]).touch()
                time.sleep(600)
            raise BuildFailureError(f"embeddings failed after {self.calls} batches")
        if self.fail_on is not None and any(self.fail_on in t.lower() for t in texts):
            raise BuildFailureError(f"embeddings refused a text holding {self.fail_on!r}")
        self.calls += 1
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def poisoned() -> WordHashEmbeddings:
    """:class:`WordHashEmbeddings` failing on any batch with the word ``poison``."""
    return WordHashEmbeddings(fail_on="poison")
