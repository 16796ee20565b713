"""The operator's usage history (what the usage charts draw) and the charts themselves."""

from __future__ import annotations

from gatehouse_contract.activity import DURATION_BINS, UsageRow
from gatehouse_operator.connections.models import AppUsage, ConnectionUsage, UsagePoint
from gatehouse_operator.table.usage import UsageHistory
from gatehouse_operator.web.charts import Chart, bar_chart
from gatehouse_operator.web.pages import usage_charts

NOW = 1_800_000_000.0  # a fixed clock, on a minute's start
MINUTE = int(NOW // 60)


def _row(minute: int, connection: str = "ns/c", app: str = "ns/DataApp/a", fast: int = 0,
         slow: int = 0, errors: int = 0, cached: int = 0) -> UsageRow:  # fmt: skip
    durations = [0] * DURATION_BINS
    durations[0], durations[-1] = fast, slow
    return UsageRow(
        minute=minute,
        connection=connection,
        app=app,
        errors=errors,
        durations=tuple(durations),
        cached=cached,
    )


def test_rows_add_up_per_minute_and_hour_and_p95_is_read_off_the_bins() -> None:
    history = UsageHistory(clock=lambda: NOW)
    history.add([_row(MINUTE, fast=95, slow=5, errors=3), _row(MINUTE, fast=10)])
    history.add([_row(MINUTE - 1, fast=1, slow=19)])
    history.add([_row(MINUTE - 24 * 60 - 5, fast=1000)])  # past the day: dropped
    (buckets,) = history.of_connection("ns/c", "hour").values()
    assert len(buckets) == 60
    assert (buckets[-1].requests, buckets[-1].errors, buckets[-1].p95_ms) == (110, 3, 10.0)
    assert buckets[-2].p95_over
    assert buckets[-2].p95_ms == 5000.0
    assert buckets[0].requests == 0
    assert buckets[0].p95_ms is None
    (hours,) = history.of_connection("ns/c", "day").values()
    assert len(hours) == 24
    assert sum(bucket.requests for bucket in hours) == 130
    assert history.of_connection("ns/other", "hour") == {}


def test_an_old_minute_slot_is_cleared_when_the_ring_comes_round() -> None:
    now = [NOW]
    history = UsageHistory(clock=lambda: now[0])
    history.add([_row(MINUTE, fast=7)])
    now[0] += 3600
    history.add([_row(MINUTE + 60, fast=1)])
    (buckets,) = history.of_connection("ns/c", "hour").values()
    assert [bucket.requests for bucket in buckets if bucket.requests] == [1]


def test_at_most_most_pairs_are_kept_the_least_recently_reported_going_first() -> None:
    history = UsageHistory(most_pairs=2, clock=lambda: NOW)
    history.add([_row(MINUTE, connection="ns/a", fast=1), _row(MINUTE, connection="ns/b", fast=1)])
    history.add([_row(MINUTE, connection="ns/a", fast=1)])
    history.add([_row(MINUTE, connection="ns/c", fast=1)])
    assert len(history) == 2
    assert history.of_connection("ns/b", "hour") == {}
    assert history.of_connection("ns/a", "hour")


def test_a_chart_draws_numbers_and_escapes_its_title() -> None:
    svg = str(
        bar_chart(
            Chart("<b>Requests</b>", "", "#000", [0.0, 2.0, None], [0.0, 60.0, 120.0], "minute")
        )
    )
    assert svg.startswith("<svg")
    assert svg.endswith("</svg>")
    assert "<b>" not in svg
    assert "&lt;b&gt;" in svg
    assert svg.count('class="bar"') == 1
    assert 'data-total="2"' in svg


def test_requests_served_from_the_cache_add_up_beside_the_requests() -> None:
    history = UsageHistory(clock=lambda: NOW)
    history.add([_row(MINUTE, fast=10, cached=7), _row(MINUTE, fast=5, cached=5)])
    history.add([_row(MINUTE - 1, fast=3, slow=1, errors=1)])
    (buckets,) = history.of_connection("ns/c", "hour").values()
    assert [(b.requests, b.errors, b.cached) for b in buckets[-2:]] == [(4, 1, 0), (15, 0, 12)]
    assert buckets[-1].p95_ms == 10.0  # the cached count is no latency bin
    (hours,) = history.of_connection("ns/c", "day").values()
    assert (sum(b.requests for b in hours), sum(b.cached for b in hours)) == (19, 12)


def _usage(*cached: int) -> ConnectionUsage:
    points = [
        UsagePoint(start=NOW + 60 * index, requests=9, errors=1, p95_ms=10.0, cached=count)
        for index, count in enumerate(cached)
    ]
    return ConnectionUsage(window="hour", apps=[AppUsage(app="DataApp/a", points=points)])


def test_calls_saved_are_shown_only_where_the_cache_answered_some() -> None:
    """A connection without a cache (or whose cache answered nothing in the window) looks as
    before: three charts, and no ``cached`` in the service API's body."""
    ((_, plain),) = usage_charts(_usage(0, 0))
    assert [str(chart).count("Calls saved") for chart in plain] == [0, 0, 0]
    assert "cached" not in _usage(0, 0).model_dump_json()
    ((_, charts),) = usage_charts(_usage(0, 4))
    assert len(charts) == 4
    saved = str(charts[2])
    assert 'aria-label="Calls saved (served from the cache)"' in saved
    assert 'data-total="4"' in saved
    body = _usage(0, 4).model_dump(by_alias=True, mode="json")
    assert [point.get("cached") for point in body["apps"][0]["points"]] == [None, 4]
