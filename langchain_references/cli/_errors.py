"""The error of a command that cannot run as asked: :class:`CLIError`."""

from __future__ import annotations

from langchain_references.errors import LangchainReferencesError

__all__ = ["CLIError"]


class CLIError(LangchainReferencesError, RuntimeError):
    """The command cannot run as asked (bad option value, unreadable input, missing package).

    :func:`langchain_references.cli.main` prints it as one ``error: ...`` line on stderr and
    exits with status 2.
    """
