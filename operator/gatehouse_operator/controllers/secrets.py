"""Secrets: a rotated or deleted Secret reaches the proxy within seconds.

The API server sends the operator only Secrets labelled ``gatehouse.dev/credential=true`` (the
selector is set at start-up); of those it acts on the ones a connection references (its
credential, or its client certificate or CA bundle) or that hold an app's proxy credential. A
Secret that loses the label arrives as DELETED, so a deletion is confirmed by reading the Secret,
never taken from the watch alone.
"""

from __future__ import annotations

import base64
from typing import Any

import kopf

from gatehouse_contract.routes import token_sha256
from gatehouse_operator.api.stored import StoredConnectionSpec
from gatehouse_operator.controllers import external_connections, linked_apps
from gatehouse_operator.kube import API_ERRORS
from gatehouse_operator.runtime import Runtime


def _relevant(name: str, namespace: str | None, labels: kopf.Labels, memo: Any, **_: Any) -> bool:
    runtime: Runtime = memo.runtime
    if namespace is None:
        return False
    return bool(
        runtime.routes.indexes.connections_using_secret(namespace, name)
        or linked_apps.app_for_credential_secret(dict(labels), namespace)
    )


def _credential_secret(spec: Any) -> str:
    """The Secret auth.secretRef names: the one whose data reconcile takes as delivered. A
    connection's TLS Secrets (spec.tls) are read by reconcile itself."""
    return StoredConnectionSpec.model_validate(spec or {}).secret_ref_name


@kopf.on.event("", "v1", "secrets", when=_relevant)
async def secret_event(
    event: kopf.RawEvent, body: kopf.Body, name: str, namespace: str | None, memo: Any, **_: Any
) -> None:
    runtime: Runtime = memo.runtime
    if namespace is None:
        return
    deleted = event.get("type") == "DELETED"
    data = {key: base64.b64decode(value) for key, value in (body.get("data") or {}).items()}
    for key in runtime.routes.indexes.connections_using_secret(namespace, name):
        connection = runtime.routes.connection_resource(key)
        if connection is None:
            continue  # dropped while an earlier one was reconciled
        if not deleted and _credential_secret(connection.spec) == name:
            await external_connections.reconcile(runtime, connection, secret_data=data)
            continue
        try:
            await external_connections.reconcile(runtime, connection)  # reads it
        except API_ERRORS:
            runtime.unread.add(key)  # kopf retries no event handler: housekeeping reads it

    app = linked_apps.app_for_credential_secret(
        dict(body.get("metadata", {}).get("labels") or {}), namespace
    )
    route = runtime.routes.app(app) if app else None
    app_resource = runtime.routes.app_resource(app) if app else None
    token = data.get("token", b"").decode()
    if app and route and app_resource and (deleted or route.token_sha256 != token_sha256(token)):
        # Deleted or edited by hand: issue a fresh credential (or adopt the edited one).
        kind = linked_apps.KINDS[app.split("/")[1]]
        await linked_apps.reconcile(runtime, kind, app_resource)
