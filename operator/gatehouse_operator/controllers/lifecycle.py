"""Operator start-up and shut-down: settings, API client, servers, keyring watch.

Two servers run in the operator's event loop: the table channel for the proxies (aiohttp, TLS)
and the service API. The admission webhook is a process of its own (admission_server).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Iterator
from typing import Any

import kopf
import uvicorn
from aiohttp import web
from kubernetes.aio import client
from starlette.applications import Starlette

from gatehouse_contract.request_deadline import with_head_deadline
from gatehouse_contract.sealing import KeyringError, KeyringFile, KeyringSource
from gatehouse_operator.access import Access
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.conditions import CREDENTIAL_WATCHED
from gatehouse_operator.controllers import connection_tests, external_connections, linked_apps
from gatehouse_operator.credentials import CREDENTIAL_READY
from gatehouse_operator.keyring_secret import KeyringSecret
from gatehouse_operator.kube import API_ERRORS, WATCHED_SELECTOR, Kube, api_client, failure
from gatehouse_operator.leadership import Leadership
from gatehouse_operator.runtime import Runtime, app_key, resource_key
from gatehouse_operator.service_api import app as service_api
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.table import metrics
from gatehouse_operator.web import routes as connections_page

# No handler needs a finalizer any more; naming the one earlier versions put on connections and
# apps lets kopf take it off the next time it sees each of them.
FINALIZER = "gatehouse.dev/finalizer"
TEST_SWEEP_SECONDS = 10
RESYNC_SECONDS = 60
# How soon a keyring Secret edited by hand (a rotation) is noticed; one GET each time.
KEYRING_POLL_SECONDS = 10
# How long the service API and page wait for a request's head (a browser or client sends it at
# once); bodies have their own bound (service_api.models.BODY_SECONDS).
API_HEAD_SECONDS = 10.0
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
    kube = Kube(api, options.namespaces)
    keyring = await _keyring(options, kube)
    runtime = Runtime(options, kube, keyring)
    memo.tasks = []

    connections, apps = await _existing(runtime)
    expected = set(connections) | set(apps)
    runtime.routes.startup.expect(expected, options.initial_sync_seconds)

    access = Access(api)
    channel = web.AppRunner(runtime.channel.create_app(), access_log=None)
    await channel.setup()
    await web.TCPSite(
        channel, options.table_host, options.table_port, ssl_context=runtime.channel.tls.context
    ).start()
    if options.metrics_port:
        found = metrics.registry(runtime.journal, runtime.replicas, runtime.rollout)
        metrics_runner = web.AppRunner(metrics.create_app(found), access_log=None)
        await metrics_runner.setup()
        await web.TCPSite(metrics_runner, options.metrics_host, options.metrics_port).start()
        memo.runners = [channel, metrics_runner]
    else:
        memo.runners = [channel]
    servers = [
        _embedded(
            service_api.create_app(runtime, access, connections_page.mount(runtime, access)),
            options.api_host,
            options.api_port,
        ),
    ]
    memo.runtime = runtime
    memo.access = access
    memo.api = api
    memo.servers = servers
    memo.tasks += [
        *(asyncio.create_task(server.serve(), name="server") for server in servers),
        asyncio.create_task(_housekeeping(runtime), name="housekeeping"),
        asyncio.create_task(runtime.rollout.run(), name="rollout"),
    ]
    log.info("waiting to see %d existing resources before the first table", len(expected))


async def _keyring(options: OperatorSettings, kube: Kube) -> KeyringSource:
    if options.keyring_file:
        return KeyringFile(options.keyring_file)
    namespace, _, name = options.keyring_secret.partition("/")
    keyring = KeyringSecret(namespace, name, create=options.keyring_create)
    try:
        await keyring.load(kube)
    except KeyringError as error:
        raise kopf.PermanentError(str(error)) from None
    except client.ApiException as error:
        # Retried by kopf: the API server may be busy, or RBAC not yet in effect.
        raise kopf.TemporaryError(
            f"cannot read the keyring Secret {keyring.ref} (HTTP {error.status} {error.reason})",
            delay=5,
        ) from None
    return keyring


async def _existing(runtime: Runtime) -> tuple[dict[str, str], dict[str, str]]:
    """The connections and the apps in the cluster now: their uids by key."""
    connections = {
        resource_key(item): item["metadata"]["uid"]
        for item in await runtime.kube.existing(EXTERNAL_CONNECTION)
    }
    apps = {
        app_key(kind, item): item["metadata"]["uid"]
        for kind in (DATA_APP, CHART_TYPE)
        for item in await runtime.kube.existing(kind)
    }
    return connections, apps


async def _drop_vanished(runtime: Runtime) -> None:
    """Forgets the routes the store holds and the cluster no longer has.

    A watch that restarts lists again and never reports what vanished meanwhile, so a missed
    deletion would keep a route (and its credential) alive until the operator restarts. Only
    what the store held before the listing is compared: anything newer may not be in it yet.
    """
    routes = runtime.routes
    held = {key: _uid(routes.connection_body(key)) for key in routes.connection_keys()}
    held_apps = {key: _uid(routes.app_body(key)) for key in routes.app_keys()}
    connections, apps = await _existing(runtime)
    for key, uid in held.items():
        body = routes.connection_body(key)
        if connections.get(key) != uid and body is not None and body["metadata"]["uid"] == uid:
            log.info("connection %s was deleted while unwatched: dropping its route", key)
            await external_connections.forget(runtime, body)
    for key, uid in held_apps.items():
        body = routes.app_body(key)
        if apps.get(key) != uid and body is not None and body["metadata"]["uid"] == uid:
            log.info("app %s was deleted while unwatched: dropping its route", key)
            await linked_apps.forget(runtime, linked_apps.KINDS[key.split("/")[1]], body)


def _uid(body: dict[str, Any] | None) -> str:
    return str(body["metadata"]["uid"]) if body else ""


async def _reconcile_connections(runtime: Runtime, keys: list[str]) -> None:
    """Reconciles these connections again; one the API server cannot serve now keeps its route
    as it is and is tried again in 10 s (runtime.unread), as are all that are left when the
    API server cannot be reached at all."""
    for index, key in enumerate(keys):
        body = runtime.routes.connection_body(key)
        if body is None:
            continue
        try:
            await external_connections.reconcile(runtime, body)
        except client.ApiException as error:
            log.warning("cannot reconcile connection %s now (%s)", key, failure(error))
            runtime.unread.add(key)
        except API_ERRORS as error:
            log.warning(
                "cannot reach the API server (%s); %d connections left for later",
                failure(error),
                len(keys) - index,
            )
            runtime.unread.update(keys[index:])
            return


def _unwatched(runtime: Runtime) -> list[str]:
    """Connections whose Secret the watch does not see, or the operator may not read: read
    again every resync (a right granted later, or a rotation, shows within a minute)."""
    return [
        key
        for key in runtime.routes.connection_keys()
        if runtime.condition(key, CREDENTIAL_WATCHED).get("status") == "False"
        or runtime.condition(key, CREDENTIAL_READY).get("reason") == "SecretForbidden"
    ]


def _unread(runtime: Runtime) -> list[str]:
    """Connections whose Secret could not be read when its watch event came: taken off the list
    here, and put back by a read that fails again."""
    keys, runtime.unread = sorted(runtime.unread), set()
    return keys


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside kopf's event loop: kopf, not uvicorn, owns the process's signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _embedded(app: Starlette, host: str, port: int) -> EmbeddedServer:
    # The proxy's protocol: a deadline for each request head, and bounds on its size and on
    # pipelined requests, so trickled heads cannot hold the API's connections (and the one loop)
    # for as long as a client likes.
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http=with_head_deadline(API_HEAD_SECONDS),
    )
    return EmbeddedServer(config)


async def _housekeeping(runtime: Runtime) -> None:
    """Publishes the first table once synced, re-seals everything when the keyring rotates,
    deletes expired ConnectionTests, drops routes whose resources vanished unseen and reads
    again the Secrets the watch does not see.

    Each duty's failure is logged and the duty tried again at its next turn: an API server that
    is away (refused connections, not only HTTP errors) must not end the loop.
    """
    keyring = Rotation(runtime)
    for tick in itertools.count(1):
        await asyncio.sleep(1.0)
        if not runtime.journal.version:
            runtime.channel.flush()  # the first table, once the start-up gate opens
        if tick % TEST_SWEEP_SECONDS == 0:
            await _duty("sweep expired ConnectionTests", connection_tests.expire_finished(runtime))
            await _duty("read Secrets again", _reconcile_connections(runtime, _unread(runtime)))
        if tick % RESYNC_SECONDS == 0:
            await _duty("find missed deletions", _drop_vanished(runtime))
            await _duty(
                "read unwatched Secrets", _reconcile_connections(runtime, _unwatched(runtime))
            )
        if tick % KEYRING_POLL_SECONDS == 0 and isinstance(runtime.keyring, KeyringSecret):
            await _duty("read the keyring Secret", runtime.keyring.refresh(runtime.kube))
        await _duty("follow the keyring", keyring.follow())


async def _duty(what: str, work: Awaitable[None]) -> None:
    try:
        await work
    except Exception as error:  # any: housekeeping must outlive one failed turn
        log.warning("cannot %s (%s); trying again later", what, failure(error))


class Rotation:
    """Re-seals every credential, and re-keys the channel, when the keyring's active key moves."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.active = runtime.keyring.current().active

    async def follow(self) -> None:
        runtime = self.runtime
        try:
            now_active = runtime.keyring.current().active
        except (OSError, ValueError) as error:
            log.error("cannot read the keyring (%s); keeping the current key", type(error).__name__)
            return
        if now_active == self.active:
            return
        log.info("keyring rotated to key %r: re-sealing every credential", now_active)
        self.active = now_active
        runtime.channel.tls.use(runtime.keyring.current())
        await _reconcile_connections(runtime, runtime.routes.connection_keys())


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
