"""The gatehouse.dev resources, their status and Events, and the webhook configuration, as the
operator reads and writes them itself (kopf does the watching)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import time
from typing import Any, cast

from kubernetes.aio import client

from gatehouse_operator.api.meta import GROUP, VERSION, Kind
from gatehouse_operator.kube.calls import KubeCalls, read
from gatehouse_operator.kube.errors import Conflict, NotFound, Unavailable


class Resources:
    """The gatehouse.dev resources, their status and Events, and the webhook configuration."""

    def __init__(self, calls: KubeCalls) -> None:
        self.namespaces = calls.namespaces
        self.core, self.custom, self.admission = calls.core, calls.custom, calls.admission

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

    async def webhook_configuration_owner(self, name: str) -> client.V1OwnerReference:
        """An owner reference to the ValidatingWebhookConfiguration ``name``."""
        found = await self.admission.read_validating_webhook_configuration(name)
        return client.V1OwnerReference(
            api_version="admissionregistration.k8s.io/v1",
            kind="ValidatingWebhookConfiguration",
            name=name,
            uid=str(found.metadata.uid if found.metadata else ""),
        )

    async def annotate(
        self, kind: Kind, namespace: str, name: str, key: str, value: str | None
    ) -> None:
        """Sets one annotation, or removes it (None); an object deleted meanwhile is left be."""
        with contextlib.suppress(NotFound):
            await self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                kind.plural,
                name,
                {"metadata": {"annotations": {key: value}}},
                _content_type="application/merge-patch+json",
            )

    async def get_custom(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found = await read(
                lambda: self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, kind.plural, name
                )
            )
        except NotFound:
            return None
        return cast(dict[str, Any], found)

    async def list_custom(self, kind: Kind, namespace: str) -> list[dict[str, Any]]:
        listing = cast(
            dict[str, Any],
            await read(
                lambda: self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, kind.plural
                )
            ),
        )
        items: list[dict[str, Any]] = listing.get("items", [])
        return items

    async def delete_custom(self, kind: Kind, namespace: str, name: str) -> None:
        with contextlib.suppress(NotFound):
            await self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, kind.plural, name
            )

    async def delete_as_read(self, kind: Kind, body: dict[str, Any]) -> bool:
        """Deletes the object as read (its uid and resourceVersion as preconditions): False when
        it is gone or changed since, so of two callers that read it only one deletes it."""
        meta = body["metadata"]
        preconditions = client.V1Preconditions(
            uid=meta["uid"], resource_version=meta["resourceVersion"]
        )
        try:
            await self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                meta["namespace"],
                kind.plural,
                meta["name"],
                body=client.V1DeleteOptions(preconditions=preconditions),
            )
        except (NotFound, Conflict):
            return False
        return True

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
        with contextlib.suppress(NotFound):  # deleted meanwhile: nothing left to report on
            await self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, kind.plural, name, {"status": status}
            )

    async def existing(self, kind: Kind, patience: float = 30.0) -> list[dict[str, Any]]:
        """Every object of ``kind`` in the watched namespaces, as plain dicts.

        Retries while the API server says it is busy: right after a CRD is installed, listing
        its objects answers 429 "storage is (re)initializing" for a moment.
        """
        deadline = time.monotonic() + patience
        while True:
            try:
                listings = (
                    [await self.custom.list_cluster_custom_object(GROUP, VERSION, kind.plural)]
                    if not self.namespaces
                    else [
                        await self.custom.list_namespaced_custom_object(
                            GROUP, VERSION, namespace, kind.plural
                        )
                        for namespace in self.namespaces
                    ]
                )
                return [
                    item
                    for listing in cast(list[dict[str, Any]], listings)
                    for item in listing.get("items", [])
                ]
            except Unavailable as error:
                if error.status not in (429, 500, 503) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.5)
