"""What a 401 to a minted token says, judged for the fleet, against a real redis-server on
127.0.0.1 (and by each worker alone without it).

Each "worker" is a FleetTokens with a store client of its own, as each proxy process has; a
"request" is what the proxy's _call does with a 401: judge it, and if the verdict allows, ask for
a token other than the refused one and judge that answer too. The real token endpoint, real
proxies and an API that refuses a path whatever the token are in tests/e2e/test_oauth2.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import pytest

from gatehouse_contract.frames import MAX_RENEWALS
from gatehouse_contract.keyring import KeyringFile
from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.credentials import fleet_tokens
from gatehouse_proxy.credentials.fleet_tokens import FleetTokens
from gatehouse_proxy.credentials.token_refusals import RETRIED, Verdict
from tests.proxy.credentials.test_fleet_tokens import KEY, Minter
from tests.proxy.stores import store_up


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with nothing stored, and mints may follow each other quickly."""
    monkeypatch.setattr(fleet_tokens, "MINT_SPACING_SECONDS", 0.05)


async def _request(
    tokens: FleetTokens, mint: Minter, endpoint: str, refuses: Callable[[str], bool]
) -> list[Verdict]:
    """One GET through the proxy: its verdicts (none when the upstream took its token)."""
    token = await tokens.token(KEY, mint)
    if not refuses(token):
        return []
    judged = await tokens.refused(KEY, token, endpoint)
    if judged.verdict not in RETRIED:
        return [judged.verdict]
    again = await tokens.token(KEY, mint, refused=token)
    if not refuses(again):
        return [judged.verdict]
    return [judged.verdict, (await tokens.refused(KEY, again, endpoint)).verdict]


def _always(token: str) -> bool:
    return True


def _flat(verdicts: Iterable[list[Verdict]]) -> list[Verdict]:
    return [verdict for each in verdicts for verdict in each]


def test_an_endpoint_that_refuses_every_token_costs_the_fleet_one_new_token(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """R4-5: two loops on a path that answers 401 whatever the token made the fleet mint every
    2 s. Now the endpoint that refused the renewed token too is marked: one new token."""

    async def scenario() -> tuple[int, list[Verdict]]:
        stores = [await store_up(redis_server) for _ in range(4)]
        workers = [FleetTokens(store, keyring_file) for store in stores]
        mint = Minter(delay=0.01)
        try:
            verdicts = []
            for _ in range(10):  # ten rounds of concurrent requests on every worker
                verdicts += _flat(
                    await asyncio.gather(
                        *(_request(workers[i % 4], mint, "/api/admin", _always) for i in range(8))
                    )
                )
        finally:
            for store in stores:
                await store.close()
        return mint.calls, verdicts

    calls, verdicts = asyncio.run(scenario())
    assert calls == 2  # the first token, and the one renewal that proved the endpoint's answer
    assert "renewed" in verdicts
    assert verdicts[-40:] == ["endpoint"] * 40  # then relayed, the token kept


def test_a_revocation_still_gets_one_new_token_and_a_replaced_token_none(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    async def scenario() -> None:
        stores = [await store_up(redis_server) for _ in range(2)]
        first, second = (FleetTokens(store, keyring_file) for store in stores)
        mint = Minter(delay=0.01)
        revoked = {"token-1"}
        try:
            assert await first.token(KEY, mint) == await second.token(KEY, mint) == "token-1"
            # The provider revokes token-1: the first refusal renews, the retry passes.
            assert await _request(first, mint, "/api/orders", revoked.__contains__) == ["renewed"]
            assert mint.calls == 2
            # The other worker still holds token-1: refused on another endpoint, its token was
            # replaced already, and its retry takes the fleet's new one without a token request.
            assert await _request(second, mint, "/api/users", revoked.__contains__) == ["replaced"]
            assert mint.calls == 2
            assert await second.token(KEY, mint) == "token-2"
        finally:
            for store in stores:
                await store.close()

    asyncio.run(scenario())


def test_only_the_refused_request_waits_for_the_new_token(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """The others keep the token their worker holds while the renewal is asked for: none of
    them waits on a mint it did not cause (R4-5: another app's p50 went to 1.5 s)."""

    async def scenario() -> None:
        store = await store_up(redis_server)
        tokens = FleetTokens(store, keyring_file)
        mint = Minter(delay=0.01)
        try:
            assert await tokens.token(KEY, mint) == "token-1"
            mint.delay = 30  # the renewal hangs at the token endpoint
            judged = await tokens.refused(KEY, "token-1", "/api/admin")
            assert judged.verdict == "renewed"
            renewal = asyncio.ensure_future(tokens.token(KEY, mint, refused="token-1"))
            await asyncio.sleep(0.2)
            assert mint.calls == 2  # asked, and waiting
            async with asyncio.timeout(1):
                others = await asyncio.gather(*(tokens.token(KEY, mint) for _ in range(50)))
            assert set(others) == {"token-1"}
            assert not renewal.done()
            renewal.cancel()
        finally:
            await store.close()

    asyncio.run(scenario())


def test_renewals_are_bounded_per_credential_and_window(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """A 401 from endpoint after endpoint (each never seen before) renews at most MAX_RENEWALS
    times a window; then 401s are relayed and the token kept, said once per worker."""

    async def scenario() -> None:
        stores = [await store_up(redis_server) for _ in range(2)]
        workers = [FleetTokens(store, keyring_file) for store in stores]
        mint = Minter(delay=0.01)
        try:
            for index in range(MAX_RENEWALS):
                token = await workers[index % 2].token(KEY, mint)
                judged = await workers[index % 2].refused(KEY, token, f"/api/e{index}")
                assert judged.verdict == "renewed"
                await workers[index % 2].token(KEY, mint, refused=token)
            assert mint.calls == 1 + MAX_RENEWALS
            current = await workers[1].token(KEY, mint)  # the one the last renewal made
            told = []
            for index in range(6):
                judged = await workers[index % 2].refused(KEY, current, f"/api/x{index}")
                assert judged.verdict == "bounded"
                assert 0 < judged.seconds <= 60
                told.append(judged.news)
            assert mint.calls == 1 + MAX_RENEWALS
            assert told == [True, True, False, False, False, False]  # once per worker
        finally:
            for store in stores:
                await store.close()
        with redis_server.client() as client:
            for suffix in (":renewals", ":endpoints"):
                assert 0 < int(client.pttl(KEY.store_key(suffix))) <= 600_000

    asyncio.run(scenario())


def test_alone_a_worker_judges_by_the_same_rules(keyring_file: KeyringFile) -> None:
    async def scenario() -> None:
        tokens = FleetTokens(None, keyring_file)
        mint = Minter(delay=0.01)
        verdicts = _flat([await _request(tokens, mint, "/api/admin", _always) for _ in range(20)])
        assert mint.calls == 2
        assert verdicts[:2] == ["renewed", "endpoint"]
        assert set(verdicts[2:]) == {"endpoint"}
        # A real revocation elsewhere still renews, within the bound.
        assert await _request(tokens, mint, "/api/orders", {"token-2"}.__contains__) == ["renewed"]
        assert mint.calls == 3
        judged = await tokens.refused(KEY, "token-3", "/api/other")
        assert (judged.verdict, judged.news) == ("bounded", True)

    asyncio.run(scenario())
