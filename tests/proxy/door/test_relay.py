"""The app port without a framework, and answers relayed whole or streamed: a real proxy (uvicorn
on 127.0.0.1) in front of a real upstream that echoes the injected key."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from aiohttp import web

from gatehouse_contract.connection_tests import Answered, ProxyRefused, ReplicaTestRequest
from gatehouse_dev.echoes import COMPRESSED, leaks
from gatehouse_dev.raw_upstream import RawUpstream
from tests.proxy.serving import Running, Tenant, running_proxy, upstream

SECRET = "sk_live_relay_0123456789"
CHUNK = 64 * 1024


def _upstream() -> web.Application:
    async def small(request: web.Request) -> web.Response:
        return web.json_response({"echo": request.headers.get("X-Api-Key", "")})

    async def big(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse()
        await answer.prepare(request)
        # The key straddles the boundary of the first two chunks.
        body = b"a" * (CHUNK - 5) + SECRET.encode() + b"b" * (CHUNK * 15)
        for start in range(0, len(body), CHUNK):
            await answer.write(body[start : start + CHUNK])
        await answer.write_eof()
        return answer

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def endless(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse()
        await answer.prepare(request)
        for _ in range(600):
            await answer.write(b"x" * 1024)
            await asyncio.sleep(0.05)
        return answer

    app = web.Application()
    app.router.add_get("/small", small)
    app.router.add_get("/big", big)
    app.router.add_get("/empty", empty)
    app.router.add_get("/endless", endless)
    return app


@contextlib.asynccontextmanager
async def _proxy(tmp_path: Path) -> AsyncIterator[tuple[Running, httpx.AsyncClient, Tenant]]:
    async with upstream(_upstream()) as origin:
        tenant = Tenant(
            "one",
            origin,
            auth="apiKey",
            secret=SECRET,
            parameter="X-Api-Key",
            location="header",
            methods=frozenset({"GET", "HEAD"}),
        )
        async with (
            running_proxy(tmp_path, [tenant]) as proxy,
            httpx.AsyncClient(
                base_url=f"{proxy.url}/v1/fetch/api",
                headers={"Authorization": f"Bearer {tenant.token}"},
                timeout=10,
            ) as client,
        ):
            yield proxy, client, tenant


def test_an_answer_already_whole_goes_out_scrubbed_with_its_length(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _proxy(tmp_path) as (_, client, _tenant):
            answer = await client.get("/small")
            assert answer.json() == {"echo": "[redacted]"}
            assert answer.headers["content-length"] == str(len(answer.content))
            assert "transfer-encoding" not in answer.headers
            head = await client.head("/small")
            assert head.status_code == 200
            assert head.content == b""
            assert "content-length" not in head.headers
            empty = await client.get("/empty")
            assert empty.status_code == 204
            assert "content-length" not in empty.headers

    asyncio.run(scenario())


def test_a_longer_answer_is_streamed_and_scrubbed_across_its_chunks(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _proxy(tmp_path) as (_, client, _tenant):
            answer = await client.get("/big")
            assert answer.headers.get("transfer-encoding") == "chunked"
            assert SECRET.encode() not in answer.content
            assert answer.content.count(b"[redacted]") == 1
            assert len(answer.content) == CHUNK * 16 - 5 + len("[redacted]")

    asyncio.run(scenario())


def test_an_app_that_hangs_up_mid_stream_frees_its_place_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _proxy(tmp_path) as (proxy, client, _tenant):
            concurrency = proxy.proxy.concurrency
            async with client.stream("GET", "/endless") as answer:
                await anext(answer.aiter_raw())
                assert concurrency.in_flight("namespace", "one") == 1
            # The upstream would stream for 30 s more: the place is freed when the app leaves.
            for _ in range(100):
                if concurrency.in_flight("namespace", "one") == 0:
                    break
                await asyncio.sleep(0.02)
            assert concurrency.in_flight("namespace", "one") == 0

    asyncio.run(scenario())


def test_the_app_port_answers_fetches_and_liveness_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _proxy(tmp_path) as (proxy, client, tenant):
            base = proxy.url
            auth = {"Authorization": f"Bearer {tenant.token}"}
            assert (await client.get(f"{base}/healthz")).text == "ok"
            for path in ("/", "/nope", "/v1/fetch/", "/v1/fetch", "/v1/fetch//small"):
                missing = await client.get(f"{base}{path}", headers=auth)
                assert (missing.status_code, missing.text) == (404, "Not Found"), path
            traced = await client.request("TRACE", f"{base}/v1/fetch/api/small", headers=auth)
            assert traced.status_code == 405
            assert traced.headers["allow"] == "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"
            posted = await client.post(f"{base}/healthz")
            assert (posted.status_code, posted.headers["allow"]) == (405, "GET, HEAD")

    asyncio.run(scenario())


# Upstreams that answer in ways an app must not see (red-team round 3, N7 and N8).


@contextlib.asynccontextmanager
async def _through(
    tmp_path: Path, origin: str, *, secret: str = SECRET
) -> AsyncIterator[httpx.AsyncClient]:
    """An app's client for a connection to ``origin`` that injects ``secret`` (none if empty)."""
    tenant = Tenant("one", origin)
    if secret:
        tenant = dataclasses.replace(
            tenant, auth="apiKey", secret=secret, parameter="X-Api-Key", location="header"
        )
    async with (
        running_proxy(tmp_path, [tenant]) as proxy,
        httpx.AsyncClient(
            base_url=f"{proxy.url}/v1/fetch/api",
            headers={"Authorization": f"Bearer {tenant.token}", "Accept-Encoding": "gzip"},
            timeout=10,
        ) as client,
    ):
        yield client


def test_a_compressed_answer_is_decoded_and_scrubbed_or_refused(tmp_path: Path) -> None:
    """Compressed though identity was asked for: decoded, relayed without Content-Encoding and
    scrubbed, or refused when it cannot be decoded here."""

    async def scenario() -> None:
        async with upstream() as origin, _through(tmp_path, origin) as client:
            for coding in sorted(COMPRESSED):
                async with client.stream("GET", f"/compressed/{coding}") as answer:
                    raw = b"".join([chunk async for chunk in answer.aiter_raw()])
                if coding == "br":
                    assert answer.status_code == 502, coding
                    assert json.loads(raw)["error"]["code"] == "unsupported_encoding"
                    assert SECRET.encode() not in raw
                    continue
                assert answer.status_code == 200, (coding, raw)
                assert "content-encoding" not in answer.headers, coding
                assert json.loads(raw)["key"] == "[redacted]", coding
                assert not leaks(raw, SECRET), coding

    asyncio.run(scenario())


def test_a_compressed_bomb_is_cut_at_the_cap(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with upstream() as origin, _through(tmp_path, origin) as client:
            # 30 MB of padding, 30 KB compressed; the cap is 10 MiB.
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get("/compressed/gzip", params={"pad": "30000000"})
            assert (await client.get("/compressed/gzip")).status_code == 200

    asyncio.run(scenario())


def test_without_a_secret_a_compressed_answer_passes_untouched(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with upstream() as origin, _through(tmp_path, origin, secret="") as client:
            async with client.stream("GET", "/compressed/gzip") as answer:
                raw = b"".join([chunk async for chunk in answer.aiter_raw()])
            assert answer.headers["content-encoding"] == "gzip"
            assert json.loads(gzip.decompress(raw))["key"] == ""

    asyncio.run(scenario())


def test_a_connection_test_shows_a_compressed_answer_decoded(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with upstream() as origin:
            tenant = Tenant(
                "one",
                origin,
                auth="apiKey",
                secret=SECRET,
                parameter="X-Api-Key",
                location="header",
            )
            async with running_proxy(tmp_path, [tenant]) as proxy:
                for coding in ("gzip-then-deflate", "br"):
                    outcome = await proxy.proxy.run_test(
                        ReplicaTestRequest(
                            connection="one/api", method="GET", path=f"/compressed/{coding}"
                        ),
                        lambda: None,
                    )
                    assert SECRET not in outcome.model_dump_json()
                    if coding == "br":
                        assert isinstance(outcome, ProxyRefused)
                        assert outcome.refused.code == "unsupported_encoding"
                    else:
                        assert isinstance(outcome, Answered)
                        assert json.loads(outcome.answered.body)["key"] == "[redacted]"

    asyncio.run(scenario())


def test_a_101_nobody_asked_for_is_refused_and_its_connection_closed(tmp_path: Path) -> None:
    async def scenario(raw: RawUpstream) -> None:
        async with _through(tmp_path, raw.url) as client:
            refused = await client.get("/switching")
            assert refused.status_code == 502
            assert refused.json()["error"]["code"] == "upstream_informational"
            assert SECRET not in refused.text
            outcomes = await asyncio.to_thread(raw.outcomes, 1)
            assert outcomes == [("/switching", "closed")]

    with RawUpstream() as raw:
        asyncio.run(scenario(raw))


def test_control_bytes_in_a_header_drop_that_header_not_the_answer(tmp_path: Path) -> None:
    async def scenario(raw: RawUpstream) -> None:
        async with _through(tmp_path, raw.url) as client:
            for _ in range(3):
                answer = await client.get("/control-bytes")
                assert (answer.status_code, answer.text) == (200, "ok")
                assert "cache-control" not in answer.headers
                assert "x-ratelimit-remaining" not in answer.headers
                assert answer.headers["link"] == "<https://x.example/a>;\trel=next"

    with RawUpstream() as raw:
        asyncio.run(scenario(raw))


def test_a_transfer_coding_is_decoded_too(tmp_path: Path) -> None:
    async def scenario(raw: RawUpstream) -> None:
        async with _through(tmp_path, raw.url) as client:
            answer = await client.get("/transfer-gzip")
            assert (answer.status_code, answer.content) == (200, b"key [redacted]")

    with RawUpstream() as raw:
        asyncio.run(scenario(raw))


QUERY_KEY = "Qk7+vZ/9xY=aB3+cD4/eF5="  # percent-encoding changes + / =


def _self_linking() -> web.Application:
    """An upstream whose answer embeds the request's own URL in another URL, as a login page's
    ``return_to`` or an API's ``self`` link does: what the proxy sent, percent-encoded again."""

    async def selflink(request: web.Request) -> web.Response:
        own = f"{request.scheme}://{request.host}{request.raw_path}"
        return web.json_response(
            {
                "login": "https://x.example/login?return_to=" + quote(own, safe=""),
                "login-lower": "https://x.example/login?r=" + quote(own, safe="").lower(),
                "self": own,
            }
        )

    app = web.Application()
    app.router.add_get("/selflink", selflink)
    return app


def test_a_query_key_echoed_inside_another_url_is_scrubbed(tmp_path: Path) -> None:
    """R4-4: the key is sent percent-encoded (%2B); a link that embeds the request's URL
    encodes it twice (%252B, or %252b)."""

    async def scenario() -> None:
        async with upstream(_self_linking()) as origin:
            tenant = Tenant(
                "one", origin, auth="apiKey", secret=QUERY_KEY, parameter="key", location="query"
            )
            async with (
                running_proxy(tmp_path, [tenant]) as proxy,
                httpx.AsyncClient(timeout=10) as client,
            ):
                answer = await client.get(
                    f"{proxy.url}/v1/fetch/api/selflink?page=2",
                    headers={"Authorization": f"Bearer {tenant.token}"},
                )
        assert answer.status_code == 200
        body = answer.json()
        assert "%252B" not in answer.text
        assert body["self"].endswith("/selflink?page=2&key=[redacted]")
        assert body["login"].endswith("%3Fpage%3D2%26key%3D[redacted]")
        assert not leaks(answer.content, QUERY_KEY), answer.text

    asyncio.run(scenario())
