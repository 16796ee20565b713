"""Operator start-up and shut-down: settings, API client, servers, webhook, keyring watch.

Three servers run in the operator's event loop: the routing-table stream for the proxies, the
service API, and (kopf's) admission webhook.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from typing import Any

import kopf
import uvicorn
from kubernetes.aio import client, config
from starlette.applications import Starlette

from gatehouse_operator.access import Access
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.controllers import connection_tests, external_connections
from gatehouse_operator.kube import Kube
from gatehouse_operator.runtime import Runtime, app_key, resource_key
from gatehouse_operator.service_api import app as service_api
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.table_server import EmbeddedServer, Publisher, create_app
from gatehouse_operator.webhook import WEBHOOK_CONFIGURATION, WebhookServer
from gatehouse_proxy.sealing import KeyringFile

FINALIZER = "gatehouse.dev/finalizer"
TEST_SWEEP_SECONDS = 10
log = logging.getLogger("gatehouse.operator")


async def _api_client() -> client.ApiClient:
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return client.ApiClient(configuration)
    api: client.ApiClient = await config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=os.environ.get("KUBECONFIG")
    )
    return api


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="gatehouse.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="gatehouse.dev", key="last-handled-configuration"
    )
    options: OperatorSettings = memo.options  # checked by __main__ before kopf started
    settings.admission.server = WebhookServer(
        addr=options.webhook_host, port=options.webhook_port, service=options.webhook_service
    )
    settings.admission.managed = WEBHOOK_CONFIGURATION
    keyring = KeyringFile(options.keyring_file)
    api = await _api_client()
    runtime = Runtime(options, Kube(api), keyring, Publisher(keyring))

    expected = {resource_key(item) for item in await runtime.kube.existing(EXTERNAL_CONNECTION)}
    for kind in (DATA_APP, CHART_TYPE):
        expected |= {app_key(kind, item) for item in await runtime.kube.existing(kind)}
    runtime.world.expect(expected, options.initial_sync_seconds)

    access = Access(api)
    servers = [
        _embedded(create_app(runtime.publisher), options.table_host, options.table_port),
        _embedded(service_api.create_app(runtime, access), options.api_host, options.api_port),
    ]
    memo.runtime = runtime
    memo.access = access
    memo.api = api
    memo.servers = servers
    memo.tasks = [
        *(asyncio.create_task(server.serve(), name="server") for server in servers),
        asyncio.create_task(_housekeeping(runtime), name="housekeeping"),
    ]
    log.info("waiting to see %d existing resources before the first table", len(expected))


def _embedded(app: Starlette, host: str, port: int) -> EmbeddedServer:
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="off"
    )
    return EmbeddedServer(config)


async def _housekeeping(runtime: Runtime) -> None:
    """Publishes the first table once synced, re-seals everything when the keyring rotates, and
    deletes expired ConnectionTests."""
    active = runtime.keyring.current().active
    for tick in itertools.count(1):
        await asyncio.sleep(1.0)
        if runtime.publisher.current is None:
            runtime.refresh_table()
        if tick % TEST_SWEEP_SECONDS == 0:
            try:
                await connection_tests.expire_finished(runtime)
            except client.ApiException as error:
                log.warning("cannot sweep expired ConnectionTests (HTTP %s)", error.status)
        try:
            now_active = runtime.keyring.current().active
        except (OSError, ValueError) as error:
            log.error("cannot read the keyring (%s); keeping the current key", type(error).__name__)
            continue
        if now_active != active:
            log.info("keyring rotated to key %r: re-sealing every credential", now_active)
            active = now_active
            for body in list(runtime.world.connection_bodies.values()):
                await external_connections.reconcile(runtime, body)


@kopf.on.cleanup()
async def stop(memo: Any, **_: Any) -> None:
    for server in memo.servers:
        server.should_exit = True
    for task in memo.tasks:
        if task.get_name() != "server":
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*memo.tasks, return_exceptions=True)
    await memo.runtime.http.aclose()
    await memo.api.close()
