"""Answers' content types through a real proxy (uvicorn on 127.0.0.1) from an upstream that
writes them byte for byte (round four's R4-7, and the grown suite's class 2): the type checked
against ``allowedContentTypes`` is the one a browser reads, the app gets exactly that one, and
every relayed answer says ``nosniff``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from gatehouse_contract.connection_tests import Answered, ProxyRefused, ReplicaTestRequest
from gatehouse_dev.raw_upstream import RawUpstream
from tests.proxy.serving import Running, Tenant, running_proxy

SECRET = "sk_live_types_0123456789"
JSON_ONLY = ("application/json",)


@contextlib.asynccontextmanager
async def _through(
    tmp_path: Path, origin: str, *, allowing: tuple[str, ...] = ()
) -> AsyncIterator[tuple[Running, httpx.AsyncClient]]:
    tenant = Tenant(
        "one",
        origin,
        auth="apiKey",
        secret=SECRET,
        parameter="X-Api-Key",
        location="header",
        methods=frozenset({"GET", "HEAD"}),
        content_types=allowing,
    )
    async with (
        running_proxy(tmp_path, [tenant]) as proxy,
        httpx.AsyncClient(
            base_url=f"{proxy.url}/v1/fetch/api",
            headers={"Authorization": f"Bearer {tenant.token}"},
            timeout=10,
        ) as client,
    ):
        yield proxy, client


def test_the_type_a_browser_reads_is_the_one_checked(tmp_path: Path) -> None:
    async def scenario(raw: RawUpstream) -> None:
        async with _through(tmp_path, raw.url, allowing=JSON_ONLY) as (_, client):
            for path in ("/type-twice", "/type-comma"):
                refused = await client.get(path)
                assert refused.status_code == 502, (path, refused.text)
                assert refused.json()["error"]["code"] == "content_type_not_allowed"
                assert "'text/html'" in refused.json()["error"]["message"], path
                assert "<script>" not in refused.text
            for path in ("/type-control", "/type-no-break-space", "/type-ideographic-space"):
                refused = await client.get(path)
                assert refused.status_code == 502, (path, refused.text)
                assert refused.json()["error"]["code"] == "content_type_not_allowed"
                assert "no browser can read" in refused.json()["error"]["message"], path
            # JSON to a browser too: relayed as the type read, its parameters re-quoted.
            for path, relayed in (
                ("/type-parameters", 'application/json;x="<script>"'),
                ("/type-quoted-comma", 'application/json;x=",text/html"'),
            ):
                answer = await client.get(path)
                assert answer.status_code == 200, (path, answer.text)
                assert answer.headers.get_list("content-type") == [relayed]
                assert answer.headers["x-content-type-options"] == "nosniff"

    with RawUpstream() as raw:
        asyncio.run(scenario(raw))


def _head(proxy: str, token: str, path: str) -> bytes:
    """The answer's head as its bytes, as a socket reads them."""
    host, port = proxy.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(
            f"GET /v1/fetch/api{path} HTTP/1.1\r\nHost: proxy\r\n"
            f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode()
        )
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    return received.partition(b"\r\n\r\n")[0]


def test_without_allowed_types_the_app_still_gets_one_type_and_nosniff(tmp_path: Path) -> None:
    async def scenario(raw: RawUpstream) -> None:
        async with _through(tmp_path, raw.url) as (proxy, client):
            for path, relayed in (
                ("/type-twice", ["text/html"]),
                ("/type-comma", ["text/html"]),
                ("/type-control", []),
                ("/type-no-break-space", []),
                ("/type-parameters", ['application/json;x="<script>"']),
            ):
                answer = await client.get(path)
                assert answer.status_code == 200, (path, answer.text)
                assert answer.headers.get_list("content-type") == relayed, path
                assert answer.headers.get_list("x-content-type-options") == ["nosniff"], path
            token = Tenant("one", raw.url).token
            head = await asyncio.to_thread(_head, proxy.url, token, "/type-latin1")
            assert b'\r\ncontent-type: text/plain;name="\xe9"\r\n' in head

    with RawUpstream() as raw:
        asyncio.run(scenario(raw))


def test_a_connection_test_shows_the_type_an_app_would_get(tmp_path: Path) -> None:
    async def run(proxy: Running, path: str) -> Answered | ProxyRefused:
        outcome = await proxy.proxy.run_test(
            ReplicaTestRequest(connection="one/api", method="GET", path=path), lambda: None
        )
        assert isinstance(outcome, Answered | ProxyRefused)
        return outcome

    async def scenario(raw: RawUpstream) -> None:
        async with _through(tmp_path / "any", raw.url) as (proxy, _):
            for path, shown in (
                ("/type-twice", "text/html"),
                ("/type-control", ""),
                # A byte that is no UTF-8 is shown as U+FFFD, never a surrogate no status holds.
                ("/type-latin1", 'text/plain;name="\ufffd"'),
            ):
                outcome = await run(proxy, path)
                assert isinstance(outcome, Answered), (path, outcome)
                assert outcome.answered.content_type == shown, path
        async with _through(tmp_path / "json", raw.url, allowing=JSON_ONLY) as (proxy, _):
            outcome = await run(proxy, "/type-twice")
            assert isinstance(outcome, ProxyRefused)
            assert outcome.refused.code == "content_type_not_allowed"
            assert "'text/html'" in outcome.refused.message

    (tmp_path / "any").mkdir()
    (tmp_path / "json").mkdir()
    with RawUpstream() as raw:
        asyncio.run(scenario(raw))


def test_a_type_echoing_the_key_is_named_redacted(tmp_path: Path) -> None:
    """The refusal names the type the upstream wrote: never the key, if that is what it wrote."""

    async def scenario(raw: RawUpstream) -> None:
        async with _through(tmp_path, raw.url, allowing=JSON_ONLY) as (_, client):
            refused = await client.get("/type-echo")
            assert refused.status_code == 502
            assert SECRET not in refused.text
            assert "text/[redacted]" in refused.json()["error"]["message"]

    with RawUpstream() as raw:
        asyncio.run(scenario(raw))
