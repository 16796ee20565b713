"""A connection's cache compiled into its route (issue 51): the policy as the proxies read it, its
epoch the purge annotation's time (a purge is a new table delta), a connection without a cache
off the wire, and an annotation that is not a time a condition and an Event, the cache off.

The API server is a stand-in here; the purge through the service API, with the operator running
against a real one, is tested end to end (tests/e2e/test_cache_purge.py)."""

from __future__ import annotations

import asyncio
import copy
import datetime
from typing import Any

import pytest

from gatehouse_contract.routes import CachePolicy, ConnectionRoute
from gatehouse_operator.api.cache_purge import (
    CACHE_PURGED_AT,
    MAX_PURGE_CHARS,
    purge_problem,
    purge_time,
)
from gatehouse_operator.controllers import external_connections
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.table.journal import Delta
from gatehouse_operator.wiring.controller import assemble
from tests.operator.kube_fakes import kube_of
from tests.operator.test_credential_watch import CONNECTION, SecretsApi, conditions
from tests.operator.test_missed_deletions import StaticKeyring

KEY = "shop/vendor"


def _connection(cache: dict[str, Any] | None, purged_at: str | None) -> dict[str, Any]:
    """A connection whose Secret is missing: not Ready, so its status is written at once (with
    no proxy replica to wait for), its route in the table marked unavailable."""
    connection: dict[str, Any] = copy.deepcopy(CONNECTION)
    if cache is not None:
        connection["spec"]["cache"] = cache
    if purged_at is not None:
        connection["metadata"]["annotations"] = {CACHE_PURGED_AT: purged_at}
    return connection


def _reconciled(runtime: Runtime, body: dict[str, Any]) -> Delta | None:
    """The delta the reconcile published, if any: the channel's, if it flushed before the loop
    ended (the first time), else the one it would have flushed soon after."""
    before = runtime.journal.version
    asyncio.run(external_connections.reconcile(runtime, resource_of(copy.deepcopy(body))))
    late = runtime.journal.flush(runtime.routes)
    if late is not None:
        return late
    return runtime.journal.history[-1] if runtime.journal.version != before else None


def _route(runtime: Runtime) -> ConnectionRoute:
    route = runtime.routes.connection(KEY)
    assert route is not None
    return route


def test_the_route_carries_the_cache_and_a_purge_is_a_new_delta() -> None:
    api = SecretsApi(None, True)
    runtime = assemble(OperatorSettings(), kube_of(api), StaticKeyring())
    cache = {"ttlSeconds": 30, "maxTTLSeconds": 600, "scope": "connection"}
    first = _reconciled(runtime, _connection(cache, None))
    assert first is not None
    assert _route(runtime).cache == CachePolicy(
        ttl_seconds=30, max_ttl_seconds=600, max_body_bytes=262_144, scope="connection", epoch=""
    )
    assert "CachePurged" not in conditions(api)
    assert _reconciled(runtime, _connection(cache, None)) is None  # as it was: no delta

    purged = "2026-11-29T09:00:00.123456Z"
    delta = _reconciled(runtime, _connection(cache, purged))
    assert delta is not None
    assert delta.changed == (("connection", KEY),)
    assert f'"epoch":"{purged}"'.encode() in delta.payload
    assert _route(runtime).cache == CachePolicy(
        ttl_seconds=30,
        max_ttl_seconds=600,
        max_body_bytes=262_144,
        scope="connection",
        epoch=purged,
    )
    found = conditions(api)["CachePurged"]
    assert (found["status"], found["reason"]) == ("True", "Purged")
    assert found["message"] == f"answers cached before {purged} are never served again"

    again = _reconciled(runtime, _connection(cache, "2026-11-29T10:00:00Z"))
    assert again is not None
    assert b'"epoch":"2026-11-29T10:00:00Z"' in again.payload


def test_a_connection_without_a_cache_stays_off_the_wire() -> None:
    runtime = assemble(OperatorSettings(), kube_of(SecretsApi(None, True)), StaticKeyring())
    delta = _reconciled(runtime, _connection(None, "2026-11-29T09:00:00Z"))
    assert _route(runtime).cache is None
    assert delta is not None
    assert b'"cache"' not in delta.payload


@pytest.mark.parametrize(
    "purged_at",
    [
        "yesterday",
        "2026-11-29",  # a date, not a time
        "2026-13-01T00:00:00Z",  # no 13th month
        "2026-11-29T09:00:00",  # no offset
        "2026-11-29T09:00:00." + "1" * 9 + "+00:00" + " " * 40,
        "2026-11-29T09:00:00." + "1" * (MAX_PURGE_CHARS - 20) + "Z",  # over 64 characters
    ],
)
def test_an_annotation_that_is_not_a_time_turns_the_cache_off_and_says_so(
    purged_at: str,
) -> None:
    api = SecretsApi(None, True)
    runtime = assemble(OperatorSettings(), kube_of(api), StaticKeyring())
    _reconciled(runtime, _connection({}, purged_at))
    route = _route(runtime)
    assert route.cache is None
    found = conditions(api)
    assert (found["CachePurged"]["status"], found["CachePurged"]["reason"]) == (
        "False",
        "InvalidPurgeTime",
    )
    assert found["CachePurged"]["message"] == (
        f"metadata.annotations[{CACHE_PURGED_AT}] must be an RFC 3339 time of at most 64 "
        "characters (2026-11-29T09:00:00Z), as gatehouse cache purge sets it; the cache is off "
        "until it is: every request reaches the API"
    )
    assert ("Warning", "InvalidPurgeTime", found["CachePurged"]["message"]) in api.events
    assert found["Ready"]["reason"] == "SecretNotFound"  # advisory: Ready does not read it


def test_a_purge_time_is_an_epoch_the_route_takes() -> None:
    now = datetime.datetime(
        2026, 11, 29, 10, 0, 0, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
    )
    said = purge_time(now)
    assert said == "2026-11-29T08:00:00.000005Z"
    assert purge_problem(said) == ""
    assert len(said) <= MAX_PURGE_CHARS
    assert CachePolicy(ttl_seconds=1, max_ttl_seconds=1, max_body_bytes=1, epoch=said).epoch == said
    for accepted in ("2026-11-29T09:00:00Z", "2026-11-29t09:00:00.5+05:30"):
        assert purge_problem(accepted) == "", accepted
