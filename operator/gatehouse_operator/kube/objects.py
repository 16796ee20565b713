"""The typed ``api.resource.Resource`` of an object as kopf or the Kubernetes client hands it
over: a plain mapping, read here once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gatehouse_operator.api.cache_purge import CACHE_PURGED_AT, MAX_PURGE_CHARS
from gatehouse_operator.api.resource import Resource


def resource_of(body: Mapping[str, Any]) -> Resource:
    """``body``: kopf's Body, or an object the client listed."""
    meta = body["metadata"]
    return Resource(
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta.get("uid") or "",
        generation=int(meta.get("generation", 0)),
        creation_timestamp=meta.get("creationTimestamp") or "",
        spec=body.get("spec") or {},
        status=body.get("status") or {},
        cache_purged_at=(meta.get("annotations") or {}).get(CACHE_PURGED_AT, "")[
            : MAX_PURGE_CHARS + 1
        ],
    )
