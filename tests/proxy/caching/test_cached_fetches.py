"""A fetch answered from the connection's cache, through a real proxy (uvicorn on 127.0.0.1) with
a real redis-server and a real upstream: what is kept and what never is, what the app sees
(Cache-Status, Age), a stale answer revalidated with a conditional request, and the credential
scrubbed from what is kept.

The fleet (two replicas of two workers, coalescing across them, a worker killed, the store
stopped) is tests/e2e/test_response_cache.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

import httpx
import pytest
from aiohttp import web

from gatehouse_contract.routes import CachePolicy
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.upstream import CALLS
from tests.proxy.serving import Running, Tenant, running_proxy, upstream

SECRET = "sk_live_cached_0123456789"


class Fetcher(Protocol):
    async def __call__(
        self,
        path: str,
        method: str = ...,
        headers: dict[str, str] | None = ...,
        content: bytes | None = ...,
    ) -> httpx.Response: ...


POLICY = CachePolicy(ttl_seconds=60, max_ttl_seconds=600, max_body_bytes=4096)


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    CALLS.clear()


@asynccontextmanager
async def cached_proxy(
    tmp_path: Path,
    store: RedisServer,
    policy: CachePolicy = POLICY,
    app: web.Application | None = None,
) -> AsyncIterator[tuple[Running, Fetcher]]:
    async with upstream(app) as origin:
        tenant = Tenant(
            "team",
            origin,
            auth="apiKey",
            secret=SECRET,
            parameter="X-API-Key",
            location="header",
            cache=policy,
        )
        async with running_proxy(tmp_path, [tenant], store=store) as running:
            shared = running.proxy.shared_store
            for _ in range(200):
                if shared is not None and shared.up:
                    break
                await asyncio.sleep(0.01)
            client = httpx.AsyncClient(timeout=10)

            async def get(
                path: str,
                method: str = "GET",
                headers: dict[str, str] | None = None,
                content: bytes | None = None,
            ) -> httpx.Response:
                return await client.request(
                    method,
                    f"{running.url}/v1/fetch/api{path}",
                    headers={"Authorization": f"Bearer {tenant.token}", **(headers or {})},
                    content=content,
                )

            try:
                yield running, get
            finally:
                await client.aclose()


def calls() -> int:
    return CALLS["/cacheable"]


def test_a_kept_answer_is_served_again_scrubbed_with_its_age_and_status(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server) as (_, get):
            first = await get("/cacheable/orders")
            assert first.status_code == 200
            assert (
                first.headers["cache-status"] == "gatehouse; fwd=uri-miss; fwd-status=200; stored"
            )
            assert first.json()["key"] == "[redacted]"
            again = [await get("/cacheable/orders") for _ in range(3)]
            assert calls() == 1
            assert {reply.json()["id"] for reply in again} == {first.json()["id"]}
            assert again[-1].headers["cache-status"].startswith("gatehouse; hit; ttl=")
            assert int(again[-1].headers["age"]) >= 0
            assert again[-1].headers["x-content-type-options"] == "nosniff"
            assert SECRET not in again[-1].text
            # What the store holds: nothing of the key, nothing readable.
            with redis_server.client() as client:
                values = [
                    client.hget(key, "a")
                    for key in client.keys("gatehouse:{team}:cache:*")
                    if client.type(key) == b"hash"
                ]
            assert values
            assert not [value for value in values if SECRET.encode() in value or b"orders" in value]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "header",
    ["Cache-Control:no-store", "Cache-Control:private, max-age=60", "Set-Cookie:s=1", "Vary:*"],
)
def test_what_may_not_be_kept_is_fetched_every_time(
    tmp_path: Path, redis_server: RedisServer, header: str
) -> None:
    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server) as (_, get):
            ids = {(await get(f"/cacheable/never?header={header}")).json()["id"] for _ in range(3)}
            assert len(ids) == 3
            assert calls() == 3

    asyncio.run(scenario())


def test_a_post_and_an_answer_over_the_largest_body_are_not_kept(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server) as (_, get):
            for _ in range(2):
                posted = await get("/cacheable/posted", method="POST")
                assert posted.status_code == 200
                assert posted.headers["cache-status"] == "gatehouse; fwd=bypass; fwd-status=200"
            large = [await get("/cacheable/large?size=5000") for _ in range(2)]
            assert len({reply.json()["id"] for reply in large}) == 2
            assert large[0].headers["cache-status"] == "gatehouse; fwd=uri-miss; fwd-status=200"
            assert calls() == 4

    asyncio.run(scenario())


def test_a_stale_answer_is_revalidated_with_its_etag_and_renewed_by_a_304(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server) as (_, get):
            path = "/cacheable/short?header=Cache-Control:max-age%3D1"
            first = await get(path)
            await asyncio.sleep(1.2)
            renewed = await get(path)
            assert renewed.headers["cache-status"] == "gatehouse; fwd=stale; fwd-status=304; stored"
            assert renewed.json()["id"] == first.json()["id"]
            assert calls() == 2
            hit = await get(path)
            assert hit.headers["cache-status"].startswith("gatehouse; hit")
            assert calls() == 2

    asyncio.run(scenario())


def test_a_huge_max_age_is_capped_by_the_connections_longest(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    policy = CachePolicy(ttl_seconds=1, max_ttl_seconds=1, max_body_bytes=4096)

    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server, policy) as (_, get):
            path = "/cacheable/capped?version=a&header=Cache-Control:max-age%3D99999999999"
            await get(path)
            await get(path)
            assert calls() == 1
            await asyncio.sleep(1.2)
            await get(path)
            assert calls() == 2  # revalidated: 304

    asyncio.run(scenario())


def test_a_stale_answer_stands_in_for_a_failing_vendor_within_stale_if_error(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    policy = CachePolicy(
        ttl_seconds=1, max_ttl_seconds=60, max_body_bytes=4096, stale_if_error_seconds=30
    )
    failing = {"now": False}

    async def flaky(request: web.Request) -> web.Response:
        if failing["now"]:
            return web.json_response({"error": "down"}, status=503)
        return web.json_response({"fine": True})

    app = web.Application()
    app.router.add_get("/flaky", flaky)

    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server, policy, app) as (_, get):
            assert (await get("/flaky")).json() == {"fine": True}
            failing["now"] = True
            await asyncio.sleep(1.2)
            stood_in = await get("/flaky")
            assert stood_in.status_code == 200
            assert stood_in.json() == {"fine": True}
            assert "detail=stale-if-error" in stood_in.headers["cache-status"]

    asyncio.run(scenario())


def test_a_stale_answer_is_served_while_one_request_revalidates_it(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    policy = CachePolicy(
        ttl_seconds=1, max_ttl_seconds=60, max_body_bytes=4096, stale_while_revalidate_seconds=30
    )

    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server, policy) as (_, get):
            path = "/cacheable/swr?delay=0.5"
            first = await get(path)
            await asyncio.sleep(1.2)
            revalidating = asyncio.ensure_future(get(path))
            await asyncio.sleep(0.1)
            meanwhile = await get(path)
            assert "detail=stale-while-revalidate" in meanwhile.headers["cache-status"]
            assert "ttl=-" in meanwhile.headers["cache-status"]
            assert meanwhile.json()["id"] == first.json()["id"]
            renewed = await revalidating
            assert renewed.headers["cache-status"] == "gatehouse; fwd=stale; fwd-status=304; stored"
            assert calls() == 2

    asyncio.run(scenario())


def test_apps_asking_other_encodings_share_the_answer_the_vendor_sent_as_identity(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A credentialed request is sent with Accept-Encoding: identity whatever the app asked, so
    an answer that varies on it is compared on what the vendor received."""

    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server) as (_, get):
            path = "/cacheable/encoded?header=Vary:Accept-Encoding"
            ids = set()
            for encoding in ("gzip, deflate", "gzip, deflate, br", ""):
                reply = await get(path, headers={"Accept-Encoding": encoding})
                ids.add(reply.json()["id"])
            assert len(ids) == 1
            assert calls() == 1

    asyncio.run(scenario())


def test_a_validator_that_echoes_the_credential_is_kept_and_sent_scrubbed(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    asked: list[str] = []

    async def echoing(request: web.Request) -> web.Response:
        asked.append(request.headers.get("If-None-Match", ""))
        etag = f'"{request.headers.get("X-Api-Key", "")}"'
        return web.json_response(
            {"fine": True}, headers={"ETag": etag, "Cache-Control": "max-age=1"}
        )

    app = web.Application()
    app.router.add_get("/echoing", echoing)

    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server, app=app) as (_, get):
            first = await get("/echoing")
            assert SECRET not in first.headers["etag"]
            await asyncio.sleep(1.2)
            await get("/echoing")
            assert len(asked) == 2
            assert SECRET not in asked[1]

    asyncio.run(scenario())


def test_an_answer_of_unknown_length_past_the_largest_body_streams_whole_and_is_not_kept(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    body = b"".join(b"%05d," % n for n in range(2000))  # 12 kB, past maxBodyBytes (4 kB)

    async def chunked(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await answer.prepare(request)
        for start in range(0, len(body), 1000):
            await answer.write(body[start : start + 1000])
            await asyncio.sleep(0.001)
        await answer.write_eof()
        return answer

    app = web.Application()
    app.router.add_get("/chunked", chunked)

    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server, app=app) as (_, get):
            for _ in range(2):
                reply = await get("/chunked")
                assert reply.status_code == 200
                assert reply.content == body
                assert reply.headers["cache-status"] == "gatehouse; fwd=uri-miss; fwd-status=200"

    asyncio.run(scenario())


def test_a_get_with_a_body_is_neither_answered_nor_kept(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Red team, issue 51: a search API's GET body was no part of the key, so two searches got
    one answer."""

    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server) as (_, get):
            ids = set()
            for query in (b'{"q": "a"}', b'{"q": "b"}', b'{"q": "a"}'):
                reply = await get("/cacheable/search", content=query)
                assert reply.headers["cache-status"] == "gatehouse; fwd=bypass; fwd-status=200"
                ids.add(reply.json()["id"])
            assert len(ids) == 3
            assert calls() == 3

    asyncio.run(scenario())
