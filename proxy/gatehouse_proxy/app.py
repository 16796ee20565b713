"""The composition root: the parts of one proxy process made once and wired together.

What is made at once (the table, the feed, the tenants' limits, tracing, the observers) is made
here; what needs the shared store or the network (the pools, the quotas, the injector, and the
passage and connection tests that use them) is made in the app's lifespan. A new table prunes
what is no longer routed. The app port is :func:`create_app`, the admin port :func:`admin_app`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from gatehouse_contract.connecting import GrantsAnswered, GrantsAsked
from gatehouse_contract.connection_tests import ReplicaTestOutcome, ReplicaTestRequest
from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_proxy import admin
from gatehouse_proxy.caching.response_cache import ResponseCache
from gatehouse_proxy.connection_tests.runs import ConnectionTests
from gatehouse_proxy.credentials.aws_roles import RoleMinter
from gatehouse_proxy.credentials.connecting import Connecting
from gatehouse_proxy.credentials.fleet_grants import FleetGrants
from gatehouse_proxy.credentials.fleet_tokens import FleetTokens
from gatehouse_proxy.credentials.google_tokens import GoogleMinter
from gatehouse_proxy.credentials.grant_changes import GrantChanges
from gatehouse_proxy.credentials.injecting import decrypt_client_certificate
from gatehouse_proxy.credentials.injectors import Injector, credential_key, mints_tokens
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.door.disconnect_endpoint import DisconnectEndpoint
from gatehouse_proxy.door.entrance import FirstTurn, Routes
from gatehouse_proxy.door.fetch_endpoint import FetchEndpoint
from gatehouse_proxy.limits.quotas import Quotas
from gatehouse_proxy.limits.tenancy import (
    TURNS_ALONE,
    TURNS_PER_ROUND,
    TURNS_WITHIN_SECONDS,
    ConcurrencyLimits,
    RequestBytes,
    Turns,
)
from gatehouse_proxy.observation import metrics, observers
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.passage.refused_tokens import RefusedTokens
from gatehouse_proxy.passage.sending import Sender
from gatehouse_proxy.passage.steps import Passage
from gatehouse_proxy.passage.vendor_pause import VendorPause
from gatehouse_proxy.settings import ProxySettings
from gatehouse_proxy.store.answer_store import AnswerStore
from gatehouse_proxy.store.connect_store import ConnectStore
from gatehouse_proxy.store.grant_store import GrantStore
from gatehouse_proxy.store.shared_store import SharedStore, opened
from gatehouse_proxy.store.shares import Shares
from gatehouse_proxy.table.feed import Answers, TableFeed, TableStore
from gatehouse_proxy.table.routing_table import RoutingTable
from gatehouse_proxy.upstream.connection_tls import ConnectionContexts
from gatehouse_proxy.upstream.forwarder import Forwarder, new_session, tls_context
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from gatehouse_proxy.upstream.pools import TenantPools
from gatehouse_proxy.viewers.assertions import Verifier
from gatehouse_proxy.viewers.jwks_http import JwksClient, issuer_loader


class Proxy:
    """One proxy process's parts, shared across requests."""

    def __init__(self, settings: ProxySettings, tracing: Tracing | None = None) -> None:
        self.settings = settings
        self.keyring = KeyringFile(settings.keyring_file)
        self.store = TableStore(on_install=self._prune)
        self.activity = Activity(settings.replica, settings.audit)
        self.feed = TableFeed(
            self.store,
            settings.operator_url,
            self.keyring,
            settings.replica,
            Answers(self.run_test, self.activity, self.answer_grants),
        )
        self.concurrency = ConcurrencyLimits(settings.tenant_limits)
        self.request_bytes = RequestBytes(settings.tenant_limits)
        self.turns = Turns(TURNS_PER_ROUND, TURNS_ALONE, TURNS_WITHIN_SECONDS)
        self.tracing = tracing or Tracing.from_env(settings.traces)
        self.observers = observers.listed(self.tracing, self.activity, settings.viewers.record_ids)
        self.shares = Shares(settings.shares)
        self.shared_store: SharedStore | None = None  # opened with the lifespan
        metrics.FEED.track(
            version=lambda: self.store.current.version if self.store.current else 0,
            age=lambda: self.store.age() if self.store.current else None,
            connected=lambda: self.feed.state.connected,
            received=lambda: self.feed.state.bytes_received,
        )

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        settings = self.settings
        policy = NetworkPolicy(settings.allowed_private_networks)
        ca_file = str(settings.upstream_ca_file) if settings.upstream_ca_file else None
        tls = tls_context(ca_file)
        self.pools = TenantPools(
            lambda size: new_session(policy, tls, size),
            settings.tenant_limits.concurrent_per_namespace,
        )
        forwarder = Forwarder(policy, settings.allow_http)
        # Token requests have a pool of their own, behind the same guard as upstreams.
        token_session = new_session(policy, tls)
        # The injector's own view of the keyring, looked at once a second rather than per
        # request; the feed's sees every change at once.
        keyring = KeyringFile(settings.keyring_file, recheck_seconds=1.0)
        jwks = JwksClient(tls)
        # Each connection's own TLS (spec.tls), its client certificate decrypted as credentials are.
        self.connection_tls = ConnectionContexts(
            functools.partial(decrypt_client_certificate, keyring), ca_file
        )
        pod = settings.aws.pod_identity()
        async with opened(settings.store) as store:
            self.shared_store = store
            self.quotas = Quotas(
                store, lambda: self.feed.state.fleet, settings.quota_lease_share, self.shares
            )
            metrics.STORE.track(lambda: None if store is None else store.up)
            metrics.STORE_MEMORY.track(
                lambda: self.shares.memory,
                lambda: self.shares.usage,
                lambda: (settings.shares.namespace_keys, settings.shares.namespace_bytes),
            )
            # The installation's Google endpoint is trusted as the installation set it; a
            # connection's token URL is held to the upstreams' rules.
            tokens = TokenClient(
                token_session, policy, settings.allow_http, settings.max_token_chars
            )
            fleet_tokens = FleetTokens(store, keyring, self.shares)
            grants = FleetGrants(
                None if store is None else GrantStore(store, self.shares), keyring, tokens
            )
            self.grant_changes = GrantChanges(grants, keyring)
            self.connecting = Connecting(
                grants,
                None if store is None else ConnectStore(store, self.shares),
                keyring,
                settings.page_url,
                self._routed,
                settings.viewers.record_ids,
            )
            self.injector = Injector(
                keyring,
                fleet_tokens,
                GoogleMinter(tokens, settings.google_token_url),
                tokens,
                grants,
                RoleMinter(
                    tokens, settings.aws.web_identity_token_file, settings.aws.sts_url, pod=pod
                ),
            )
            passage = Passage(
                self.tracing,
                self.quotas,
                self.concurrency,
                self.request_bytes,
                self.turns,
                self.injector,
                Sender(forwarder, self.pools, self.tracing, self.connection_tls),
                RefusedTokens(self.injector, self.feed),
                VendorPause(self.quotas, self.feed),
                Verifier(settings.viewers, issuer_loader(jwks)),
                self.connecting,
                ResponseCache(None if store is None else AnswerStore(store, self.shares), keyring),
            )
            self.door = FetchEndpoint(
                self.store, passage, self.observers, settings.request_read_timeout_seconds
            )
            self.connection_tests = ConnectionTests(self.store, passage)
            self.disconnect = DisconnectEndpoint(
                self.store, passage.viewers, self.connecting, settings.request_read_timeout_seconds
            )
            running = [asyncio.create_task(self.feed.run(), name="table-feed")]
            if store is not None:
                watch = self.shares.watch(store, self._routed_namespaces)
                running.append(asyncio.create_task(watch, name="store-shares"))
            try:
                yield
            finally:
                for task in running:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)
                await fleet_tokens.close()
                await self.grant_changes.close()
                await grants.close()
                await self.pools.close()
                await token_session.close()
                if pod is not None:
                    await pod.close()
                await jwks.close()
                await asyncio.to_thread(self.tracing.close)

    async def fetch(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.door(scope, receive, send)

    async def disconnect_viewer(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.disconnect(scope, receive, send)

    async def run_test(
        self, test: ReplicaTestRequest, sending: Callable[[], None]
    ) -> ReplicaTestOutcome:
        return await self.connection_tests.run(test, sending)

    async def answer_grants(self, asked: GrantsAsked) -> GrantsAnswered:
        return await self.connecting.answer(asked)

    def _routed(self, key: str) -> ConnectionRoute | None:
        table = self.store.current
        return None if table is None else table.connections.get(key)

    def describe_store(self) -> dict[str, object]:
        return admin.describe_store(self.shared_store, self.shares)

    def _prune(self, table: RoutingTable) -> None:
        """Drops pools, TLS contexts, token caches and rate buckets of what is no longer routed,
        and the grants of connections whose grants' identity changed or that left the table."""
        self.pools.keep({namespace_of(key) for key in table.connections})
        self.connection_tls.keep(
            {route.uid: route.tls for route in table.connections.values() if route.tls is not None}
        )
        self.quotas.forget({route.uid for route in table.connections.values()})
        # Tables arrive only through the feed, which starts after the lifespan made these.
        self.injector.forget(
            {credential_key(route) for route in table.connections.values() if mints_tokens(route)}
        )
        self.grant_changes.follow(table.connections.values())

    def _routed_namespaces(self) -> set[str]:
        table = self.store.current
        return {namespace_of(key) for key in table.connections} if table else set()


def create_app(proxy: Proxy) -> ASGIApp:
    """The app-facing server: the fetch endpoint, a viewer's disconnect, and a liveness answer
    that says nothing."""
    return FirstTurn(
        Routes(proxy.fetch, proxy.disconnect_viewer, proxy.lifespan),
        proxy.turns,
        lambda: proxy.store.current,
    )


def admin_app(proxy: Proxy) -> Starlette:
    """The admin port: readiness and metrics (:mod:`gatehouse_proxy.admin`), given the parts
    they describe."""
    return admin.create_admin_app(
        proxy.store, proxy.feed.state, proxy.activity, proxy.describe_store
    )
