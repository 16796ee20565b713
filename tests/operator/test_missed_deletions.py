"""A deletion the watch never reported (it restarted meanwhile) still takes the route away.

The Kubernetes side is a stand-in here: listing and Secret deletion run against the real API
server in the end-to-end suite (tests/e2e); this checks which routes the sweep drops and keeps.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gatehouse_contract.keyring import Keyring
from gatehouse_contract.routes import AppRoute, ConnectionRoute, Credential, Limits
from gatehouse_operator.api.apps import DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.wiring import resync
from gatehouse_operator.wiring.controller import assemble
from tests.operator.kube_fakes import kube_of
from tests.operator.test_table_budget import SPEC


class StaticKeyring:
    def __init__(self) -> None:
        self.keyring = Keyring.generate()

    def current(self) -> Keyring:
        return self.keyring


class Listing:
    """What the API server lists now, and the Secrets the sweep deleted."""

    def __init__(self, live: dict[str, list[dict[str, Any]]]) -> None:
        self.live = live
        self.deleted_secrets: list[str] = []

    async def existing(self, kind: Kind) -> list[dict[str, Any]]:
        return self.live.get(kind.kind, [])

    async def delete_credential_secret(
        self, namespace: str, name: str, owner: dict[str, Any]
    ) -> None:
        self.deleted_secrets.append(f"{namespace}/{name}")


def body(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"namespace": "shop", "name": name, "uid": uid}}


def runtime_with(listing: Listing) -> Runtime:
    keyring = StaticKeyring()
    runtime = assemble(OperatorSettings(), kube_of(listing), keyring)
    for name, uid in (("kept", "c1"), ("gone", "c2"), ("replaced", "c3")):
        route = ConnectionRoute(
            key=f"shop/{name}",
            uid=uid,
            origin="https://api.example.com",
            allowed_methods=frozenset({"GET"}),
            allowed_paths=("/",),
            credential=Credential(type="none"),
            limits=Limits(
                timeout_seconds=30, max_request_bytes=1, max_response_bytes=1, requests_per_minute=1
            ),
        )
        connection = resource_of(body(EXTERNAL_CONNECTION.kind, name, uid))
        runtime.routes.put_connection(route, SPEC, connection)
    for name, uid in (("kept", "a1"), ("gone", "a2")):
        key = f"shop/DataApp/{name}"
        app = AppRoute(key=key, token_sha256="0" * 64)
        runtime.routes.put_app(app, resource_of(body(DATA_APP.kind, name, uid)), seen_as=key)
    return runtime


def test_routes_whose_resources_vanished_unseen_are_dropped() -> None:
    listing = Listing(
        {
            EXTERNAL_CONNECTION.kind: [
                body(EXTERNAL_CONNECTION.kind, "kept", "c1"),
                # Deleted and made again under the same name: the old route goes.
                body(EXTERNAL_CONNECTION.kind, "replaced", "c9"),
            ],
            DATA_APP.kind: [body(DATA_APP.kind, "kept", "a1")],
        }
    )
    runtime = runtime_with(listing)
    asyncio.run(resync.drop_vanished(runtime))
    assert set(runtime.routes.connection_keys()) == {"shop/kept"}
    assert set(runtime.routes.app_keys()) == {"shop/DataApp/kept"}
    assert listing.deleted_secrets == ["shop/dataapp-gone-gatehouse"]
