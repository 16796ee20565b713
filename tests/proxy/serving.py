"""A real proxy (uvicorn on 127.0.0.1) holding a table the test writes, beside real upstreams.

For tests of what happens between tenants on one replica: no operator is needed to hold a table,
so the table is installed directly; the table channel itself is tested end to end elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from aiohttp import web

from gatehouse_contract.frames import AppEntry, ConnectionEntry, Snapshot
from gatehouse_contract.keyring import Keyring
from gatehouse_contract.request_deadline import with_head_deadline
from gatehouse_contract.routes import (
    AppRoute,
    AwsSigning,
    CachePolicy,
    ConnectionRoute,
    Credential,
    Limits,
    UpstreamTls,
    entry_digest,
    token_sha256,
)
from gatehouse_dev.processes import free_port
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.upstream import create_app as create_upstream
from gatehouse_proxy.app import Proxy, admin_app, create_app
from gatehouse_proxy.limits.tenancy import TenantLimits
from gatehouse_proxy.observation.audit import AuditSettings
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.settings import ProxySettings
from gatehouse_proxy.store.shared_store import StoreSettings
from gatehouse_proxy.table.routing_table import RoutingTable

KEYRING = Keyring.generate("k1")
LIMITS = Limits(
    timeout_seconds=30,
    max_request_bytes=10 * 1024 * 1024,
    max_response_bytes=10 * 1024 * 1024,
    requests_per_minute=100_000,
)


@dataclasses.dataclass(frozen=True)
class Tenant:
    """One namespace with one connection and one app linked to it under the alias ``api``."""

    namespace: str
    origin: str
    auth: str = "none"
    secret: str = ""
    parameter: str = ""
    location: str = ""
    limits: Limits = LIMITS
    methods: frozenset[str] = frozenset({"GET", "POST"})
    # The connection's own headers (spec.headers) and allowed answer types.
    headers: tuple[tuple[str, str], ...] = ()
    content_types: tuple[str, ...] = ()
    cache: CachePolicy | None = None
    aws: AwsSigning | None = None  # awsSigV4's region and service
    # The connection's own TLS, and its client certificate (chain and key in PEM), encrypted into
    # it as the operator does.
    tls: UpstreamTls | None = None
    client_certificate: bytes = b""

    @property
    def token(self) -> str:
        return f"app-token-{self.namespace}"

    @property
    def app_key(self) -> str:
        return f"{self.namespace}/DataApp/app"

    def connection(self) -> ConnectionRoute:
        key, uid = f"{self.namespace}/api", f"uid-{self.namespace}"
        credential = Credential(
            type=self.auth,  # type: ignore[arg-type]
            parameter=self.parameter,
            location=self.location,  # type: ignore[arg-type]
            aws=self.aws,
        )
        if self.secret:
            context = credential.context(uid, self.origin)
            credential = credential.model_copy(
                update={"encrypted": KEYRING.encrypt(self.secret.encode(), context)}
            )
        tls = self.tls
        if self.client_certificate:
            encrypted = KEYRING.encrypt(
                self.client_certificate, UpstreamTls.context(uid, self.origin)
            )
            tls = (tls or UpstreamTls()).model_copy(update={"client_certificate": encrypted})
        return ConnectionRoute(
            key=key,
            uid=uid,
            origin=self.origin,
            allowed_methods=self.methods,
            allowed_paths=("/",),
            credential=credential,
            limits=self.limits,
            headers=self.headers,
            content_types=self.content_types,
            cache=self.cache,
            tls=tls,
        )

    def app(self) -> AppRoute:
        return AppRoute(
            key=self.app_key,
            token_sha256=token_sha256(self.token),
            links={"api": f"{self.namespace}/api"},
        )


def table(tenants: Sequence[Tenant], version: int = 1) -> RoutingTable:
    digest = 0
    for tenant in tenants:
        digest ^= entry_digest("connection", f"{tenant.namespace}/api", version)
        digest ^= entry_digest("app", tenant.app_key, version)
    snapshot = Snapshot(
        version=version,
        digest=f"{digest:x}",
        connections=tuple(ConnectionEntry(rev=version, route=t.connection()) for t in tenants),
        apps=tuple(AppEntry(rev=version, route=t.app()) for t in tenants),
    )
    return RoutingTable.from_snapshot(snapshot, KEYRING.active)


@dataclasses.dataclass
class Running:
    url: str
    admin_url: str
    proxy: Proxy


async def _serve(
    app: Any, port: int, http: Any = "auto"
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, lifespan="auto", http=http
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return server, task


@contextlib.asynccontextmanager
async def running_proxy(
    tmp_path: Path,
    tenants: Sequence[Tenant],
    limits: TenantLimits | None = None,
    *,
    tracing: Tracing | None = None,
    audit: AuditSettings | None = None,
    store: RedisServer | None = None,
) -> AsyncIterator[Running]:
    keyring_file = tmp_path / "keyring.json"
    keyring_file.write_text(KEYRING.dump())
    settings = ProxySettings(
        keyring_file=keyring_file,
        # Nothing listens there: the feed retries in the background, the test's table stays.
        operator_url=f"https://127.0.0.1:{free_port()}",
        allow_http=True,
        allowed_private_networks=("127.0.0.0/8",),
        tenant_limits=limits or TenantLimits(),
        audit=audit or AuditSettings(),
        store=None if store is None else StoreSettings(store.url, password=store.password),
    )
    proxy = Proxy(settings, tracing)
    app = create_app(proxy)
    # The app port with the production protocol (request-head deadline and bounds).
    servers = [
        await _serve(app, free_port(), with_head_deadline(15.0)),
        await _serve(admin_app(proxy), free_port()),
    ]
    proxy.store.install(table(tenants))
    try:
        yield Running(
            url=f"http://127.0.0.1:{servers[0][0].config.port}",
            admin_url=f"http://127.0.0.1:{servers[1][0].config.port}",
            proxy=proxy,
        )
    finally:
        for server, task in servers:
            server.should_exit = True
            await task


@contextlib.asynccontextmanager
async def upstream(
    app: web.Application | None = None, tls: ssl.SSLContext | None = None
) -> AsyncIterator[str]:
    """A real upstream on 127.0.0.1 (the dev stand-in, unless the test brings its own), over
    ``tls`` if given."""
    runner = web.AppRunner(app or create_upstream())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()
    try:
        yield f"{'http' if tls is None else 'https'}://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
