"""What the page shows in people's units, and which remembered requests its filters keep."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from gatehouse_operator.connections.models import HiddenRequestView, RecentRequestView
from gatehouse_operator.web.pages import RequestFilter
from gatehouse_operator.web.rendering import duration, limit, size


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (0, "0 bytes"),
        (1000, "1,000 bytes"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (65_536, "64 KiB"),
        (1_048_576, "1 MiB"),
        (10 * 1_048_576 + 1, "10 MiB"),
        (3 << 30, "3 GiB"),
    ],
)
def test_a_size_reads_in_binary_units(count: int, shown: str) -> None:
    assert size(count) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 s"),
        (45, "45 s"),
        (60, "1 min"),
        (90, "1 min 30 s"),
        (3_600, "1 h"),
        (5_400, "1 h 30 min"),
        (86_400, "1 day"),
        (7 * 86_400, "7 days"),
        (86_400 + 3_600 + 60, "1 day 1 h"),
    ],
)
def test_a_duration_reads_in_its_two_largest_units(seconds: int, shown: str) -> None:
    assert duration(seconds) == shown


def test_a_limit_reads_in_its_keys_unit() -> None:
    assert limit(1_048_576, "maxResponseBytes") == "1 MiB"
    assert limit(30, "timeoutSeconds") == "30 s"
    assert limit(10_000, "requestsPerDay") == "10,000"
    assert limit({"statuses": [429]}, "credentialLimit") == "{'statuses': [429]}"


def asked(query: str) -> RequestFilter:
    return RequestFilter.of(Request({"type": "http", "query_string": query.encode()}))


def seen(app: str, status: int, path: str) -> RecentRequestView:
    return RecentRequestView(
        time=1.0,
        app=app,
        connection="open",
        method="GET",
        path=path,
        status=status,
        code="ok",
        duration_ms=1.0,
        request_bytes=0,
        response_bytes=10,
        replica="r1",
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
    )


def test_the_requests_filters_keep_an_apps_a_status_class_and_a_path() -> None:
    items: list[RecentRequestView | HiddenRequestView] = [
        seen("DataApp/board", 200, "/echo/orders"),
        seen("DataApp/board", 404, "/echo/missing"),
        seen("DataApp/rival", 502, "/echo/orders"),
    ]
    hidden = HiddenRequestView(
        time=1.0, app="DataApp/board", connection="locked", status=200, code="ok",
        replica="r1", trace_id="0af7651916cd43dd8448eb211c80319c",
    )  # fmt: skip
    items.append(hidden)

    def kept(query: str) -> list[tuple[str, int]]:
        chosen = asked(query)
        return [(item.app, item.status) for item in items if chosen.keeps(item)]

    assert len(kept("")) == 4
    assert kept("app=DataApp/rival") == [("DataApp/rival", 502)]
    assert kept("status=4xx") == [("DataApp/board", 404)]
    assert kept("status=ok&app=DataApp/board") == [("DataApp/board", 200)] * 2
    # A path filter keeps no request whose path is hidden from the visitor.
    assert kept("path=orders") == [("DataApp/board", 200), ("DataApp/rival", 502)]
    # A status filter the page does not offer is none.
    assert asked("status=teapot").status == ""
    assert asked("app=DataApp/board&path=/x").query() == "app=DataApp%2Fboard&path=%2Fx"
