"""Purging a connection's cached answers, for those who may manage it (update on it): the
annotation gatehouse.dev/cache-purged-at set to now, with the operator's identity once the
caller may. The controller makes it the cache's epoch on the route (api.cache_purge), so every
replica stops serving the answers cached before it as soon as it holds the new table."""

from __future__ import annotations

import datetime

from gatehouse_operator.access.reviews import User
from gatehouse_operator.api.cache_purge import CACHE_PURGED_AT, purge_time
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.connections.models import CachePurged


async def purge_cache(
    connections: Connections, user: User, namespace: str, name: str
) -> CachePurged:
    found, can_manage = await connections.visible(user, namespace, name)
    if not can_manage:
        raise Refused(
            403,
            "forbidden",
            f"{user.name} may not update externalconnections/{name} in namespace {namespace}: "
            "purging its cache is the connection's managers'",
        )
    if found.spec.cache is None:
        raise Refused(409, "conflict", f"connection {name} caches nothing (no spec.cache)")
    purged_at = purge_time(datetime.datetime.now(datetime.UTC))
    await connections.runtime.kube.resources.annotate(
        EXTERNAL_CONNECTION, namespace, name, CACHE_PURGED_AT, purged_at
    )
    return CachePurged(purged_at=purged_at)
