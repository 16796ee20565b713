"""The observers of a finished fetch, listed in the order they are called (as mitmproxy lists its
addons): each takes the :class:`~gatehouse_proxy.observation.fetch.Fetch` as the door finished it.

- :class:`Metrics`: the request's count and duration (to its answer's head, the refusal's code);
- :class:`Traces`: the fetch's span's attributes (resource keys, status, outcome code);
- :class:`Inspector`: the replica's recent requests (``recent_requests``);
- :class:`Usage`: the usage charts' count (``usage_counts``), when a connection was found,
  with whether the cache answered it;
- :class:`Audit`: the audit line, when the installation asks (``audit``).

A fetch no app's token identified is counted in the metrics and the trace only: made-up tokens and
aliases are kept nowhere a tenant sees. The door calls them once per fetch, so each does a few
microseconds of work and no I/O but the audit line (docs/operating/inspector-and-audit.md, "The
inspector, usage and the audit trail", has the cost measured).
"""

from __future__ import annotations

from typing import Protocol

from gatehouse_contract.activity import duration_bin, is_error
from gatehouse_contract.routes import namespace_of
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.audit import AuditTrail
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.observation.recent_requests import RecentRequests, Record, scrubbed_path
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.observation.usage_counts import UsageCounts


class Observer(Protocol):
    def observe(self, fetch: Fetch) -> None: ...


def listed(
    tracing: Tracing, activity: Activity, record_viewers: bool = True
) -> tuple[Observer, ...]:
    """Every observer of a fetch, in order; ``record_viewers``: whether the inspector and the
    audit line show the viewer's id (no metric ever does)."""
    return (
        Metrics(),
        Traces(tracing),
        Inspector(activity.recent, record_viewers),
        Usage(activity.usage),
        Audit(activity.audit, record_viewers),
    )


class Metrics:
    def observe(self, fetch: Fetch) -> None:
        # Unauthenticated requests stay unlabelled (app and connection ""), so made-up aliases
        # cannot grow the metric's cardinality. The duration is to the answer's head.
        labels = metrics.Labels(fetch.app, fetch.connection, fetch.code)
        metrics.observe(labels, fetch.method, fetch.status, fetch.answered - fetch.started)
        if fetch.cache:
            served = fetch.sent if fetch.served_from_cache else 0
            metrics.count_cache(fetch.connection, fetch.cache, served)


class Traces:
    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    def observe(self, fetch: Fetch) -> None:
        self.tracing.answered(fetch.app, fetch.connection, fetch.status, fetch.code)


def record_of(fetch: Fetch, seq: int, record_viewer: bool = True) -> Record:
    """The inspector's record of a fetch (the audit line's too), with its viewer's id if
    ``record_viewer``."""
    viewer = fetch.viewer
    # tuple.__new__: half of what Record(...) costs, with the same names.
    return tuple.__new__(
        Record,
        (
            seq,
            fetch.ended_at,
            fetch.app,
            fetch.connection,
            fetch.method,
            scrubbed_path(fetch.path, fetch.query),
            fetch.status,
            fetch.outcome,
            fetch.milliseconds,
            fetch.received,
            fetch.sent,
            fetch.traced(),
            viewer.id if viewer is not None and record_viewer else "",
            fetch.cache,
        ),
    )


class Inspector:
    def __init__(self, recent: RecentRequests, record_viewers: bool = True) -> None:
        self.recent = recent
        self.record_viewers = record_viewers

    def observe(self, fetch: Fetch) -> None:
        if not fetch.app:
            return
        self.recent.add(
            record_of(fetch, self.recent.next_seq(), self.record_viewers), namespace_of(fetch.app)
        )


class Usage:
    def __init__(self, usage: UsageCounts) -> None:
        self.usage = usage

    def observe(self, fetch: Fetch) -> None:
        if not fetch.app or not fetch.connection:
            return
        self.usage.count(
            int(fetch.ended_at // 60),
            fetch.connection,
            fetch.app,
            is_error(fetch.status),
            duration_bin(fetch.milliseconds),
            cached=fetch.served_from_cache,
        )


class Audit:
    def __init__(self, trail: AuditTrail, record_viewers: bool = True) -> None:
        self.trail = trail
        self.record_viewers = record_viewers

    def observe(self, fetch: Fetch) -> None:
        if fetch.app and self.trail.chosen():
            self.trail.write(record_of(fetch, 0, self.record_viewers))
