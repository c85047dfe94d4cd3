"""A search provider whose results are kept in a run cache: a resumed run searches nothing twice.

:class:`CachedSearch` wraps any provider: the hits of ``(provider, query, k)`` are stored in a
:class:`~langchain_references.services.runcache.RunCache` (namespace ``"search"``) once the provider
answers, and read back when the cache reuses (``--resume``). Failures are not stored: a
resumed run asks again. The hits of a corpus served on a local port
(:class:`~langchain_references.factcheck.served.ServedCorpus`) are stored with their links in
the corpus's stable form and read back as links to this run's server.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from langchain_references.factcheck.search.base import DEFAULT_K, SearchProvider
from langchain_references.factcheck.served import ServedCorpus
from langchain_references.factcheck.types import SearchHit
from langchain_references.services.runcache import RunCache, content_key

__all__ = ["SEARCH_NAMESPACE", "CachedSearch", "provider_name"]

logger = logging.getLogger(__name__)

#: Namespace of the search results in a run cache.
SEARCH_NAMESPACE: Final = "search"


def provider_name(provider: object) -> str:
    """The name of a search provider, for logs and cache keys.

    Args:
        provider: The provider.

    Returns:
        Its ``name`` attribute, else its class name.
    """
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) and name else type(provider).__name__


class CachedSearch:
    """A provider answered from a run cache when it can (see the module docs).

    Args:
        provider: The provider.
        cache: The run cache.
        identity: What distinguishes this provider's results from another's with the same
            name (e.g. a recording's digest, a SearxNG URL); part of the key. Never a local
            server's address: it changes with every run.
        corpus: The served corpus the provider links to, if any: links are stored in its
            stable form (see the module docs).

    Attributes:
        name: The provider's name.
    """

    def __init__(
        self,
        provider: SearchProvider,
        cache: RunCache,
        *,
        identity: str = "",
        corpus: ServedCorpus | None = None,
    ) -> None:
        self.provider = provider
        self.cache = cache
        self.name = provider_name(provider)
        self.identity = identity
        self.corpus = corpus

    def _key(self, query: str, k: int) -> str:
        return content_key("search", self.name, self.identity, query, k)

    def _lookup(self, key: str) -> list[SearchHit] | None:
        value = self.cache.get(SEARCH_NAMESPACE, key)
        if not isinstance(value, list):
            return None
        try:
            hits = [SearchHit.model_validate(hit) for hit in value]
        except ValueError as exc:
            logger.warning("Ignoring a malformed cached search result: %s", exc)
            return None
        if self.corpus is None:
            return hits
        served = self.corpus.served
        return [hit.model_copy(update={"link": served(hit.link)}) for hit in hits]

    def _record(self, key: str, hits: list[SearchHit]) -> None:
        if self.corpus is not None:
            stable = self.corpus.stable
            hits = [hit.model_copy(update={"link": stable(hit.link)}) for hit in hits]
        self.cache.put(SEARCH_NAMESPACE, key, [hit.model_dump() for hit in hits])

    def search(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """The cached hits of ``(query, k)``, else the provider's, then stored (see ``search``)."""
        key = self._key(query, k)
        hits = self._lookup(key)
        if hits is None:
            hits = self.provider.search(query, k)
            self._record(key, hits)
        return hits

    async def asearch(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """Async :meth:`search` (the cache is read and written in a worker thread)."""
        key = self._key(query, k)
        hits = await asyncio.to_thread(self._lookup, key)
        if hits is None:
            hits = await self.provider.asearch(query, k)
            await asyncio.to_thread(self._record, key, hits)
        return hits
