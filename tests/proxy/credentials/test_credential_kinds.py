"""The auth kinds' contract: every ``credential.type`` the routing table may carry has one
injector in the registry, each injector sends the credential under the header names it says
before decrypting it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import get_args

import aiohttp
import pytest

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import AuthType
from gatehouse_proxy.credentials import injectors
from gatehouse_proxy.credentials.kinds import KINDS
from tests.proxy.credentials.test_injectors import injector_for
from tests.proxy.serving import KEYRING, Tenant


def test_every_auth_type_of_the_routing_table_has_one_injector() -> None:
    assert sorted(KINDS) == sorted(get_args(AuthType))


def test_only_the_minted_kinds_mint() -> None:
    minted = {kind for kind, injector in KINDS.items() if injector.mints}
    assert minted == {"oauth2ClientCredentials", "googleServiceAccount"}


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
