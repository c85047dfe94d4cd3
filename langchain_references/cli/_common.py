"""Pieces shared by the command-line tools: argument types and chat-model loading."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel

__all__ = ["CLIError", "add_subcommand", "load_chat_model", "positive_float", "positive_int"]


class CLIError(RuntimeError):
    """The command cannot run as asked (bad option value, missing optional package...)."""


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


def load_chat_model(name: str, *, option: str = "--model", **kwargs: Any) -> BaseChatModel:
    """Load ``provider:model`` with ``langchain.chat_models.init_chat_model``.

    Args:
        name: E.g. ``"openai:gpt-4o-mini"``.
        option: The option that named the model, for error messages.
        **kwargs: Passed to ``init_chat_model`` (e.g. ``temperature=0``).

    Returns:
        The chat model.

    Raises:
        CLIError: If ``langchain`` or the provider package is missing or the name is unknown.
    """
    try:
        # Optional dependency, imported by name: it may be absent (and untyped).
        chat_models = importlib.import_module("langchain.chat_models")
    except ImportError as exc:
        raise CLIError(
            f"{option} {name} needs the langchain package: pip install langchain "
            "(plus the provider package, e.g. langchain-openai)"
        ) from exc
    try:
        model: BaseChatModel = chat_models.init_chat_model(name, **kwargs)
    except (ImportError, ValueError) as exc:
        raise CLIError(f"cannot load {option} {name}: {exc}") from exc
    return model


def add_subcommand(
    subparsers: Any,
    name: str,
    *,
    help: str,
    description: str,
    configure: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
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
