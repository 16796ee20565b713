"""OAuth 2.0 grants kept for the fleet and refreshed once, against a real redis-server and the dev
authorization server (rotating refresh tokens, reuse detection) on 127.0.0.1.

Each "worker" here is a FleetGrants with a store client of its own, as each proxy process has;
several processes, killed mid-refresh, are in tests/e2e/test_grants.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp import web

from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_contract.routes import TokenRequest
from gatehouse_dev.echoes import leaks
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.token_endpoint import Client, TokenEndpoint, create_app
from gatehouse_proxy.credentials import fleet_grants
from gatehouse_proxy.credentials.fleet_grants import (
    SHARED,
    AuthorizationRequired,
    FleetGrants,
    GrantClient,
    GrantNotKept,
    GrantOwner,
)
from gatehouse_proxy.credentials.token_grants import GrantedTokens, MintedToken, TokenClient
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.store.grant_store import GrantKeys, GrantStore
from gatehouse_proxy.store.shared_store import SharedStore
from gatehouse_proxy.store.shares import Shares, ShareSettings
from gatehouse_proxy.upstream.forwarder import new_session, tls_context
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from tests.proxy.stores import quota_route, store_up

SECRET = "cs_grants+/ secret"
REDIRECT = "http://127.0.0.1:9/callback"
CONNECTION = quota_route("team/crm", "uid-crm")


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    """Each test starts with nothing stored."""


@dataclass
class Fleet:
    url: str
    endpoint: TokenEndpoint
    workers: list[FleetGrants]
    stores: list[SharedStore]
    client: GrantClient

    def register(self, lifetime: float = 3600, **settings: Any) -> None:
        self.endpoint.clients["crm"] = Client(
            SECRET, "basic", lifetime, redirect_uris=(REDIRECT,), **settings
        )

    async def connect(
        self, owner: str, worker: int = 0, user: str = "", keep_with: GrantClient | None = None
    ) -> None:
        """The connect flow: consent (scripted), the code exchanged, the grant kept."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = {
            "response_type": "code",
            "client_id": "crm",
            "redirect_uri": REDIRECT,
            "scope": "read",
            "state": "s",
            "code_challenge": challenge.decode().rstrip("="),
            "code_challenge_method": "S256",
            "consent": "approve",
            "user": user or owner,
        }
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{self.url}/authorize", params=query, allow_redirects=False) as reply,
        ):
            code = parse_qs(urlsplit(reply.headers["Location"]).query)["code"][0]
        grants = self.workers[worker]
        tokens = await grants.exchange(CONNECTION, self.client, code, REDIRECT, verifier)
        await grants.store(CONNECTION, owner, keep_with or self.client, tokens)

    def stats(self) -> dict[str, Any]:
        return self.endpoint.codes.stats()

    def user_of(self, token: str) -> str:
        return str(self.endpoint.issued[token]["user"])


def _run(
    redis_server: RedisServer,
    keyring: KeyringFile,
    scenario: Callable[[Fleet], Awaitable[None]],
    *,
    workers: int = 4,
    shares: ShareSettings | None = None,
) -> None:
    async def main() -> None:
        guard = NetworkPolicy(["127.0.0.0/8"])
        async with (
            _authorization_server() as (url, endpoint),
            new_session(guard, tls_context()) as session,
        ):
            token_client = TokenClient(session, guard, True)
            stores = [await store_up(redis_server) for _ in range(workers)]
            fleet = Fleet(
                url,
                endpoint,
                [
                    FleetGrants(
                        GrantStore(store, Shares(shares or ShareSettings())), keyring, token_client
                    )
                    for store in stores
                ],
                stores,
                GrantClient(TokenRequest(url=url + "/token", client_id="crm"), SECRET, ("read",)),
            )
            try:
                await scenario(fleet)
            finally:
                for grants in fleet.workers:
                    await grants.close()
                for store in stores:
                    await store.close()

    asyncio.run(main())


@asynccontextmanager
async def _authorization_server() -> AsyncIterator[tuple[str, TokenEndpoint]]:
    endpoint = TokenEndpoint(None, "", "", 3600)
    runner = web.AppRunner(create_app(endpoint))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", endpoint
    finally:
        await runner.cleanup()


@pytest.fixture
def keyring(tmp_path: Path) -> KeyringFile:
    path = tmp_path / "keyring.json"
    path.write_text(Keyring.generate("k1").dump())
    return KeyringFile(path)


async def _token(fleet: Fleet, owner: str, worker: int = 0, within: float = 5) -> str:
    return await fleet.workers[worker].access_token(CONNECTION, owner, fleet.client, within=within)


def test_200_requests_on_four_workers_at_the_expiry_make_exactly_one_refresh(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=1, refresh_delay_seconds=0.2)
        await fleet.connect("ada")
        first = await _token(fleet, "ada")
        await asyncio.sleep(1.05)  # expired
        tokens = await asyncio.gather(*(_token(fleet, "ada", i % 4) for i in range(200)))
        assert set(tokens) != {first}
        assert len(set(tokens)) == 1
        stats = fleet.stats()
        assert stats["refreshes"] == 1
        assert (stats["reuseDetections"], stats["revokedGrants"]) == (0, 0)

    _run(redis_server, keyring, scenario)


def test_requests_before_the_expiry_use_the_current_token_while_it_is_refreshed(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=4, refresh_delay_seconds=0.5)
        await fleet.connect("ada")
        first = await _token(fleet, "ada")
        await asyncio.sleep(3.1)  # past the refresh time (a quarter of its life), not expired
        started = time.monotonic()
        tokens = await asyncio.gather(*(_token(fleet, "ada", i % 4) for i in range(40)))
        assert set(tokens) == {first}
        assert time.monotonic() - started < 0.3  # nobody waited for the refresh
        await asyncio.sleep(0.7)
        assert await _token(fleet, "ada", 1) != first
        assert fleet.stats()["refreshes"] == 1

    _run(redis_server, keyring, scenario)


def test_two_owners_never_get_each_others_token(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=1)
        with pytest.raises(AuthorizationRequired) as missing:
            await _token(fleet, "issuer|bob")
        assert missing.value.status == 401
        assert "connect it" in missing.value.message
        await fleet.connect("issuer|ada", user="ada")
        await fleet.connect("issuer|bob", 1, user="bob")
        await fleet.connect(SHARED, 2, user="admin")
        for _ in range(3):
            for worker in range(4):
                assert fleet.user_of(await _token(fleet, "issuer|ada", worker)) == "ada"
                assert fleet.user_of(await _token(fleet, "issuer|bob", worker)) == "bob"
                assert fleet.user_of(await _token(fleet, SHARED, worker)) == "admin"
            await asyncio.sleep(1.0)
        with pytest.raises(AuthorizationRequired) as other:
            await _token(fleet, "issuer|eve")
        assert "connect it" in other.value.message
        assert fleet.stats()["revokedGrants"] == 0

    _run(redis_server, keyring, scenario)


def test_a_grant_is_sealed_in_the_store_and_bound_to_its_owner(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register()
        await fleet.connect("issuer|ada")
        await fleet.connect("issuer|bob")
        token = await _token(fleet, "issuer|ada")
        grant = fleet.endpoint.codes.grants[fleet.endpoint.issued[token]["grant"]]
        with redis_server.client() as client:
            keys = [key for key in client.keys("gatehouse:*") if b":grant:" in key]
            dumped = b"".join(client.dump(key) or b"" for key in keys)
            assert len(keys) == 2
            for secret in (token, grant.refresh_token, "issuer|ada", "ada"):
                assert not leaks(dumped + b"".join(keys), secret)
            # Bob's encrypted grant copied under Ada's key does not decrypt as hers.
            ada, bob = (
                _keys(fleet, owner).grant("gatehouse:{team}:")
                for owner in ("issuer|ada", "issuer|bob")
            )
            client.hset(ada, "v", client.hget(bob, "v") or b"")
        with pytest.raises(ProxyError) as refused:
            await _token(fleet, "issuer|ada", 1)
        assert refused.value.code == "connection_unavailable"

    _run(redis_server, keyring, scenario)


def test_a_grant_revoked_at_the_provider_asks_the_person_to_connect_again(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=1)
        await fleet.connect("ada")
        await _token(fleet, "ada")
        for grant_id in list(fleet.endpoint.codes.grants):
            fleet.endpoint.codes.revoke_grant(grant_id)
        await asyncio.sleep(1.05)
        with pytest.raises(AuthorizationRequired) as refused:
            await _token(fleet, "ada")
        assert "invalid_grant" in refused.value.message
        # Dropped: the next request is told at once, without asking the provider.
        asked = fleet.endpoint.clients["crm"].requests
        with pytest.raises(AuthorizationRequired):
            await _token(fleet, "ada", 2)
        assert fleet.endpoint.clients["crm"].requests == asked

    _run(redis_server, keyring, scenario)


def test_a_changed_client_or_scope_drops_the_grant(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register()
        await fleet.connect("ada")
        fleet.client = GrantClient(fleet.client.token_request, SECRET, ("read", "write"))
        with pytest.raises(AuthorizationRequired) as refused:
            await _token(fleet, "ada", 3)
        assert "another client id, token URL or scopes" in refused.value.message

    _run(redis_server, keyring, scenario)


def test_a_lock_left_by_a_killed_worker_lapses_and_the_next_request_refreshes(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=1)
        await fleet.connect("ada")
        await asyncio.sleep(1.05)
        # A worker took the lock and died before asking: its lock lapses.
        store = GrantStore(fleet.stores[0], Shares(ShareSettings()))
        assert await store.lock(_keys(fleet), "dead-worker", 0.5, 1) == 0
        started = time.monotonic()
        token = await _token(fleet, "ada", 1)
        assert 0.3 < time.monotonic() - started < 2
        assert fleet.user_of(token) == "ada"
        assert fleet.stats()["refreshes"] == 1

    _run(redis_server, keyring, scenario)


def _keys(fleet: Fleet, owner: str = "ada") -> GrantKeys:
    return GrantOwner(CONNECTION.key, CONNECTION.uid, owner).keys


@pytest.mark.parametrize(("reuse_seconds", "kept"), [(30, True), (0, False)])
def test_a_worker_killed_after_the_rotation_is_recovered_by_the_providers_reuse_interval(
    redis_server: RedisServer, keyring: KeyringFile, reuse_seconds: float, kept: bool
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=1, refresh_reuse_seconds=reuse_seconds)
        await fleet.connect("ada")
        await asyncio.sleep(1.05)
        # The provider rotated for a worker that died before the store's write.
        (grant,) = fleet.endpoint.codes.grants.values()
        form = {"refresh_token": grant.refresh_token}
        await fleet.endpoint.codes.refresh(form, "crm", fleet.endpoint.clients["crm"])
        if kept:
            assert fleet.user_of(await _token(fleet, "ada", 2)) == "ada"
            assert fleet.stats()["revokedGrants"] == 0
        else:
            with pytest.raises(AuthorizationRequired):
                await _token(fleet, "ada", 2)
            assert fleet.stats()["reuseDetections"] == 1

    _run(redis_server, keyring, scenario)


def test_an_endpoint_echoing_the_refresh_token_and_secret_leaks_neither(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=1)
        # Refreshed at an endpoint that echoes the form and the client's Basic credentials.
        hostile = GrantClient(
            TokenRequest(url=fleet.url + "/hostile/echo", client_id="crm"), SECRET, ("read",)
        )
        await fleet.connect("ada", keep_with=hostile)
        fleet.client = hostile
        (grant,) = fleet.endpoint.codes.grants.values()
        refresh_token = grant.refresh_token
        await asyncio.sleep(1.05)
        with pytest.raises(ProxyError) as refused:
            await _token(fleet, "ada")
        assert refused.value.code == "token_endpoint_failed"
        assert "[redacted]" in refused.value.message
        for secret in (refresh_token, SECRET):
            assert not leaks(refused.value.message.encode(), secret)

    _run(redis_server, keyring, scenario)


def test_grants_are_counted_in_the_namespaces_share_and_dropped(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register()
        await fleet.connect("ada")
        with redis_server.client() as client:
            held = int(client.get("gatehouse:{team}:held") or 0)
        assert 300 < held < 1200
        await fleet.connect("bob")
        with pytest.raises(GrantNotKept) as refused:
            await fleet.connect("eve")
        assert "share" in str(refused.value)
        assert await fleet.workers[1].drop(CONNECTION, "ada") == 1
        with pytest.raises(AuthorizationRequired):
            await _token(fleet, "ada", 1)
        await fleet.connect("eve")
        assert await fleet.workers[2].drop(CONNECTION, None) == 2
        for owner in ("bob", "eve"):
            with pytest.raises(AuthorizationRequired):
                await _token(fleet, owner, 3)
        with redis_server.client() as client:
            assert int(client.get("gatehouse:{team}:held") or 0) == 0

    _run(redis_server, keyring, scenario, shares=ShareSettings(namespace_bytes=2000))


def test_a_grant_takes_about_a_kibibyte_of_the_namespaces_share(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    """The store's bytes per grant (docs/development/performance.md): Google's sizes (a 200-
    character access token, a 100-character refresh token, one scope), a hundred viewers."""

    async def scenario(fleet: Fleet) -> None:
        tokens = GrantedTokens(MintedToken("a" * 200, 3600), "r" * 100, ("read",))
        for viewer in range(100):
            owner = f"https://bi.example.com|user-{viewer:06d}"
            await fleet.workers[0].store(CONNECTION, owner, fleet.client, tokens)
        with redis_server.client() as client:
            keys = client.keys("*:grant:*")
            used = sum(client.memory_usage(key) or 0 for key in keys) / len(keys)
            charged = int(client.get("gatehouse:{team}:held") or 0) / len(keys)
        print(f"a grant takes {used:.0f} bytes of the store, charged {charged:.0f}")
        assert len(keys) == 100
        assert used < 1000
        assert charged < 1200

    _run(redis_server, keyring, scenario, workers=1)


def test_a_failing_refresh_keeps_the_grant_and_is_not_asked_again_at_every_request(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register(lifetime=1)
        await fleet.connect("ada")
        await asyncio.sleep(1.05)
        client = fleet.endpoint.clients["crm"]
        client.secret = "rotated-at-the-provider"
        asked = fleet.endpoint.token_requests
        for _ in range(20):
            with pytest.raises(ProxyError) as failed:
                await _token(fleet, "ada")
            assert failed.value.code == "token_endpoint_failed"
            assert "invalid_client" in failed.value.message
        assert fleet.endpoint.token_requests == asked + 1
        client.secret = SECRET
        await asyncio.sleep(2.05)
        assert fleet.user_of(await _token(fleet, "ada")) == "ada"

    _run(redis_server, keyring, scenario, workers=1)


def test_a_disconnect_revokes_the_refresh_tokens_at_the_provider(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    async def scenario(fleet: Fleet) -> None:
        fleet.register()
        for owner in ("ada", "bob", "cyd"):
            await fleet.connect(owner)
        tokens = {owner: await _token(fleet, owner) for owner in ("ada", "bob", "cyd")}
        revoke_at = fleet.url + "/revoke"
        dropped = await fleet.workers[1].drop(
            CONNECTION, "ada", revoke_at=revoke_at, client=fleet.client
        )
        assert dropped == 1
        assert fleet.stats()["revokedGrants"] == 1
        assert tokens["ada"] not in fleet.endpoint.issued
        assert tokens["bob"] in fleet.endpoint.issued
        dropped = await fleet.workers[2].drop(
            CONNECTION, None, revoke_at=revoke_at, client=fleet.client
        )
        assert dropped == 2
        assert fleet.stats()["revokedGrants"] == 3
        # A revocation endpoint that fails: the grant is gone here all the same.
        await fleet.connect("dee")
        dropped = await fleet.workers[3].drop(
            CONNECTION, "dee", revoke_at=fleet.url + "/hostile/echo", client=fleet.client
        )
        assert dropped == 1
        with pytest.raises(AuthorizationRequired):
            await _token(fleet, "dee", 3)

    _run(redis_server, keyring, scenario)


def test_a_revocation_url_off_the_token_urls_origin_is_never_sent_the_client_secret(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    """The revocation URL is not guarded as the token URL is (changing it needs no right to
    use the Secret): a drop revokes only on the token URL's origin, so an editor cannot have the
    client secret and every viewer's refresh token posted to a host of theirs."""

    async def scenario(fleet: Fleet) -> None:
        fleet.register()
        await fleet.connect("ada")
        # The same server under another origin's name: a revocation sent there would count.
        elsewhere = fleet.url.replace("127.0.0.1", "localhost") + "/revoke"
        assert elsewhere != fleet.url + "/revoke"
        dropped = await fleet.workers[0].drop(
            CONNECTION, "ada", revoke_at=elsewhere, client=fleet.client
        )
        assert dropped == 1
        assert fleet.stats()["revokedGrants"] == 0

    _run(redis_server, keyring, scenario, workers=1)


def test_a_token_the_upstream_refused_is_refreshed_once_for_its_owner_only(
    redis_server: RedisServer, keyring: KeyringFile
) -> None:
    """The retry after a 401 (refused=...): the owner's grant refreshed at once, once for the
    fleet, never another owner's token; a token not refused is served as it was."""

    async def scenario(fleet: Fleet) -> None:
        fleet.register()
        await fleet.connect("ada")
        await fleet.connect("bob")
        ada, bob = await _token(fleet, "ada"), await _token(fleet, "bob")
        renewed = await asyncio.gather(
            *(
                fleet.workers[i % 4].access_token(
                    CONNECTION, "ada", fleet.client, within=5, refused=ada
                )
                for i in range(40)
            )
        )
        assert len(set(renewed)) == 1
        assert renewed[0] != ada
        assert fleet.user_of(renewed[0]) == "ada"
        assert fleet.stats()["refreshes"] == 1
        assert await _token(fleet, "bob", 3) == bob
        # The new token refused too, at once: the endpoint's answer (a scope never granted),
        # not the token's: no refresh per request, each rotating the refresh token.
        for _ in range(5):
            again = await fleet.workers[0].access_token(
                CONNECTION, "ada", fleet.client, within=5, refused=renewed[0]
            )
            assert again == renewed[0]
        assert fleet.stats()["refreshes"] == 1

    _run(redis_server, keyring, scenario)


def test_a_workers_held_tokens_past_their_time_are_let_go_as_viewers_come(
    keyring: KeyringFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection with many viewers: each worker holds an access token only while it is used,
    so what it holds stays bounded (not one token per viewer ever seen)."""
    monkeypatch.setattr(fleet_grants, "_MOST_HELD", 3)
    grants = FleetGrants(None, keyring, None)  # type: ignore[arg-type]
    for viewer in range(10):
        grants._hold(GrantOwner(CONNECTION.key, CONNECTION.uid, f"v{viewer}"), "t", 0)
    assert len(grants._held) <= 3
    grants._hold(GrantOwner(CONNECTION.key, CONNECTION.uid, "live"), "t", 60)
    grants._hold(GrantOwner(CONNECTION.key, CONNECTION.uid, "another"), "t", 0)
    assert GrantOwner(CONNECTION.key, CONNECTION.uid, "live") in grants._held
