"""How a command is registered and run: :class:`Command`, :class:`LazyCommand`, the parsers.

Every command module exposes ``HELP``, ``DESCRIPTION``, ``configure_parser(parser)`` and
``run(args, *, out=None, err=None)``, the :class:`Command` stored as ``args.func`` that
:func:`langchain_references.cli.main` calls; :func:`add_command` registers it (a module with
subcommands of its own, like ``index``, has an ``add_parser(subparsers)`` that does).
:func:`streams` resolves a command's ``out`` and ``err``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final, Protocol, TextIO

__all__ = [
    "PROG",
    "Command",
    "CommandParser",
    "LazyCommand",
    "VersionAction",
    "add_command",
    "add_subcommand",
    "streams",
    "write_version",
]


class Command(Protocol):
    """A command's handler: ``run(args, *, out=None, err=None) -> exit status``."""

    def __call__(
        self, args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> int:
        """Run the command.

        Args:
            args: The parsed arguments.
            out: Where results go (stdout by default).
            err: Where notices and errors go (stderr by default).

        Returns:
            The exit status.
        """
        ...


class LazyCommand:
    """A :class:`Command` that imports its module when it runs, not when the parser is built.

    ``--help`` and ``--version`` then load only the light modules that define the options
    (:mod:`langchain_references.cli.parsers`); a command's judges, models and engines load
    when it runs. Picklable (the parsed arguments travel to Ray actors).

    Args:
        module: The command's module, e.g. ``"langchain_references.cli.factcheck"``.
        function: Its function run as the command (default ``run``).
    """

    def __init__(self, module: str, function: str = "run") -> None:
        self.module = module
        self.function = function

    def __repr__(self) -> str:
        return f"LazyCommand({self.module!r}, {self.function!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyCommand):
            return NotImplemented
        return (self.module, self.function) == (other.module, other.function)

    def __hash__(self) -> int:
        return hash((self.module, self.function))

    def __call__(
        self, args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> int:
        """Import the command's module and run its function."""
        command: Command = getattr(importlib.import_module(self.module), self.function)
        return command(args, out=out, err=err)


#: The program's name.
PROG: Final = "langchain-references"


def write_version() -> None:
    """Print ``langchain-references VERSION`` on stdout (the version read only then)."""
    from langchain_references import __version__  # importlib.metadata: not for --help

    sys.stdout.write(f"{PROG} {__version__}\n")


class VersionAction(argparse.Action):
    """``--version``: print ``langchain-references VERSION`` and exit."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Print the version and exit with status 0."""
        write_version()
        parser.exit()


class CommandParser(argparse.ArgumentParser):
    """The parser of a command: an option it does not know is its error, with its usage.

    argparse hands a subcommand's unknown arguments back to the top-level parser, which then
    reports them under the program's usage; this parser reports them itself (exit status 2).
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse ``args``; an argument this command does not take is a usage error.

        Raises:
            SystemExit: From :meth:`~argparse.ArgumentParser.error` (status 2), if an
                argument is not the command's.
        """
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def add_subcommand(
    subparsers: Any,
    name: str,
    help: str,
    description: str,
    configure: Callable[[argparse.ArgumentParser], None],
    run: Command,
) -> argparse.ArgumentParser:
    """Add a subcommand whose handler is ``args.func``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.
        name: The subcommand.
        help: One line for the command list.
        description: The subcommand's ``--help`` description.
        configure: Adds the subcommand's arguments.
        run: The handler, stored as ``args.func``.

    Returns:
        The subcommand's parser.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=description
    )
    configure(parser)
    parser.set_defaults(func=run)
    return parser


def add_command(subparsers: Any, name: str, command: ModuleType) -> argparse.ArgumentParser:
    """Register the command module ``command`` as ``name``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.
        name: The subcommand.
        command: The command's module: its ``add_parser(subparsers)`` if it has one, else its
            ``HELP``, ``DESCRIPTION``, ``configure_parser`` and ``run``
            (:func:`add_subcommand`).

    Returns:
        The subcommand's parser.
    """
    add_parser = getattr(command, "add_parser", None)
    if add_parser is not None:
        parser: argparse.ArgumentParser = add_parser(subparsers)
        return parser
    return add_subcommand(
        subparsers, name, command.HELP, command.DESCRIPTION, command.configure_parser, command.run
    )


def streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    """A command's output and error streams: the given ones, else stdout and stderr.

    Args:
        out: ``run``'s ``out`` argument.
        err: ``run``'s ``err`` argument.

    Returns:
        ``(out, err)``, resolved when the command runs (so that redirections apply).
    """
    return (sys.stdout if out is None else out), (sys.stderr if err is None else err)
