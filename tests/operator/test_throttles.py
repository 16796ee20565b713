"""A vendor's pause is told once per pause, whichever replicas report it (the Event itself is
posted to a real API server in tests/e2e/test_quotas.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from gatehouse_contract.frames import Throttled
from gatehouse_contract.routes import ConnectionRoute, Credential, Limits
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.table.store import RouteStore
from gatehouse_operator.table.throttles import Throttles
from tests.operator.test_table_budget import SPEC


class Posted:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def post_event(
        self, kind: Any, meta: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        self.events.append((meta["name"], message))


def _routes() -> RouteStore:
    routes = RouteStore()
    route = ConnectionRoute(
        key="team/crm",
        uid="uid-1",
        origin="https://api.example.com",
        allowed_methods=frozenset({"GET"}),
        allowed_paths=(),
        credential=Credential(type="none"),
        limits=Limits(
            timeout_seconds=1, max_request_bytes=1, max_response_bytes=1, requests_per_minute=1
        ),
    )
    routes.put_connection(
        route, SPEC, resource_of({"metadata": {"namespace": "team", "name": "crm"}}), 100
    )
    return routes


def test_one_event_per_pause_however_many_replicas_report_it() -> None:
    async def scenario() -> list[tuple[str, str]]:
        posted = Posted()
        throttles = Throttles(_routes(), posted)  # type: ignore[arg-type]
        for _ in range(4):  # four replicas saw the same answer
            throttles.heard(Throttled(connection="team/crm", status=429, seconds=30))
        throttles.heard(Throttled(connection="team/crm", status=429, seconds=60))  # longer
        throttles.heard(Throttled(connection="team/gone", status=429, seconds=30))  # unrouted
        await asyncio.sleep(0)
        await asyncio.gather(*throttles._tasks)
        return posted.events

    events = asyncio.run(scenario())
    assert [name for name, _ in events] == ["crm", "crm"]
    assert "answered 429 with Retry-After 30s" in events[0][1]
