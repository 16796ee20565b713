"""One token per credential for the fleet, against a real redis-server on 127.0.0.1.

Each "worker" here is a FleetTokens with a store client of its own, as each proxy process has;
the minter counts the token requests it would make (the real token endpoint and real proxy
processes are in tests/e2e/test_oauth2.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path

import pytest

from gatehouse_contract.keyring import KeyringFile
from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.credentials import fleet_tokens
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey, FleetTokens
from gatehouse_proxy.credentials.token_grants import MintedToken
from gatehouse_proxy.credentials.token_refusals import RETRIED
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.store.shared_store import SharedStore, StoreSettings, StoreUnavailable
from tests.proxy.stores import store_up

KEY = CredentialKey.of("team/crm", "uid-crm", ["oauth2ClientCredentials", "f1", "scope"])


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    """Each test starts with nothing stored."""


class Minter:
    def __init__(self, lifetime: float = 3600, delay: float = 0.05, fail: bool = False) -> None:
        self.calls = 0
        self.times: list[float] = []
        self.lifetime = lifetime
        self.delay = delay
        self.fail = fail
        self.numbers = itertools.count(1)

    async def __call__(self) -> MintedToken:
        self.calls += 1
        self.times.append(asyncio.get_running_loop().time())
        await asyncio.sleep(self.delay)
        if self.fail:
            raise ProxyError("token_endpoint_failed", "the token endpoint refused (invalid_client)")
        return MintedToken(f"token-{next(self.numbers)}", self.lifetime)


async def _workers(
    redis_server: RedisServer, keyring: KeyringFile, count: int
) -> list[tuple[SharedStore, FleetTokens]]:
    stores = [await store_up(redis_server) for _ in range(count)]
    return [(store, FleetTokens(store, keyring)) for store in stores]


async def _close(workers: list[tuple[SharedStore, FleetTokens]]) -> None:
    for store, _ in workers:
        await store.close()


def test_500_concurrent_requests_on_four_workers_make_one_token_request(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, keyring_file, 4)
        mint = Minter()
        try:
            tokens = await asyncio.gather(*(workers[i % 4][1].token(KEY, mint) for i in range(500)))
        finally:
            await _close(workers)
        assert mint.calls == 1
        assert set(tokens) == {"token-1"}

    asyncio.run(scenario())


def test_a_revoked_token_is_renewed_once_for_a_storm_of_401s(
    redis_server: RedisServer, keyring_file: KeyringFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_tokens, "MINT_SPACING_SECONDS", 0.2)

    async def scenario() -> None:
        workers = await _workers(redis_server, keyring_file, 4)
        mint = Minter()
        try:
            assert {await tokens.token(KEY, mint) for _, tokens in workers} == {"token-1"}

            async def refused_then_again(tokens: FleetTokens) -> str:
                judged = await tokens.refused(KEY, "token-1", "/api/orders")
                assert judged.verdict in RETRIED
                return await tokens.token(KEY, mint, refused="token-1")

            again = await asyncio.gather(
                *(refused_then_again(workers[i % 4][1]) for i in range(200))
            )
        finally:
            await _close(workers)
        assert mint.calls == 2
        assert set(again) == {"token-2"}

    asyncio.run(scenario())


def test_a_credential_whose_tokens_are_always_refused_mints_once_per_span(
    redis_server: RedisServer, keyring_file: KeyringFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every 401 is judged, and every retry asks for a token other than the one refused: the
    fleet still mints at most once per span, however many requests keep failing."""
    monkeypatch.setattr(fleet_tokens, "MINT_SPACING_SECONDS", 0.5)

    async def scenario() -> None:
        workers = await _workers(redis_server, keyring_file, 2)
        mint = Minter(delay=0)
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def always_refused(tokens: FleetTokens) -> None:
            token = ""
            while loop.time() - started < 2.2:
                with contextlib.suppress(ProxyError):  # a wait past its own 1 s
                    token = await tokens.token(KEY, mint, within=1.0, refused=token)
                    await tokens.refused(KEY, token, "/api/orders")
                await asyncio.sleep(0.01)

        try:
            await asyncio.gather(*(always_refused(workers[i % 2][1]) for i in range(20)))
        finally:
            await _close(workers)
        # One at the start, then one per half second, and never two within a span.
        spans = [later - earlier for earlier, later in itertools.pairwise(mint.times)]
        assert min(spans) >= 0.45, spans
        assert len([at for at in mint.times if at - started < 2.2]) <= 5

    asyncio.run(scenario())


def test_tokens_are_renewed_a_margin_before_they_expire(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, keyring_file, 2)
        # A 0.4 s token is renewed after 0.3 s (a quarter of its life early).
        mint = Minter(lifetime=0.4, delay=0)
        try:
            assert await workers[0][1].token(KEY, mint) == "token-1"
            assert await workers[1][1].token(KEY, mint) == "token-1"
            await asyncio.sleep(0.35)
            assert await workers[1][1].token(KEY, mint) == "token-2"
            assert await workers[0][1].token(KEY, mint) == "token-2"
        finally:
            await _close(workers)
        assert mint.calls == 2

    asyncio.run(scenario())


def test_a_failing_endpoint_is_asked_once_per_backoff_by_the_whole_fleet(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, keyring_file, 4)
        mint = Minter(fail=True)
        try:
            for _ in range(5):
                for _, tokens in workers:
                    with pytest.raises(ProxyError, match="invalid_client"):
                        await tokens.token(KEY, mint)
        finally:
            await _close(workers)
        assert mint.calls == 1

    asyncio.run(scenario())


def test_with_the_store_down_each_worker_mints_for_itself_and_shares_again_after(
    tmp_path: Path, keyring_file: KeyringFile
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()

    async def scenario() -> None:
        workers = await _workers(server, keyring_file, 2)
        mint = Minter(delay=0)
        other = CredentialKey.of("team/crm2", "uid-crm2", ["x"])
        try:
            server.pause()
            # Each worker finds the store silent past its deadline and mints for itself.
            assert await workers[0][1].token(KEY, mint) == "token-1"
            assert await workers[1][1].token(KEY, mint) == "token-2"
            server.resume()
            for _ in range(100):
                if all(store.up for store, _ in workers):
                    break
                await asyncio.sleep(0.05)
            assert all(store.up for store, _ in workers)
            first = await workers[0][1].token(other, mint)
            assert await workers[1][1].token(other, mint) == first
        finally:
            server.resume()
            await _close(workers)
            server.stop()
        assert mint.calls == 3

    asyncio.run(scenario())


def test_a_stored_token_is_encrypted(redis_server: RedisServer, keyring_file: KeyringFile) -> None:
    async def scenario() -> None:
        workers = await _workers(redis_server, keyring_file, 1)
        try:
            await workers[0][1].token(KEY, Minter())
        finally:
            await _close(workers)

    asyncio.run(scenario())
    with redis_server.client() as client:
        stored = client.get(KEY.store_key(""))
        keys = client.keys("*")
    assert stored is not None
    assert b"token-1" not in stored
    # The connection's keys, and its namespace's ledger, in the namespace's slot.
    assert sorted(keys) == [
        b"gatehouse:{team}:held",
        b"gatehouse:{team}:ledger",
        b"gatehouse:{team}:uid-crm:token",
        b"gatehouse:{team}:uid-crm:token:minted",
    ]
    assert all(client_ttl > 0 for client_ttl in _ttls(redis_server, keys))


def _ttls(redis_server: RedisServer, keys: list[bytes]) -> list[int]:
    with redis_server.client() as client:
        return [int(client.pttl(key)) for key in keys]


def test_the_store_is_taken_down_by_an_error_or_by_late_answers_in_a_row(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()

    async def scenario() -> None:
        store = SharedStore(
            StoreSettings(server.url, password=server.password, deadline_seconds=0.05)
        )
        await store.start()
        try:
            for _ in range(100):
                if store.up:
                    break
                await asyncio.sleep(0.01)
            server.pause()
            for late in range(1, 4):
                with pytest.raises(StoreUnavailable):
                    await store.call(lambda client: client.ping())
                assert store.up == (late < 3)
            server.resume()
            for _ in range(100):
                if store.up:
                    break
                await asyncio.sleep(0.05)
            assert store.up  # the probe heard it again
            server.stop()
            with pytest.raises(StoreUnavailable):
                await store.call(lambda client: client.ping())
            assert not store.up  # an error takes it down at once
            assert "Error" in store.describe()["lastError"]
        finally:
            server.resume()
            await store.close()
            server.stop()

    asyncio.run(scenario())


def test_a_wrong_password_is_a_store_that_is_down_with_the_reason(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()

    async def scenario() -> None:
        store = SharedStore(StoreSettings(server.url, password="wrong"))
        await store.start()
        try:
            await asyncio.sleep(0.3)
            assert not store.up
            assert "invalid username-password pair" in store.describe()["lastError"]
            assert "wrong" not in str(store.describe())
        finally:
            await store.close()
            server.stop()

    asyncio.run(scenario())
