"""What replicas tell of a connection's upstream, kept for the page and told once as an Event on
the ExternalConnection: a vendor's pause (``Throttled``), and a credential whose 401s renewed its
token as often as it may (``RenewalsBounded``).

A replica that sees an upstream's 429 or 503 with Retry-After pauses the endpoint it came on, or
the whole connection (the credential's limit), for the whole fleet (in the shared store) and
tells the operator on the table channel. Every replica that sees the same answer tells it too,
and a busy connection may hear it again as soon as the pause ends: so one Event per pause, not
one per replica or per request, and none while a pause already told covers the new one. The
pauses heard are kept until they end (what the connection's page shows as paused), at most
``MAX_PAUSES_SHOWN`` per connection.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from dataclasses import dataclass

from gatehouse_contract.frames import PauseScope, RenewalsBounded, Throttled
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.kube import API_ERRORS, Resources, failure
from gatehouse_operator.table.store import RouteStore

log = logging.getLogger("gatehouse.operator")
REASON = "Throttled"
RENEWALS_REASON = "TokenRenewalsBounded"
# The same pause told by several replicas ends within this much of itself.
_SAME_PAUSE_SECONDS = 2.0
# The pauses of one connection kept (the proxies pause at most 64 endpoints, then the whole).
MAX_PAUSES_SHOWN = 65


@dataclass(frozen=True)
class Pause:
    """A vendor's pause the fleet keeps: of the whole connection, or of one endpoint."""

    scope: PauseScope
    endpoint: str  # the endpoint the answer came on ("" from a replica of an earlier release)
    status: int
    seconds: float
    until: float  # time.time()

    @property
    def what(self) -> str:
        if self.scope == "endpoint":
            return f"{self.endpoint} only"
        return "the whole connection (the credential's limit)"

    @property
    def ends(self) -> str:
        return _clock(self.until)


class Throttles:
    def __init__(self, routes: RouteStore, resources: Resources | None) -> None:
        self.routes = routes
        # None: heard, and told to nobody (a channel without a cluster).
        self.resources = resources
        # connection key -> what is paused ("" the whole connection, else the endpoint) -> pause
        self._paused: dict[str, dict[str, Pause]] = {}
        self._bounds_told: dict[str, float] = {}  # connection key -> when the bound ends
        self._tasks: set[asyncio.Task[None]] = set()

    def paused(self, connection: str) -> list[Pause]:
        """What is paused on the connection now, the whole connection first, then by when each
        pause ends."""
        now = time.time()
        live = [pause for pause in self._paused.get(connection, {}).values() if pause.until > now]
        return sorted(live, key=lambda pause: (pause.scope == "endpoint", pause.until))

    def heard(self, said: Throttled) -> None:
        until = time.time() + said.seconds
        which = said.endpoint if said.scope == "endpoint" else ""
        known = self._paused.get(said.connection, {}).get(which)
        if known is not None and until <= known.until + _SAME_PAUSE_SECONDS:
            return
        route = self.routes.connection(said.connection)
        if route is None or self.resources is None:
            return
        pause = Pause(said.scope, said.endpoint, said.status, said.seconds, until)
        self._keep(said.connection, which, pause)
        where = f" on {said.endpoint}" if said.endpoint else ""
        if said.scope == "endpoint":
            message = (
                f"the API answered {said.status} with Retry-After {said.seconds:g}s{where}: no "
                f"proxy replica calls {said.endpoint} until {pause.ends}; apps get 429 "
                "rate_limited there with the time left, and the connection's other paths are "
                "not paused (limits.credentialLimit says which answers pause it all)"
            )
        else:
            message = (
                f"the API answered {said.status} with Retry-After {said.seconds:g}s{where}, the "
                f"credential's limit: no proxy replica calls this connection until {pause.ends}; "
                "apps get 429 rate_limited with the time left"
            )
        self._tell(said.connection, route.uid, REASON, message)

    def bounded(self, said: RenewalsBounded) -> None:
        now = time.time()
        if self._bounds_told.get(said.connection, 0.0) > now:
            return
        route = self.routes.connection(said.connection)
        if route is None or self.resources is None:
            return
        self._bounds_told = {key: end for key, end in self._bounds_told.items() if end > now}
        self._bounds_told[said.connection] = now + said.seconds
        message = (
            f"the API's 401s renewed this connection's token {said.renewals} times within a "
            f"minute, the most it may: until {_clock(now + said.seconds)} the proxies relay a 401 "
            "as the API sent it and keep the token. Check the paths apps call and the client's "
            "scopes (gatehouse_proxy_token_renewals_total says which app's 401s they were)"
        )
        self._tell(said.connection, route.uid, RENEWALS_REASON, message)

    def _keep(self, connection: str, which: str, pause: Pause) -> None:
        """Bounded: the connections with a live pause, each with at most MAX_PAUSES_SHOWN
        (those ending first go)."""
        now = time.time()
        self._paused = {
            key: live
            for key, kept in self._paused.items()
            if (live := {name: held for name, held in kept.items() if held.until > now})
        }
        kept = self._paused.setdefault(connection, {})
        kept[which] = pause
        while len(kept) > MAX_PAUSES_SHOWN:
            del kept[min(kept, key=lambda name: kept[name].until)]

    def _tell(self, connection: str, uid: str, reason: str, message: str) -> None:
        namespace, _, name = connection.partition("/")
        meta = {"namespace": namespace, "name": name, "uid": uid}
        task = asyncio.create_task(self._post(meta, reason, message), name="connection-event")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, meta: dict[str, str], reason: str, message: str) -> None:
        assert self.resources is not None
        try:
            await self.resources.post_event(EXTERNAL_CONNECTION, meta, "Warning", reason, message)
        except API_ERRORS as error:
            log.warning("cannot post the %s Event on %s (%s)", reason, meta["name"], failure(error))


def _clock(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.UTC).strftime("%H:%M:%S UTC")
