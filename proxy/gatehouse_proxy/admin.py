"""The admin port: readiness and metrics, on a port of their own that apps are not given: both
describe every tenant's routes and traffic.

``/readyz`` answers 503 until the first routing table is installed, then describes it, the
table channel's state, the shared store as this worker sees it and what the inspector holds.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gatehouse_proxy.observation import metrics
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.store.shared_store import SharedStore
from gatehouse_proxy.store.shares import Shares
from gatehouse_proxy.table.feed import FeedState, TableStore


def describe_store(store: SharedStore | None, shares: Shares) -> dict[str, object]:
    """The shared store as this worker sees it: a worker that counts alone says so, and why."""
    if store is None:
        return {"configured": False, "counting": "alone"}
    return {
        "configured": True,
        "counting": "shared" if store.up else "alone",
        **store.describe(),
        # Namespaces whose writes the store refused lately: theirs alone are kept by each
        # worker (their share is full, or the store is).
        "sharesFull": shares.describe(),
    }


def create_admin_app(
    table: TableStore,
    feed: FeedState,
    activity: Activity,
    store: Callable[[], dict[str, object]],
) -> Starlette:
    """``store``: the shared store's description (:func:`describe_store`), asked per probe (the
    store is opened with the app's lifespan)."""

    async def readyz(request: Request) -> Response:
        current = table.current
        described = feed.describe()
        if current is None:
            return JSONResponse(
                {"ready": False, "reason": "no routing table yet", "feed": described},
                status_code=503,
            )
        # A key rotation may drop the old key once every replica's table is signed with the new
        # key and encrypts nothing with the old one. The last verified table keeps being served
        # while the feed is down; the feed's state says so.
        encrypted_with = sorted(current.keyring_key_ids)
        return JSONResponse(
            {
                "ready": True,
                "tableVersion": current.version,
                "connections": len(current.connections),
                "apps": len(current.apps),
                "tableAgeSeconds": round(table.age(), 1),
                "signedWith": current.key_id,
                # The keyring keys the table's credentials are encrypted with.
                "encryptedWith": encrypted_with,
                # Deprecated alias of encryptedWith for probes written before 0.2.0; goes in 0.3.0.
                "sealedWith": encrypted_with,
                "feed": described,
                "store": store(),
                "activity": {
                    "recentRequests": len(activity.recent),
                    "usageRows": activity.usage.rows,
                    "usageDropped": activity.usage.dropped,
                },
            }
        )

    return Starlette(routes=[Route("/readyz", readyz), Route("/metrics", metrics.endpoint)])
