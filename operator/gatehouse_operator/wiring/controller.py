"""The controller process: its parts assembled, its servers started and stopped.

Three servers run in the operator's event loop beside kopf (and kopf's liveness endpoint): the
table channel for the proxies (aiohttp, TLS), the metrics (aiohttp, plain HTTP) and the front end
(uvicorn: the service API and the page). The housekeeping duties are tasks of their own
(``housekeeping``). The admission webhook is a process of its own (``webhook``); the leader is
elected before any of this starts (``gatehouse_operator.leadership.elected``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf
from aiohttp import web

from gatehouse_contract.keyring import KeyringError, KeyringFile, KeyringSource
from gatehouse_operator.access.reviews import Access
from gatehouse_operator.keys.credentials import CredentialEncrypter
from gatehouse_operator.keys.keyring_secret import KeyringSecret
from gatehouse_operator.keys.sealed_values import (
    SEALING_KEYS_FILE,
    Resealer,
    SealingKeysFile,
    SealingKeysSource,
)
from gatehouse_operator.keys.sealing_secret import SealingKeysSecret
from gatehouse_operator.kube import WATCHED_SELECTOR, Kube, api_client
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.leadership.lease import Leadership
from gatehouse_operator.runtime import Runtime
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.status import StatusWriter
from gatehouse_operator.table import metrics
from gatehouse_operator.table.channel import TableChannel
from gatehouse_operator.table.gather import Gatherer
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout
from gatehouse_operator.table.store import RouteStore
from gatehouse_operator.table.throttles import Throttles
from gatehouse_operator.wiring import front_end, housekeeping, resync

# No handler needs a finalizer any more; naming the one earlier versions put on connections and
# apps lets kopf take it off the next time it sees each of them.
FINALIZER = "gatehouse.dev/finalizer"
log = logging.getLogger("gatehouse.operator")


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="gatehouse.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="gatehouse.dev", key="last-handled-configuration"
    )
    # Filtered by the API server, not here: unrelated Secrets (thousands of Helm releases of
    # hundreds of KiB each) are neither sent to the operator nor parsed by it.
    settings.watching.label_selectors["", "v1", "secrets"] = WATCHED_SELECTOR
    options: OperatorSettings = memo.options  # checked by __main__ before kopf started
    api = await api_client()
    kube = Kube.of(api, options.namespaces)
    keyring = await _keyring(options, kube)
    sealing = _sealing(options)
    if isinstance(sealing, SealingKeysSecret):
        await sealing.refresh(kube)  # never raises: sealed values wait for it, nothing else
    runtime = assemble(options, kube, keyring, sealing)
    memo.tasks = []

    connections, apps = await resync.existing(runtime)
    expected = set(connections) | set(apps)
    runtime.routes.startup.expect(expected, options.initial_sync_seconds)

    access = Access(api)
    channel = web.AppRunner(runtime.channel.create_app(), access_log=None)
    await channel.setup()
    await web.TCPSite(
        channel, options.table_host, options.table_port, ssl_context=runtime.channel.tls.context
    ).start()
    if options.metrics_port:
        found = metrics.registry(
            runtime.journal,
            runtime.replicas,
            runtime.rollout,
            runtime.status,
            runtime.channel.dropped,
        )
        metrics_runner = web.AppRunner(metrics.create_app(found), access_log=None)
        await metrics_runner.setup()
        await web.TCPSite(metrics_runner, options.metrics_host, options.metrics_port).start()
        memo.runners = [channel, metrics_runner]
    else:
        memo.runners = [channel]
    servers = [
        front_end.EmbeddedServer(
            front_end.config(front_end.app(runtime, access), options.api_host, options.api_port)
        )
    ]
    memo.runtime = runtime
    memo.access = access
    memo.api = api
    memo.servers = servers
    memo.tasks += [
        *(asyncio.create_task(server.serve(), name="server") for server in servers),
        *(asyncio.create_task(d.run(), name=d.what) for d in housekeeping.duties(runtime)),
        asyncio.create_task(runtime.rollout.run(), name="rollout"),
    ]
    log.info("waiting to see %d existing resources before the first table", len(expected))


def assemble(
    settings: OperatorSettings,
    kube: Kube,
    keyring: KeyringSource,
    sealing: SealingKeysSource | None = None,
) -> Runtime:
    """The controller's parts, each given what it works with."""
    routes, journal, status = RouteStore(), Journal(), StatusWriter(kube)
    # A replica that moves wakes the rollout (made next: no replica connects before it exists).
    replicas = Replicas(settings.replica_grace_seconds, lambda: rollout.wake())
    channel = TableChannel(keyring, routes, journal, replicas, Throttles(routes, kube.resources))
    rollout = Rollout(routes, journal, replicas, status.write)
    encrypter = CredentialEncrypter(keyring)
    return Runtime(
        settings,
        kube,
        keyring,
        routes,
        journal,
        replicas,
        channel,
        rollout,
        status,
        encrypter,
        sealing or _sealing(settings),
        Resealer(),
        Gatherer(channel),
    )


def _sealing(settings: OperatorSettings) -> SealingKeysSource:
    if settings.sealing_keys_secret:
        namespace, _, name = settings.sealing_keys_secret.partition("/")
        published = settings.sealing_keys_config_map.partition("/")
        return SealingKeysSecret(
            namespace,
            name,
            create=settings.sealing_keys_create,
            published=(published[0], published[2]) if published[2] else None,
        )
    # A keyring file is a mounted Secret's key: the sealing keys are the file beside it.
    beside = settings.keyring_file.with_name(SEALING_KEYS_FILE) if settings.keyring_file else None
    return SealingKeysFile(beside)


async def _keyring(options: OperatorSettings, kube: Kube) -> KeyringSource:
    if options.keyring_file:
        return KeyringFile(options.keyring_file)
    namespace, _, name = options.keyring_secret.partition("/")
    keyring = KeyringSecret(namespace, name, create=options.keyring_create)
    try:
        await keyring.load(kube)
    except KeyringError as error:
        raise kopf.PermanentError(str(error)) from None
    except ApiError as error:
        # Retried by kopf: the API server may be busy, or RBAC not yet in effect.
        raise kopf.TemporaryError(
            f"cannot read the keyring Secret {keyring.ref} (HTTP {error.status} {error.reason})",
            delay=5,
        ) from None
    return keyring


@kopf.on.cleanup()
async def stop(memo: Any, **_: Any) -> None:
    await memo.runtime.channel.close()
    for runner in memo.runners:
        await runner.cleanup()
    for server in memo.servers:
        server.should_exit = True
    for task in memo.tasks:
        if task.get_name() != "server":
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*memo.tasks, return_exceptions=True)
    leadership: Leadership | None = getattr(memo, "leadership", None)
    if leadership is not None:
        await leadership.release()  # serving no more: a standby may lead now
    await memo.api.close()
