"""The options of ``langchain-references demo``: its parser, without the command's code.

The command itself (:mod:`langchain_references.cli.demo`: Chroma, MiniLM embeddings) loads when
it runs (:class:`~langchain_references.cli._commands.LazyCommand`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from langchain_references.cli._args import non_blank, positive_int
from langchain_references.cli._commands import LazyCommand
from langchain_references.demo.corpus import SAMPLE_QUESTION

if TYPE_CHECKING:
    from langchain_references.core.styles import ReferenceStyle

__all__ = [
    "DEFAULT_K",
    "DEFAULT_OPENAI_MODEL",
    "DESCRIPTION",
    "HELP",
    "REQUIRES",
    "STYLES",
    "configure_parser",
    "run",
]

#: The optional packages the command imports when it loads, in that order: the first one
#: missing is named by ``--help`` and by any run (:func:`langchain_references.cli.main`).
REQUIRES: Final[tuple[str, ...]] = ("pysbd",)
#: The command (``args.func``), imported when it runs.
run: Final = LazyCommand("langchain_references.cli.demo")


def _style(name: str, **kwargs: Any) -> Callable[[], ReferenceStyle]:
    """A factory of the style class ``name`` of :mod:`langchain_references.core.styles`.

    The module is imported when the style is made, not when the parser is built.
    """

    def make() -> ReferenceStyle:
        from langchain_references.core import styles

        style: ReferenceStyle = getattr(styles, name)(**kwargs)
        return style

    make.__name__ = make.__qualname__ = name
    return make


#: Reference styles selectable with ``--style`` (inline links open the quoted passage).
STYLES: Final[dict[str, Callable[[], ReferenceStyle]]] = {
    "markdown": _style("MarkdownReferenceStyle", deep_links=True),
    "text": _style("TextReferenceStyle"),
    "html": _style("HTMLReferenceStyle", deep_links=True),
    "empty": _style("EmptyReferenceStyle"),
}

#: The OpenAI model suggested when ``OPENAI_API_KEY`` is set (used only with ``--model``).
DEFAULT_OPENAI_MODEL: Final = "gpt-4o-mini"
#: Documents retrieved by default.
DEFAULT_K: Final = 4


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``demo`` arguments to a parser.

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument(
        "--question",
        type=non_blank,
        default=SAMPLE_QUESTION,
        help=f"the question to answer (default: {SAMPLE_QUESTION!r})",
    )
    parser.add_argument(
        "--style",
        choices=sorted(STYLES),
        default="markdown",
        help="reference style (default: markdown)",
    )
    parser.add_argument(
        "--model",
        default=None,
        metavar="PROVIDER:MODEL",
        help="a chat model for langchain's init_chat_model, e.g. "
        f"openai:{DEFAULT_OPENAI_MODEL} (default: the offline ExtractiveAnswerer; the demo "
        "never picks a networked model by itself)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="use the offline ExtractiveAnswerer even if --model is given",
    )
    parser.add_argument(
        "-k",
        type=positive_int,
        default=DEFAULT_K,
        help=f"documents to retrieve (default: {DEFAULT_K})",
    )


HELP: Final = "stream a cited answer over the offline demo corpus"
DESCRIPTION: Final = (
    "Answer a question over the demo corpus (embedded Chroma, MiniLM embeddings) with streamed, "
    "rewritten citations, then list the retrieved documents and which ones the answer cited."
)
