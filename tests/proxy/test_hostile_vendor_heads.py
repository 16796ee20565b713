"""The rule "a vendor cannot make the proxy answer 500", swept: every answer header the proxy
reads (and a few it relays), each with the values a hostile vendor writes, on the statuses whose
handling reads them, through a real proxy (uvicorn on 127.0.0.1) and a real upstream. Whatever
comes back, the app gets the vendor's status or one of the proxy's refusals with its code, and
the proxy logs no error. One tenant with no credential, one with an API key (scrubbing and
identity on), one with an answer allow-list. Heads no HTTP library will send (CR, LF, other
control bytes, 101s) are
tests/e2e/test_hostile_answers.py's."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from gatehouse_contract.errors import REFUSAL_CODES
from tests.proxy.serving import Tenant, running_proxy, upstream

KEY = "sk_live_Sweep+0123456789/abcdef="
# What the proxy reads of an answer (a pause, a type, a coding, a redirect's target, a 401's
# challenge), and what it relays after filtering.
HEADERS = (
    "Retry-After",
    "Content-Type",
    "Content-Encoding",
    "Location",
    "WWW-Authenticate",
    "Vary",
    "Link",
    "X-RateLimit-Reset",
)
VALUES = (
    "",
    " ",
    "²",
    "①",
    "٣",
    "-1",
    "999999999999999999999999",
    "1e400",
    "NaN",
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "Fri, 31 Dec 99999999999999999999 23:59:59 GMT",
    "application/json;,text/html",
    'text/html; charset="\\',
    "gzip, br, zstd, x-unknown",
    "\u00e9\u00ff\u0080",
    "https://attacker.example/?k=" + KEY,
    "x" * 8000,
)
STATUSES = (200, 301, 401, 429, 503)


def _sweep_upstream() -> web.Application:
    async def answer(request: web.Request) -> web.StreamResponse:
        status = int(request.match_info["status"])
        name = request.match_info["name"]
        value = VALUES[int(request.match_info["value"])]
        body = b"" if status == 301 else b'{"ok": true}'
        response = web.Response(
            status=status, body=body, headers={"Content-Type": "application/json"}
        )
        if name == "Content-Type":
            response.headers.popall("Content-Type")
        response.headers.add(name, value)
        return response

    app = web.Application()
    app.router.add_get("/sweep/{status}/{name}/{value}", answer)
    return app


def test_no_answer_header_a_vendor_writes_makes_the_proxy_answer_500(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with upstream(_sweep_upstream()) as origin:
            tenants = [
                Tenant("plain", origin),
                Tenant(
                    "keyed",
                    origin,
                    auth="apiKey",
                    secret=KEY,
                    parameter="X-API-Key",
                    location="header",
                ),
                Tenant("typed", origin, content_types=("application/json",)),
            ]
            async with (
                running_proxy(tmp_path, tenants) as running,
                httpx.AsyncClient(timeout=30) as client,
            ):
                for tenant in tenants:
                    headers = {"Authorization": f"Bearer {tenant.token}"}
                    for status, name, value in itertools.product(
                        STATUSES, HEADERS, range(len(VALUES))
                    ):
                        url = f"{running.url}/v1/fetch/api/sweep/{status}/{name}/{value}"
                        # The bytes as relayed: a coding the vendor claims is not undone.
                        async with client.stream("GET", url, headers=headers) as said:
                            body = b"".join([piece async for piece in said.aiter_raw()])
                        case = (tenant.namespace, status, name, VALUES[value][:40])
                        assert said.status_code != 500, (case, body[:200])
                        if said.status_code != status:
                            code = json.loads(body)["error"]["code"]
                            assert code in REFUSAL_CODES, case
                        assert KEY.encode() not in body, case

    with caplog.at_level(logging.WARNING):
        asyncio.run(scenario())
    # The feed's retries are this harness's (no operator runs); any other error is a finding.
    failed = [
        record
        for record in caplog.records
        if record.exc_info is not None and record.name != "gatehouse.proxy.table"
    ]
    assert not failed, [record.getMessage() for record in failed[:3]]
