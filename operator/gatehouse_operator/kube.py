"""The few Kubernetes API calls the operator makes itself (kopf does the watching)."""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from typing import Any, cast

from kubernetes.aio import client

from gatehouse_operator.api.meta import GROUP, VERSION, Kind

CREDENTIAL_LABEL = "gatehouse.dev/credential-for"
TOKEN_KEY = "token"  # noqa: S105 (the key name within the Secret)


def _decoded(data: dict[str, bytes | str] | None) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in (data or {}).items()}


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    async def secret_data(self, namespace: str, name: str) -> dict[str, bytes] | None:
        try:
            secret = await self.core.read_namespaced_secret(name, namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return _decoded(secret.data)

    async def app_token(self, namespace: str, secret_name: str, owner: dict[str, Any]) -> str:
        """The app's proxy credential from the Secret the operator owns, created if missing."""
        existing = await self.secret_data(namespace, secret_name)
        if existing and existing.get(TOKEN_KEY):
            return existing[TOKEN_KEY].decode()
        token = secrets.token_urlsafe(32)
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=secret_name,
                labels={CREDENTIAL_LABEL: f"{owner['kind']}.{owner['name']}"},
                owner_references=[
                    client.V1OwnerReference(
                        api_version=f"{GROUP}/{VERSION}",
                        kind=owner["kind"],
                        name=owner["name"],
                        uid=owner["uid"],
                        controller=True,
                        block_owner_deletion=True,
                    )
                ],
            ),
            type="Opaque",
            string_data={TOKEN_KEY: token},
        )
        if existing is None:
            await self.core.create_namespaced_secret(namespace, body)
        else:
            await self.core.replace_namespaced_secret(secret_name, namespace, body)
        return token

    async def delete_secret(self, namespace: str, name: str) -> None:
        try:
            await self.core.delete_namespaced_secret(name, namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise

    async def patch_status(
        self, kind: Kind, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        try:
            await self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, kind.plural, name, {"status": status}
            )
        except client.ApiException as error:
            if error.status != 404:  # deleted meanwhile: nothing left to report on
                raise

    async def existing(self, kind: Kind, patience: float = 30.0) -> list[dict[str, Any]]:
        """Every object of ``kind`` in the cluster, as plain dicts.

        Retries while the API server says it is busy: right after a CRD is installed, listing
        its objects answers 429 "storage is (re)initializing" for a moment.
        """
        deadline = time.monotonic() + patience
        while True:
            try:
                listing = cast(
                    dict[str, Any],
                    await self.custom.list_cluster_custom_object(GROUP, VERSION, kind.plural),
                )
                items: list[dict[str, Any]] = listing.get("items", [])
                return items
            except client.ApiException as error:
                if error.status not in (429, 500, 503) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.5)
