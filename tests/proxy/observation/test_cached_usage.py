"""The usage charts' calls saved, on the replica's side: of each (minute, connection, app) row's
requests, those the connection's cache answered (a hit, or an identical request's answer waited
for), counted apart, and carried on the wire only when there are some, so that an operator of the
release before, whose rows forbid fields they do not know, reads every row of a replica without
a cache as before, and this release's operator reads a row without the count."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from pydantic import Field

from gatehouse_contract.activity import DURATION_BINS, UsageRow
from gatehouse_contract.frames import Gather, Unreadable, UsageReport, read_replica_message
from gatehouse_contract.wire import Count, Wire
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.observation.observers import Usage

APP = "ns/DataApp/a"


class EarlierUsageRow(Wire):
    """A UsageRow as the release before reads it (no ``cached``; unknown fields refused)."""

    minute: int
    connection: str
    app: str
    errors: Count
    durations: tuple[Count, ...] = Field(min_length=DURATION_BINS, max_length=DURATION_BINS)


def _observed(activity: Activity, connection: str, cache: str, status: int = 200) -> None:
    fetch = Fetch("GET", b"/a", b"", None, 0.0, app=APP, connection=connection)
    fetch.cache, fetch.status = cache, status
    fetch.answered = fetch.finished = 0.002
    fetch.ended_at = time.time()
    Usage(activity.usage).observe(fetch)


def _reported(activity: Activity) -> list[str]:
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    asyncio.run(activity.answer(Gather(id="g", usage=True), send))
    return sent[:-1]  # the UsageReport parts, the Gathered last


def test_requests_the_cache_answered_are_counted_beside_the_requests() -> None:
    activity = Activity("replica-1")
    for cache in ("hit", "hit", "collapsed", "miss", "revalidated", "stale", "bypass"):
        _observed(activity, "ns/cached", cache)
    _observed(activity, "ns/cached", "hit", status=404)  # a kept 404 is an error all the same
    for _ in range(3):
        _observed(activity, "ns/plain", "")
    (part,) = _reported(activity)
    report = read_replica_message(part.encode())
    assert isinstance(report, UsageReport)
    rows = {row.connection: row for row in report.rows}
    cached, plain = rows["ns/cached"], rows["ns/plain"]
    # revalidated and stale called the vendor (a 304, or a failure a stale answer stood in for).
    assert (sum(cached.durations), cached.errors, cached.cached) == (8, 1, 4)
    assert (sum(plain.durations), plain.errors, plain.cached) == (3, 0, 0)


def test_a_row_without_cached_answers_is_sent_as_the_release_before_reads_it() -> None:
    activity = Activity("replica-1")
    _observed(activity, "ns/plain", "")
    _observed(activity, "ns/cached", "collapsed")
    (part,) = _reported(activity)
    rows = {row["connection"]: row for row in json.loads(part)["rows"]}
    assert "cached" not in rows["ns/plain"]
    assert rows["ns/cached"]["cached"] == 1
    # The release before reads the row without it; a row with it only from a replica of this
    # release, which it never asks (ACTIVITY_FEATURE is older than both).
    assert EarlierUsageRow.model_validate(rows["ns/plain"]).errors == 0


def test_this_release_reads_a_row_without_the_count_and_refuses_one_out_of_bounds() -> None:
    row = {
        "minute": 30_000_000, "connection": "a/b", "app": "a/x", "errors": 0,
        "durations": [1] + [0] * (DURATION_BINS - 1),
    }  # fmt: skip
    report = read_replica_message(json.dumps({"type": "usage", "id": "u", "rows": [row]}))
    assert isinstance(report, UsageReport)
    assert report.rows == (UsageRow.model_validate(row),)
    assert report.rows[0].cached == 0
    for bad in (-1, 2**53):
        frame = json.dumps({"type": "usage", "id": "u", "rows": [{**row, "cached": bad}]})
        with pytest.raises(Unreadable, match="cached"):
            read_replica_message(frame)
