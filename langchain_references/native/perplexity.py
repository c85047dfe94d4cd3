"""Perplexity: ``[k]`` markers in the answer, resolved through the run's source lists.

Perplexity's Sonar models write ``[1]``, ``[2][3]``... in their answer; ``k`` is 1-based
into the response's ``citations`` (a list of URLs) and ``search_results`` (``{"title",
"url", "date", "snippet", ...}``). ``langchain-perplexity`` puts both lists in
``additional_kwargs``: on the first streamed chunk only (as dicts), or on the whole message
of ``invoke`` (``search_results`` then holds the SDK's ``APIPublicSearchResult`` objects).
Its Responses (Agent API) path streams ``search_results`` on a chunk of their own before
the answer.

The adapter streams: only a possible marker prefix (``[``, ``[12``, ``[12]`` waiting for the
next character) is held back. A marker beyond the lists is dropped; ``[k]`` followed by
``(`` is not a Perplexity marker (a Markdown link, or the ``[n](id=k)`` citations of this
package) and stays text; without any source list (no search ran) brackets stay text. If a
marker arrives before any chunk carried the lists, the text from that marker on is held
until they arrive or the stream ends.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage
from typing_extensions import override

from langchain_references.native._markers import coalesce
from langchain_references.native._spans import field_of
from langchain_references.native.base import (
    BaseNativeAdapter,
    NativeCitation,
    Piece,
    normalize_url,
)

__all__ = ["PerplexityAdapter"]

logger = logging.getLogger(__name__)

_MAX_DIGITS: Final = 4
#: A complete marker, or the beginning of one at the end of the buffer.
_MARKER_RE: Final = re.compile(rf"\[([0-9]{{1,{_MAX_DIGITS}}})\]")
_PREFIX_RE: Final = re.compile(rf"\[(?:[0-9]{{1,{_MAX_DIGITS}}}\]?)?")


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _result_list(value: Any) -> list[Any] | None:
    if isinstance(value, list) and all(isinstance(field_of(item, "url"), str) for item in value):
        return value
    return None


class PerplexityAdapter(BaseNativeAdapter):
    """Turns Perplexity's ``[k]`` markers into citations of ``citations``/``search_results``.

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> adapter = PerplexityAdapter()
        >>> message = AIMessage(
        ...     content="Paris is the capital[1].",
        ...     additional_kwargs={"citations": ["https://a.org/paris?utm_source=x"]},
        ... )
        >>> pieces = adapter.feed(message) + adapter.finish()
        >>> [p if isinstance(p, str) else p.source for p in pieces]
        ['Paris is the capital', 'https://a.org/paris', '.']
    """

    provider: str = "perplexity"

    __slots__ = ("_buffer", "_citations", "_known", "_results")

    def __init__(self) -> None:
        self._buffer = ""
        self._citations: list[str] = []
        self._results: list[Any] = []
        self._known = False

    @classmethod
    @override
    def matches(cls, message: BaseMessage) -> bool:
        """Return True for a Perplexity message: its provider, model or source lists."""
        metadata = message.response_metadata
        if metadata.get("model_provider") == "perplexity":
            return True
        model = metadata.get("model_name") or metadata.get("model")
        if isinstance(model, str) and model.startswith("sonar"):
            return True
        kwargs = message.additional_kwargs
        citations = kwargs.get("citations")
        if citations and _str_list(citations) is not None:
            return True
        results = kwargs.get("search_results")
        return bool(results) and _result_list(results) is not None

    @override
    def _read(self, message: BaseMessage) -> list[Piece]:
        """Keep the sources and the text; return it with a possible marker prefix held."""
        self._read_sources(message.additional_kwargs)
        self._buffer += message.text
        return self._scan(final=False)

    @override
    def finish(self) -> list[Piece]:
        """End the answer; return the held-back text (a pending marker is resolved now)."""
        return self._scan(final=True)

    def _read_sources(self, kwargs: dict[str, Any]) -> None:
        if "citations" in kwargs or "search_results" in kwargs:
            self._known = True
        citations = _str_list(kwargs.get("citations"))
        if citations and not self._citations:
            self._citations = list(citations)
        results = _result_list(kwargs.get("search_results"))
        if results and not self._results:
            self._results = list(results)

    def _scan(self, *, final: bool) -> list[Piece]:
        text = self._buffer
        out: list[Piece] = []
        position = 0
        while True:
            cut = text.find("[", position)
            if cut < 0:
                out.append(text[position:])
                position = len(text)
                break
            out.append(text[position:cut])
            match = _MARKER_RE.match(text, cut)
            if match is None:
                if not final and _PREFIX_RE.fullmatch(text, cut):
                    position = cut  # "[", "[12": wait for the rest
                    break
                out.append("[")
                position = cut + 1
                continue
            after = match.end()
            if after == len(text) and not final:
                position = cut  # "[12]": a "(" next would make it a link
                break
            if after < len(text) and text[after] == "(":
                out.append(match.group())
                position = after
                continue
            if not self._known and not final:
                position = cut  # the sources are not known yet: hold from here
                break
            out.extend(self._resolve(int(match.group(1)), match.group()))
            position = after
        self._buffer = text[position:]
        return coalesce(out)

    def _resolve(self, number: int, raw: str) -> Sequence[Piece]:
        count = max(len(self._citations), len(self._results))
        if count == 0 or number < 1:
            return [raw]  # no search ran (or "[0]"): ordinary brackets
        if number > count:
            logger.debug("Perplexity marker %s beyond its %d sources: dropped", raw, count)
            return []
        return [self._citation(number - 1)]

    def _citation(self, index: int) -> NativeCitation:
        url = self._citations[index] if index < len(self._citations) else None
        result = self._results[index] if index < len(self._results) else None
        if url is None:
            result_url = field_of(result, "url")
            url = result_url if isinstance(result_url, str) else None
        elif not _same_url(field_of(result, "url"), url):
            # The lists are not parallel: take the title of the result with this URL.
            result = next((r for r in self._results if _same_url(field_of(r, "url"), url)), None)
        title = field_of(result, "title")
        return NativeCitation(
            provider=self.provider,
            source=normalize_url(url) if url else None,
            url=url,
            title=title if isinstance(title, str) and title else None,
        )


def _same_url(candidate: Any, url: str) -> bool:
    return isinstance(candidate, str) and normalize_url(candidate) == normalize_url(url)
