"""The forwarder refuses private upstreams unless the installation allows them, and redirects;
a body that fails half-way is a ProxyError too, never an aiohttp exception."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web

from gatehouse_dev.pki import CertificateAuthority
from gatehouse_dev.processes import free_port
from gatehouse_dev.raw_upstream import RawUpstream
from gatehouse_dev.upstream import create_app
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.upstream.forwarder import (
    Forwarder,
    UpstreamRequest,
    new_session,
    tls_context,
)
from gatehouse_proxy.upstream.network_guard import NetworkPolicy


@contextlib.asynccontextmanager
async def _dev_upstream(policy: NetworkPolicy) -> AsyncIterator[tuple[int, ClientSession]]:
    """The dev upstream on a free port, and a session of the proxy's own kind."""
    runner = web.AppRunner(create_app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    session = new_session(policy, tls_context())
    try:
        yield port, session
    finally:
        await session.close()
        await runner.cleanup()


async def _send(
    policy: NetworkPolicy,
    url: str,
    *,
    allow_http: bool = True,
    timeout_seconds: float = 5,
    max_response_bytes: int = 1_000_000,
) -> int:
    async with _dev_upstream(policy) as (port, session):
        forwarder = Forwarder(policy, allow_http=allow_http)
        upstream = await forwarder.send(
            session,
            UpstreamRequest(
                method="GET",
                url=url.format(port=port),
                headers=[],
                timeout_seconds=timeout_seconds,
                max_response_bytes=max_response_bytes,
            ),
        )
        chunks = [chunk async for chunk in upstream.body()]
        assert chunks
        return upstream.status


def _code(policy: NetworkPolicy, url: str, **limits: Any) -> str:
    with pytest.raises(ProxyError) as caught:
        asyncio.run(_send(policy, url, **limits))
    return caught.value.code


def test_loopback_is_refused_by_default_by_ip_and_by_name() -> None:
    assert _code(NetworkPolicy(), "http://127.0.0.1:{port}/echo/") == "blocked_address"
    assert _code(NetworkPolicy(), "http://localhost:{port}/echo/") == "blocked_address"


def test_http_is_refused_unless_the_installation_allows_it() -> None:
    allowed = NetworkPolicy(["127.0.0.0/8"])
    assert _code(allowed, "http://127.0.0.1:{port}/echo/", allow_http=False) == "blocked_address"


def test_allowed_private_network_passes_and_redirects_are_refused() -> None:
    allowed = NetworkPolicy(["127.0.0.0/8", "::1/128"])
    assert asyncio.run(_send(allowed, "http://127.0.0.1:{port}/echo/")) == 200
    assert _code(allowed, "http://127.0.0.1:{port}/redirect") == "upstream_redirect"


def test_a_body_that_fails_half_way_is_a_proxy_error() -> None:
    allowed = NetworkPolicy(["127.0.0.0/8"])
    chunked = "http://127.0.0.1:{port}/big?bytes=300000&chunked=1"
    assert _code(allowed, chunked, max_response_bytes=100_000) == "response_too_large"
    assert _code(allowed, "http://127.0.0.1:{port}/broken") == "upstream_failed"
    stalled = "http://127.0.0.1:{port}/broken?then=stall&seconds=5"
    assert _code(allowed, stalled, timeout_seconds=0.5) == "upstream_timeout"


def test_the_upstream_ca_adds_to_the_system_trust_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system_dir, private_dir = tmp_path / "system", tmp_path / "private"
    system_dir.mkdir()
    private_dir.mkdir()
    system = CertificateAuthority(system_dir, "a-public-ca")
    private = CertificateAuthority(private_dir, "the-installations-ca")
    # OpenSSL's default trust store, as create_default_context loads it.
    monkeypatch.setenv("SSL_CERT_FILE", str(system.cert_path))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "none"))
    policy = NetworkPolicy(["127.0.0.0/8"])

    async def scenario() -> list[int]:
        runners, ports = [], []
        for ca in (system, private):
            pair = ca.issue("upstream", "upstream", hosts=("127.0.0.1",))
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(pair.cert_path, pair.key_path)
            runner = web.AppRunner(create_app())
            await runner.setup()
            ports.append(free_port())
            await web.TCPSite(runner, "127.0.0.1", ports[-1], ssl_context=context).start()
            runners.append(runner)
        session = new_session(policy, tls_context(str(private.cert_path)))
        try:
            forwarder = Forwarder(policy, allow_http=False)
            statuses = []
            for port in ports:
                upstream = await forwarder.send(
                    session,
                    UpstreamRequest(
                        method="GET",
                        url=f"https://127.0.0.1:{port}/echo/",
                        headers=[],
                        timeout_seconds=5,
                        max_response_bytes=1_000_000,
                    ),
                )
                upstream.release()
                statuses.append(upstream.status)
            return statuses
        finally:
            await session.close()
            for runner in runners:
                await runner.cleanup()

    assert asyncio.run(scenario()) == [200, 200]


def test_a_test_gets_the_answer_as_it_is_read_up_to_the_limit() -> None:
    """What a connection test sees (``as_answered``): the redirect itself, never followed, and a
    body over the limit read up to it, whether its length was declared or not."""
    allowed = NetworkPolicy(["127.0.0.0/8"])

    async def scenario() -> None:
        forwarder = Forwarder(allowed, allow_http=True)
        async with _dev_upstream(allowed) as (port, session):
            for path, status in (("/redirect", 302), ("/big?bytes=300000", 200)):
                for chunked in ("", "&chunked=1" if "?" in path else ""):
                    upstream = await forwarder.send(
                        session,
                        UpstreamRequest(
                            method="GET",
                            url=f"http://127.0.0.1:{port}{path}{chunked}",
                            headers=[],
                            timeout_seconds=5,
                            max_response_bytes=100_000,
                            as_answered=True,
                        ),
                    )
                    assert upstream.status == status
                    read = b"".join([chunk async for chunk in upstream.body(stop_at_limit=True)])
                    if status == 200:
                        assert len(read) == 100_000
                        assert upstream.over_limit
                    else:
                        assert upstream.response.headers["location"].endswith("/elsewhere")
                        assert not upstream.over_limit

    asyncio.run(scenario())


def test_an_interim_final_status_is_refused_and_its_connection_closed() -> None:
    """aiohttp returns a 101 as the final answer: refused (also for a connection test), and its
    connection closed, never pooled."""
    policy = NetworkPolicy(["127.0.0.1/32"])

    async def scenario(url: str) -> list[str]:
        session = new_session(policy, tls_context())
        codes: list[str] = []
        try:
            for as_answered in (False, True):
                with pytest.raises(ProxyError) as caught:
                    await Forwarder(policy, allow_http=True).send(
                        session,
                        UpstreamRequest(
                            method="GET",
                            url=f"{url}/switching",
                            headers=[("X-Api-Key", "sk_live_0123456789")],
                            timeout_seconds=5,
                            max_response_bytes=1000,
                            as_answered=as_answered,
                        ),
                    )
                codes.append(caught.value.code)
                assert "sk_live" not in caught.value.message
        finally:
            await session.close()
        return codes

    with RawUpstream() as raw:
        assert asyncio.run(scenario(raw.url)) == ["upstream_informational"] * 2
        assert raw.outcomes(2) == [("/switching", "closed")] * 2


def test_a_body_compressed_in_a_way_the_proxy_cannot_read_is_refused() -> None:
    allowed = NetworkPolicy(["127.0.0.0/8"])

    async def scenario(coding: str, decode: bool) -> tuple[str, bytes]:
        async with _dev_upstream(allowed) as (port, session):
            try:
                upstream = await Forwarder(allowed, allow_http=True).send(
                    session,
                    UpstreamRequest(
                        method="GET",
                        url=f"http://127.0.0.1:{port}/compressed/{coding}",
                        headers=[],
                        timeout_seconds=5,
                        max_response_bytes=100_000,
                        decode=decode,
                    ),
                )
            except ProxyError as error:
                return error.code, b""
            return "", b"".join([chunk async for chunk in upstream.body()])

    assert asyncio.run(scenario("br", decode=True)) == ("unsupported_encoding", b"")
    code, passed = asyncio.run(scenario("br", decode=False))
    assert (code, json.loads(passed)["error"]) == ("", "bad key")
    code, decoded = asyncio.run(scenario("gzip-then-deflate", decode=True))
    assert (code, json.loads(decoded)["error"]) == ("", "bad key")
