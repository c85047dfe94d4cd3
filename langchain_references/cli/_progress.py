"""Progress on stderr: :class:`ProgressLines`, off with ``--quiet`` (:func:`add_quiet_option`).

``[i/n] ...`` lines, or one live line on a terminal.
"""

from __future__ import annotations

import argparse
from typing import Generic, TextIO, TypeVar

__all__ = ["ItemProgress", "ProgressLines", "add_quiet_option"]


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    """Add ``-q/--quiet``: no progress on stderr (errors and notices still go there).

    Args:
        parser: The parser of a command that shows progress.
    """
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


class ProgressLines:
    r"""Progress of numbered items on stderr: a live, rewritten line on a terminal, else lines.

    Each line is tagged ``[i/n]``. On a terminal (``live``) the line of the step under way is
    rewritten in place (``\r``); elsewhere (a file, a pipe) only finished steps are written,
    one line each.

    Args:
        stream: The stream (stderr).
        total: Number of items.
        live: Rewrite one line instead of writing a line per step; defaults to whether
            ``stream`` is a terminal.
        enabled: Show nothing when false (``--quiet``).
    """

    def __init__(
        self, stream: TextIO, total: int, *, live: bool | None = None, enabled: bool = True
    ) -> None:
        self.stream = stream
        self.total = total
        self.enabled = enabled
        isatty = getattr(stream, "isatty", None)
        self.live = live if live is not None else bool(isatty and isatty())

    def _tag(self, index: int) -> str:
        return f"[{index + 1}/{self.total}]"

    def _write(self, line: str, *, final: bool) -> None:
        if not self.enabled:
            return
        if self.live:
            self.stream.write("\r\x1b[K" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def step(self, index: int, text: str, *, elapsed_s: float | None = None) -> None:
        """Show a step of item ``index``: under way (``elapsed_s`` None) or finished.

        A step under way is shown only on a live line (``text…``); a finished one as
        ``[i/n] text (1.23s)``.

        Args:
            index: 0-based item index.
            text: What the step does, e.g. ``"judge"``.
            elapsed_s: Seconds the finished step took; ``None`` while it runs.
        """
        if elapsed_s is not None:
            self._write(f"{self._tag(index)} {text} ({elapsed_s:.2f}s)", final=False)
        elif self.live:
            self._write(f"{self._tag(index)} {text}…", final=False)

    def done(self, index: int, text: str) -> None:
        """Show the outcome of item ``index`` (a line of its own, also on a terminal).

        Args:
            index: 0-based item index.
            text: The outcome.
        """
        self._write(f"{self._tag(index)} {text}", final=True)


DisplayT = TypeVar("DisplayT", bound=ProgressLines)


class ItemProgress(Generic[DisplayT]):
    """The item a progress callback handler reports on: a display and the item's index.

    A base of the commands' callback handlers (mixed in before the LangChain handler class).

    Args:
        display: The display.
        index: 0-based index of the item (statement, record...).
    """

    def __init__(self, display: DisplayT, index: int) -> None:
        self.display = display
        self.index = index
