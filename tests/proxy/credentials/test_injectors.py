"""The injector decrypts each credential for its request with the keyring as it is now: a key
added to the keyring file decrypts what it encrypted at once, though the file is looked at once a
second. What it sends is what the scrubber it hands over catches."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from urllib.parse import quote, quote_plus

import aiohttp
import pytest

from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_contract.redaction import Redactor
from gatehouse_dev.echoes import leaks
from gatehouse_proxy.credentials.aws_roles import RoleMinter
from gatehouse_proxy.credentials.fleet_grants import FleetGrants
from gatehouse_proxy.credentials.fleet_tokens import FleetTokens
from gatehouse_proxy.credentials.google_tokens import GoogleMinter
from gatehouse_proxy.credentials.injectors import Injection, Injector
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.rules.query import upstream_query
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from tests.proxy.serving import KEYRING, Tenant


def client_for(session: aiohttp.ClientSession) -> TokenClient:
    """Token requests to endpoints on 127.0.0.1, over http."""
    return TokenClient(session, NetworkPolicy(["127.0.0.0/8"]), allow_http=True)


def injector_for(
    keyring: KeyringFile, session: aiohttp.ClientSession, roles: RoleMinter | None = None
) -> Injector:
    """An injector with no shared store: each worker mints for itself (a role's keys from
    ``roles``; by default, a proxy without a web identity)."""
    client = client_for(session)
    return Injector(
        keyring,
        FleetTokens(None, keyring),
        GoogleMinter(client, "http://127.0.0.1:9/token"),
        client,
        FleetGrants(None, keyring, client),
        roles or RoleMinter(client, None),
    )


def test_a_credential_encrypted_with_a_key_just_added_decrypts_at_once(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    old = Keyring.generate("k1")
    path.write_text(old.dump())
    tenant = Tenant("one", "https://api.example.com", auth="bearer", parameter="", secret="s3")
    route = tenant.connection()
    credential = route.credential
    assert credential.encrypted is not None
    rotated = old.with_new_key("k2").activated("k2")
    encrypted = rotated.encrypt(b"s3-new", credential.context(route.uid, route.origin))
    credential = credential.model_copy(update={"encrypted": encrypted})
    route = route.model_copy(update={"credential": credential})

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            keyring = KeyringFile(path, recheck_seconds=3600)
            injector = injector_for(keyring, session)
            keyring.current()  # looked at before the rotation: not due again for an hour
            path.write_text(rotated.dump())
            injection = await injector.injection(route)
            assert injection.headers == {"Authorization": "Bearer s3-new"}

    asyncio.run(scenario())


def test_basic_auth_sends_the_pair_and_scrubs_each_form(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(KEYRING.dump())
    route = Tenant(
        "one", "https://api.example.com", auth="basic", secret="ana:p4ss w0rd"
    ).connection()

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            injection = await injector_for(KeyringFile(path), session).injection(route)
        assert injection.headers == {"Authorization": "Basic YW5hOnA0c3MgdzByZA=="}
        assert set(injection.secrets) == {"ana:p4ss w0rd", "YW5hOnA0c3MgdzByZA==", "p4ss w0rd"}

    asyncio.run(scenario())


SENT = "ana:Sx9+kQ/7vZ= m2Lp"  # characters each encoding writes its own way


@pytest.mark.parametrize(
    ("auth", "location"),
    [("bearer", ""), ("basic", ""), ("apiKey", "header"), ("apiKey", "query")],
)
def test_what_is_sent_is_scrubbed_as_sent_and_one_encoding_more(
    tmp_path: Path, auth: str, location: str
) -> None:
    """Whatever the injector writes on the wire, the scrubber it hands over catches, also
    encoded once more: percent-encoded (so a query key twice), in base64 or in hex."""
    path = tmp_path / "keyring.json"
    path.write_text(KEYRING.dump())
    parameter = "key" if auth == "apiKey" else ""
    route = Tenant(
        "one", "https://x.example", auth=auth, secret=SENT, parameter=parameter, location=location
    ).connection()

    async def scenario() -> Injection:
        async with aiohttp.ClientSession() as session:
            return await injector_for(KeyringFile(path), session).injection(route)

    injection = asyncio.run(scenario())
    sent = list(injection.headers.values())
    if injection.query is not None:
        sent.append(upstream_query(b"", injection.query))
    assert sent
    redact = Redactor(injection.secrets)
    for value in sent:
        for echo in (
            value,
            quote(value, safe=""),
            quote(value, safe="").lower(),
            quote_plus(value),
            base64.b64encode(value.encode()).decode(),
            value.encode().hex(),
        ):
            scrubbed = redact(f"<p>{echo}</p>".encode())
            for secret in (SENT, SENT.partition(":")[2]):
                assert not leaks(scrubbed, secret), (echo, scrubbed)
