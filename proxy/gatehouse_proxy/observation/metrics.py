"""Prometheus metrics: requests by tenant, connection, app and outcome; latency by tenant; the
table feed; and the process.

Labels carry resource names and error codes only: never a path, a query string or a header value.
Names are split (namespace, connection, app_kind, app), so queries never parse a label. Latency is
a histogram per namespace, not per connection and app: at 16 series per histogram, per pair it
was about 160,000 series per replica at 10,000 connections; the counts per connection and app stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from gatehouse_contract.observability import register_process_metrics

REGISTRY = CollectorRegistry()
register_process_metrics(REGISTRY, "proxy")

_ROUTE = ["namespace", "connection", "app_kind", "app"]
REQUESTS = Counter(
    "gatehouse_proxy_requests",
    "App requests handled, by connection, app, method, status class (2xx..5xx) and outcome code.",
    [*_ROUTE, "method", "status", "code"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "gatehouse_proxy_request_duration_seconds",
    "Time to the upstream's response headers (or the refusal), by the app's namespace.",
    ["namespace"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)

CUT = Counter(
    "gatehouse_proxy_responses_cut",
    "Answers cut off after their headers were sent (too large, upstream broke off or stalled).",
    [*_ROUTE, "code"],
    registry=REGISTRY,
)

TOKEN_REQUESTS = Counter(
    "gatehouse_proxy_token_requests",
    "Token requests this replica made (OAuth 2.0 client credentials, Google service accounts), "
    "by outcome (issued, failed) and whether the fleet shared the token (shared) or this "
    "worker minted for itself (alone: no shared store, or it was down).",
    ["namespace", "connection", "outcome", "coordination"],
    registry=REGISTRY,
)

COUNTED_ALONE = Counter(
    "gatehouse_proxy_quota_counted_alone",
    "Requests whose quotas this worker counted alone (its share of each limit), because the "
    "shared store did not answer in time or was down.",
    ["namespace", "connection"],
    registry=REGISTRY,
)
STORE_REFUSALS = Counter(
    "gatehouse_proxy_store_refused",
    "Writes the shared store refused for a namespace, by what (tokens, counters) and why: "
    "share (the namespace holds its whole share), reserve (tokens: the store's memory is "
    "within its reserve) or full (the store's maxmemory). The namespace's tokens are then "
    "kept, and its quotas counted, by each worker alone; other namespaces are not affected.",
    ["namespace", "what", "reason"],
    registry=REGISTRY,
)
PAUSES = Counter(
    "gatehouse_proxy_vendor_pauses",
    "Times an upstream's 429 or 503 with Retry-After paused, for the fleet, the endpoint it came "
    "on (scope endpoint) or its whole connection (scope credential: the credential's limit).",
    ["namespace", "connection", "scope"],
    registry=REGISTRY,
)
RENEWALS = Counter(
    "gatehouse_proxy_token_renewals",
    "An upstream's 401s to a minted token, by app and by what they were taken to say: renewed "
    "(the token was refused: a new one asked for), replaced (a newer token was there already), "
    "endpoint (the endpoint answers 401 whatever the token: relayed, the token kept), bounded "
    "(the credential renewed as often as it may this minute: relayed, the token kept).",
    [*_ROUTE, "decision"],
    registry=REGISTRY,
)
CACHE = Counter(
    "gatehouse_proxy_cache_requests",
    "Requests to connections with a cache, by what the cache did: hit (a fresh answer, no call "
    "to the vendor), collapsed (an identical request's answer, waited for: no call either), "
    "revalidated (the vendor confirmed a stale answer, 304), stale (a stale answer stood in for "
    "a failed call), miss (the vendor called), bypass (not the cache's: another method, the "
    "app's own conditions, the shared store away).",
    ["namespace", "connection", "outcome"],
    registry=REGISTRY,
)
CACHE_BYTES = Counter(
    "gatehouse_proxy_cache_served_bytes",
    "Body bytes served from the cache (hits and collapsed waits): what the vendor did not send.",
    ["namespace", "connection"],
    registry=REGISTRY,
)
CACHE_WRITES = Counter(
    "gatehouse_proxy_cache_writes",
    "Answers offered to the shared store, by outcome: kept, share (the namespace's cache share "
    "is full even after evicting its own entries nearest their end: not kept) or reserve (the "
    "store's memory is within the reserve counters keep: not kept).",
    ["outcome"],
    registry=REGISTRY,
)
CACHE_EVICTIONS = Counter(
    "gatehouse_proxy_cache_evictions",
    "Cached answers a namespace's own new answers evicted to stay within its cache share.",
    registry=REGISTRY,
)


class Feed(Collector):
    """The table feed's figures, read at each scrape so they never lag what /readyz says."""

    def __init__(self) -> None:
        self.track(lambda: 0, lambda: None, lambda: False, lambda: 0)

    def track(
        self,
        version: Callable[[], int],
        age: Callable[[], float | None],
        connected: Callable[[], bool],
        received: Callable[[], int],
    ) -> None:
        self.version, self.age, self.connected, self.received = version, age, connected, received

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "gatehouse_proxy_table_version",
            "Version of the routing table this replica serves (0: none yet).",
            value=self.version(),
        )
        age = GaugeMetricFamily(
            "gatehouse_proxy_table_age_seconds",
            "Seconds since this replica installed its table; no sample before the first one. "
            "Alert on it with the feed.",
        )
        seconds = self.age()
        if seconds is not None:
            age.add_metric([], seconds)
        yield age
        yield GaugeMetricFamily(
            "gatehouse_proxy_table_feed_connected",
            "1 while the table stream from the operator is open, else 0.",
            value=float(self.connected()),
        )
        yield CounterMetricFamily(
            "gatehouse_proxy_table_feed_received_bytes",
            "Bytes received on the table channel since the replica started (snapshots and deltas).",
            value=self.received(),
        )


FEED = Feed()
REGISTRY.register(FEED)


class Store(Collector):
    """Whether this worker counts with the fleet: no sample without a shared store."""

    def __init__(self) -> None:
        self.track(lambda: None)

    def track(self, up: Callable[[], bool | None]) -> None:
        self.up = up

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "gatehouse_proxy_store_up",
            "1 while this worker counts quotas and keeps tokens with the fleet in the shared "
            "store, 0 while it counts alone (the store is down or slower than its deadline); no "
            "sample when the installation has no store.",
        )
        up = self.up()
        if up is not None:
            family.add_metric([], float(up))
        yield family


STORE = Store()
REGISTRY.register(STORE)


class StoreMemory(Collector):
    """What the shared store holds, as this worker last read it (every 30 s): its memory, and
    each namespace's share used. No sample without a store, or before the first reading."""

    def __init__(self) -> None:
        self.track(lambda: None, lambda: {}, lambda: (0, 0))

    def track(
        self,
        memory: Callable[[], tuple[int, int] | None],
        usage: Callable[[], dict[str, tuple[int, int]]],
        share: Callable[[], tuple[int, int]],
    ) -> None:
        self.memory, self.usage, self.share = memory, usage, share

    def collect(self) -> Iterator[Metric]:
        used = GaugeMetricFamily(
            "gatehouse_proxy_store_used_memory_bytes",
            "The shared store's used memory (INFO memory: used_memory).",
        )
        most = GaugeMetricFamily(
            "gatehouse_proxy_store_max_memory_bytes",
            "The shared store's maxmemory (0: unbounded). Tokens are refused past 1 - the "
            "reserve of it; every write past all of it.",
        )
        memory = self.memory()
        if memory is not None:
            used.add_metric([], memory[0])
            most.add_metric([], memory[1])
        yield used
        yield most
        keys = GaugeMetricFamily(
            "gatehouse_proxy_store_namespace_keys",
            "Keys a namespace holds in the shared store (those it holds any), counted by the "
            "store with each write.",
            labels=["namespace"],
        )
        held = GaugeMetricFamily(
            "gatehouse_proxy_store_namespace_bytes",
            "Bytes a namespace holds in the shared store (those it holds any), as its share "
            "counts them.",
            labels=["namespace"],
        )
        for namespace, (count, size) in sorted(self.usage().items()):
            keys.add_metric([namespace], count)
            held.add_metric([namespace], size)
        yield keys
        yield held
        share_keys, share_bytes = self.share()
        yield GaugeMetricFamily(
            "gatehouse_proxy_store_namespace_share_keys",
            "The keys each namespace may hold in the shared store.",
            value=share_keys,
        )
        yield GaugeMetricFamily(
            "gatehouse_proxy_store_namespace_share_bytes",
            "The bytes each namespace may hold in the shared store.",
            value=share_bytes,
        )


STORE_MEMORY = StoreMemory()
REGISTRY.register(STORE_MEMORY)


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


def _route_labels(labels: Labels) -> tuple[str, str, str, str]:
    """namespace, connection, app_kind, app: from the keys "ns/name" and "ns/Kind/name"."""
    namespace, _, app = labels.app.partition("/")
    app_kind, _, app_name = app.partition("/")
    connection = labels.connection.partition("/")[2]
    return namespace, connection, app_kind, app_name


# The series a request counts in, looked up once per route, method and outcome rather than
# through prometheus_client's label checks and lock on every request. As bounded as the series
# themselves: one entry per series.
_SERIES: dict[tuple[Labels, str, int], tuple[Counter, Histogram]] = {}


def observe(labels: Labels, method: str, status: int, seconds: float) -> None:
    key = (labels, method, status // 100)
    series = _SERIES.get(key)
    if series is None:
        route = _route_labels(labels)
        series = _SERIES[key] = (
            REQUESTS.labels(*route, method, status_class(status), labels.code),
            DURATION.labels(route[0]),
        )
    series[0].inc()
    series[1].observe(seconds)


def count_token_request(connection: str, outcome: str, *, shared: bool) -> None:
    namespace, _, name = connection.partition("/")
    TOKEN_REQUESTS.labels(namespace, name, outcome, "shared" if shared else "alone").inc()


# As _SERIES: counted for every request while the store is away, looked up once per connection.
_ALONE: dict[str, Counter] = {}


def count_alone(connection: str) -> None:
    series = _ALONE.get(connection)
    if series is None:
        series = _ALONE[connection] = COUNTED_ALONE.labels(*connection.split("/", 1))
    series.inc()


def count_cache(connection: str, outcome: str, served_bytes: int) -> None:
    namespace, _, name = connection.partition("/")
    CACHE.labels(namespace, name, outcome).inc()
    if served_bytes:
        CACHE_BYTES.labels(namespace, name).inc(served_bytes)


def count_cache_kept(outcome: str, evicted: int) -> None:
    CACHE_WRITES.labels(outcome).inc()
    if evicted:
        CACHE_EVICTIONS.inc(evicted)


def count_store_refusal(namespace: str, what: str, reason: str) -> None:
    STORE_REFUSALS.labels(namespace, what, reason).inc()


def count_pause(connection: str, scope: str) -> None:
    PAUSES.labels(*connection.split("/", 1), scope).inc()


def count_renewal(labels: Labels, decision: str) -> None:
    RENEWALS.labels(*_route_labels(labels), decision).inc()


def count_cut(labels: Labels) -> None:
    CUT.labels(*_route_labels(labels), labels.code).inc()


async def endpoint(request: Request) -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
