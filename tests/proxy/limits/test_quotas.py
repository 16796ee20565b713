"""Quotas counted once for the fleet, against a real redis-server on 127.0.0.1.

Each "worker" is a Quotas with a store client of its own, as each proxy process has. The minute
is shortened (Quotas.window_seconds) where a test needs the window to slide within seconds; the
e2e tests (tests/e2e/test_quotas.py) count real minutes through real proxies.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gatehouse_contract.routes import ConnectionRoute
from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.limits.quotas import MAX_PAUSED_ENDPOINTS, Quotas
from tests.proxy.stores import quota_route, store_up


def _connection(per_app: int = 100, per_connection: int = 0, per_day: int = 0) -> ConnectionRoute:
    return quota_route(per_app=per_app, per_connection=per_connection, per_day=per_day)


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    """Each test starts with nothing counted."""


async def _workers(server: RedisServer, count: int, fleet: int = 4) -> list[Quotas]:
    return [Quotas(await store_up(server), lambda: fleet) for _ in range(count)]


async def _close(workers: list[Quotas]) -> None:
    for quotas in workers:
        if quotas.store is not None:
            await quotas.store.close()


async def _admitted(
    quotas: Quotas, connection: ConnectionRoute, app: str, endpoint: str = ""
) -> bool:
    try:
        await quotas.admit(connection, app, endpoint)
    except ProxyError as error:
        if error.code != "rate_limited":
            raise
        return False
    return True


@pytest.mark.parametrize("spread", ["even", "one worker"])
def test_a_limit_of_100_admits_100_whichever_workers_the_requests_reach(
    redis_server: RedisServer, spread: str
) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 4)
        connection = _connection(per_app=100)
        try:
            answers = await asyncio.gather(
                *(
                    _admitted(workers[i % 4 if spread == "even" else 0], connection, "app-1")
                    for i in range(300)
                )
            )
        finally:
            await _close(workers)
        assert sum(answers) == 100

    asyncio.run(scenario())


def test_the_connections_limit_holds_across_its_apps(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 4)
        connection = _connection(per_app=1000, per_connection=100)
        try:
            answers = await asyncio.gather(
                *(_admitted(workers[i % 4], connection, f"app-{i % 3}") for i in range(300))
            )
        finally:
            await _close(workers)
        assert sum(answers) == 100

    asyncio.run(scenario())


def test_a_window_slides_and_stays_exact_under_even_load(redis_server: RedisServer) -> None:
    """Twice the limit, spread evenly over three windows (a 3 s "minute" of sixty 50 ms
    buckets) that start mid-bucket: each window's worth of time admits the limit, within 2 %."""

    async def scenario() -> None:
        workers = await _workers(redis_server, 2)
        for quotas in workers:
            quotas.window_seconds = 3
        connection = _connection(per_app=100)
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0.025 + 0.05 - time.time() % 0.05)  # half-way into a bucket
        admitted: list[float] = []
        started = loop.time()
        try:
            sent = 0
            while loop.time() - started < 9:  # about 200 per window: twice the limit
                if await _admitted(workers[sent % 2], connection, "app-1"):
                    admitted.append(loop.time() - started)
                sent += 1
                await asyncio.sleep(started + sent * 0.015 - loop.time())
        finally:
            await _close(workers)
        for window in range(3):
            inside = [at for at in admitted if 3 * window <= at < 3 * window + 3]
            assert 98 <= len(inside) <= 102, (window, len(inside))

    asyncio.run(scenario())


def test_a_refusal_says_when_to_come_back_and_answers_say_where_the_app_stands(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 1)
        connection = _connection(per_app=3)
        try:
            standings = [await workers[0].admit(connection, "app-1") for _ in range(3)]
            with pytest.raises(ProxyError) as refused:
                await workers[0].admit(connection, "app-1")
        finally:
            await _close(workers)
        assert [standing.remaining for standing in standings] == [2, 1, 0]
        assert all(standing.limit == 3 for standing in standings)
        assert 1 <= standings[0].reset_seconds <= 61
        headers = refused.value.headers
        assert headers["RateLimit-Remaining"] == "0"
        assert 1 <= int(headers["Retry-After"]) <= 61
        assert "more than 3 requests per minute for this app" in str(refused.value)

    asyncio.run(scenario())


def test_a_daily_quota_outlives_the_workers(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        connection = _connection(per_app=1000, per_day=5)
        first = await _workers(redis_server, 2)
        try:
            assert [await _admitted(first[i % 2], connection, "a") for i in range(3)] == [True] * 3
        finally:
            await _close(first)
        # Restarted (a rollout): the count is the store's, not the workers'.
        second = await _workers(redis_server, 2)
        try:
            answers = [await _admitted(second[i % 2], connection, "a") for i in range(4)]
        finally:
            await _close(second)
        assert answers == [True, True, False, False]

    asyncio.run(scenario())


def test_a_vendors_pause_holds_every_worker_until_it_ends(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 4)
        connection = _connection(per_app=1000)
        try:
            await workers[0].pause(connection, 1.0)
            for quotas in workers:
                with pytest.raises(ProxyError) as refused:
                    await quotas.admit(connection, "app-1")
                assert refused.value.headers["Retry-After"] == "1"
                assert "asked to wait" in str(refused.value)
            await asyncio.sleep(1.1)
            assert all([await _admitted(quotas, connection, "app-1") for quotas in workers])
        finally:
            await _close(workers)

    asyncio.run(scenario())


def test_a_shorter_pause_does_not_cut_a_longer_one(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 1)
        connection = _connection()
        try:
            await workers[0].pause(connection, 30)
            await workers[0].pause(connection, 1)
        finally:
            await _close(workers)

    asyncio.run(scenario())
    with redis_server.client() as client:
        assert int(client.pttl("gatehouse:{team}:uid-crm:pause")) > 25_000


def test_without_the_store_each_worker_admits_its_share_and_shares_again_after(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()

    async def scenario() -> None:
        workers = await _workers(server, 2, fleet=4)
        connection = _connection(per_app=100)
        try:
            server.stop()
            started = time.monotonic()
            # The first call sees the store gone and answers from the worker's share at once.
            answers = [await _admitted(workers[0], connection, "app-1") for _ in range(40)]
            assert time.monotonic() - started < 1.0
            assert sum(answers) == 25  # 100 / (2 replicas x 2 workers)
            server.start()
            for _ in range(100):
                if all(quotas.store is not None and quotas.store.up for quotas in workers):
                    break
                await asyncio.sleep(0.05)
            assert time.monotonic() - started < 5.0
            answers = [await _admitted(workers[i % 2], connection, "app-1") for i in range(150)]
            assert sum(answers) == 100  # shared again: the store's count starts afresh
        finally:
            await _close(workers)
            server.stop()

    asyncio.run(scenario())


def test_the_keys_name_the_namespace_and_uids_and_all_expire(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 1)
        try:
            await workers[0].admit(_connection(per_connection=10, per_day=10), "app-uid-1")
            await workers[0].pause(_connection(), 5)
        finally:
            await _close(workers)

    asyncio.run(scenario())
    with redis_server.client() as client:
        keys = sorted(key.decode() for key in client.keys("*"))
        assert keys == [
            # The namespace's ledger, which counts the others, in the same slot.
            "gatehouse:{team}:held",
            "gatehouse:{team}:ledger",
            "gatehouse:{team}:uid-crm:app:app-uid-1",
            "gatehouse:{team}:uid-crm:day",
            "gatehouse:{team}:uid-crm:minute",
            "gatehouse:{team}:uid-crm:pause",
        ]
        assert all(int(client.pttl(key)) > 0 for key in keys)
        # What a (connection, app) costs the store: its minute's hash.
        assert int(client.memory_usage("gatehouse:{team}:uid-crm:app:app-uid-1")) < 1024


def _store_calls(server: RedisServer) -> int:
    with server.client() as client:
        stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0))


def test_a_hot_connection_takes_permits_in_leases_and_never_admits_more(
    redis_server: RedisServer,
) -> None:
    """At 100,000 a minute a round trip per request would cost more than the request: a worker
    takes up to 1 % of the limit at once. What it took is counted, so the fleet admits no more
    than the limit, and at most 1 % less."""

    async def scenario() -> None:
        workers = await _workers(redis_server, 4, fleet=4)
        connection = _connection(per_app=20_000)
        with redis_server.client() as client:
            client.config_resetstat()
        try:
            answers = await asyncio.gather(
                *(_admitted(workers[i % 4], connection, "app-1") for i in range(24_000))
            )
            # Every worker's lease is handed back with its next call: the store counts what
            # was used.
            counted = await _counted(redis_server)
        finally:
            await _close(workers)
        assert 20_000 * 0.99 <= sum(answers) <= 20_000
        assert counted >= sum(answers)
        # Leases of up to 50 (1 % of 20,000 over 4 workers), and refusals kept a bucket long.
        assert _store_calls(redis_server) < 24_000 / 20

    asyncio.run(scenario())


async def _counted(server: RedisServer) -> int:
    with server.client() as client:
        return int(client.hget("gatehouse:{team}:uid-crm:app:app-1", "t") or 0)


def test_unused_permits_go_back_with_the_next_call(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 1)
        for quotas in workers:
            quotas.window_seconds = 6  # buckets of 0.1 s: a lease lapses quickly
        connection = _connection(per_app=100_000)
        try:
            for _ in range(40):  # leases grow while they run out within their bucket
                await workers[0].admit(connection, "app-1")
            leased = await _counted(redis_server)
            await asyncio.sleep(0.15)  # the lease's bucket ends with permits left
            await workers[0].admit(connection, "app-1")
            after = await _counted(redis_server)
        finally:
            await _close(workers)
        assert leased > 40  # the last lease held more than was used
        # Handed back: 41 used, and the new lease's permits (as many as the last one used).
        assert after < leased
        assert after <= 41 + 9

    asyncio.run(scenario())


def test_a_pause_this_worker_heard_ends_its_leases(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 1)
        connection = _connection(per_app=100_000)
        try:
            for _ in range(20):
                await workers[0].admit(connection, "app-1")
            await workers[0].pause(connection, 5)
            with pytest.raises(ProxyError, match="asked to wait"):
                await workers[0].admit(connection, "app-1")
        finally:
            await _close(workers)

    asyncio.run(scenario())


def test_a_pause_on_an_endpoint_holds_that_endpoint_only_on_every_worker(
    redis_server: RedisServer,
) -> None:
    """R4-6: a 429 on one endpoint paused every app on the connection for up to an hour. Now
    it pauses the endpoint it came on, for the fleet; the connection's other paths go on."""

    async def scenario() -> None:
        workers = await _workers(redis_server, 4)
        connection = _connection(per_app=1000)
        try:
            assert await workers[0].pause(connection, 30, "/api/a") == "endpoint"
            assert await workers[0].pause(connection, 30, "/api/a") is None  # kept already
            for quotas in workers:
                with pytest.raises(ProxyError) as refused:
                    await quotas.admit(connection, "app-1", "/api/a")
                assert 29 <= int(refused.value.headers["Retry-After"]) <= 30
                assert "/api/a on this connection is paused" in str(refused.value)
                assert await _admitted(quotas, connection, "app-1", "/api/b")
                assert await _admitted(quotas, connection, "app-2", "/api/b")
        finally:
            await _close(workers)

    asyncio.run(scenario())
    with redis_server.client() as client:
        assert not client.exists("gatehouse:{team}:uid-crm:pause")
        assert int(client.pttl("gatehouse:{team}:uid-crm:pauses")) > 25_000
        # The endpoint is a digest there: no path an app sent is kept.
        assert b"/api/a" not in b"".join(client.hkeys("gatehouse:{team}:uid-crm:pauses"))


def test_past_as_many_paused_endpoints_as_a_connection_holds_the_whole_connection_pauses(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, 2)
        connection = _connection(per_app=1000)
        try:
            scopes = [
                await workers[i % 2].pause(connection, 30, f"/api/e{i}")
                for i in range(MAX_PAUSED_ENDPOINTS + 1)
            ]
            assert scopes == ["endpoint"] * MAX_PAUSED_ENDPOINTS + ["credential"]
            for quotas in workers:
                with pytest.raises(ProxyError, match="the credential's limit"):
                    await quotas.admit(connection, "app-1", "/elsewhere")
        finally:
            await _close(workers)

    asyncio.run(scenario())
    with redis_server.client() as client:
        assert client.hlen("gatehouse:{team}:uid-crm:pauses") == MAX_PAUSED_ENDPOINTS


def test_without_the_store_a_worker_pauses_the_endpoint_alone(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()

    async def scenario() -> None:
        workers = await _workers(server, 1)
        connection = _connection(per_app=1000)
        try:
            server.stop()
            assert await workers[0].pause(connection, 30, "/api/a") == "endpoint"
            assert not await _admitted(workers[0], connection, "app-1", "/api/a")
            assert await _admitted(workers[0], connection, "app-1", "/api/b")
            for index in range(MAX_PAUSED_ENDPOINTS):
                await workers[0].pause(connection, 30, f"/api/e{index}")
            assert not await _admitted(workers[0], connection, "app-1", "/api/b")
        finally:
            await _close(workers)
            server.stop()

    asyncio.run(scenario())


def test_a_worker_with_a_lease_learns_the_fleets_endpoint_pauses_within_a_bucket(
    redis_server: RedisServer,
) -> None:
    """A lease admits without asking the store: the store's next answer (within the lease's
    one-second bucket) tells the worker which endpoints another worker heard paused, and its
    lease's permits are not given to them."""

    async def scenario() -> None:
        heard, other = await _workers(redis_server, 2)
        connection = _connection(per_app=100_000)
        try:
            for _ in range(50):  # a hot app: its permits come in leases
                await other.admit(connection, "app-1", "/api/b")
            await heard.pause(connection, 30, "/api/a")
            await asyncio.sleep(1.1)  # the lease's bucket ends
            assert await _admitted(other, connection, "app-1", "/api/b")  # a new lease...
            assert not await _admitted(other, connection, "app-1", "/api/a")  # ...not for /api/a
            assert await _admitted(other, connection, "app-1", "/api/b")
        finally:
            await _close([heard, other])

    asyncio.run(scenario())
