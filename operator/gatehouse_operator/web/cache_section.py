"""The connection page's "Cache" (``spec.cache``): its settings in human units, when its cached
answers were last purged, and for those who may manage the connection (update on it) the button
that purges them (connections.cache_purging decides, as for the service API and the CLI)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from gatehouse_operator.api.connection import CacheSettings
from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.connections.cache_purging import purge_cache
from gatehouse_operator.connections.models import ConnectionDetail
from gatehouse_operator.web.grants_section import BackTo
from gatehouse_operator.web.guards import Visitor
from gatehouse_operator.web.rendering import duration, size

_SCOPES = {
    "app": "each app its own answers",
    "connection": "shared between the apps linked to it",
}


@dataclass(frozen=True)
class CacheView:
    rows: list[tuple[str, str]]
    purged_at: str  # "" never
    can_purge: bool
    error: str = ""


def cache_view(detail: ConnectionDetail) -> CacheView | None:
    """The section, for a connection that caches (None for one that does not)."""
    if detail.cache is None:
        return None
    purged_at, can_purge = detail.cache_purged_at, detail.can_manage
    try:
        cache = CacheSettings.model_validate(detail.cache)
    except ValidationError:
        return CacheView([], purged_at, can_purge, "not valid: see the connection's Accepted")
    rows = [
        ("Fresh for", f"{duration(cache.ttl_seconds)} unless the API says otherwise"),
        ("At most", duration(cache.max_ttl_seconds)),
        ("Largest answer kept", size(cache.max_body_bytes)),
        ("Whose answers", _SCOPES[cache.scope] + "; a viewer's own credential's, theirs alone"),
        ("Stale while revalidating", _window(cache.stale_while_revalidate_seconds)),
        ("Stale if the API fails", _window(cache.stale_if_error_seconds)),
    ]
    return CacheView(rows, purged_at, can_purge)


def _window(seconds: int) -> str:
    return duration(seconds) if seconds else "off"


class CacheSection:
    def __init__(self, connections: Connections, back_to: BackTo) -> None:
        self.connections = connections
        self.back_to = back_to

    async def purge(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        purged = await purge_cache(self.connections, visitor.user, namespace, name)
        notice = f"Purged: answers cached before {purged.purged_at} are never served again."
        return self.back_to(visitor, namespace, name, notice)
