"""Calls saved, as a replica reports them: fetches through a real proxy (uvicorn on 127.0.0.1) with
a real redis-server and a real upstream, and the UsageReport the operator's Gather is answered
with: of the app's requests on a connection with a cache, those the cache answered (hits, and
identical requests that waited for one fetch), beside the vendor's calls the upstream counted; a
connection without a cache reports none (its rows as the release before reads them)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatehouse_contract.frames import Gather, UsageReport, read_replica_message
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.upstream import CALLS
from tests.proxy.caching.test_cached_fetches import cached_proxy, calls
from tests.proxy.serving import Running, Tenant, running_proxy, upstream


@pytest.fixture(autouse=True)
def _empty(empty_store: RedisServer) -> None:
    CALLS.clear()


async def _reported(running: Running) -> list[dict[str, Any]]:
    """The UsageReport rows a Gather is answered with, as JSON on the channel."""
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    await running.proxy.activity.answer(Gather(id="g", usage=True), send)
    reports = [read_replica_message(text.encode()) for text in sent[:-1]]
    assert all(isinstance(report, UsageReport) for report in reports)
    return [row for text in sent[:-1] for row in json.loads(text)["rows"]]


def test_the_replica_reports_the_requests_its_cache_answered(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async def scenario() -> None:
        async with cached_proxy(tmp_path, redis_server) as (running, get):
            # Five identical requests at once on a cold cache: one goes to the vendor, the
            # others wait for its answer (collapsed); then three hits.
            together = await asyncio.gather(*(get("/cacheable/report?delay=0.3") for _ in range(5)))
            assert [reply.status_code for reply in together] == [200] * 5
            for _ in range(3):
                assert (await get("/cacheable/report?delay=0.3")).status_code == 200
            assert calls() == 1
            (row,) = await _reported(running)
        assert row["connection"] == "team/api"
        assert sum(row["durations"]) == 8
        assert row["cached"] == 7

    asyncio.run(scenario())


def test_a_connection_without_a_cache_reports_no_calls_saved(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async def scenario() -> None:
        async with upstream() as origin:
            tenant = Tenant("plain", origin)
            async with (
                running_proxy(tmp_path, [tenant], store=redis_server) as running,
                httpx.AsyncClient(timeout=10) as client,
            ):
                for _ in range(3):
                    reply = await client.get(
                        f"{running.url}/v1/fetch/api/cacheable/report",
                        headers={"Authorization": f"Bearer {tenant.token}"},
                    )
                    assert reply.status_code == 200
                    assert "cache-status" not in reply.headers
                (row,) = await _reported(running)
        assert CALLS["/cacheable"] == 3
        assert sum(row["durations"]) == 3
        assert "cached" not in row

    asyncio.run(scenario())
