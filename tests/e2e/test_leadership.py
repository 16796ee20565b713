"""Leader election on the real API server: one holder at a time, a released Lease taken at once,
an abandoned one only after its duration, and a holder that cannot renew told so in time.

Short timings (a lease of 3 s, a deadline of 2 s) keep the test quick; the controller's are
kube-controller-manager's (15 s, 10 s, 2 s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from kubernetes.aio import client, config

from gatehouse_dev.cluster import Cluster
from gatehouse_operator.leadership.lease import Leadership, Timings

pytestmark = pytest.mark.e2e

FAST = Timings(lease_seconds=3, renew_deadline_seconds=2, retry_seconds=0.2)


@asynccontextmanager
async def _coordination(cluster: Cluster) -> AsyncIterator[client.CoordinationV1Api]:
    api = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        yield client.CoordinationV1Api(api)
    finally:
        await api.close()


def test_one_holder_and_a_released_lease_is_taken_at_once(cluster: Cluster, namespace: str) -> None:
    async def scenario() -> None:
        async with _coordination(cluster) as coordination:
            first = Leadership(coordination, namespace, "lead", "first", FAST)
            second = Leadership(coordination, namespace, "lead", "second", FAST)
            await first.acquire()
            keeping = asyncio.create_task(first.keep())
            waiting = asyncio.create_task(second.acquire())
            await asyncio.sleep(2 * FAST.lease_seconds)  # renewed meanwhile: never expires
            assert not waiting.done()
            assert first.holding()
            keeping.cancel()
            started = time.monotonic()
            await first.release()
            await asyncio.wait_for(waiting, timeout=5)
            assert time.monotonic() - started < 1.0  # a retry period, not a lease duration
            assert second.holding()
            assert not first.holding()
            lease = await coordination.read_namespaced_lease("lead", namespace)
            assert lease.spec is not None
            assert lease.spec.holder_identity == "second"
            assert lease.spec.lease_transitions == 1

    asyncio.run(scenario())


def test_an_abandoned_lease_is_taken_after_its_duration(cluster: Cluster, namespace: str) -> None:
    async def scenario() -> None:
        async with _coordination(cluster) as coordination:
            gone = Leadership(coordination, namespace, "lead", "gone", FAST)
            await gone.acquire()  # and never renewed: a killed leader
            standby = Leadership(coordination, namespace, "lead", "standby", FAST)
            started = time.monotonic()
            await asyncio.wait_for(standby.acquire(), timeout=10)
            waited = time.monotonic() - started
            assert FAST.lease_seconds <= waited < FAST.lease_seconds + 1

    asyncio.run(scenario())


def test_a_holder_that_cannot_renew_stops_within_the_deadline(
    cluster: Cluster, namespace: str
) -> None:
    """Another writer takes the Lease (as after a partition): the holder's renewals fail from
    then on, and keep() returns once the deadline has passed, before the Lease could expire
    for anyone else."""

    async def scenario() -> None:
        async with _coordination(cluster) as coordination:
            holder = Leadership(coordination, namespace, "lead", "holder", FAST)
            await holder.acquire()
            keeping = asyncio.create_task(holder.keep())
            lease = await coordination.read_namespaced_lease("lead", namespace)
            assert lease.spec is not None
            lease.spec.holder_identity = "usurper"
            await coordination.replace_namespaced_lease("lead", namespace, lease)
            started = time.monotonic()
            await asyncio.wait_for(keeping, timeout=5)
            assert time.monotonic() - started <= FAST.renew_deadline_seconds + FAST.retry_seconds
            assert not holder.holding()

    asyncio.run(scenario())
