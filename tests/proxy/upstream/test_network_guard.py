"""Only public unicast addresses pass, whatever form they hide in (CVE-2024-4032's list too)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from gatehouse_proxy.upstream.network_guard import (
    BlockedAddressError,
    GuardedResolver,
    NetworkPolicy,
)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.20.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",  # noqa: S104 (a denied address under test, not a bind)
        "192.0.0.192",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "::127.0.0.1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "fd00::1",
        "fe80::1",
        "ff02::1",
    ],
)
def test_denied_addresses(address: str) -> None:
    assert not NetworkPolicy().permits(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "1.1.1.1"])
def test_public_addresses_pass(address: str) -> None:
    assert NetworkPolicy().permits(ipaddress.ip_address(address))


def test_installation_may_allow_named_private_networks() -> None:
    policy = NetworkPolicy(["127.0.0.0/8", "10.20.0.0/16"])
    assert policy.permits(ipaddress.ip_address("127.0.0.1"))
    assert policy.permits(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert policy.permits(ipaddress.ip_address("10.20.1.1"))
    assert not policy.permits(ipaddress.ip_address("10.21.1.1"))
    assert not policy.permits(ipaddress.ip_address("169.254.169.254"))


def test_ip_literal_hosts_are_checked() -> None:
    with pytest.raises(BlockedAddressError):
        NetworkPolicy().check_address("[::1]")
    NetworkPolicy().check_address("api.example.com")


class _FixedResolver(AbstractResolver):
    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(hostname=host, host=a, port=port, family=family, proto=0, flags=0)
            for a in self.addresses
        ]

    async def close(self) -> None:
        return None


def test_resolver_drops_denied_addresses_and_refuses_when_none_remain() -> None:
    mixed = GuardedResolver(NetworkPolicy(), _FixedResolver(["10.0.0.1", "93.184.215.14"]))
    results = asyncio.run(mixed.resolve("rebind.example", 443))
    assert [result["host"] for result in results] == ["93.184.215.14"]

    private = GuardedResolver(NetworkPolicy(), _FixedResolver(["127.0.0.1"]))
    with pytest.raises(BlockedAddressError, match=r"rebind\.example"):
        asyncio.run(private.resolve("rebind.example", 443))
