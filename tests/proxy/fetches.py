"""Finished fetches, observed as the door observes them: for the tests of what a replica keeps."""

from __future__ import annotations

import time

from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.observation.observers import Audit, Inspector, Observer, Usage


class Recorder:
    """An activity's observers (the inspector's, the usage's and the audit's), given fetches."""

    def __init__(self, activity: Activity) -> None:
        self.observers: tuple[Observer, ...] = (
            Inspector(activity.recent),
            Usage(activity.usage),
            Audit(activity.audit),
        )

    def record(
        self,
        app: str,
        connection: str,
        method: str,
        path: bytes,
        query: bytes,
        status: int,
        code: str,
        seconds: float,
        received: int,
        sent: int,
        traceparent: str | None = None,
    ) -> None:
        """One fetch that took ``seconds`` from its arrival to the end of its answer."""
        fetch = Fetch(method, path, query, traceparent, 0.0, app=app, connection=connection)
        fetch.status, fetch.code, fetch.received, fetch.sent = status, code, received, sent
        fetch.answered = fetch.finished = seconds
        fetch.ended_at = time.time()
        for observer in self.observers:
            observer.observe(fetch)
