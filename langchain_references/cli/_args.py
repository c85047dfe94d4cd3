"""Argument types and shared options: positive numbers, non-blank text, ``--retrieval``.

:class:`DeprecatedAlias` accepts an option's old spelling with a warning.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from langchain_references.services.retrieval import DEFAULT_RETRIEVAL, RETRIEVAL_MODES

__all__ = ["DeprecatedAlias", "add_retrieval_option", "non_blank", "positive_float", "positive_int"]


class DeprecatedAlias(argparse.Action):
    """An option's old spelling: stores what ``replacement`` stores and says so on stderr.

    Args:
        option_strings: The old spelling.
        dest: Where the new option stores its value.
        replacement: The new option, named in the warning.
        **kwargs: Passed to :class:`argparse.Action` (``type``, ``metavar``...).
    """

    def __init__(
        self, option_strings: Sequence[str], dest: str, *, replacement: str, **kwargs: Any
    ) -> None:
        kwargs.setdefault("help", f"deprecated: same as {replacement}")
        kwargs.setdefault("default", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Store ``values`` under the new option's name; warn on stderr."""
        sys.stderr.write(f"warning: {option_string} is deprecated; use {self.replacement}\n")
        setattr(namespace, self.dest, values)


def positive_int(value: str) -> int:
    """``argparse`` type: an integer >= 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def positive_float(value: str) -> float:
    """``argparse`` type: a number > 0."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return number


def non_blank(value: str) -> str:
    """``argparse`` type: a string that is not empty or only whitespace."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def add_retrieval_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--retrieval dense|bm25|hybrid`` (default ``hybrid``).

    Args:
        parser: The parser of a command that ranks evidence (``index build``, ``serve``,
            ``factcheck``).
        what: What the mode ranks, for the help text.
    """
    parser.add_argument(
        "--retrieval",
        choices=RETRIEVAL_MODES,
        default=DEFAULT_RETRIEVAL,
        help=f"how {what}: by embeddings (dense), by BM25 (bm25), or both fused by "
        f"reciprocal rank (hybrid; the default)",
    )
