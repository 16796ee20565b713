"""A connection's Secret as the operator sees it: unlabelled (read, not watched), unreadable
(HTTP 403), and an API server that cannot be reached during housekeeping.

The API server is a stand-in here; the label selector and the conditions on a real API server
are tested end to end (tests/e2e/test_connections.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from kubernetes.aio import client

from gatehouse_operator.api.apps import DATA_APP
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.controllers import external_connections, linked_apps
from gatehouse_operator.kube import credential_owner
from gatehouse_operator.kube.errors import translated
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.wiring import housekeeping, resync
from gatehouse_operator.wiring.controller import assemble
from tests.operator.kube_fakes import kube_of
from tests.operator.test_missed_deletions import StaticKeyring


class SecretsApi:
    """Serves one Secret (or refuses it) and records statuses and Events."""

    def __init__(self, data: dict[str, bytes] | None, watched: bool, status: int = 0) -> None:
        self.data, self.watched, self.status = data, watched, status
        self.statuses: list[dict[str, Any]] = []
        self.events: list[tuple[str, str, str]] = []

    async def watched_secret(
        self, namespace: str, name: str
    ) -> tuple[dict[str, bytes] | None, bool]:
        if self.status:
            raise translated(client.ApiException(status=self.status, reason="Forbidden"))
        return self.data, self.watched

    async def patch_status(
        self, kind: Kind, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        self.statuses.append(status)

    async def post_event(
        self, kind: Kind, meta: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        self.events.append((type_, reason, message))


CONNECTION = {
    "kind": "ExternalConnection",
    "metadata": {"namespace": "shop", "name": "vendor", "uid": "u1", "generation": 1},
    "spec": {
        "displayName": "Vendor",
        "linkPolicy": "Builders",
        "baseURL": "https://api.example.com",
        "auth": {
            "type": "bearer",
            "secretRef": {"name": "vendor", "key": "token"},
        },
    },
}


def conditions(api: SecretsApi) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api.statuses[-1]["conditions"]}


def reconciled(api: SecretsApi) -> Runtime:
    runtime = assemble(OperatorSettings(), kube_of(api), StaticKeyring())
    asyncio.run(external_connections.reconcile(runtime, resource_of(CONNECTION)))
    return runtime


def test_an_unreadable_secret_is_a_condition_naming_the_cause() -> None:
    api = SecretsApi(None, False, status=403)
    reconciled(api)
    found = conditions(api)
    assert found["CredentialReady"]["reason"] == "SecretForbidden"
    assert "may not read Secret 'vendor' (HTTP 403)" in found["CredentialReady"]["message"]
    assert found["Ready"]["status"] == "False"
    assert api.events[0][:2] == ("Warning", "SecretForbidden")


def test_an_unlabelled_secret_works_and_says_how_to_label_it() -> None:
    api = SecretsApi(None, False)  # missing: not ready, and not watched either
    runtime = reconciled(api)
    found = conditions(api)
    assert found["CredentialWatched"]["reason"] == "SecretNotFound"
    assert "labelled gatehouse.dev/credential=true" in found["CredentialWatched"]["message"]
    assert resync.unwatched(runtime) == ["shop/vendor"]  # read again every resync
    reasons = [reason for _, reason, _ in api.events]
    assert reasons == ["SecretNotFound", "SecretNotFound"]  # Ready's, then CredentialWatched's


def test_housekeeping_outlives_an_api_server_it_cannot_reach() -> None:
    async def unreachable() -> None:
        raise aiohttp.ClientConnectionError("refused")

    async def http_error() -> None:
        raise translated(client.ApiException(status=503))

    async def turns() -> None:
        await housekeeping.Duty("list", 1.0, unreachable).turn()
        await housekeeping.Duty("list", 1.0, http_error).turn()

    asyncio.run(turns())  # neither raises


def test_an_app_credential_the_operator_may_not_write_is_a_condition() -> None:
    class Forbidden(SecretsApi):
        async def app_token(self, namespace: str, name: str, owner: dict[str, Any]) -> str:
            raise translated(client.ApiException(status=403, reason="Forbidden"))

    api = Forbidden(None, False)
    runtime = assemble(OperatorSettings(), kube_of(api), StaticKeyring())
    app = {
        "kind": "DataApp",
        "metadata": {"namespace": "shop", "name": "sales", "uid": "a1", "generation": 1},
        "spec": {"connections": [{"alias": "vendor", "connection": "vendor"}]},
    }
    asyncio.run(linked_apps.reconcile(runtime, DATA_APP, resource_of(app)))
    found = conditions(api)
    assert found["CredentialIssued"]["reason"] == "SecretForbidden"
    assert "dataapp-sales-gatehouse" in found["CredentialIssued"]["message"]
    assert found["Ready"]["status"] == "False"


def test_an_app_credential_secret_is_the_operators_only_by_its_controller_reference() -> None:
    owner = {"kind": "DataApp", "name": "sales", "uid": "a1"}

    def made(*references: client.V1OwnerReference) -> client.V1Secret:
        return client.V1Secret(metadata=client.V1ObjectMeta(owner_references=list(references)))

    def reference(uid: str, **changed: Any) -> client.V1OwnerReference:
        fields = {
            "api_version": "gatehouse.dev/v1alpha1",
            "kind": "DataApp",
            "name": "sales",
            "uid": uid,
            "controller": True,
        }
        return client.V1OwnerReference(**{**fields, **changed})

    assert credential_owner(made(reference("a1")), owner) == "this app"
    # The one made for an app of this name that was deleted (the garbage collector's to delete).
    assert credential_owner(made(reference("a0")), owner) == "an earlier app"
    for stranger in (
        made(),  # a Secret someone made
        made(reference("a1", controller=False)),
        made(reference("a1", kind="ChartType")),
        made(reference("a1", name="other")),
        made(reference("a1", api_version="example.com/v1")),
    ):
        assert credential_owner(stranger, owner) is None
