"""A resource as a watch or a listing handed it over: what the operator reads of its metadata,
and its spec and status as stored.

Built once where kopf's body (or the client's listing) enters (``kube.objects.resource_of``) and
passed on to the controllers, the status writer, the route store and the rollout. The route store
keeps one for each of up to 20,000 connections and apps, so it holds only what is read later
(not kopf's annotations, labels or managedFields), in a slots dataclass rather than a model.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from gatehouse_operator.api.stored import StoredStatus


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    namespace: str
    uid: str  # "" only for an object never stored (the API server gives every object one)
    generation: int
    creation_timestamp: str
    # The spec as stored: each controller parses it with its kind's strict model, and reports
    # one it refuses (InvalidSpec), which therefore cannot be refused here.
    spec: dict[str, JsonValue]
    # The status as stored, as JSON: the status writer compares what it would write with it
    # exactly (an unchanged status is not written again), which a parsed model would not allow.
    status: dict[str, JsonValue]
    # A connection's annotation gatehouse.dev/cache-purged-at (api.cache_purge), as set, cut to
    # one character past its bound (too long is still told); "" when unset.
    cache_purged_at: str = ""

    @property
    def key(self) -> str:
        """namespace/name: how the table names a connection."""
        return f"{self.namespace}/{self.name}"

    def stored_status(self) -> StoredStatus:
        """The stored status's conditions, read leniently."""
        return StoredStatus.model_validate(self.status)

    def reference(self) -> dict[str, str | None]:
        """The metadata an Event's involvedObject names it by (no uid: left out)."""
        return {"name": self.name, "namespace": self.namespace, "uid": self.uid or None}
