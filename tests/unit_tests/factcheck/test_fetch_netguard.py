from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_references.errors import LangchainReferencesError
from langchain_references.factcheck.netguard import (
    BlockedURLError,
    HostResolutionError,
    NetGuard,
    blocked_reason,
)


@pytest.mark.parametrize(
    ("address", "label"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("224.0.0.251", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-global"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:192.168.0.1", "private"),
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("fec0::1", "site-local"),  # deprecated site-local, "global" for Python 3.11
        ("feff:ffff::1", "site-local"),
        ("3fff::1", "non-global"),  # documentation (RFC 9637)
        ("::ffff:fec0:1", "reserved"),  # IPv4-mapped 254.192.0.1
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of 169.254.169.254
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ],
)
def test_non_public_addresses_are_blocked(address: str, label: str) -> None:
    reason = blocked_reason(address)
    assert reason is not None
    assert reason.startswith(f"{label} address")


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(address) is None


def test_blocked_reason_rejects_non_addresses() -> None:
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
        blocked_reason("example.org")


@given(st.ip_addresses(v=4))
def test_ipv4_mapped_ipv6_is_judged_like_its_ipv4(ip: ipaddress.IPv4Address) -> None:
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    assert (blocked_reason(mapped) is None) == (blocked_reason(ip) is None)


@given(st.ip_addresses(network="10.0.0.0/8") | st.ip_addresses(network="fe80::/10"))
def test_every_address_of_a_private_range_is_blocked(ip: ipaddress.IPv4Address) -> None:
    assert blocked_reason(ip) is not None


@given(st.ip_addresses(network="fec0::/10"))
def test_every_site_local_address_is_blocked(ip: ipaddress.IPv6Address) -> None:
    assert blocked_reason(ip) is not None


_PRIVATE_V4 = (
    st.ip_addresses(network="10.0.0.0/8")
    | st.ip_addresses(network="172.16.0.0/12")
    | st.ip_addresses(network="192.168.0.0/16")
    | st.ip_addresses(network="127.0.0.0/8")
    | st.ip_addresses(network="169.254.0.0/16")
    | st.ip_addresses(network="100.64.0.0/10")
)


@given(_PRIVATE_V4, st.sampled_from(["mapped", "6to4", "nat64"]), st.integers(0, 2**64 - 1))
def test_private_ipv4_embedded_in_ipv6_is_blocked(
    ip: ipaddress.IPv4Address, how: str, low: int
) -> None:
    if how == "mapped":
        embedded = ipaddress.IPv6Address(f"::ffff:{ip}")
    elif how == "6to4":
        embedded = ipaddress.IPv6Address((0x2002 << 112) | (int(ip) << 80) | low)
    else:
        embedded = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(ip))
    reason = blocked_reason(embedded)
    assert reason is not None
    assert f"embedded in {embedded}" in reason


async def test_site_local_host_is_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["fec0::1"]

    with pytest.raises(BlockedURLError, match="site-local address fec0::1"):
        await NetGuard(resolver=resolver).check("https://intranet.example/")
    with pytest.raises(BlockedURLError, match="site-local"):
        await NetGuard().check("http://[fec0::10]/")


async def test_any_blocked_address_refuses_the_host() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "192.168.0.10"]

    with pytest.raises(BlockedURLError, match=r"refused: private address 192\.168\.0\.10"):
        await NetGuard(resolver=resolver).check("https://mixed.example/")
    allowed = await NetGuard(allow_private=True, resolver=resolver).check("https://mixed.example/")
    assert allowed.pinned_ip == "93.184.216.34"
    assert allowed.port == 443


async def test_public_host_is_pinned_to_its_checked_address() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["2606:4700:4700::1111"]

    resolved = await NetGuard(resolver=resolver).check("http://dns.example:8080/x")
    assert (resolved.host, resolved.port, resolved.pinned_ip) == (
        "dns.example",
        8080,
        "2606:4700:4700::1111",
    )


def test_scheme_is_checked_even_when_private_addresses_are_allowed() -> None:
    with pytest.raises(BlockedURLError, match="scheme 'file' not allowed"):
        NetGuard.parse("file:///etc/passwd")
    with pytest.raises(BlockedURLError, match="no host"):
        NetGuard.parse("http:///path-only")


def test_refusals_are_package_errors_and_value_errors() -> None:
    for error in (BlockedURLError, HostResolutionError):
        assert issubclass(error, LangchainReferencesError)
        assert issubclass(error, ValueError)
