"""The commands' plain-text tables: :func:`format_table`, :func:`format_number`."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_number", "format_table"]


def format_number(value: float | None, digits: int = 3) -> str:
    """A table cell for a number: ``-`` for None, else ``digits`` decimals.

    Args:
        value: The number, or None when undefined.
        digits: Decimals.

    Returns:
        The cell.
    """
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, with a dashed line under the header.

    Args:
        rows: The header row, then the data rows; all of the same length.

    Returns:
        The table, without a final newline.
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
