"""One fetch, as the door makes it and the steps fill it in: the value every observer is given.

Made once per request at the door (the app's method, the path under the alias, the query, the
``traceparent`` it sent, when it arrived), filled in as the request is identified and checked
(the app, the connection, the endpoint, the viewer), and finished at the door when its answer
has ended (the outcome, the bytes each way, the trace id). The observers (``observers``) then
take it as it is. Slotted, and allocated once a request: it is on every request's path.
"""

from __future__ import annotations

from dataclasses import dataclass

from gatehouse_proxy.observation.trace_ids import trace_id
from gatehouse_proxy.viewers.assertions import Viewer


@dataclass(slots=True)
class Fetch:
    method: str
    path: bytes  # the path under the alias, as the app sent it
    query: bytes
    traceparent: str | None  # the app's, as it sent it
    started: float  # time.perf_counter() when it arrived
    app: str = ""  # the app's routing key, namespace/Kind/name; "" until its token is known
    app_uid: str = ""  # what the app's quotas are counted by
    connection: str = ""  # the connection's routing key, namespace/name; "" if none was found
    endpoint: str = ""  # the allowed path it matched (what a quota or a pause covers)
    viewer: Viewer | None = None  # the verified viewer, for a connection that needs one
    # The phases' ends (time.perf_counter()): the answer's head ready to relay (or the refusal
    # made), and the answer relayed; ``ended_at`` is the latter in seconds since the epoch.
    answered: float = 0.0
    finished: float = 0.0
    ended_at: float = 0.0
    received: int = 0  # the request body's bytes read
    sent: int = 0  # the answer body's bytes sent to the app
    status: int = 0
    code: str = "ok"  # the refusal's code (what the metrics and the trace count)
    cut: str = ""  # the code of a cut that ended the answer half-way
    trace_id: str = ""  # the trace id tracing gave it, when tracing is on
    # What the connection's cache did: hit, collapsed (an identical request's answer, waited
    # for), revalidated, stale, miss (fetched, for the fleet where it could be kept), bypass
    # (not the cache's: another method, the app's own conditions, the store away); "" none.
    cache: str = ""

    @property
    def served_from_cache(self) -> bool:
        """Whether the cache answered it (a hit, or an identical request's answer waited for):
        a call the vendor did not get."""
        return self.cache in ("hit", "collapsed")

    @property
    def outcome(self) -> str:
        """What the fetch came to for its record: a cut's code, else the refusal's (or "ok")."""
        return self.cut or self.code

    @property
    def milliseconds(self) -> float:
        """From its arrival to the end of its answer."""
        return (self.finished - self.started) * 1000

    def traced(self) -> str:
        """The trace id tracing gave it (the same as the exported trace's), else the app's
        ``traceparent``'s or a new one: decided once, so every observer shows the same."""
        if not self.trace_id:
            self.trace_id = trace_id(self.traceparent)
        return self.trace_id
