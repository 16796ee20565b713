"""An app's recent requests as each caller may see them: a fetch through a connection whose
details the caller may not see (build-spec's detailsHidden) is shown as build-spec shows its link.
tests/e2e/test_inspector.py runs the same through the service API, the page and the CLI with
real RBAC; here the rule alone, with the API server and the replicas stood in for."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gatehouse_contract.activity import Position, RecentRequest, RequestsQuery
from gatehouse_operator.access.reviews import Access, User
from gatehouse_operator.api.apps import DATA_APP
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.cli.requests_cli import line
from gatehouse_operator.connections import request_cursor
from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.connections.activity import Activity, limit_of
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.connections.models import HiddenRequestView, RecentRequestView
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.table.gather import Gathering
from tests.operator.kube_fakes import kube_of

NAMESPACE = "shop"
MATRIX = "/rec/inspect;sid=MATRIX"
ADMIN, BUILDER = User("admin"), User("builder")


def _connection(name: str, policy: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"baseURL": f"https://{name}.example", "linkPolicy": policy},
    }


def _record(seq: int, connection: str, path: str) -> RecentRequest:
    return RecentRequest(
        seq=seq,
        time=1_000.0 + seq,
        app=f"{NAMESPACE}/DataApp/payroll",
        connection=f"{NAMESPACE}/{connection}" if connection else "",
        method="POST",
        path=path,
        status=201,
        code="ok",
        duration_ms=12.5,
        request_bytes=40,
        response_bytes=1_234,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
    )


class Cluster:
    """The API server (payroll, and its connections: vendorc AdminsOnly, openc Builders; gone
    was deleted) and the replicas (payroll's fetches through each, and one to an alias that
    named no connection). The admin may update connections; the builder may link them and
    update apps."""

    connections = (_connection("vendorc", "AdminsOnly"), _connection("openc", "Builders"))
    records = (
        _record(1, "vendorc", f"{MATRIX}?api_key=*"),
        _record(2, "openc", "/open/items?page=*"),
        _record(3, "gone", "/gone/secret-shape"),
        _record(4, "", "/x"),
    )

    async def allowed(
        self, user: User, verb: str, resource: str, namespace: str, name: str = ""
    ) -> bool:
        if user is ADMIN:
            return True
        return (verb, resource) in {("link", "externalconnections"), ("update", "dataapps")}

    async def get_custom(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return {"metadata": {"name": name}} if kind is DATA_APP and name == "payroll" else None

    async def list_custom(self, kind: Kind, namespace: str) -> list[dict[str, Any]]:
        return list(self.connections)

    async def recent(
        self, namespace: str, query: RequestsQuery, after: Mapping[str, Position] | None = None
    ) -> Gathering:
        found = [("proxy-a", record) for record in self.records if record.app == query.app]
        return Gathering(requests=found[::-1], asked=1, answered=1, unable=0)


def _app_requests(user: User) -> list[RecentRequestView | HiddenRequestView]:
    cluster = Cluster()
    runtime = cast(Runtime, SimpleNamespace(kube=kube_of(cluster), gatherer=cluster))
    activity = Activity(Connections(runtime, cast(Access, cluster)))
    found = asyncio.run(activity.app_requests(user, NAMESPACE, DATA_APP, "payroll"))
    if any(item.details_hidden for item in found.items):
        assert "'vendorc'" in found.hidden_reason
    else:
        assert found.hidden_reason == ""
    return found.items


def test_a_builder_sees_only_when_and_how_an_app_was_answered_through_a_hidden_connection() -> None:
    """R4-9: build-spec hides AdminsOnly vendorc from the builder, and the connection's own
    requests are 404 to them; an app's requests showed its paths, query names and sizes."""
    items = {item.connection: item for item in _app_requests(BUILDER)}
    for connection in ("vendorc", "gone"):  # AdminsOnly and deleted read alike
        hidden = items[connection]
        assert isinstance(hidden, HiddenRequestView), hidden
        shown = hidden.model_dump(by_alias=True, mode="json")
        assert set(shown) == {
            "time", "app", "connection", "status", "code", "replica", "traceId", "detailsHidden",
        }  # fmt: skip
        assert shown["detailsHidden"] is True
        assert (shown["status"], shown["code"]) == (201, "ok")
    assert "MATRIX" not in str(items["vendorc"].model_dump())
    assert "secret-shape" not in line(items["gone"])
    assert line(items["vendorc"]).endswith("-> vendorc (details hidden) 201 ok proxy-a")
    # What the builder may see stays whole: a Builders connection, an alias that named none.
    assert isinstance(items["openc"], RecentRequestView)
    assert items["openc"].path == "/open/items?page=*"
    assert items["openc"].details_hidden is False
    assert isinstance(items[""], RecentRequestView)


def test_an_admin_sees_every_request_of_the_app_whole() -> None:
    items = _app_requests(ADMIN)
    assert all(isinstance(item, RecentRequestView) for item in items)
    assert {item.connection for item in items} == {"vendorc", "openc", "gone", ""}


@pytest.mark.parametrize("raw", ["²", "①", "٣", "+5", "0", "99999999999999999999999"])
def test_a_limit_that_is_no_whole_number_in_range_is_a_400(raw: str) -> None:
    with pytest.raises(Refused) as refused:
        limit_of(raw)
    assert refused.value.status == 400


def test_a_cursor_holds_every_replicas_position_and_keeps_those_not_heard_from() -> None:
    before = {"proxy-a": Position(instance="a1", seq=5, number=5)}
    now = {"proxy-b": Position(instance="b1", seq=9, number=2)}
    cursor = request_cursor.written(before, now)
    assert request_cursor.read(cursor) == {**before, **now}
    moved = {"proxy-a": Position(instance="a1", seq=7, number=7)}
    assert request_cursor.read(request_cursor.written(request_cursor.read(cursor), moved)) == {
        **now,
        **moved,
    }
    assert request_cursor.read(None) is None
    assert request_cursor.read("") is None
    many = {f"proxy-{i}": Position(instance="x", seq=i, number=i) for i in range(100)}
    kept = request_cursor.read(request_cursor.written(None, many))
    assert kept is not None
    assert len(kept) == request_cursor.MAX_REPLICAS
    assert "proxy-99" in kept  # the latest heard from are kept


@pytest.mark.parametrize(
    "raw",
    [
        "not a cursor!",
        base64.urlsafe_b64encode(b'{"proxy-a": ["x", -1, 0]}').decode(),
        base64.urlsafe_b64encode(b'{"proxy-a": ["' + b"x" * 40 + b'", 1, 0]}').decode(),
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        "e" * (request_cursor.MAX_CHARS + 1),
    ],
)
def test_an_after_that_is_no_cursor_an_answer_gave_is_a_400_naming_it(raw: str) -> None:
    with pytest.raises(Refused) as refused:
        request_cursor.read(raw)
    assert refused.value.status == 400
    assert "after" in str(refused.value)
