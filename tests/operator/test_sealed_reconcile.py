"""The controller's side of sealed values: a value that opens is sealed for the proxies, one that
does not is a condition and an Event naming the field, and after a rotation the status offers
the value resealed. The API server is a stand-in here (tests/e2e/test_sealed_credentials.py has
the real one)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from gatehouse_operator.controllers import external_connections
from gatehouse_operator.keys.sealed_values import SEALING_KEYS_FILE, Scope, SealedValue, SealingKeys
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.table.rollout import Routed
from gatehouse_operator.wiring.controller import assemble
from tests.operator.kube_fakes import kube_of
from tests.operator.test_credential_watch import SecretsApi, conditions
from tests.operator.test_missed_deletions import StaticKeyring

CANARY = b"sk_live_reconcile_canary"
ORIGIN = "https://api.example.com"


def connection(name: str, sealed: str, base_url: str = ORIGIN) -> dict[str, Any]:
    return {
        "kind": "ExternalConnection",
        "metadata": {"namespace": "shop", "name": name, "uid": f"u-{name}", "generation": 1},
        "spec": {
            "displayName": name,
            "linkPolicy": "Builders",
            "baseURL": base_url,
            "auth": {"type": "bearer", "sealedSecret": sealed},
        },
    }


def test_sealed_values_open_for_their_connection_and_are_offered_resealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys_file = tmp_path / SEALING_KEYS_FILE
    keys = SealingKeys.generate()
    keys_file.write_text(keys.dump())
    settings = OperatorSettings(keyring_file=tmp_path / "keyring.json")
    api = SecretsApi(None, False)
    runtime = assemble(settings, kube_of(api), StaticKeyring())
    routed: list[Routed] = []

    async def waits_for_the_proxies(entry: Routed) -> None:
        routed.append(entry)  # its status is written once the replicas hold the route

    monkeypatch.setattr(runtime.rollout, "report", waits_for_the_proxies)
    value = keys.public().seal(CANARY, Scope("shop", "vendor", ORIGIN))

    def reconcile(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The status the connection gets: written now when not ready, else once routed."""
        written, waiting = len(api.statuses), len(routed)
        asyncio.run(external_connections.reconcile(runtime, resource_of(body)))
        if len(routed) > waiting:
            entry = routed[-1]
            fields = entry.extra.model_dump(by_alias=True, exclude_unset=True, mode="json")
            return fields, {verdict.type: asdict(verdict) for verdict in entry.verdicts}
        assert len(api.statuses) > written
        return api.statuses[-1], conditions(api)

    status, found = reconcile(connection("vendor", value))
    assert found["CredentialReady"]["reason"] == "CredentialEncrypted"
    assert found["CredentialReady"]["message"] == (
        "auth.sealedSecret opens and is encrypted for the proxies"
    )
    assert status["hasSecret"] is True
    assert status["resealedSecret"] == ""
    assert runtime.routes.connection_resource("shop/vendor") is not None

    # Copied to another name, or kept while baseURL moved elsewhere.
    for body, why in (
        (connection("copy", value), "this connection is shop/copy at https://api.example.com"),
        (
            connection("vendor", value, "https://evil.example"),
            "this connection is shop/vendor at https://evil.example",
        ),
    ):
        _, found = reconcile(body)
        assert found["CredentialReady"]["reason"] == "SealedForAnotherConnection"
        assert why in found["CredentialReady"]["message"]
        assert found["Ready"]["status"] == "False"
    _, found = reconcile(connection("vendor", value, "https://0x7f.1"))
    assert found["CredentialReady"]["reason"] == "InvalidBaseURL"

    # A rotation: the old value still opens, and the status offers it under the new key, the
    # same offer on every reconcile until the file takes it.
    rotated = keys.rotated()
    keys_file.write_text(rotated.dump())
    status, found = reconcile(connection("vendor", value))
    assert found["CredentialReady"]["reason"] == "CredentialEncrypted"
    offered = status["resealedSecret"]
    assert SealedValue.parse(offered).key == rotated.active
    assert rotated.open(offered, Scope("shop", "vendor", ORIGIN)) == CANARY
    assert reconcile(connection("vendor", value))[0]["resealedSecret"] == offered
    assert reconcile(connection("vendor", offered))[0]["resealedSecret"] == ""

    everything = json.dumps(
        [api.statuses, api.events, [entry.extra.model_dump(mode="json") for entry in routed]]
    )
    assert CANARY.decode() not in everything


def test_new_sealing_keys_are_published_before_any_connection_is_offered_resealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gatehouse reseal takes an offer only when it is sealed with the active key the ConfigMap
    names: were the offers made first, a user resealing in between would be refused (CI saw
    it), so the keys' change is published before the connections are reconciled."""
    from gatehouse_operator.wiring import key_following

    keys_file = tmp_path / SEALING_KEYS_FILE
    keys = SealingKeys.generate()
    keys_file.write_text(keys.dump())
    settings = OperatorSettings(
        keyring_file=tmp_path / "keyring.json", sealing_keys_config_map="gatehouse/sealing-keys"
    )
    runtime = assemble(settings, kube_of(SecretsApi(None, False)), StaticKeyring())
    happened: list[str] = []

    async def publish(namespace: str, name: str, data: dict[str, str]) -> bool:
        happened.append(f"published {data['active']}")
        return True

    async def reconcile(_: Any, keys: list[str]) -> None:
        happened.append("reconciled")

    monkeypatch.setattr(runtime.kube.secrets, "publish_config_map", publish, raising=False)
    monkeypatch.setattr(key_following, "reconcile_connections", reconcile)
    follower = key_following.SealingKeysFollower(runtime)
    asyncio.run(follower.follow())
    assert happened == []  # the first look: the start-up publish and reconcile have it
    rotated = keys.rotated()
    keys_file.write_text(rotated.dump())
    asyncio.run(follower.follow())
    assert happened == [f"published {rotated.active}", "reconciled"]
