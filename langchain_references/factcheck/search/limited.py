"""A search provider under a rate limit: requests per second, concurrency, 429 retries.

:class:`RateLimitedSearch` sends every search of the wrapped provider through a
:class:`~langchain_references.services.ratelimit.RateLimiter` key (``"search"`` by default), shared
by every worker holding the limiter; a search that fails with "too many requests" (HTTP 429/503,
ddgs' ``RatelimitException``) is retried after the provider's ``Retry-After`` or a backoff.
"""

from __future__ import annotations

from langchain_references.factcheck.search.base import DEFAULT_K, SearchProvider
from langchain_references.factcheck.search.cached import provider_name
from langchain_references.factcheck.types import SearchHit
from langchain_references.services.ratelimit import RateLimiter

__all__ = ["RateLimitedSearch"]


class RateLimitedSearch:
    """A provider whose searches wait for the limiter (see the module docs).

    Args:
        provider: The provider.
        limiter: The limiter.
        key: The limiter key.

    Attributes:
        name: The provider's name.
    """

    def __init__(self, provider: SearchProvider, limiter: RateLimiter, key: str = "search") -> None:
        self.provider = provider
        self.limiter = limiter
        self.key = key
        self.name = provider_name(provider)

    def search(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """The provider's hits of ``(query, k)``, once the limiter lets the request go."""
        return self.limiter.call(self.key, lambda: self.provider.search(query, k))

    async def asearch(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]:
        """Async :meth:`search`."""
        return await self.limiter.acall(self.key, lambda: self.provider.asearch(query, k))
