"""A connection's saved samples (ConnectionSamples): listed, saved within the sample limit, one
save a connection at a time in this process, and deleted."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes.aio import client

from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.connection_sample import CONNECTION_SAMPLE
from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.kube.calls import owner_reference
from gatehouse_operator.kube.resources import Resources


class SampleRefused(Exception):
    """The sample cannot be saved: ``reason`` is the SampleSaved condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Samples(Resources):
    async def samples(self, namespace: str, connection: str) -> dict[str, dict[str, Any]]:
        """The connection's saved samples: each ConnectionSample's name to its spec.

        The namespace's samples, filtered here: a label would carry the connection's name, and
        names may be longer than a label value's 63 characters.
        """
        return {
            item["metadata"]["name"]: item["spec"]
            for item in await self.list_custom(CONNECTION_SAMPLE, namespace)
            if item.get("spec", {}).get("connection") == connection
        }

    async def save_sample(
        self, namespace: str, owner: dict[str, Any], name: str, spec: dict[str, Any], limit: int
    ) -> None:
        """Writes the ConnectionSample ``name`` (owned by the connection, deleted with it).

        Saves for one connection take turns in this process, so twenty tests finishing together
        cannot all pass the count before any is written; only the elected operator saves.
        Saving a sample that exists already is done.
        """
        connection = owner["name"]
        key = (namespace, connection)
        writer = self._sample_writers.get(key) or self._sample_writers.setdefault(
            key, asyncio.Lock()
        )
        async with writer:
            saved = await self.samples(namespace, connection)
            if name in saved:
                return
            if len(saved) >= limit:
                raise SampleRefused(
                    Reason.SAMPLE_LIMIT_REACHED,
                    f"the connection keeps at most {limit} samples; delete one "
                    f"(kubectl delete {CONNECTION_SAMPLE.singular} NAME) to save another",
                )
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
            except client.ApiException as error:
                if error.status != 409:
                    raise
                raise SampleRefused(
                    Reason.SAMPLE_EXISTS,
                    f"another connection's sample is named {name!r}: delete it or run the test "
                    "again under another name",
                ) from None

    async def delete_sample(self, namespace: str, connection: str, name: str) -> bool:
        """Deletes the connection's sample ``name``; False when it has no such sample."""
        found = await self.get_custom(CONNECTION_SAMPLE, namespace, name)
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
        except client.ApiException as error:
            if error.status not in (404, 409):
                raise
            return False
        return True
