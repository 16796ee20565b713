"""What apps did with connections, as replicas report it to the operator: recent requests (the
inspector) and usage counts.

Each proxy replica keeps its last fetches per connection and per app, and counts requests,
errors and a small latency histogram per (connection, app) and minute. The operator asks for
them on the table channel (see :mod:`gatehouse_contract.frames`: ``Gather``, answered by
``UsageReport`` parts and one ``Gathered``); these are their shapes. A record holds names,
codes, sizes and a path whose query values are replaced: never a header value or a body.
"""

from __future__ import annotations

from bisect import bisect_left

from pydantic import Field

from gatehouse_contract.wire import MAX_INSTANT, Count, HttpStatus, Instant, Wire

# Latency histogram: a request lands in the first bin whose bound (milliseconds) it does not
# exceed, or in the last bin, past every bound. Nine bins in all; p95 is read off them (the
# bound of the bin the 95th percentile falls in), so it is exact to a bin.
DURATION_BOUNDS_MS = (10, 25, 50, 100, 250, 500, 1000, 5000)
DURATION_BINS = len(DURATION_BOUNDS_MS) + 1
# A recorded path is cut here (with "…" at its end): the record's size is bounded whatever the
# app sends.
MAX_PATH_CHARS = 256
# Query values are replaced with this; the names stay.
SCRUBBED_VALUE = "*"
# The most recent requests one query gets from one replica.
MAX_RECENT = 500
# The most usage rows one UsageReport carries (a replica sends as many parts as it needs).
MAX_USAGE_ROWS = 1000
_KEY = 600  # a route's key: namespace/name, namespace/Kind/name
# A viewer's id as the proxy takes it from an assertion (its sub).
MAX_VIEWER_CHARS = 256


class RecentRequest(Wire):
    """One fetch as a replica recorded it, when its answer ended (or it was refused)."""

    seq: Count = Field(description="The replica's own count, for telling records apart.")
    time: Instant = Field(description="When the answer ended, in seconds since the epoch.")
    app: str = Field(max_length=_KEY)
    connection: str = Field(max_length=_KEY)  # empty when no connection was found (an alias)
    method: str = Field(max_length=16)
    path: str = Field(max_length=MAX_PATH_CHARS + 1)
    status: HttpStatus
    code: str = Field(max_length=64)  # "ok", or the proxy's error code
    duration_ms: float = Field(ge=0, le=MAX_INSTANT * 1000, allow_inf_nan=False)  # finite
    request_bytes: Count
    response_bytes: Count
    trace_id: str = Field(max_length=32)
    # The verified viewer's id, where the installation records it (viewers.recordViewerIds).
    # Left out when empty: an operator of the release before reads records without it.
    viewer: str = Field(default="", max_length=MAX_VIEWER_CHARS, exclude_if=lambda value: not value)
    # What the connection's cache did (hit, collapsed, revalidated, stale, miss, bypass). Left out
    # when empty, as the viewer is.
    cache: str = Field(default="", max_length=16, exclude_if=lambda value: not value)


class Position(Wire):
    """Where a follower stands in one replica's records of one connection or app: the replica's
    process (``instance``, new at each start, so a restarted replica's count is not mistaken for
    the one before), the last record it was given (``seq``, the replica's own count) and that
    record's ``number`` among the connection's (or app's) records the replica ever kept, which
    tells how many it no longer holds were never given."""

    instance: str = Field(max_length=32)
    seq: Count
    number: Count


# Where a follower that was given nothing of a replica stands: before its first record.
START = Position(instance="", seq=0, number=0)


class RequestsQuery(Wire):
    """Which records to send: one connection's or one app's (routing keys), ended after
    ``since``, at most ``limit`` of the newest.

    ``cursor`` (asked of a replica that named CURSOR_FEATURE, never of another): the answer
    says where the records stand (``Gathered.position``); with ``after``, it holds the records
    after that position instead, oldest first, at most ``limit``, and how many past it the
    replica no longer holds (``Gathered.lost``)."""

    connection: str = Field(default="", max_length=_KEY)
    app: str = Field(default="", max_length=_KEY)
    since: float = 0.0
    limit: int = Field(default=100, ge=1, le=MAX_RECENT)
    cursor: bool = False
    after: Position | None = None


class UsageRow(Wire):
    """Requests of one (connection, app) in one minute, counted since the replica last
    reported: additive, so the operator adds each row once into its history."""

    minute: int = Field(
        ge=0, le=int(MAX_INSTANT) // 60, description="Minutes since the epoch (UTC)."
    )
    connection: str = Field(max_length=_KEY)
    app: str = Field(max_length=_KEY)
    errors: Count
    # Requests per latency bin (DURATION_BOUNDS_MS); their sum is the requests.
    durations: tuple[Count, ...] = Field(min_length=DURATION_BINS, max_length=DURATION_BINS)
    # Of the requests, those answered from the connection's cache (a hit, or a wait on another's
    # fetch): calls the vendor did not get. Left out when 0, as RecentRequest's viewer is: an
    # operator of the release before reads rows without it.
    cached: Count = Field(default=0, exclude_if=lambda value: not value)


def duration_bin(milliseconds: float) -> int:
    """The histogram bin of a request that took ``milliseconds``."""
    return bisect_left(DURATION_BOUNDS_MS, milliseconds)


def is_error(status: int) -> bool:
    """An answer the usage charts count as an error: any 4xx or 5xx, the proxy's or the API's."""
    return status >= 400
