"""Prometheus metrics per connection and app: counts by outcome, and latency.

Labels carry resource keys and error codes only: never a path, a query string or a header value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from starlette.requests import Request
from starlette.responses import Response

REGISTRY = CollectorRegistry()

REQUESTS = Counter(
    "gatehouse_proxy_requests",
    "App requests handled, by connection, app, method, status class (2xx..5xx) and outcome code.",
    ["connection", "app", "method", "status", "code"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "gatehouse_proxy_request_duration_seconds",
    "Time to the upstream's response headers (or the refusal), by connection and app.",
    ["connection", "app"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)

CUT = Counter(
    "gatehouse_proxy_responses_cut",
    "Answers cut off after their headers were sent (too large, upstream broke off or stalled).",
    ["connection", "app", "code"],
    registry=REGISTRY,
)

TABLE_VERSION = Gauge(
    "gatehouse_proxy_table_version",
    "Version of the routing table this replica serves (0: none yet).",
    registry=REGISTRY,
)
TABLE_AGE = Gauge(
    "gatehouse_proxy_table_age_seconds",
    "Seconds since this replica installed its table (-1: none yet); alert on it with the feed.",
    registry=REGISTRY,
)
FEED_CONNECTED = Gauge(
    "gatehouse_proxy_table_feed_connected",
    "1 while the table stream from the operator is open, else 0.",
    registry=REGISTRY,
)

FEED_BYTES = Gauge(
    "gatehouse_proxy_table_feed_received_bytes",
    "Bytes received on the table channel since the replica started (snapshots and deltas).",
    registry=REGISTRY,
)


def track_feed(
    version: Callable[[], float],
    age: Callable[[], float],
    connected: Callable[[], float],
    received: Callable[[], float],
) -> None:
    """Reads the feed's figures at each scrape, so they can never lag what /readyz says."""
    TABLE_VERSION.set_function(version)
    TABLE_AGE.set_function(age)
    FEED_CONNECTED.set_function(connected)
    FEED_BYTES.set_function(received)


@dataclass(frozen=True)
class Labels:
    app: str = ""
    connection: str = ""
    code: str = "ok"

    def with_code(self, code: str) -> Labels:
        return replace(self, code=code)


UNLABELLED = Labels()


def status_class(status: int) -> str:
    """``2xx`` .. ``5xx``: an upstream may answer any number, and each would be a new series."""
    return f"{status // 100}xx" if 100 <= status < 600 else "other"


# The series a request counts in, looked up once per route, method and outcome rather than
# through prometheus_client's label checks and lock on every request. As bounded as the series
# themselves: one entry per series.
_SERIES: dict[tuple[Labels, str, int], tuple[Counter, Histogram]] = {}


def observe(labels: Labels, method: str, status: int, seconds: float) -> None:
    key = (labels, method, status // 100)
    series = _SERIES.get(key)
    if series is None:
        series = _SERIES[key] = (
            REQUESTS.labels(
                labels.connection, labels.app, method, status_class(status), labels.code
            ),
            DURATION.labels(labels.connection, labels.app),
        )
    series[0].inc()
    series[1].observe(seconds)


def count_cut(labels: Labels) -> None:
    CUT.labels(labels.connection, labels.app, labels.code).inc()


async def endpoint(request: Request) -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
