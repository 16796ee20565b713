"""Which addresses the proxy may connect to, checked after DNS and pinned for the connection.

The guard sits in aiohttp's resolver: the addresses it returns are the ones aiohttp connects to,
so a host cannot resolve to a public address for the check and a private one for the connection
(DNS rebinding). aiohttp skips resolvers for IP literals, so the forwarder checks those itself
with :meth:`NetworkPolicy.check_address`.

Denied ranges are an explicit list, not ``ipaddress.is_global``, whose answers for 192.0.0.192,
NAT64, 6to4 and IPv4-compatible addresses were wrong on the Pythons we support (CVE-2024-4032).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from gatehouse_proxy.errors import ProxyException

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DENIED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "0.0.0.0/8",  # "this" network
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
        "::/96",  # unspecified, loopback, IPv4-compatible
        "::ffff:0:0/96",  # IPv4-mapped (checked again as IPv4 below)
        "64:ff9b::/96",  # NAT64
        "64:ff9b:1::/48",
        "100::/64",  # discard
        "2001::/23",  # IETF protocol assignments: Teredo, ORCHID
        "2001:db8::/32",
        "2002::/16",  # 6to4
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",
        "ff00::/8",  # multicast
    )
)


class BlockedAddressError(ProxyException, OSError):
    """Every address of the host is in a denied range (the message names the host, not why)."""


_MAX_VERDICTS = 65536


class NetworkPolicy:
    """Public unicast addresses only, except the private networks the installation allows."""

    def __init__(self, allowed_private: Iterable[str] = ()) -> None:
        self.allowed_private = tuple(ipaddress.ip_network(cidr) for cidr in allowed_private)
        # The verdict on each host an upstream URL names, made once (parsing an address is a
        # few microseconds of every request otherwise).
        self._verdicts: dict[str, bool] = {}

    def permits(self, address: IPAddress) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in network for network in self.allowed_private):
            return True
        return not any(address in network for network in DENIED_NETWORKS)

    def check_address(self, host: str) -> None:
        """For IP-literal hosts, which never reach the resolver."""
        permitted = self._verdicts.get(host)
        if permitted is None:
            try:
                address = ipaddress.ip_address(host.strip("[]"))
            except ValueError:
                permitted = True  # a name: the resolver checks what it resolves to
            else:
                permitted = self.permits(address)
            # Hosts come from the routing table's origins: as many as its connections. The bound
            # is only against a table that changes its origins for ever.
            if len(self._verdicts) >= _MAX_VERDICTS:
                self._verdicts.clear()
            self._verdicts[host] = permitted
        if not permitted:
            raise BlockedAddressError(f"{host} is not an address the proxy may connect to")


class GuardedResolver(AbstractResolver):
    def __init__(self, policy: NetworkPolicy, inner: AbstractResolver | None = None) -> None:
        self.policy = policy
        self.inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        permitted = [
            result
            for result in results
            if self.policy.permits(ipaddress.ip_address(result["host"]))
        ]
        if not permitted:
            raise BlockedAddressError(f"{host} resolves only to addresses the proxy may not use")
        return permitted

    async def close(self) -> None:
        await self.inner.close()
