"""A vendor's pause on a connection, told once as an Event on the ExternalConnection.

A replica that sees an upstream's 429 or 503 with Retry-After pauses the connection for the whole
fleet (in the shared store) and tells the operator on the table channel. Every replica that sees
the same answer tells it too, and a busy connection may hear it again as soon as the pause ends:
so one Event per pause, not one per replica or per request, and none while a pause already told
covers the new one.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time

from gatehouse_contract.frames import Throttled
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.kube import API_ERRORS, Resources, failure
from gatehouse_operator.table.store import RouteStore

log = logging.getLogger("gatehouse.operator")
REASON = "Throttled"
# The same pause told by several replicas ends within this much of itself.
_SAME_PAUSE_SECONDS = 2.0


class Throttles:
    def __init__(self, routes: RouteStore, resources: Resources | None) -> None:
        self.routes = routes
        # None: heard, and told to nobody (a channel without a cluster).
        self.resources = resources
        self._told_until: dict[str, float] = {}  # connection key -> time.time()
        self._tasks: set[asyncio.Task[None]] = set()

    def heard(self, said: Throttled) -> None:
        until = time.time() + said.seconds
        if until <= self._told_until.get(said.connection, 0.0) + _SAME_PAUSE_SECONDS:
            return
        route = self.routes.connection(said.connection)
        if route is None or self.resources is None:
            return
        self._told_until[said.connection] = until
        # Bounded: one entry per connection that was ever paused; ended pauses go.
        now = time.time()
        self._told_until = {key: end for key, end in self._told_until.items() if end > now}
        namespace, _, name = said.connection.partition("/")
        meta = {"namespace": namespace, "name": name, "uid": route.uid}
        ends = datetime.datetime.fromtimestamp(until, datetime.UTC).strftime("%H:%M:%S UTC")
        message = (
            f"the API answered {said.status} with Retry-After {said.seconds:g}s: no proxy "
            f"replica calls it until {ends}; apps get 429 rate_limited with the time left"
        )
        task = asyncio.create_task(self._post(meta, message), name="throttled-event")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, meta: dict[str, str], message: str) -> None:
        assert self.resources is not None
        try:
            await self.resources.post_event(EXTERNAL_CONNECTION, meta, "Warning", REASON, message)
        except API_ERRORS as error:
            log.warning("cannot post the Throttled Event on %s (%s)", meta["name"], failure(error))
