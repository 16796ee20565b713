"""Which table changes drop a connection's grants: a new client id, token URL or scopes, or the
connection gone; never a moment without its credential (each viewer would connect again). The
drops themselves, against the real store and authorization server, are in test_fleet_grants.py
and tests/e2e/test_viewer_grants.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import Authorization, ConnectionRoute, Credential, TokenRequest
from gatehouse_proxy.credentials.grant_changes import GrantChanges
from tests.proxy.stores import quota_route


class Drops:
    """Records the connections whose grants were dropped."""

    def __init__(self) -> None:
        self.dropped: list[str] = []

    async def drop(self, connection: ConnectionRoute, owner: str | None, **_: Any) -> int:
        self.dropped.append(connection.credential.grant_identity)
        return 0


def _granted(scopes: tuple[str, ...] = ("read",), unavailable: str = "") -> ConnectionRoute:
    credential = Credential(
        type="oauth2AuthorizationCode",
        scopes=scopes,
        token_request=TokenRequest(url="https://login.example.com/token", client_id="crm"),
        authorization=Authorization(url="https://login.example.com/authorize"),
    )
    route = quota_route("team/crm", "uid-crm")
    return route.model_copy(update={"credential": credential, "unavailable": unavailable})


def _follow(*tables: list[ConnectionRoute]) -> list[str]:
    drops = Drops()

    async def run() -> None:
        changes = GrantChanges(drops, KeyringFile(Path("/nonexistent")))  # type: ignore[arg-type]
        for table in tables:
            changes.follow(table)
            await changes.close()

    asyncio.run(run())
    return drops.dropped


def test_a_connection_routed_without_its_credential_keeps_its_grants() -> None:
    # Its Secret deleted and made again: the table routes it as unavailable, with no grant
    # identity, then as before.
    bare = _granted().model_copy(
        update={"credential": Credential(type="oauth2AuthorizationCode"), "unavailable": "gone"}
    )
    assert _follow([_granted()], [bare], [_granted()]) == []
    # A change of scopes while it was away still drops them.
    assert _follow([_granted()], [bare], [_granted(("read", "write"))]) == [
        _granted().credential.grant_identity
    ]


def test_new_scopes_or_the_connection_gone_drop_its_grants() -> None:
    before = _granted().credential.grant_identity
    assert _follow([_granted()], [_granted(("read", "write"))]) == [before]
    assert _follow([_granted()], []) == [before]
    assert _follow([_granted()], [_granted()]) == []
