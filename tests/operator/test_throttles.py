"""A vendor's pause is told once per pause, whichever replicas report it, and says what is paused
(the Event itself is posted to a real API server in tests/e2e/test_quotas.py); so is a bound on a
credential's renewals."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gatehouse_contract.frames import (
    MAX_ENDPOINT_CHARS,
    RenewalsBounded,
    Throttled,
    Unreadable,
    read_replica_message,
)
from gatehouse_contract.routes import ConnectionRoute, Credential, Limits
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.table.store import RouteStore
from gatehouse_operator.table.throttles import Pause, Throttles
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


def test_the_event_and_the_page_say_what_is_paused_and_why() -> None:
    async def scenario() -> tuple[list[tuple[str, str]], list[Pause]]:
        posted = Posted()
        throttles = Throttles(_routes(), posted)  # type: ignore[arg-type]
        throttles.heard(
            Throttled(
                connection="team/crm", status=429, seconds=30, scope="endpoint", endpoint="/api/a"
            )
        )
        # Another endpoint is another pause, and the credential's limit another still.
        throttles.heard(
            Throttled(
                connection="team/crm", status=503, seconds=60, scope="endpoint", endpoint="/api/b"
            )
        )
        throttles.heard(
            Throttled(
                connection="team/crm",
                status=429,
                seconds=90,
                scope="credential",
                endpoint="/api/c",
            )
        )
        await asyncio.sleep(0)
        await asyncio.gather(*throttles._tasks)
        return posted.events, throttles.paused("team/crm")

    events, paused = asyncio.run(scenario())
    assert len(events) == 3
    assert (
        "answered 429 with Retry-After 30s on /api/a: no proxy replica calls /api/a"
        in (events[0][1])
    )
    assert "other paths are not paused" in events[0][1]
    assert "answered 429 with Retry-After 90s on /api/c, the credential's limit" in events[2][1]
    assert "no proxy replica calls this connection" in events[2][1]
    assert [(pause.scope, pause.endpoint, pause.status) for pause in paused] == [
        ("credential", "/api/c", 429),
        ("endpoint", "/api/a", 429),
        ("endpoint", "/api/b", 503),
    ]
    assert paused[1].what == "/api/a only"


def test_a_bound_on_renewals_is_told_once_per_window() -> None:
    async def scenario() -> list[tuple[str, str]]:
        posted = Posted()
        throttles = Throttles(_routes(), posted)  # type: ignore[arg-type]
        for _ in range(4):  # each worker that met the bound
            throttles.bounded(RenewalsBounded(connection="team/crm", renewals=2, seconds=50))
        await asyncio.sleep(0)
        await asyncio.gather(*throttles._tasks)
        return posted.events

    events = asyncio.run(scenario())
    assert len(events) == 1
    assert "401s renewed this connection's token 2 times within a minute" in events[0][1]


def test_an_endpoint_longer_than_a_frame_may_carry_is_refused_by_the_reader() -> None:
    frame = Throttled(connection="team/crm", status=429, seconds=1, endpoint="/a").model_dump()
    frame["endpoint"] = "/" + "a" * MAX_ENDPOINT_CHARS
    with pytest.raises(Unreadable):
        read_replica_message(json.dumps(frame))
