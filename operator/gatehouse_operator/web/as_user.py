"""The Kubernetes API as the signed-in user: the page's changes are theirs, not the operator's.

A client with the operator's API server address and CA, and only the user's bearer token (never
the operator's certificate or token), so RBAC and the admission webhooks see the user.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from kubernetes.aio import client

from gatehouse_operator.api.meta import GROUP, VERSION, Kind


class AsUser:
    def __init__(self, api: client.CustomObjectsApi) -> None:
        self.custom = api

    async def get_custom(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        found = await self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, kind.plural, name
        )
        return cast(dict[str, Any], found)

    async def replace_custom(self, kind: Kind, namespace: str, body: dict[str, Any]) -> None:
        """Replaces with the read resourceVersion: a change made meanwhile is a 409, not lost."""
        await self.custom.replace_namespaced_custom_object(
            GROUP, VERSION, namespace, kind.plural, body["metadata"]["name"], body
        )


@asynccontextmanager
async def as_user(operator: client.ApiClient, token: str) -> AsyncIterator[AsUser]:
    own = operator.configuration
    configuration = client.Configuration(host=own.host)
    configuration.ssl_ca_cert = own.ssl_ca_cert
    configuration.verify_ssl = own.verify_ssl
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    api = client.ApiClient(configuration)
    try:
        yield AsUser(client.CustomObjectsApi(api))
    finally:
        await api.close()  # type: ignore[no-untyped-call]
