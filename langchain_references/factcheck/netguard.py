"""Refuse URLs that point at private networks before anything is fetched (SSRF guard).

URLs in search results are untrusted. Before each request (and before each redirect hop) the
fetcher asks :class:`NetGuard` to check the URL:

* the scheme must be ``http`` or ``https`` (the fetcher cannot fetch anything else);
* the host is resolved, and *every* address it resolves to must be public: loopback, private,
  link-local, site-local, multicast, reserved, unspecified and other non-global addresses are
  refused, for IPv4 and IPv6, including IPv4 addresses embedded in IPv6 (IPv4-mapped
  ``::ffff:a.b.c.d``, 6to4 ``2002::/16``, Teredo ``2001::/32`` and NAT64 ``64:ff9b::/96``).

``allow_private=True`` lets private and loopback addresses through (tests against a local
server, intranet corpora); the scheme check always applies.

DNS rebinding: a host could resolve to a public address when checked and to a private one when
the HTTP client connects. :meth:`NetGuard.check` therefore returns the address it checked
(:attr:`ResolvedURL.pinned_ip`), and the fetcher connects to that address, sending the original
host name in the ``Host`` header and as the TLS SNI / certificate name, so no second DNS lookup
happens. A proxy configured in the environment would resolve names itself, which is why the
fetcher ignores proxy environment variables.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from langchain_references.errors import LangchainReferencesError

__all__ = [
    "ALLOWED_SCHEMES",
    "BlockedURLError",
    "HostResolutionError",
    "NetGuard",
    "ResolvedURL",
    "Resolver",
    "blocked_reason",
    "default_resolver",
]

#: Schemes the guard lets through.
ALLOWED_SCHEMES = frozenset({"http", "https"})

#: Async resolver: ``(host, port) -> list of IP address strings``.
Resolver = Callable[[str, int], Awaitable[list[str]]]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Non-global IPv6 ranges that older ``ipaddress`` tables (Python < 3.13) call global.
_NON_GLOBAL_V6 = (
    ipaddress.IPv6Network("fec0::/10"),  # deprecated site-local (RFC 3879)
    ipaddress.IPv6Network("3fff::/20"),  # documentation (RFC 9637)
    ipaddress.IPv6Network("5f00::/16"),  # SRv6 SIDs (RFC 9602)
)


class BlockedURLError(LangchainReferencesError, ValueError):
    """The guard refused a URL; ``reason`` says why (e.g. ``"private address 10.0.0.1"``)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"refused: {reason} ({url})")
        self.url = url
        self.reason = reason


class HostResolutionError(BlockedURLError):
    """The host name could not be resolved, so the URL cannot be checked (nor fetched)."""

    def __init__(self, url: str, host: str) -> None:
        super().__init__(url, f"DNS resolution failed for {host}")
        self.host = host


@dataclass(frozen=True)
class ResolvedURL:
    """A URL that passed the guard.

    Attributes:
        url: The parsed URL.
        host: Host name as written in the URL (IDNA-encoded, no brackets).
        port: Port, explicit or the scheme's default.
        addresses: Every address the host resolved to (all passed the check).
        pinned_ip: The address to connect to.
    """

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[str, ...]
    pinned_ip: str


async def default_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the event loop's ``getaddrinfo`` (TCP addresses, IPv4 and IPv6).

    Args:
        host: Host name or IP literal.
        port: Port (passed to ``getaddrinfo``).

    Returns:
        The distinct addresses, in resolver order.
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
        if address not in addresses:
            addresses.append(address)
    return addresses


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # the client address
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def blocked_reason(address: str | IPAddress) -> str | None:
    """Say why an address must not be fetched, or return ``None`` if it is public.

    Args:
        address: An IPv4 or IPv6 address (string or ``ipaddress`` object).

    Returns:
        A short reason such as ``"loopback address 127.0.0.1"``, or ``None``.

    Raises:
        ValueError: If ``address`` is not an IP address.
    """
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    site_local = isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local
    listed = isinstance(ip, ipaddress.IPv6Address) and any(ip in n for n in _NON_GLOBAL_V6)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = blocked_reason(embedded)
            return None if inner is None else f"{inner} embedded in {ip}"
    checks = (
        (ip.is_unspecified, "unspecified"),
        (ip.is_loopback, "loopback"),
        (ip.is_link_local, "link-local"),
        (ip.is_multicast, "multicast"),
        (ip.is_reserved, "reserved"),
        (ip.is_private, "private"),
        (site_local, "site-local"),
        (listed or not ip.is_global, "non-global"),
    )
    for failed, label in checks:
        if failed:
            return f"{label} address {ip}"
    return None


def _host_and_port(url: httpx.URL) -> tuple[str, int]:
    if not url.host:
        raise BlockedURLError(str(url), "no host in URL")
    port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
    return url.host, port


class NetGuard:
    """Check URLs before they are fetched.

    Args:
        allow_private: Let private, loopback and other non-public addresses through.
        resolver: Async host resolver; defaults to :func:`default_resolver`. Tests can map
            names to addresses with their own resolver.
    """

    def __init__(self, *, allow_private: bool = False, resolver: Resolver | None = None) -> None:
        self.allow_private = allow_private
        self._resolver: Resolver = resolver or default_resolver

    @staticmethod
    def parse(url: str | httpx.URL) -> httpx.URL:
        """Parse a URL and check its scheme (no network access).

        Args:
            url: The URL.

        Returns:
            The parsed URL.

        Raises:
            BlockedURLError: If the URL is malformed, has no host, or its scheme is not
                http(s).
        """
        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise BlockedURLError(str(url), f"invalid URL: {exc}") from exc
        if parsed.scheme not in ALLOWED_SCHEMES:
            scheme = parsed.scheme or "(none)"
            raise BlockedURLError(str(url), f"scheme {scheme!r} not allowed (http/https only)")
        _host_and_port(parsed)
        return parsed

    async def check(self, url: str | httpx.URL) -> ResolvedURL:
        """Check a URL: scheme, then every address its host resolves to.

        Args:
            url: The URL.

        Returns:
            The resolved URL with the address to connect to.

        Raises:
            HostResolutionError: If the host cannot be resolved.
            BlockedURLError: If the URL is refused.
        """
        parsed = self.parse(url)
        host, port = _host_and_port(parsed)
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                addresses = await self._resolver(host, port)
            except (OSError, UnicodeError) as exc:
                raise HostResolutionError(str(url), host) from exc
        if not addresses:
            raise HostResolutionError(str(url), host)
        if not self.allow_private:
            for address in addresses:
                reason = blocked_reason(address)
                if reason is not None:
                    raise BlockedURLError(str(url), reason)
        return ResolvedURL(
            url=parsed, host=host, port=port, addresses=tuple(addresses), pinned_ip=addresses[0]
        )
