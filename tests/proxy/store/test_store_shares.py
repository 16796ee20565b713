"""Each namespace's share of the shared store, counted by the store with each write, against a
real redis-server on 127.0.0.1: the ledger's sums against what the store says it holds, a share
that is full refusing its own namespace's writes and nobody else's, the reserve tokens keep off,
a store at its maxmemory that stays up, and a credential's token leaving the store with it.

The end-to-end case (two replicas of two workers, a tenant filling its share with a token
endpoint of its own while another's quota and token stay the fleet's) is
tests/e2e/test_store_shares.py.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey, FleetTokens
from gatehouse_proxy.credentials.token_grants import MintedToken
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.limits.quotas import Quotas
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.store.shared_store import SharedStore
from gatehouse_proxy.store.shares import Shares, ShareSettings
from tests.proxy.stores import quota_route, store_up


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    """Each test starts with nothing stored."""


class Minter:
    def __init__(self, size: int = 40, lifetime: float = 3600) -> None:
        self.calls = 0
        self.size = size
        self.lifetime = lifetime
        self.numbers = itertools.count(1)

    async def __call__(self) -> MintedToken:
        self.calls += 1
        return MintedToken(f"token-{next(self.numbers)}-".ljust(self.size, "x"), self.lifetime)


def _key(namespace: str, name: str, credential: str = "c1") -> CredentialKey:
    return CredentialKey.of(f"{namespace}/{name}", f"uid-{namespace}-{name}", [credential])


def _connection(namespace: str, name: str = "crm", per_app: int = 100) -> ConnectionRoute:
    return quota_route(f"{namespace}/{name}", f"uid-{namespace}-{name}", per_app=per_app)


def _ledger(server: RedisServer, namespace: str) -> tuple[int, int, int]:
    """The namespace's ledger: keys counted, bytes counted, and what its keys take in the
    store (MEMORY USAGE, the ledger's own included)."""
    with server.client() as client:
        held = int(client.get(f"gatehouse:{{{namespace}}}:held") or 0)
        counted = int(client.zcard(f"gatehouse:{{{namespace}}}:ledger"))
        taken = sum(
            int(client.memory_usage(key) or 0)
            for key in client.scan_iter(match=f"gatehouse:{{{namespace}}}:*")
        )
    return counted, held, taken


def _refusals(namespace: str, what: str, reason: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "gatehouse_proxy_store_refused_total",
        {"namespace": namespace, "what": what, "reason": reason},
    )
    return value or 0.0


async def _tokens(server: RedisServer, keyring: KeyringFile, shares: Shares) -> FleetTokens:
    return FleetTokens(await store_up(server), keyring, shares)


async def _close(*stores: SharedStore | None) -> None:
    for store in stores:
        if store is not None:
            await store.close()


def test_a_token_is_charged_what_the_store_says_it_takes_and_is_stored_compact(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    shares = Shares(ShareSettings())

    async def scenario() -> None:
        tokens = await _tokens(redis_server, keyring_file, shares)
        try:
            for index in range(4):
                await tokens.token(_key("team", f"c{index}"), Minter(size=8192))
        finally:
            await _close(tokens.store)

    asyncio.run(scenario())
    counted, held, taken = _ledger(redis_server, "team")
    assert counted == 8  # 4 tokens, each with its mint's span
    # The ledger charges each key a little more than the store says it takes (its own entry,
    # rounded up), never less.
    assert taken <= held <= taken * 1.1, (held, taken)
    with redis_server.client() as client:
        stored = client.memory_usage(_key("team", "c0").store_key(""))
    # The largest token allowed takes about 10,400 bytes: raw ciphertext, not JSON of base64
    # (12,424).
    assert stored is not None
    assert stored <= 10_400, stored


def test_a_full_share_refuses_its_own_namespaces_tokens_and_nobody_elses(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    shares = Shares(ShareSettings(namespace_bytes=64 * 1024, namespace_keys=2048))
    filler, other = Minter(size=8000), Minter()

    async def scenario() -> list[str]:
        workers = [await _tokens(redis_server, keyring_file, shares) for _ in range(2)]
        try:
            # 12 tokens of 8,000 characters (about 10 KiB each) for a share of 64 KiB.
            for index in range(12):
                await workers[index % 2].token(_key("attacker", f"c{index}"), filler)
            # Another namespace shares its token as ever: one mint for both workers.
            mine = [await worker.token(_key("victim", "crm"), other) for worker in workers]
            # The attacker's next credential: each worker mints its own, at once.
            alone = Minter()
            theirs = [await worker.token(_key("attacker", "late"), alone) for worker in workers]
            assert alone.calls == 2
            assert all(worker.store is not None and worker.store.up for worker in workers)
            # What each namespace holds, for the metrics (and the store's memory).
            assert workers[0].store is not None
            await shares.read(workers[0].store, ["attacker", "victim", "idle"])
            assert set(shares.usage) == {"attacker", "victim"}
            assert shares.usage["attacker"][1] <= 64 * 1024 < shares.usage["attacker"][1] + 12_000
            assert shares.memory is not None
            assert shares.memory[0] > 0
            return [*mine, *theirs]
        finally:
            await _close(*(worker.store for worker in workers))

    answered = asyncio.run(scenario())
    assert answered[0] == answered[1]  # the victim's, shared
    assert answered[2] != answered[3]  # the attacker's, one each
    assert other.calls == 1
    _counted, held, _ = _ledger(redis_server, "attacker")
    assert held <= 64 * 1024
    with redis_server.client() as client:
        kept = [
            key
            for key in client.scan_iter(match="gatehouse:{attacker}:*:token")
            if client.exists(key)
        ]
        assert client.get("gatehouse:{attacker}:full") == b"share"
        assert not client.exists("gatehouse:{victim}:full")
    # What the share holds, each token about 8.9 KiB with its span: 7 of the 12.
    assert 1 <= len(kept) <= 64 * 1024 // 8000, kept
    assert _refusals("attacker", "tokens", "share") >= 1
    assert "attacker" in shares.describe()
    assert "victim" not in shares.describe()


def test_a_share_counts_keys_too_and_a_full_one_counts_its_own_requests_alone(
    redis_server: RedisServer,
) -> None:
    shares = Shares(ShareSettings(namespace_keys=16))

    async def scenario() -> tuple[list[bool], list[bool]]:
        quotas = Quotas(await store_up(redis_server), lambda: 4, shares=shares)
        try:
            # One minute key per (connection, app): the 17th has no room in a share of 16 keys.
            crowded = [
                await _admitted(quotas, _connection("crowd", f"c{index}"), "app")
                for index in range(20)
            ]
            calm = [await _admitted(quotas, _connection("calm"), "app") for _ in range(3)]
            assert quotas.store is not None
            assert quotas.store.up
        finally:
            await _close(quotas.store)
        return crowded, calm

    alone_before = _alone("crowd")
    crowded, calm = asyncio.run(scenario())
    assert crowded == [True] * 20  # admitted all the same, by this worker's share of each
    assert _alone("crowd") - alone_before == 4
    assert calm == [True] * 3
    assert _alone("calm") == 0
    counted, _, _ = _ledger(redis_server, "crowd")
    assert counted == 16
    assert _refusals("crowd", "counters", "share") == 4


def _alone(namespace: str) -> float:
    return sum(
        sample.value
        for family in metrics.REGISTRY.collect()
        if family.name == "gatehouse_proxy_quota_counted_alone"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels["namespace"] == namespace
    )


async def _admitted(quotas: Quotas, connection: ConnectionRoute, app: str) -> bool:
    try:
        await quotas.admit(connection, app)
    except ProxyError as error:
        if error.code != "rate_limited":
            raise
        return False
    return True


def test_what_expired_is_released_and_what_lives_on_is_kept(redis_server: RedisServer) -> None:
    shares = Shares(ShareSettings(namespace_keys=16))

    async def scenario() -> None:
        quotas = Quotas(await store_up(redis_server), lambda: 4, shares=shares)
        quotas.window_seconds = 1  # a minute's key lives about a second past its last count
        try:
            for index in range(16):
                await quotas.admit(_connection("team", f"c{index}"), "app")
            # One key is counted on; the others expire, and their entries with them.
            for _ in range(25):
                await quotas.admit(_connection("team", "c0"), "app")
                await asyncio.sleep(0.1)
            for index in range(16, 31):
                await quotas.admit(_connection("team", f"c{index}"), "app")
        finally:
            await _close(quotas.store)

    asyncio.run(scenario())
    counted, held, _ = _ledger(redis_server, "team")
    assert counted == 16  # c0, living on, and the 15 new ones: none was refused
    assert _refusals("team", "counters", "share") == 0
    with redis_server.client() as client:
        assert client.exists("gatehouse:{team}:uid-team-c0:app:app")
        assert client.zscore("gatehouse:{team}:ledger", "uid-team-c0:app:app") is not None
    assert held <= 16 * 1300


def test_tokens_keep_off_the_reserve_and_counters_do_not(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    shares = Shares(ShareSettings(reserve=0.5))
    with redis_server.client() as client:
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used + 256 * 1024)
    try:

        async def scenario() -> None:
            tokens = await _tokens(redis_server, keyring_file, shares)
            quotas = Quotas(tokens.store, lambda: 4, shares=shares)
            try:
                # Past half the store: the token stays with its worker, and the store up.
                await tokens.token(_key("team", "crm"), Minter(size=8000))
                assert _refusals("team", "tokens", "reserve") == 1
                assert await _admitted(quotas, _connection("team"), "app")
                assert tokens.store is not None
                assert tokens.store.up
            finally:
                await _close(tokens.store)

        asyncio.run(scenario())
        with redis_server.client() as client:
            assert not client.exists(_key("team", "crm").store_key(""))
            assert client.exists("gatehouse:{team}:uid-team-crm:app:app")
    finally:
        with redis_server.client() as client:
            client.config_set("maxmemory", "64mb")


def test_a_store_at_its_maxmemory_is_full_not_down(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    shares = Shares(ShareSettings())
    with redis_server.client() as client:
        # Under what the server itself takes: every write is refused for want of memory.
        client.config_set("maxmemory", 512 * 1024)
    try:

        async def scenario() -> None:
            tokens = await _tokens(redis_server, keyring_file, shares)
            quotas = Quotas(tokens.store, lambda: 4, shares=shares)
            try:
                minter = Minter()
                await tokens.token(_key("team", "crm"), minter)
                assert minter.calls == 1
                assert await _admitted(quotas, _connection("team"), "app")
                assert tokens.store is not None
                # Answered alone, each, and the store is still up for everything else.
                assert tokens.store.up
                assert "OutOfMemoryError" in str(tokens.store.describe()["lastFull"]["error"])
                assert _refusals("team", "counters", "full") == 1
                with redis_server.client() as client:
                    client.config_set("maxmemory", "64mb")
                assert await _admitted(quotas, _connection("team"), "app")
            finally:
                await _close(tokens.store)

        asyncio.run(scenario())
        with redis_server.client() as client:
            assert client.hget("gatehouse:{team}:uid-team-crm:app:app", "t") == b"1"
    finally:
        with redis_server.client() as client:
            client.config_set("maxmemory", "64mb")


def test_a_changed_or_dropped_credentials_token_leaves_the_store(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    shares = Shares(ShareSettings())
    first, changed, kept = _key("team", "crm"), _key("team", "crm", "c2"), _key("team", "erp")

    async def scenario() -> None:
        workers = [await _tokens(redis_server, keyring_file, shares) for _ in range(2)]
        try:
            for worker in workers:
                worker.forget({first, kept})
            await workers[0].token(first, Minter())
            await workers[0].token(kept, Minter())
            # Every worker hears the table's change; the first to act deletes, the other finds
            # nothing to.
            for worker in workers:
                worker.forget({changed, kept})
                await worker.close()
            with redis_server.client() as client:
                assert not client.exists(first.store_key(""))
                assert client.exists(kept.store_key(""))
            # The new credential's first mint does not wait for the old one's span.
            started = asyncio.get_running_loop().time()
            await workers[1].token(changed, Minter())
            assert asyncio.get_running_loop().time() - started < 1
            # erp leaves the table: its token, span and all go.
            for worker in workers:
                worker.forget({changed})
                await worker.close()
        finally:
            await _close(*(worker.store for worker in workers))

    asyncio.run(scenario())
    with redis_server.client() as client:
        assert client.exists(changed.store_key(""))
        assert not client.exists(kept.store_key(""))
        assert not client.exists(kept.store_key(":minted"))
        remaining = sorted(client.zrange("gatehouse:{team}:ledger", 0, -1))
    assert remaining == [b"uid-team-crm:token", b"uid-team-crm:token:minted"]


def test_a_401s_judgement_and_an_endpoints_pause_are_counted_and_leave_with_the_connection(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """The keys of the judgement of 401s (gatehouse_proxy.credentials.token_refusals) and of the
    endpoints' pauses are the namespace's like every other: in its slot, in its ledger at their
    largest size, and the judgement's deleted with the connection's token."""
    shares = Shares(ShareSettings())
    key = _key("team", "crm")

    async def scenario() -> None:
        tokens = await _tokens(redis_server, keyring_file, shares)
        quotas = Quotas(tokens.store, lambda: 1, shares=shares)
        try:
            tokens.forget({key})
            token = await tokens.token(key, Minter())
            assert (await tokens.refused(key, token, "/api/a")).verdict == "renewed"
            assert await quotas.pause(_connection("team"), 30, "/api/a") == "endpoint"
            with redis_server.client() as client:
                members = set(client.zrange("gatehouse:{team}:ledger", 0, -1))
                stored = {
                    key.decode().removeprefix("gatehouse:{team}:")
                    for key in client.scan_iter(match="gatehouse:{team}:*")
                }
            assert {
                b"uid-team-crm:token:renewals",
                b"uid-team-crm:token:endpoints",
                b"uid-team-crm:pauses",
            } <= members
            assert stored - {"ledger", "held"} == {member.decode() for member in members}
            counted, held, taken = _ledger(redis_server, "team")
            assert (counted, held >= taken) == (len(members), True)
            tokens.forget(set())
            await tokens.close()
        finally:
            await _close(tokens.store)

    asyncio.run(scenario())
    with redis_server.client() as client:
        assert not client.exists(key.store_key(":renewals"), key.store_key(":endpoints"))
        members = set(client.zrange("gatehouse:{team}:ledger", 0, -1))
    assert not {b"uid-team-crm:token:renewals", b"uid-team-crm:token:endpoints"} & members


def test_a_401_past_the_namespaces_share_is_judged_by_the_worker_alone(
    redis_server: RedisServer, keyring_file: KeyringFile
) -> None:
    """A namespace with no room for the judgement's keys has its 401 judged by the worker alone
    (nothing of it written), its tokens each worker's for a while, and the new token minted
    alone; the namespace is told refused, no other."""
    shares = Shares(ShareSettings(namespace_keys=3))
    key = _key("team", "crm")
    before = _refusals("team", "tokens", "share")

    async def scenario() -> None:
        tokens = await _tokens(redis_server, keyring_file, shares)
        mint = Minter()
        try:
            token = await tokens.token(key, mint)
            judged = await tokens.refused(key, token, "/api/a")
            assert judged.verdict == "renewed"
            assert _refusals("team", "tokens", "share") == before + 1
            with redis_server.client() as client:
                assert not client.exists(key.store_key(":renewals"), key.store_key(":endpoints"))
                assert client.get("gatehouse:{team}:full") == b"share"
            assert await tokens.token(key, mint, refused=token) != token
            assert mint.calls == 2
        finally:
            await _close(tokens.store)

    asyncio.run(scenario())
