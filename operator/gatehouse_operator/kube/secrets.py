"""Secrets and ConfigMaps, read and written by the operator itself: the ones it is told of, and
the labels of those its watch sees."""

from __future__ import annotations

import base64

from kubernetes.aio import client

from gatehouse_operator.kube.calls import KubeCalls
from gatehouse_operator.kube.errors import Conflict, NotFound

# The operator watches only Secrets labelled so (a server-side selector): every other Secret in
# the cluster, Helm's release manifests included, never crosses its watch.
WATCHED_LABEL = "gatehouse.dev/credential"
WATCHED_SELECTOR = f"{WATCHED_LABEL}=true"


def watched(secret: client.V1Secret) -> bool:
    """Whether the Secret is on the operator's watch."""
    labels = (secret.metadata.labels if secret.metadata else None) or {}
    return labels.get(WATCHED_LABEL) == "true"


def decoded(data: dict[str, bytes | str] | None) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in (data or {}).items()}


class Secrets:
    """Secrets and ConfigMaps, by namespace and name."""

    def __init__(self, calls: KubeCalls) -> None:
        self.core = calls.core

    async def secret(self, namespace: str, name: str) -> client.V1Secret | None:
        try:
            found: client.V1Secret = await self.core.read_namespaced_secret(name, namespace)
        except NotFound:
            return None
        return found

    async def secret_data(self, namespace: str, name: str) -> dict[str, bytes] | None:
        secret = await self.secret(namespace, name)
        return None if secret is None else decoded(secret.data)

    async def watched_secret(
        self, namespace: str, name: str
    ) -> tuple[dict[str, bytes] | None, bool]:
        """A Secret's data (None: there is no such Secret) and whether the operator's watch
        sees it."""
        secret = await self.secret(namespace, name)
        if secret is None:
            return None, False
        return decoded(secret.data), watched(secret)

    async def create_secret_if_absent(
        self,
        namespace: str,
        name: str,
        string_data: dict[str, str],
        *,
        type_: str = "Opaque",
        owner: client.V1OwnerReference | None = None,
    ) -> bool:
        """Creates the Secret unless it exists; False when it does. Replicas race to make the
        same Secret (a rollout overlaps): a 409 means another one made it, and theirs stands."""
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=name,
                labels={"app.kubernetes.io/managed-by": "gatehouse-operator"},
                owner_references=[owner] if owner else None,
            ),
            type=type_,
            string_data=string_data,
        )
        try:
            await self.core.create_namespaced_secret(namespace, body)
        except Conflict:
            return False
        return True

    async def config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            found = await self.core.read_namespaced_config_map(name, namespace)
        except NotFound:
            return None
        return dict(found.data or {})

    async def publish_config_map(self, namespace: str, name: str, data: dict[str, str]) -> bool:
        """Makes the ConfigMap (the chart's) hold ``data``; True when it had to be written."""
        current = await self.config_map_data(namespace, name)
        if current is None:
            raise LookupError(
                f"ConfigMap {namespace}/{name} does not exist: the chart makes it (helm upgrade "
                "puts it back)"
            )
        if current == data:
            return False
        await self.core.patch_namespaced_config_map(name, namespace, {"data": data})
        return True
