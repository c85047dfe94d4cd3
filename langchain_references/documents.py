"""Put retrieved documents into a prompt as delimited, numbered blocks.

Retrieved text is data, not instructions: each document goes into a
``<document id=N>...</document>`` block, and any look-alike tag inside the text (``</document>``,
``< DOCUMENT id=9 >``, fullwidth or homoglyph forms...) is neutralised so that a page cannot
close its block and forge another document (see :mod:`langchain_references.prompting`).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

from langchain_references.prompting import neutralise

__all__ = ["format_documents", "neutralize_tags"]


def neutralize_tags(text: str, tag: str) -> str:
    """Make every look-alike of an opening or closing ``tag`` inside ``text`` harmless.

    A thin alias of :func:`langchain_references.prompting.neutralise` for one tag: the ``<`` of
    each look-alike (any case, blanks, fullwidth or homoglyph characters) becomes ``&lt;``.

    Args:
        text: Untrusted text to embed in a prompt.
        tag: The tag name used as a delimiter, e.g. ``"document"``.

    Returns:
        The text with look-alike tags neutralised; other text is unchanged.
    """
    return neutralise(text, [tag])


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
