"""The few Kubernetes API calls the operator makes itself (kopf does the watching)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar, cast

from kubernetes.aio import client

from gatehouse_operator.api.meta import GROUP, VERSION, Kind

T = TypeVar("T")

CREDENTIAL_LABEL = "gatehouse.dev/credential-for"
SAMPLES_LABEL = "gatehouse.dev/samples-for"
TOKEN_KEY = "token"  # noqa: S105 (the key name within the Secret)


class SampleLimitReached(Exception):
    """The connection already keeps as many samples as allowed."""


def samples_config_map(connection: str) -> str:
    return f"{connection}-gatehouse-samples"


def _owner(owner: dict[str, Any]) -> client.V1OwnerReference:
    return client.V1OwnerReference(
        api_version=f"{GROUP}/{VERSION}",
        kind=owner["kind"],
        name=owner["name"],
        uid=owner["uid"],
        controller=True,
        block_owner_deletion=True,
    )


def _decoded(data: dict[str, bytes | str] | None) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in (data or {}).items()}


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.admission = client.AdmissionregistrationV1Api(api)
        self._sample_writers: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def post_event(
        self, kind: Kind, meta: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        """An Event on a resource, as ``kubectl describe`` and ``get events`` show them.

        Posted directly rather than through kopf's queue, which only handlers can reach: the
        rollout writes statuses from a task of its own.
        """
        stamp = datetime.datetime.now(datetime.UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                generate_name=f"{meta['name'][:200]}.", namespace=meta["namespace"]
            ),
            involved_object=client.V1ObjectReference(
                api_version=f"{GROUP}/{VERSION}",
                kind=kind.kind,
                name=meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            source=client.V1EventSource(component="gatehouse-operator"),
            first_timestamp=stamp,
            last_timestamp=stamp,
            count=1,
            reporting_component="gatehouse.dev/operator",
            reporting_instance=os.environ.get("POD_NAME", "gatehouse-operator")[:128],
        )
        await self.core.create_namespaced_event(meta["namespace"], event)

    async def secret(self, namespace: str, name: str) -> client.V1Secret | None:
        try:
            found: client.V1Secret = await self.core.read_namespaced_secret(name, namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    async def secret_data(self, namespace: str, name: str) -> dict[str, bytes] | None:
        secret = await self.secret(namespace, name)
        return None if secret is None else _decoded(secret.data)

    async def create_secret(self, namespace: str, name: str, string_data: dict[str, str]) -> None:
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=name, labels={"app.kubernetes.io/managed-by": "gatehouse-operator"}
            ),
            type="Opaque",
            string_data=string_data,
        )
        await self.core.create_namespaced_secret(namespace, body)

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
                owner_references=[_owner(owner)],
            ),
            type="Opaque",
            string_data={TOKEN_KEY: token},
        )
        if existing is None:
            await self.core.create_namespaced_secret(namespace, body)
        else:
            await self.core.replace_namespaced_secret(secret_name, namespace, body)
        return token

    async def samples(self, namespace: str, connection: str) -> dict[str, str]:
        """The connection's saved samples: id to JSON document."""
        try:
            found = await self.core.read_namespaced_config_map(
                samples_config_map(connection), namespace
            )
        except client.ApiException as error:
            if error.status == 404:
                return {}
            raise
        return dict(found.data or {})

    async def save_sample(
        self, namespace: str, owner: dict[str, Any], sample_id: str, document: str, limit: int
    ) -> None:
        """Adds a sample to the connection's ConfigMap (owned by the connection).

        Saves to one ConfigMap take turns in this process (twenty tests finishing together would
        otherwise outrun any number of retries); the ConfigMap's resourceVersion still guards the
        limit against another writer, and the loser of such a race reads again and retries.
        """
        await self._samples_turn(
            namespace,
            owner["name"],
            partial(self._save_sample_once, namespace, owner, sample_id, document, limit),
        )

    async def _samples_turn(
        self, namespace: str, connection: str, change: Callable[[], Awaitable[T]]
    ) -> T:
        """``change`` of the connection's samples ConfigMap, in this process's turn for it,
        again after a conflict (another writer's update came between its read and its write)."""
        key = (namespace, connection)
        writer = self._sample_writers.get(key) or self._sample_writers.setdefault(
            key, asyncio.Lock()
        )
        for _ in range(5):
            try:
                async with writer:
                    return await change()
            except client.ApiException as error:
                if error.status != 409:
                    raise
        raise RuntimeError(f"the samples of {connection} kept changing; try again")

    async def _save_sample_once(
        self, namespace: str, owner: dict[str, Any], sample_id: str, document: str, limit: int
    ) -> None:
        name = samples_config_map(owner["name"])
        try:
            found = await self.core.read_namespaced_config_map(name, namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise
            found = None
        data = dict(found.data or {}) if found is not None else {}
        version = found.metadata.resource_version if found is not None and found.metadata else None
        if sample_id not in data and len(data) >= limit:
            raise SampleLimitReached(
                f"the connection keeps at most {limit} samples; delete one from ConfigMap "
                f"{name} to save another"
            )
        data[sample_id] = document
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name=name,
                labels={SAMPLES_LABEL: owner["name"]},
                owner_references=[_owner(owner)],
                resource_version=version,
            ),
            data=data,
        )
        if found is None:
            await self.core.create_namespaced_config_map(namespace, body)
        else:
            await self.core.replace_namespaced_config_map(name, namespace, body)

    async def annotate(
        self, kind: Kind, namespace: str, name: str, key: str, value: str | None
    ) -> None:
        """Sets one annotation, or removes it (None); an object deleted meanwhile is left be."""
        try:
            await self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                kind.plural,
                name,
                {"metadata": {"annotations": {key: value}}},
                _content_type="application/merge-patch+json",
            )
        except client.ApiException as error:
            if error.status != 404:
                raise

    async def delete_sample(self, namespace: str, connection: str, sample_id: str) -> bool:
        """Removes one sample; False when there was no such sample.

        A read and an update that carries the read's resourceVersion, as saving does: the
        installation grants the operator get, create and update on ConfigMaps, not patch.
        """
        delete = partial(self._delete_sample_once, namespace, connection, sample_id)
        return await self._samples_turn(namespace, connection, delete)

    async def _delete_sample_once(self, namespace: str, connection: str, sample_id: str) -> bool:
        name = samples_config_map(connection)
        try:
            found = await self.core.read_namespaced_config_map(name, namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise
            return False
        if not found.data or sample_id not in found.data:
            return False
        del found.data[sample_id]
        try:
            await self.core.replace_namespaced_config_map(name, namespace, found)
        except client.ApiException as error:
            if error.status != 404:  # gone with its connection meanwhile
                raise
        return True

    async def get_custom(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, kind.plural, name
            )
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return cast(dict[str, Any], found)

    async def list_custom(self, kind: Kind, namespace: str) -> list[dict[str, Any]]:
        listing = cast(
            dict[str, Any],
            await self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, kind.plural),
        )
        items: list[dict[str, Any]] = listing.get("items", [])
        return items

    async def delete_custom(self, kind: Kind, namespace: str, name: str) -> None:
        try:
            await self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, kind.plural, name
            )
        except client.ApiException as error:
            if error.status != 404:
                raise

    async def delete_secret(self, namespace: str, name: str) -> None:
        try:
            await self.core.delete_namespaced_secret(name, namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise

    async def set_webhook_ca(self, configuration: str, ca_bundle: str) -> None:
        """Writes ``ca_bundle`` into every webhook of the ValidatingWebhookConfiguration.

        A strategic merge keyed by webhook name touches caBundle alone, and a PATCH never
        creates: a configuration uninstalled meanwhile stays gone.
        """
        live = await self.admission.read_validating_webhook_configuration(configuration)
        patch = {
            "webhooks": [
                {"name": webhook.name, "clientConfig": {"caBundle": ca_bundle}}
                for webhook in live.webhooks or []
            ]
        }
        await self.admission.patch_validating_webhook_configuration(
            configuration, patch, _content_type="application/strategic-merge-patch+json"
        )

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
