"""Put retrieved documents into a prompt as delimited, numbered blocks.

Retrieved text is data, not instructions: each document goes into a
``<document id=N>...</document>`` block, and any look-alike tag inside the text (``</document>``,
``< DOCUMENT id=9 >``...) is neutralised so that a page cannot close its block and forge another
document.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from langchain_core.documents import Document

__all__ = ["format_documents", "neutralize_tags"]


@cache
def _tag_pattern(tag: str) -> re.Pattern[str]:
    # "<", optional blanks and "/", the tag name (any case), then a word boundary.
    return re.compile(r"<(?=\s*/?\s*" + re.escape(tag) + r"(?![\w-]))", re.IGNORECASE)


def neutralize_tags(text: str, tag: str) -> str:
    """Make every opening or closing ``tag`` inside ``text`` harmless.

    The ``<`` of each look-alike tag (any case, blanks allowed, attributes or not) is replaced
    by ``&lt;``, so the text reads the same but can no longer open or close a block.

    Args:
        text: Untrusted text to embed in a prompt.
        tag: The tag name used as a delimiter, e.g. ``"document"``.

    Returns:
        The text with look-alike tags neutralised; other text is unchanged.
    """
    if not tag or not re.fullmatch(r"[A-Za-z][\w-]*", tag):
        raise ValueError(f"invalid tag name: {tag!r}")
    return _tag_pattern(tag).sub("&lt;", text)


def format_documents(documents: Sequence[Document], *, tag: str = "document") -> str:
    """Format documents for a prompt, numbered from 1 in list order.

    The numbers are the ids the model cites as ``[n](id=ID)``, so pass the same list, in the
    same order, to :func:`~langchain_references.manage_references`.

    Args:
        documents: The documents put in the prompt.
        tag: The block tag name.

    Returns:
        One ``<document id=N>`` block per document, separated by newlines.

    Example:
        >>> from langchain_core.documents import Document
        >>> print(format_documents([Document("Paris is in France.")]))
        <document id=1>
        Paris is in France.
        </document>
    """
    if isinstance(documents, str | Document):
        raise TypeError("format_documents() takes a sequence of Documents")
    blocks = []
    for i, doc in enumerate(documents, start=1):
        if not isinstance(doc, Document):
            raise TypeError(f"documents[{i - 1}] is {type(doc).__name__}, not a Document")
        body = neutralize_tags(doc.page_content, tag)
        blocks.append(f"<{tag} id={i}>\n{body}\n</{tag}>")
    return "\n".join(blocks)
