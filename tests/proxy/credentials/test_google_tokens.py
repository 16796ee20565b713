"""Google token exchanges cost one tenant, never every tenant on the replica.

Against a token endpoint on 127.0.0.1 (the real one that verifies signed JWTs runs in
tests/e2e): a key is parsed once however many connections and exchanges use it, without
OpenSSL's slow consistency check; assertions are signed off the event loop; a failed exchange
is answered from memory with backoff (kept by FleetTokens, as every minted token is).
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gatehouse_contract import google_keys
from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_dev.service_accounts import service_account_key
from gatehouse_proxy.credentials import google_tokens
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey, FleetTokens
from gatehouse_proxy.credentials.google_tokens import GoogleMinter
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.upstream.network_guard import NetworkPolicy

SCOPES = ("https://www.googleapis.com/auth/bigquery.readonly",)
FIRST = CredentialKey.of("one/bq", "uid-1", ["f1", *SCOPES])
SECOND = CredentialKey.of("two/bq", "uid-2", ["f2", *SCOPES])


def _minter(session: aiohttp.ClientSession, url: str) -> GoogleMinter:
    return GoogleMinter(TokenClient(session, NetworkPolicy(["127.0.0.0/8"]), allow_http=True), url)


def _tokens(tmp_path: Path) -> FleetTokens:
    """Tokens kept by this worker alone (no shared store: see test_fleet_tokens)."""
    path = tmp_path / "keyring.json"
    path.write_text(Keyring.generate("k1").dump())
    return FleetTokens(None, KeyringFile(path))


@asynccontextmanager
async def token_endpoint(status: int) -> AsyncIterator[tuple[str, list[str]]]:
    assertions: list[str] = []

    async def token(request: web.Request) -> web.Response:
        assertions.append(str((await request.post())["assertion"]))
        if status != 200:
            return web.json_response({"error": "invalid_grant"}, status=status)
        return web.json_response({"access_token": f"t{len(assertions)}", "expires_in": 3600})

    app = web.Application()
    app.router.add_post("/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/token", assertions
    finally:
        await runner.cleanup()


def test_a_key_is_parsed_once_for_all_its_connections(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key_file, _ = service_account_key()
    parsed: list[bytes] = []
    real = google_keys.load_rsa_key

    def counting(pem: bytes) -> object:
        parsed.append(pem)
        return real(pem)

    monkeypatch.setattr(google_tokens, "load_rsa_key", counting)

    async def scenario() -> None:
        async with token_endpoint(200) as (url, assertions), aiohttp.ClientSession() as session:
            minter, tokens = _minter(session, url), _tokens(tmp_path)
            assert await tokens.token(FIRST, lambda: minter.mint(FIRST, key_file, SCOPES)) == "t1"
            assert await tokens.token(SECOND, lambda: minter.mint(SECOND, key_file, SCOPES)) == "t2"
            assert len(assertions) == 2
            assert len(parsed) == 1
            minter.forget({SECOND})
            tokens.forget({SECOND})
            assert await tokens.token(SECOND, lambda: minter.mint(SECOND, key_file, SCOPES)) == "t2"
            minter.forget(set())
            assert minter._signers == {}

    asyncio.run(scenario())


def test_a_failed_exchange_is_backed_off_per_key(tmp_path: Path) -> None:
    key_file, _ = service_account_key()

    async def scenario() -> None:
        async with token_endpoint(400) as (url, assertions), aiohttp.ClientSession() as session:
            minter, tokens = _minter(session, url), _tokens(tmp_path)
            depths = set()
            for _ in range(20):
                with pytest.raises(ProxyError, match="invalid_grant") as caught:
                    await tokens.token(FIRST, lambda: minter.mint(FIRST, key_file, SCOPES))
                depths.add(len(traceback.extract_tb(caught.value.__traceback__)))
            assert len(assertions) == 1  # one exchange; the other 19 answered from memory
            # Each answer from memory is an exception of its own: one object raised again would
            # collect every request's frames in its traceback.
            assert len(depths) <= 2, depths
            # Another connection's key is not held back by this one's failures.
            with pytest.raises(ProxyError, match="invalid_grant"):
                await tokens.token(SECOND, lambda: minter.mint(SECOND, key_file, SCOPES))
            assert len(assertions) == 2

    asyncio.run(scenario())


def test_assertions_are_signed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Signing lets go of the GIL (unlike parsing), so a thread frees the loop for the few
    milliseconds a 4,096-bit signature takes."""
    key_file, _ = service_account_key(key_size=4096)
    signed_on: list[int] = []
    real = google_tokens._sign_assertion

    def recording(*args: object) -> bytes:
        signed_on.append(threading.get_ident())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(google_tokens, "_sign_assertion", recording)

    async def scenario() -> None:
        async with token_endpoint(200) as (url, _), aiohttp.ClientSession() as session:
            minted = await _minter(session, url).mint(FIRST, key_file, SCOPES)
            assert minted.value == "t1"

    asyncio.run(scenario())
    assert signed_on
    assert threading.get_ident() not in signed_on
