"""The auth kinds' contract: every ``credential.type`` the routing table may carry has one
injector in the registry, each injector sends the credential under the header names (or in the
query parameter) it says before decrypting it, and the request path asks the injector rather
than reading the kind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import get_args

import aiohttp
import pytest

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import AuthType, ConnectionRoute
from gatehouse_dev.service_accounts import service_account_key
from gatehouse_operator.api.auth_kinds import AUTH_KINDS
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.connections.origin import token_url_of
from gatehouse_operator.connections.testing import secret_texts
from gatehouse_operator.keys.credentials import encrypt_credential, secret_in
from gatehouse_proxy.credentials import injectors
from gatehouse_proxy.credentials.injecting import decrypt
from gatehouse_proxy.credentials.kinds import KINDS
from gatehouse_proxy.credentials.oauth2_tokens import token_request_form
from tests.proxy.credentials.test_injectors import injector_for
from tests.proxy.serving import KEYRING, Tenant


def test_every_auth_type_of_the_routing_table_has_one_injector() -> None:
    assert sorted(KINDS) == sorted(get_args(AuthType))


def test_only_the_minted_kinds_mint() -> None:
    minted = {kind for kind, injector in KINDS.items() if injector.mints}
    assert minted == {"oauth2ClientCredentials", "googleServiceAccount", "oauth2AuthorizationCode"}


@pytest.mark.parametrize(
    ("auth", "location", "secret"),
    [
        ("none", "", ""),
        ("bearer", "", "s3"),
        ("basic", "", "ana:p4ss"),
        ("apiKey", "header", "k3y"),
        ("apiKey", "query", "k3y"),
    ],
)
def test_a_kind_sends_its_credential_under_the_names_it_says_before_decrypting(
    tmp_path: Path, auth: str, location: str, secret: str
) -> None:
    """The names are settled (and the app's own headers checked against them) before the
    credential is decrypted: what the injection carries is under those names and no other."""
    path = tmp_path / "keyring.json"
    path.write_text(KEYRING.dump())
    parameter = "X-Key" if auth == "apiKey" else ""
    route = Tenant(
        "one", "https://x.example", auth=auth, secret=secret, parameter=parameter, location=location
    ).connection()

    async def scenario() -> set[str]:
        async with aiohttp.ClientSession() as session:
            injection = await injector_for(KeyringFile(path), session).injection(route)
        return set(injection.headers)

    assert asyncio.run(scenario()) == set(injectors.injected_header_names(route))
    assert not injectors.mints_tokens(route)
    sent_in_query = asyncio.run(query_of(path, route))
    assert injectors.injected_query_parameter(route) == sent_in_query
    assert injectors.sends_credential(route) == (auth != "none")


async def query_of(keyring: Path, route: ConnectionRoute) -> str | None:
    async with aiohttp.ClientSession() as session:
        injection = await injector_for(KeyringFile(keyring), session).injection(route)
    return None if injection.query is None else injection.query[0]


def test_the_request_path_reads_no_auth_kind() -> None:
    """Whatever depends on the kind is asked of its injector: the request's way through the rules
    (passage/), the door, the connection tests and the rules read no ``credential.type``."""
    proxy = Path(injectors.__file__).parents[1]
    reading = [
        str(path.relative_to(proxy))
        for room in ("passage", "door", "connection_tests", "rules")
        for path in sorted((proxy / room).rglob("*.py"))
        if "credential.type" in path.read_text()
    ]
    assert reading == []


def _client(authentication: str) -> dict[str, object]:
    client = {
        "tokenURL": "https://auth.example.com/token",
        "clientId": "gh client",
        "clientAuthentication": authentication,
    }
    return {"type": "oauth2ClientCredentials", "oauth2ClientCredentials": client}


def _code(authentication: str) -> dict[str, object]:
    code = {
        "authorizationURL": "https://auth.example.com/authorize",
        "tokenURL": "https://auth.example.com/token",
        "clientId": "gh client",
        "clientAuthentication": authentication,
    }
    return {"type": "oauth2AuthorizationCode", "oauth2AuthorizationCode": code}


# One auth section per way a kind sends its stored secret: each AuthType at least once.
SENT_SECRETS: list[tuple[dict[str, object], str]] = [
    ({"type": "none"}, ""),
    ({"type": "bearer"}, "s3 cr+t/"),
    ({"type": "basic"}, "ana:p4ss w+rd/"),
    ({"type": "apiKey", "apiKey": {"name": "X-Key", "in": "header"}}, "k3y+/ =&"),
    ({"type": "apiKey", "apiKey": {"name": "key", "in": "query"}}, "k3y+/ =&"),
    *[(_client(authentication), "cl1ent s+cr/t") for authentication in ("basic", "body")],
    (
        {"type": "googleServiceAccount", "googleServiceAccount": {"scopes": ["email"]}},
        service_account_key()[0].decode(),
    ),
    *[(_code(authentication), "cl1ent s+cr/t") for authentication in ("basic", "body")],
    (
        {"type": "awsSigV4", "awsSigV4": {"region": "us-east-1", "service": "execute-api"}},
        AwsKeys("ASIAEXAMPLEEXAMPLE00", "wJalr/K7+MDENG=bPx", "IQoJb3Jp+Z2lu/X2Vj==").stored(),
    ),
]


def test_every_auth_type_has_a_case_of_its_sent_forms() -> None:
    assert {auth["type"] for auth, _ in SENT_SECRETS} == set(get_args(AuthType))


@pytest.mark.parametrize(("auth", "secret"), SENT_SECRETS, ids=lambda value: str(value)[:40])
def test_the_operator_scrubs_every_form_the_proxy_sends_a_secret_in(
    tmp_path: Path, auth: dict[str, object], secret: str
) -> None:
    """Both programs read one declaration of a kind's forms (sent_forms.secret_sent): the
    credential the operator encrypts, sent by the proxy's own injector or token request, goes
    in exactly the forms the operator scrubs from a connection test's answer, besides the
    secret as stored and its parts secret on their own (a key file's private key)."""
    if auth["type"] not in AUTH_KINDS:
        pytest.skip(f"the operator does not take {auth['type']} yet")
    spec = ExternalConnectionSpec.model_validate(
        {
            "displayName": "Example",
            "baseURL": "https://api.example.com",
            "auth": {**auth, "secretRef": {"name": "s", "key": "k"}},
            "linkPolicy": "AdminsOnly",
        }
    )
    found = secret_in(spec.auth, {"k": secret.encode()})
    token_url = token_url_of(spec.auth, allow_http=False)
    credential = encrypt_credential(
        spec.auth,
        found,
        keyring=KEYRING,
        connection_uid="uid-one",
        origin="https://api.example.com",
        token_url=token_url,
    )
    route = Tenant("one", "https://api.example.com").connection()
    route = route.model_copy(update={"credential": credential})
    path = tmp_path / "keyring.json"
    path.write_text(KEYRING.dump())

    async def proxy_sends() -> tuple[str, ...]:
        if credential.token_request is not None:
            plain = decrypt(KeyringFile(path), route).decode()
            request = credential.token_request
            return token_request_form(request, credential.scopes, plain).secret_forms
        if credential.type == "googleServiceAccount":
            return ()  # the key signs the token request; it is not sent
        async with aiohttp.ClientSession() as session:
            return (await injector_for(KeyringFile(path), session).injection(route)).secrets

    sent = asyncio.run(proxy_sends())
    scrubbed = secret_texts(spec, found.value if found else None)
    held_field = {"googleServiceAccount": "private_key", "awsSigV4": "SecretAccessKey"}
    field = held_field.get(str(auth["type"]))
    held = {json.loads(secret)[field]} if field else set()
    assert set(sent) <= set(scrubbed)
    assert set(scrubbed) == ({secret} if secret else set()) | set(sent) | held
