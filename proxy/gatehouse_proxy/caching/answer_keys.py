"""What names a cached answer: a digest of everything that decides what the vendor answers.

- the connection as the vendor sees it: its uid, origin, own headers and credential (any change to
  them is a new generation of answers: a rotated key may be another account's), and the purge
  epoch an admin moves;
- whose answer it is: the app's (``scope: app``, the default) or every linked app's, and the
  viewer's where the request names one (a credential that is the viewer's own, or their identity
  sent upstream): never shared between viewers;
- the request: its path as sent upstream and its query as the app wrote it.

The store sees only the digest. Headers the answer varies on are not part of it: the answer keeps
the values it was made with, and a request with others misses (one variant per key).
"""

from __future__ import annotations

import hashlib

from gatehouse_contract.routes import ConnectionRoute

# The routes' parts a worker keeps at most (a table's connections, with room for churn).
MOST_ROUTES = 4096


class AnswerKeys:
    """The digests, with each route's own part made once per route (not per request): one
    entry per connection the worker has routed lately, replaced when its route changes."""

    def __init__(self) -> None:
        self._routes: dict[str, tuple[ConnectionRoute, bytes]] = {}

    def digest(
        self, connection: ConnectionRoute, app_uid: str, viewer: str, path: str, query: bytes
    ) -> str:
        made = self._routes.get(connection.key)
        if made is None or made[0] is not connection:
            if len(self._routes) >= MOST_ROUTES:
                self._routes.clear()  # connections come and go: start again, made as asked
            made = (connection, _route_part(connection))
            self._routes[connection.key] = made
        policy = connection.cache
        whose = app_uid if policy is None or policy.scope == "app" else ""
        digest = hashlib.sha256(made[1])
        for part in (whose, viewer, path):
            encoded = part.encode()
            digest.update(len(encoded).to_bytes(4, "big") + encoded)
        digest.update(len(query).to_bytes(4, "big") + query)
        return digest.hexdigest()[:40]


def _route_part(connection: ConnectionRoute) -> bytes:
    epoch = connection.cache.epoch if connection.cache is not None else ""
    seen = (
        connection.uid,
        epoch,
        connection.origin,
        repr(connection.headers),
        connection.credential.model_dump_json(),
    )
    return hashlib.sha256("\0".join(seen).encode()).digest()
