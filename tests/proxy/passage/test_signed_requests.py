"""awsSigV4 through the real proxy to a real upstream on 127.0.0.1: what the upstream receives
carries a signature of exactly what it received (recomputed here from the request as it arrived),
a path the proxy normalises and a body over 64 KiB included; the app's own signing headers never
arrive; an upstream that echoes the signature back has it scrubbed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.routes import AwsSigning, PayloadSigning
from gatehouse_proxy.credentials.aws_signing import (
    UNSIGNED_PAYLOAD,
    Scope,
    SigningRequest,
    payload_hash,
    sign,
)
from tests.proxy.serving import Running, Tenant, running_proxy, upstream

KEYS = AwsKeys("ASIAEXAMPLEEXAMPLE00", "wJalr/K7+MDENG=bPx", "IQoJb3Jp+Z2lu/X2Vj==")
# Added by the signer: the rest of the signed headers are the request's own.
_ADDED = {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}


def _recording_upstream(received: list[dict[str, Any]]) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        headers = [(name.decode(), value.decode()) for name, value in request.raw_headers]
        received.append(
            {
                "method": request.method,
                "target": request.raw_path,
                "headers": headers,
                "body": await request.read(),
            }
        )
        if request.path.startswith("/echo"):
            return web.Response(text=request.headers.get("Authorization", ""))
        return web.Response(text="ok")

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def _header(headers: list[tuple[str, str]], name: str) -> str:
    values = [value for header, value in headers if header.lower() == name]
    assert len(values) == 1, (name, values)
    return values[0]


def verified(received: dict[str, Any], aws: AwsSigning) -> str:
    """The signature recomputed from the request as the upstream received it; the Authorization
    received must be the one it gives. Returns the signature."""
    headers: list[tuple[str, str]] = received["headers"]
    authorization = _header(headers, "authorization")
    signed_names = re.search(r"SignedHeaders=([^,]+),", authorization)
    assert signed_names is not None
    names = signed_names.group(1).split(";")
    payload = _header(headers, "x-amz-content-sha256")
    expected_payload = (
        UNSIGNED_PAYLOAD if aws.payload == "unsigned" else payload_hash([received["body"]])
    )
    assert payload == expected_payload
    path, _, query = received["target"].partition("?")
    request = SigningRequest(
        received["method"],
        _header(headers, "host"),
        path,
        query,
        [
            (name, value)
            for name, value in headers
            if name.lower() in names and name.lower() not in _ADDED
        ],
        payload,
    )
    when = datetime.strptime(_header(headers, "x-amz-date"), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    signed = sign(request, KEYS, Scope.for_service(aws.region, aws.service), when)
    assert dict(signed.headers)["Authorization"] == authorization
    assert _header(headers, "x-amz-security-token") == KEYS.session_token
    return signed.signature


@asynccontextmanager
async def _signing_proxy(
    tmp_path: Path, received: list[dict[str, Any]], payload: PayloadSigning = "signed"
) -> AsyncIterator[tuple[Running, Tenant, httpx.AsyncClient]]:
    aws = AwsSigning(region="eu-west-1", service="execute-api", payload=payload)
    async with upstream(_recording_upstream(received)) as origin:
        tenant = Tenant("one", origin, auth="awsSigV4", secret=KEYS.stored(), aws=aws)
        async with (
            running_proxy(tmp_path, [tenant]) as proxy,
            httpx.AsyncClient(timeout=10) as client,
        ):
            yield proxy, tenant, client


def _fetch_url(proxy: Running, path: str) -> str:
    return f"{proxy.url}/v1/fetch/api{path}"


def test_the_signature_covers_what_the_upstream_received(tmp_path: Path) -> None:
    received: list[dict[str, Any]] = []
    aws = AwsSigning(region="eu-west-1", service="execute-api")

    async def scenario() -> None:
        async with _signing_proxy(tmp_path, received) as (proxy, tenant, client):
            answer = await client.post(
                # The proxy normalises the path (%7e, %41 and %3a decoded where they may be).
                _fetch_url(proxy, "/v1/%7euser/%41b/c%3a?b=2&a=%2B1&a=0"),
                headers={
                    "Authorization": f"Bearer {tenant.token}",
                    "Content-Type": "application/x-amz-json-1.1",
                    "X-Amz-Target": "Service.Operation",
                    # The app's own signing headers: the kind's alone, never sent.
                    "X-Amz-Date": "20000101T000000Z",
                    "X-Amz-Security-Token": "forged-token",
                    "X-Amz-Content-Sha256": "forged",
                    "X_Amz_Date": "forged",
                },
                content=b'{"a": 1}',
            )
            assert answer.status_code == 200, answer.text
            large = bytes(range(256)) * 1024  # 256 KiB: hashed off the event loop
            answer = await client.post(
                _fetch_url(proxy, "/upload"),
                headers={"Authorization": f"Bearer {tenant.token}"},
                content=large,
            )
            assert answer.status_code == 200, answer.text

        first, second = received
        assert first["target"] == "/v1/~user/Ab/c:?b=2&a=%2B1&a=0"
        verified(first, aws)
        assert _header(first["headers"], "x-amz-target") == "Service.Operation"
        assert _header(first["headers"], "x-amz-date") != "20000101T000000Z"
        assert "forged" not in str(first["headers"])
        assert "x_amz_date" not in {name.lower() for name, _ in first["headers"]}
        assert "content-type;host;" in _header(first["headers"], "authorization")
        assert second["body"] == large
        verified(second, aws)

    asyncio.run(scenario())


def test_an_unsigned_payload_is_signed_as_unsigned(tmp_path: Path) -> None:
    received: list[dict[str, Any]] = []
    aws = AwsSigning(region="eu-west-1", service="execute-api", payload="unsigned")

    async def scenario() -> None:
        async with _signing_proxy(tmp_path, received, "unsigned") as (proxy, tenant, client):
            answer = await client.post(
                _fetch_url(proxy, "/object"),
                headers={"Authorization": f"Bearer {tenant.token}"},
                content=b"streamed",
            )
            assert answer.status_code == 200, answer.text
        verified(received[0], aws)

    asyncio.run(scenario())


def test_an_upstream_that_echoes_the_signature_has_it_scrubbed(tmp_path: Path) -> None:
    received: list[dict[str, Any]] = []
    aws = AwsSigning(region="eu-west-1", service="execute-api")

    async def scenario() -> None:
        async with _signing_proxy(tmp_path, received) as (proxy, tenant, client):
            for _ in range(2):  # each request's own signature
                answer = await client.get(
                    _fetch_url(proxy, "/echo"),
                    headers={"Authorization": f"Bearer {tenant.token}"},
                )
                assert answer.status_code == 200, answer.text
                signature = verified(received[-1], aws)
                assert signature not in answer.text
                assert KEYS.session_token not in answer.text
                assert "Credential=ASIAEXAMPLEEXAMPLE00/" in answer.text

    asyncio.run(scenario())
