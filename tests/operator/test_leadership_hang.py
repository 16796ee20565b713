"""A leader whose API server hangs (frozen, or a partition that drops packets) gives the Lease up
by its deadline: every call is bounded in time. The API server here is a socket that accepts and
never answers; the Lease on a real API server is tested end to end (tests/e2e/test_leadership.py).
"""

from __future__ import annotations

import asyncio
import time

from kubernetes.aio import client

from gatehouse_operator.leadership.lease import Leadership, Timings

FAST = Timings(lease_seconds=3, renew_deadline_seconds=1, retry_seconds=0.2)


def test_a_leader_whose_api_server_hangs_stops_by_its_deadline() -> None:
    async def scenario() -> float:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # reads the request, answers nothing, until the client closes
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
        api = client.ApiClient(configuration)
        try:
            leadership = Leadership(client.CoordinationV1Api(api), "ns", "lead", "me", FAST)
            leadership.renewed_at = time.monotonic()  # held, renewed just now
            started = time.monotonic()
            await asyncio.wait_for(leadership.keep(), timeout=10)
            assert not leadership.holding()
            return time.monotonic() - started
        finally:
            await api.close()
            server.close()
            await server.wait_closed()

    took = asyncio.run(scenario())
    # The deadline, plus at most one bounded attempt (2 retries' time) past it.
    assert took < FAST.renew_deadline_seconds + 3 * FAST.retry_seconds + 0.5, took
