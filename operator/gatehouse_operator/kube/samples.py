"""A connection's saved samples (ConnectionSamples): listed, written and deleted. How many a
connection keeps, and saves taking turns, are the use case's (connections.sample_saving)."""

from __future__ import annotations

from typing import Any

from kubernetes.aio import client

from gatehouse_operator.api.connection_sample import CONNECTION_SAMPLE
from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.kube.calls import KubeCalls, owner_reference
from gatehouse_operator.kube.errors import Conflict, NotFound
from gatehouse_operator.kube.resources import Resources


class Samples:
    """The ConnectionSamples of a namespace, by the connection they belong to."""

    def __init__(self, calls: KubeCalls, resources: Resources) -> None:
        self.custom, self.resources = calls.custom, resources

    async def saved(self, namespace: str, connection: str) -> dict[str, dict[str, Any]]:
        """The connection's saved samples: each ConnectionSample's name to its spec.

        The namespace's samples, filtered here: a label would carry the connection's name, and
        names may be longer than a label value's 63 characters.
        """
        return {
            item["metadata"]["name"]: item["spec"]
            for item in await self.resources.list_custom(CONNECTION_SAMPLE, namespace)
            if item.get("spec", {}).get("connection") == connection
        }

    async def create(
        self, namespace: str, owner: dict[str, Any], name: str, spec: dict[str, Any]
    ) -> bool:
        """Writes the ConnectionSample ``name`` (owned by the connection, deleted with it);
        False when the name is taken."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": CONNECTION_SAMPLE.kind,
            "metadata": {
                "name": name,
                "ownerReferences": [
                    self.custom.api_client.sanitize_for_serialization(owner_reference(owner))
                ],
            },
            "spec": spec,
        }
        try:
            await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, CONNECTION_SAMPLE.plural, body
            )
        except Conflict:
            return False
        return True

    async def delete(self, namespace: str, connection: str, name: str) -> bool:
        """Deletes the connection's sample ``name``; False when it has no such sample."""
        found = await self.resources.get_custom(CONNECTION_SAMPLE, namespace, name)
        if found is None or found.get("spec", {}).get("connection") != connection:
            return False
        # The uid precondition: never a same-named sample saved after this read.
        try:
            await self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                CONNECTION_SAMPLE.plural,
                name,
                body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(uid=found["metadata"]["uid"])
                ),
            )
        except (NotFound, Conflict):
            return False
        return True
