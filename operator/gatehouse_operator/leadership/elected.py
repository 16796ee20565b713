"""The controller under leader election: stand by until the Lease is ours, then run kopf.

While standing by, the process answers its liveness and readiness probes (the port kopf's own
liveness endpoint takes over), so a standby counts as available to its Deployment and PDB, and a
rollout never waits on the Lease. See leadership for the election and its timings.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sys
from typing import Any
from urllib.parse import urlsplit

import kopf
from aiohttp import web
from kubernetes.aio import client

from gatehouse_operator.kube import api_client
from gatehouse_operator.leadership.lease import LeaderLabel, Leadership

log = logging.getLogger("gatehouse.operator")
# The exit status of a leader that lost its Lease: its container restarts as a standby.
LOST_LEASE_EXIT = 75


async def _standby_health(liveness: str) -> web.AppRunner:
    """Answers ``liveness`` (kopf's URL) with 200 while this process stands by."""
    where = urlsplit(liveness)

    async def alive(_: web.Request) -> web.Response:
        return web.Response(text="standing by")

    app = web.Application()
    app.router.add_get(where.path or "/healthz", alive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, where.hostname, where.port).start()
    return runner


async def run(lease: str, liveness: str, identity: str, **operator: Any) -> int:
    """Stands by, leads, and gives the Lease up on a clean stop; ``operator`` is kopf's."""
    api = await api_client()
    # SIGTERM before kopf runs (standing by, or just after taking the Lease) stops this process
    # too: kopf installs its own handlers over these, and is given the same flag.
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        namespace, name = lease.split("/", 1)
        leadership = Leadership(client.CoordinationV1Api(api), namespace, name, identity)
        pod = os.environ.get("POD_NAME", "")
        label = LeaderLabel(client.CoreV1Api(api), namespace, name, pod)
        if not await _stand_by(leadership, label, liveness, stopping):
            return 0  # stopped while standing by: nothing held, nothing to give up
        keeper = asyncio.create_task(leadership.keep(), name="lease")
        lost = functools.partial(_lost, leadership)
        keeper.add_done_callback(lost)
        # The controller's clean-up gives the Lease up as soon as it has stopped serving,
        # rather than after kopf has waited for its last tasks (seconds a standby would wait).
        operator["memo"].leadership = leadership
        try:
            try:
                await asyncio.wait_for(label.mark(), leadership.timings.retry_seconds * 2)
            except TimeoutError:
                log.error("cannot label this Pod the leader in time; the Service may lag")
            if leadership.holding() and not stopping.is_set():
                # kopf's Identity is a NewType of str that kopf does not export.
                await kopf.operator(
                    liveness_endpoint=liveness,
                    identity=identity,  # type: ignore[arg-type]
                    stop_flag=stopping,
                    **operator,
                )
        finally:
            keeper.remove_done_callback(lost)
            keeper.cancel()
            await leadership.release()
    finally:
        await api.close()  # type: ignore[no-untyped-call]
    return 0


async def _stand_by(
    leadership: Leadership, label: LeaderLabel, liveness: str, stopping: asyncio.Event
) -> bool:
    """Waits for the Lease, answering the probes meanwhile; False if stopped first (a Lease
    taken in the same moment is given back)."""
    health = await _standby_health(liveness)
    try:
        await label.clear_own()
        acquired = asyncio.create_task(leadership.acquire())
        stopped = asyncio.create_task(stopping.wait())
        await asyncio.wait({acquired, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (acquired, stopped):
            task.cancel()
        if stopping.is_set():
            await leadership.release()
            return False
        return leadership.holding()
    finally:
        await health.cleanup()


def _lost(leadership: Leadership, keeper: asyncio.Task[None]) -> None:
    """The Lease was not renewed in time: another replica may lead already, so this one stops
    acting now (no status write, no table after this), rather than after a graceful stop."""
    if keeper.cancelled() or leadership.released:
        return
    log.critical("exiting: the Lease is no longer this replica's")
    logging.shutdown()
    sys.stdout.flush()
    os._exit(LOST_LEASE_EXIT)
