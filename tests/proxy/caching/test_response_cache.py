"""The fleet's response cache against a real redis-server on 127.0.0.1, with several "workers"
(a ResponseCache and store client each, as each proxy worker has): identical misses coalesced
onto one fetch across all of them, a fetcher that dies taken over, pass markers, the store away,
and each namespace's cache share (its own entries evicted, never another's).

The end-to-end cases (two replicas of two workers, a counting upstream, a worker killed) are
tests/e2e/test_response_cache.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import CachePolicy, ConnectionRoute
from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.caching import response_cache
from gatehouse_proxy.caching.answers import CachedAnswer
from gatehouse_proxy.caching.response_cache import Bypass, ResponseCache, Served, Turn
from gatehouse_proxy.caching.storability import Lifetime
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.passage import cached
from gatehouse_proxy.store.answer_store import AnswerStore
from gatehouse_proxy.store.shared_store import SharedStore
from gatehouse_proxy.store.shares import Shares, ShareSettings
from tests.proxy.stores import quota_route, store_up

REQUEST = ("/v1/orders", b"page=1", [("Accept", "application/json")])
APP = ("uid-app", "")
LIFETIME = Lifetime(fresh=60, stale_while_revalidate=0, stale_if_error=0, vary=())


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    """Each test starts with nothing stored."""


def cached_route(key: str = "team/crm", scope: str = "app") -> ConnectionRoute:
    policy = CachePolicy(
        ttl_seconds=60,
        max_ttl_seconds=600,
        max_body_bytes=100_000,
        scope=scope,  # type: ignore[arg-type]
    )
    return quota_route(key, f"uid-{key}").model_copy(update={"cache": policy})


def answer(body: bytes = b'{"orders": [1, 2]}', *, now: float | None = None) -> CachedAnswer:
    now = time.time() if now is None else now
    return CachedAnswer(
        status=200,
        headers=(("content-type", "application/json"),),
        body=body,
        stored_at=now,
        fresh_until=now + 60,
        stale_while_revalidate=0,
        stale_if_error=0,
    )


async def workers(
    server: RedisServer, keyring: KeyringFile, count: int, settings: ShareSettings | None = None
) -> list[tuple[ResponseCache, SharedStore]]:
    made = []
    for _ in range(count):
        store = await store_up(server)
        shares = Shares(settings or ShareSettings())
        made.append((ResponseCache(AnswerStore(store, shares), keyring), store))
    return made


async def close(made: list[tuple[ResponseCache, SharedStore]]) -> None:
    for _, store in made:
        await store.close()


def page_request(page: int) -> tuple[str, bytes, list[tuple[str, str]]]:
    return (f"/v1/page/{page}", b"", [])


async def fill(cache: ResponseCache, route: ConnectionRoute, pages: int, body: bytes) -> None:
    """``pages`` answers of ``body`` kept for ``route``, each fetched by the one request."""
    for page in range(pages):
        turn = await cache.look_up(route, APP, page_request(page), deadline())
        assert isinstance(turn, Turn)
        await turn.keep(answer(body), LIFETIME)


def deadline(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def test_a_miss_is_fetched_once_kept_then_a_hit(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 1)
        cache = made[0][0]
        route = cached_route()
        first = await cache.look_up(route, APP, REQUEST, deadline())
        assert isinstance(first, Turn)
        await first.keep(answer(), LIFETIME)
        hit = await cache.look_up(route, APP, REQUEST, deadline())
        assert isinstance(hit, Served)
        assert hit.answer.body == b'{"orders": [1, 2]}'
        assert hit.status.startswith("hit; ttl=")
        # Another app's request (scope app) is another answer.
        other = await cache.look_up(route, ("uid-other", ""), REQUEST, deadline())
        assert isinstance(other, Turn)
        await other.release()
        # So is another viewer's, whatever the scope.
        shared = cached_route(scope="connection")
        mine = await cache.look_up(shared, ("uid-app", "viewer-a"), REQUEST, deadline())
        assert isinstance(mine, Turn)
        await mine.keep(answer(b"a's"), LIFETIME)
        theirs = await cache.look_up(shared, ("uid-other", "viewer-b"), REQUEST, deadline())
        assert isinstance(theirs, Turn)
        await theirs.release()
        # The store holds ciphertext only.
        client = made[0][1].client
        raw: list[bytes] = [
            await client.hget(key, "a")  # type: ignore[misc]
            for key in await client.keys("*cache:*")
            if await client.type(key) == b"hash"
        ]
        assert raw
        assert not [value for value in raw if b"orders" in value or b"a's" in value]
        await close(made)

    asyncio.run(scenario())


def test_identical_misses_across_workers_make_one_fetch(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """200 requests over four workers, all at once: one turn to fetch, 199 answered with its
    answer once it is kept."""

    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 4)
        route = cached_route()
        turns: list[Turn] = []

        async def one(index: int) -> Served | Turn | Bypass:
            looked = await made[index % 4][0].look_up(route, APP, REQUEST, deadline())
            if isinstance(looked, Turn):
                turns.append(looked)
                await asyncio.sleep(0.2)  # the vendor's time
                await looked.keep(answer(), LIFETIME)
            return looked

        outcomes = await asyncio.gather(*(one(n) for n in range(200)))
        assert len(turns) == 1
        served = [o for o in outcomes if isinstance(o, Served)]
        assert len(served) == 199
        assert {o.answer.body for o in served} == {b'{"orders": [1, 2]}'}
        assert all("collapsed" in o.status for o in served)
        await close(made)

    asyncio.run(scenario())


def test_a_fetcher_that_dies_is_taken_over_within_its_locks_life(
    redis_server: RedisServer, keyring_file: KeyringFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(response_cache, "LOCK_MS", 300)
    monkeypatch.setattr(response_cache, "BEAT_SECONDS", 0.1)

    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 2)
        route = cached_route()
        dead = await made[0][0].look_up(route, APP, REQUEST, deadline())
        assert isinstance(dead, Turn)
        assert dead.beat is not None
        dead.beat.cancel()  # its worker is gone: nobody renews its lock, nobody keeps
        started = time.monotonic()
        taken = await made[1][0].look_up(route, APP, REQUEST, deadline())
        assert isinstance(taken, Turn)
        assert 0.1 < time.monotonic() - started < 2.0
        await taken.keep(answer(), LIFETIME)
        # While the fetcher lives, its beats keep the lock past its first life.
        other = cached_route("team/other")
        alive = await made[0][0].look_up(other, APP, REQUEST, deadline())
        assert isinstance(alive, Turn)
        with pytest.raises(ProxyError) as waited:
            await made[1][0].look_up(other, APP, REQUEST, deadline(0.8))
        assert waited.value.code == "upstream_timeout"
        await alive.release()
        await close(made)

    asyncio.run(scenario())


def test_an_answer_that_may_not_be_kept_sends_the_waiters_to_the_vendor(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 2)
        route = cached_route()
        turn = await made[0][0].look_up(route, APP, REQUEST, deadline())
        assert isinstance(turn, Turn)
        waiting = [
            asyncio.ensure_future(made[n % 2][0].look_up(route, APP, REQUEST, deadline()))
            for n in range(10)
        ]
        await asyncio.sleep(0.1)
        await turn.pass_on(failed=False)
        outcomes = await asyncio.gather(*waiting)
        assert all(isinstance(o, Bypass) for o in outcomes), outcomes
        # Identical requests then go straight to the vendor for a while (hit-for-pass).
        assert isinstance(await made[1][0].look_up(route, APP, REQUEST, deadline()), Bypass)
        await close(made)

    asyncio.run(scenario())


def test_the_store_away_means_every_request_goes_to_the_vendor(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 1)
        cache, store = made[0]
        store._down("stopped for the test")
        looked = await cache.look_up(cached_route(), APP, REQUEST, deadline())
        assert looked == Bypass("store")
        assert ResponseCache(None, keyring_file).store is None
        await close(made)

    asyncio.run(scenario())


def test_a_tenant_filling_its_cache_share_evicts_its_own_entries_only(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    settings = ShareSettings(cache_bytes=64 * 1024, cache_keys=1000)

    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 1, settings)
        cache, store = made[0]
        quiet = cached_route("quiet/crm")
        kept = await cache.look_up(quiet, APP, REQUEST, deadline())
        assert isinstance(kept, Turn)
        await kept.keep(answer(b"quiet's"), LIFETIME)
        noisy = cached_route("noisy/crm")
        await fill(cache, noisy, 40, b"x" * 8000)
        held = int(await store.client.get("gatehouse:{noisy}:cache:held") or 0)
        assert 0 < held <= 64 * 1024
        # Its share for quotas and tokens is not what the cache fills: nothing counted there.
        assert await store.client.get("gatehouse:{noisy}:held") is None
        # The latest of the noisy tenant's is kept; others of its own were evicted (those
        # nearest their end: answers kept within one second with one lifetime end together,
        # and which of them goes first is the store's order, not the order they came in).
        last = await cache.look_up(noisy, APP, page_request(39), deadline())
        assert isinstance(last, Served)
        evicted = 0
        for page in range(39):
            looked = await cache.look_up(noisy, APP, page_request(page), deadline())
            if isinstance(looked, Turn):
                evicted += 1
                await looked.release()
        assert evicted >= 39 - held // 8000
        # The quiet tenant's answer is still served.
        still = await cache.look_up(quiet, APP, REQUEST, deadline())
        assert isinstance(still, Served)
        assert still.answer.body == b"quiet's"
        await close(made)

    asyncio.run(scenario())


def test_a_request_with_other_varied_headers_misses(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 1)
        cache = made[0][0]
        route = cached_route()
        english = ("/v1/orders", b"", [("Accept-Language", "en")])
        turn = await cache.look_up(route, APP, english, deadline())
        assert isinstance(turn, Turn)
        await turn.keep(replace(answer(b"hello"), vary=(("accept-language", "en"),)), LIFETIME)
        assert isinstance(await cache.look_up(route, APP, english, deadline()), Served)
        french = ("/v1/orders", b"", [("Accept-Language", "fr")])
        other = await cache.look_up(route, APP, french, deadline())
        assert isinstance(other, Turn)
        await other.release()
        await close(made)

    asyncio.run(scenario())


def _stale_answer(seconds_on_error: int) -> CachedAnswer:
    now = time.time()
    return replace(answer(now=now), fresh_until=now - 1, stale_if_error=seconds_on_error)


def test_a_stale_answer_stands_in_for_the_fetcher_its_waiters_and_the_fleet_on_error(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """Red team, issue 51: the fetcher's failure left its waiters, and every identical request
    for a second, to the failing vendor."""

    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 2)
        route = cached_route().model_copy(
            update={
                "cache": CachePolicy(
                    ttl_seconds=1,
                    max_ttl_seconds=60,
                    max_body_bytes=1000,
                    stale_if_error_seconds=300,
                )
            }
        )
        first = await made[0][0].look_up(route, APP, REQUEST, deadline())
        assert isinstance(first, Turn)
        await first.keep(_stale_answer(300), Lifetime(1, 0, 300, ()))
        fetcher = await made[0][0].look_up(route, APP, REQUEST, deadline())
        assert isinstance(fetcher, Turn)
        assert fetcher.stale is not None
        waiter = asyncio.ensure_future(made[0][0].look_up(route, APP, REQUEST, deadline()))
        await asyncio.sleep(0.05)
        mine = await cached.stand_in(fetcher, ProxyError("upstream_failed", "down"), time.time())
        assert isinstance(mine, Served)
        assert mine.status.startswith("fwd=stale; fwd-status=502")
        for other in (await waiter, await made[1][0].look_up(route, APP, REQUEST, deadline())):
            assert isinstance(other, Served), other
            assert "detail=stale-if-error" in other.status
        await close(made)

    asyncio.run(scenario())


def test_an_answer_larger_than_the_share_evicts_nothing_and_lets_the_fleet_go(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    settings = ShareSettings(cache_bytes=64 * 1024, cache_keys=1000)

    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 2, settings)
        route = cached_route()
        await fill(made[0][0], route, 20, b"x" * 1000)
        big = await made[0][0].look_up(route, APP, REQUEST, deadline())
        assert isinstance(big, Turn)
        fleet = asyncio.ensure_future(made[1][0].look_up(route, APP, REQUEST, deadline()))
        await asyncio.sleep(0.05)
        await big.keep(answer(b"y" * 70_000), LIFETIME)
        assert await fleet == Bypass("pass")  # to the vendor, not in turn behind each other
        for page in range(20):
            kept = await made[0][0].look_up(route, APP, page_request(page), deadline())
            assert isinstance(kept, Served), page
        await close(made)

    asyncio.run(scenario())


def test_answers_keep_off_twice_the_reserve_so_tokens_always_have_room(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """Red team, issue 51: a few namespaces' full caches, each within its share, took the store
    to the tokens' reserve, and then no namespace could keep a token, a grant or a connect."""

    async def scenario() -> None:
        made = await workers(redis_server, keyring_file, 1)
        cache, store = made[0]
        await store.client.config_set("maxmemory", 16 * 1024 * 1024)
        try:
            for namespace in ("a", "b", "c", "d"):
                route = cached_route(f"{namespace}/crm")
                await fill(cache, route, 8, b"z" * 470_000)
            used, most = await store.memory()
            # Answers stop at half the store (twice the default reserve), well short of the
            # three quarters past which tokens are refused.
            assert used <= most * 0.55, (used, most)
        finally:
            await store.client.config_set("maxmemory", 0)
        await close(made)

    asyncio.run(scenario())
