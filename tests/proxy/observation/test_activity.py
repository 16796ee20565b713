"""The replica's side of the inspector, usage and audit trail: what a fetch's record keeps (and
never keeps), the bounds on memory, the counts the operator takes, and the audit line."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from gatehouse_contract.activity import DURATION_BINS, RequestsQuery
from gatehouse_contract.frames import Gather, Gathered, UsageReport, read_replica_message
from gatehouse_contract.observability import JSONFormatter
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.audit import AuditSettings
from gatehouse_proxy.observation.recent_requests import RecentRequests, Record, scrubbed_path
from gatehouse_proxy.observation.trace_ids import sent_trace_id, trace_id
from gatehouse_proxy.observation.usage_counts import UsageCounts
from tests.proxy.fetches import Recorder

SECRET = "s3cr3t-value-never-kept"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("raw", "query", "shown"),
    [
        (b"/items", b"", "/items"),
        (b"/items", b"page=2&q=" + SECRET.encode(), "/items?page=*&q=*"),
        (b"/items", b"token=a=b=c", "/items?token=*"),
        (b"/items", SECRET.encode() + b"&page=1", "/items?*&page=*"),
        (b"/caf\xc3\xa9 x", b"", "/caf%C3%A9%20x"),
        # A segment's parameters (R4-9): values replaced, a bare one whole, segments kept.
        (b"/rec/inspect;sid=" + SECRET.encode(), b"api_key=1", "/rec/inspect;sid=*?api_key=*"),
        (
            b"/a;jsessionid=" + SECRET.encode() + b";v=a=b/items;" + SECRET.encode(),
            b"",
            "/a;jsessionid=*;v=*/items;*",
        ),
        (b"/a;;=" + SECRET.encode() + b"/b;", b"", "/a;;=*/b;"),
        # An encoded ";" is data in a segment, as servers read it.
        (b"/a%3Bv=1/b", b"", "/a%3Bv=1/b"),
        (b"/" + b"a" * 400, b"", "/" + "a" * 255 + "…"),
    ],
)
def test_a_path_keeps_its_query_names_and_never_a_value(
    raw: bytes, query: bytes, shown: str
) -> None:
    assert scrubbed_path(raw, query) == shown


def _record(seq: int, app: str = "ns/DataApp/a", connection: str = "ns/c") -> Record:
    return Record(seq, float(seq), app, connection, "GET", "/", 200, "ok", 1.0, 0, 0, "")


def test_recent_requests_keep_the_newest_within_every_bound() -> None:
    recent = RecentRequests(per_route=3, per_namespace=5, total=8)
    for seq in range(1, 11):
        recent.add(_record(seq, connection=f"ns/c{seq % 2}"), "ns")
    assert len(recent) == 5  # the namespace's bound
    found = recent.recent(RequestsQuery(connection="ns/c0", limit=10))
    assert [r.seq for r in found] == [10, 8, 6]  # newest first, the route's bound
    found = recent.recent(RequestsQuery(app="ns/DataApp/a", limit=2))
    assert [r.seq for r in found] == [10, 9]
    assert [r.seq for r in recent.recent(RequestsQuery(app="ns/DataApp/a", since=8.5))] == [10, 9]
    # Another namespace's traffic takes the first's oldest only past the total bound, and
    # keeps no more than its own namespace's bound.
    for seq in range(11, 60):
        recent.add(_record(seq, app="other/DataApp/b", connection="other/c"), "other")
    assert len(recent) == 8
    assert [r.seq for r in recent.recent(RequestsQuery(app="ns/DataApp/a"))] == [10, 9, 8]
    found = recent.recent(RequestsQuery(app="other/DataApp/b", limit=10))
    assert [r.seq for r in found] == [59, 58, 57]
    assert len(recent._all) <= recent.total + recent.total // 4


def test_usage_counts_are_taken_once_and_bounded() -> None:
    usage = UsageCounts(most_rows=2)
    usage.count(100, "ns/c", "ns/DataApp/a", False, 0)
    usage.count(100, "ns/c", "ns/DataApp/a", True, DURATION_BINS - 1)
    usage.count(100, "other/c", "other/DataApp/b", False, 1)
    usage.count(101, "ns/c", "ns/DataApp/a", False, 0)  # a third row: not counted
    assert usage.dropped == 1
    taken = usage.take("ns")
    assert taken == [((100, "ns/c", "ns/DataApp/a"), [1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0])]
    assert usage.take("ns") == []
    assert [key for key, _ in usage.take()] == [(100, "other/c", "other/DataApp/b")]
    assert usage.rows == 0


def test_a_trace_id_is_the_apps_or_a_new_one() -> None:
    assert sent_trace_id(TRACEPARENT) == "4bf92f3577b34da6a3ce929d0e0e4736"
    for bad in ("", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "ff" + TRACEPARENT[2:], "junk"):
        assert sent_trace_id(bad) == ""
        made = trace_id(bad)
        assert len(made) == 32
        assert int(made, 16) > 0


def test_the_operators_gather_is_answered_with_usage_parts_then_the_records() -> None:
    activity = Activity("replica-1")
    record = Recorder(activity).record
    for path in (b"/a", b"/b"):
        record(
            "ns/DataApp/a",
            "ns/c",
            "GET",
            path,
            b"k=" + SECRET.encode(),
            200,
            "ok",
            0.02,
            0,
            5,
            None,
        )
    record("ns/DataApp/a", "", "GET", b"/x", b"", 404, "unknown_alias", 0.001, 0, 50, None)
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    gather = Gather(id="g1", requests=RequestsQuery(app="ns/DataApp/a"), usage=True)
    asyncio.run(activity.answer(gather, send))
    messages = [read_replica_message(text.encode()) for text in sent]
    assert isinstance(messages[0], UsageReport)
    assert [(row.connection, sum(row.durations)) for row in messages[0].rows] == [("ns/c", 2)]
    assert isinstance(messages[-1], Gathered)
    assert [r.path for r in messages[-1].requests] == ["/x", "/b?k=*", "/a?k=*"]
    assert SECRET not in "".join(sent)


def test_the_audit_line_is_the_record_in_the_json_schema_and_opt_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gatehouse.proxy.audit")
    quiet = Activity("replica-1")
    Recorder(quiet).record(
        "ns/DataApp/a", "ns/c", "GET", b"/a", b"", 200, "ok", 0.01, 0, 1, TRACEPARENT
    )
    assert not [r for r in caplog.records if r.name == "gatehouse.proxy.audit"]

    audited = Activity("replica-1", AuditSettings(enabled=True, sample_rate=1.0))
    Recorder(audited).record(
        "ns/DataApp/a", "ns/c", "POST", b"/a", b"key=" + SECRET.encode(), 502, "upstream_error",
        0.25, 10, 20, TRACEPARENT,
    )  # fmt: skip
    (line,) = [r for r in caplog.records if r.name == "gatehouse.proxy.audit"]
    entry = json.loads(JSONFormatter().format(line))
    assert entry["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert entry["request"] == {
        "app": "ns/DataApp/a",
        "connection": "ns/c",
        "method": "POST",
        "path": "/a?key=*",
        "status": 502,
        "code": "upstream_error",
        "duration_ms": 250.0,
        "request_bytes": 10,
        "response_bytes": 20,
        "replica": "replica-1",
    }
    assert {"time", "level", "logger", "message"} <= entry.keys()
    assert SECRET not in json.dumps(entry)

    caplog.clear()
    never = Activity("replica-1", AuditSettings(enabled=True, sample_rate=0.0))
    Recorder(never).record("ns/DataApp/a", "ns/c", "GET", b"/a", b"", 200, "ok", 0.01, 0, 1, None)
    assert not [r for r in caplog.records if r.name == "gatehouse.proxy.audit"]


def test_a_follower_is_given_each_record_once_and_told_how_many_the_bounds_took() -> None:
    """``gatehouse requests -f``: the records after a position, oldest first, at most a page;
    the position after them; and, when the route's bound took records past the position before
    the follower asked, how many."""
    recent = RecentRequests(per_route=3, per_namespace=100, total=100)
    query = RequestsQuery(connection="ns/c0", limit=2)
    start = recent.position(query)
    assert (start.seq, start.number) == (0, 0)
    for seq in range(1, 4):
        recent.add(_record(seq, connection="ns/c0"), "ns")
    recent.add(_record(4, connection="ns/c1"), "ns")  # another route's: never given here
    page = recent.after(query, start)
    assert ([r.seq for r in page.records], page.lost) == ([1, 2], 0)  # a page: at most limit
    page = recent.after(query, page.position)
    assert ([r.seq for r in page.records], page.lost) == ([3], 0)
    assert recent.after(query, page.position).records == []  # nothing new: nothing again
    held = page.position
    for seq in range(5, 10):  # 5 more on a route that keeps 3: 2 taken before the next ask
        recent.add(_record(seq, connection="ns/c0"), "ns")
    page = recent.after(RequestsQuery(connection="ns/c0", limit=10), held)
    assert ([r.seq for r in page.records], page.lost) == ([7, 8, 9], 2)
    assert page.position.number == 8  # the route's eight records, counted

    # A position of another process (a restarted replica): all it holds is new, and what its
    # bound took of them is counted.
    other = page.position.model_copy(update={"instance": "0" * 16})
    page = recent.after(RequestsQuery(connection="ns/c0", limit=10), other)
    assert ([r.seq for r in page.records], page.lost) == ([7, 8, 9], 5)


def test_a_route_taken_whole_by_the_namespaces_bound_keeps_its_count() -> None:
    recent = RecentRequests(per_route=10, per_namespace=2, total=100)
    query = RequestsQuery(app="ns/DataApp/a", limit=10)
    recent.add(_record(1), "ns")
    held = recent.position(query)
    for seq in range(2, 5):  # 3 more of a namespace that keeps 2: 1 taken
        recent.add(_record(seq), "ns")
    for seq in range(5, 7):  # another app of the namespace takes the rest: the route is empty
        recent.add(_record(seq, app="ns/DataApp/b"), "ns")
    assert recent.recent(query) == []
    recent.add(_record(7), "ns")
    page = recent.after(query, held)
    assert ([r.seq for r in page.records], page.lost) == ([7], 3)
