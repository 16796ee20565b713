"""The proxy's app-facing HTTP surface: the fetch endpoint, health and readiness.

An app calls ``{METHOD} /v1/fetch/{alias}/{path}?{query}`` with ``Authorization: Bearer <its
credential>``. The checks run in order — table, app, alias, connection, method (and a query's
method override), path (and the objects copy headers name), rate, size, the body's parameters —
and the first that fails answers with its :class:`~gatehouse_proxy.errors.ProxyError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from functools import partial
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gatehouse_contract.connection_tests import (
    CONNECTION_TEST_CALLER,
    MAX_ANSWER_BODY_BYTES,
    MAX_CONTENT_TYPE_CHARS,
    MAX_LOCATION_CHARS,
    Answered,
    ConnectionTestAnswer,
    Problem,
    ProxyRefused,
    ReplicaTestOutcome,
    ReplicaTestRequest,
    Stale,
    TableBehind,
)
from gatehouse_contract.frames import (
    MAX_ENDPOINT_CHARS,
    MAX_RENEWALS,
    RENEWAL_WINDOW_SECONDS,
    RenewalsBounded,
    Throttled,
)
from gatehouse_contract.header_names import canonical_name
from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.redaction import Redactor, scrubbed_prefix
from gatehouse_contract.routes import AppRoute, ConnectionRoute, namespace_of
from gatehouse_contract.wire import MAX_COUNT
from gatehouse_proxy.credentials.fleet_tokens import FleetTokens
from gatehouse_proxy.credentials.google_tokens import GoogleMinter
from gatehouse_proxy.credentials.injectors import (
    Injection,
    Injector,
    credential_key,
    injected_header_names,
    mints_tokens,
)
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.credentials.token_refusals import RETRIED, Judged
from gatehouse_proxy.door.entrance import FETCH_PATH, FirstTurn, Routes, identified_app
from gatehouse_proxy.door.incoming import AppRequest, AppWentAway, header
from gatehouse_proxy.door.relay import RelayedResponse
from gatehouse_proxy.errors import ProxyError, error_response
from gatehouse_proxy.http.media_types import as_read
from gatehouse_proxy.http.retry_after import requested_pause
from gatehouse_proxy.limits.quotas import Quotas, Standing
from gatehouse_proxy.limits.tenancy import (
    ConcurrencyLimits,
    Place,
    RequestBytes,
    Turns,
)
from gatehouse_proxy.limits.vendor_pauses import PAUSING_STATUSES, is_credential_limit
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.rules import body_rules
from gatehouse_proxy.rules import headers as header_policy
from gatehouse_proxy.rules.content_types import check_content_type
from gatehouse_proxy.rules.copy_sources import check_copy_sources
from gatehouse_proxy.rules.matcher import (
    UpstreamPath,
    check_method,
    check_path,
    endpoint_of,
    normalise,
)
from gatehouse_proxy.rules.query import upstream_query
from gatehouse_proxy.settings import ProxySettings
from gatehouse_proxy.store.shared_store import SharedStore, opened
from gatehouse_proxy.store.shares import Shares
from gatehouse_proxy.table.feed import TableFeed, TableStore
from gatehouse_proxy.table.routing_table import RoutingTable
from gatehouse_proxy.upstream.forwarder import (
    Forwarder,
    RequestBody,
    Upstream,
    is_redirect,
    new_session,
    tls_context,
)
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from gatehouse_proxy.upstream.pools import TenantPools

log = logging.getLogger("gatehouse.proxy")

FETCH_PREFIX = FETCH_PATH.encode()
# Methods a request may be sent again with after a 401 (RFC 9110 9.2.2: idempotent).
RETRIED_ON_401 = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class Proxy:
    """The state one proxy process shares across requests."""

    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self.keyring = KeyringFile(settings.keyring_file)
        self.store = TableStore(on_install=self._prune)
        self.activity = Activity(settings.replica, settings.audit)
        self.feed = TableFeed(
            self.store,
            settings.operator_url,
            self.keyring,
            settings.replica,
            self.run_test,
            self.activity,
        )
        self.concurrency = ConcurrencyLimits(settings.tenant_limits)
        self.request_bytes = RequestBytes(settings.tenant_limits)
        self.turns = Turns()
        self.tracing = Tracing.from_env(settings.traces)
        self.shares = Shares(settings.shares)
        metrics.FEED.track(
            version=lambda: self.store.current.version if self.store.current else 0,
            age=lambda: self.table_age() if self.store.current else None,
            connected=lambda: self.feed.state.connected,
            received=lambda: self.feed.state.bytes_received,
        )

    def describe_store(self) -> dict[str, object]:
        """The shared store as this worker sees it, for /readyz: a worker that counts alone
        says so, and why."""
        store = getattr(self, "shared_store", None)
        if store is None:
            return {"configured": False, "counting": "alone"}
        return {
            "configured": True,
            "counting": "shared" if store.up else "alone",
            **store.describe(),
            # Namespaces whose writes the store refused lately: theirs alone are kept by each
            # worker (their share is full, or the store is).
            "sharesFull": self.shares.describe(),
        }

    def table_age(self) -> float:
        return time.monotonic() - self.store.installed_at

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        policy = NetworkPolicy(self.settings.allowed_private_networks)
        ca_file = str(self.settings.upstream_ca_file) if self.settings.upstream_ca_file else None
        tls = tls_context(ca_file)
        self.pools = TenantPools(
            lambda size: new_session(policy, tls, size),
            self.settings.tenant_limits.concurrent_per_namespace,
        )
        self.forwarder = Forwarder(policy, self.settings.allow_http)
        # Token requests have a pool of their own, behind the same guard as upstreams.
        token_session = new_session(policy, tls)
        # The injector's own view of the keyring, looked at once a second rather than per
        # request; the feed's sees every change at once.
        keyring = KeyringFile(self.settings.keyring_file, recheck_seconds=1.0)
        async with opened(self.settings.store) as store:
            self.shared_store: SharedStore | None = store
            self.quotas = Quotas(
                store,
                lambda: self.feed.state.fleet,
                self.settings.quota_lease_share,
                self.shares,
            )
            metrics.STORE.track(lambda: None if store is None else store.up)
            metrics.STORE_MEMORY.track(
                lambda: self.shares.memory,
                lambda: self.shares.usage,
                lambda: (self.settings.shares.namespace_keys, self.settings.shares.namespace_bytes),
            )
            # The installation's Google endpoint is trusted as the installation set it; a
            # connection's token URL is held to the upstreams' rules.
            tokens = TokenClient(
                token_session, policy, self.settings.allow_http, self.settings.max_token_chars
            )
            fleet_tokens = FleetTokens(store, keyring, self.shares)
            self.injector = Injector(
                keyring,
                fleet_tokens,
                GoogleMinter(tokens, self.settings.google_token_url),
                tokens,
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
                await self.pools.close()
                await token_session.close()
                await asyncio.to_thread(self.tracing.close)

    def _prune(self, table: RoutingTable) -> None:
        """Drops pools, token caches and rate buckets of what is no longer routed."""
        self.pools.keep({namespace_of(key) for key in table.connections})
        self.quotas.forget({route.uid for route in table.connections.values()})
        # Tables arrive only through the feed, which starts after the lifespan made these.
        self.injector.forget(
            {credential_key(route) for route in table.connections.values() if mints_tokens(route)}
        )

    def _routed_namespaces(self) -> set[str]:
        table = self.store.current
        return {namespace_of(key) for key in table.connections} if table else set()

    def _table(self) -> RoutingTable:
        if self.store.current is None:
            raise ProxyError("not_ready", "the proxy has not received a routing table yet")
        return self.store.current

    @staticmethod
    def _app(active: RoutingTable, request: AppRequest) -> AppRoute:
        app = identified_app(request.scope, active)
        if app is None:
            raise ProxyError(
                "unauthenticated", "send the app's credential as Authorization: Bearer"
            )
        return app

    @staticmethod
    def _connection(active: RoutingTable, app: AppRoute, alias: str) -> ConnectionRoute:
        key = app.links.get(alias)
        connection = active.connections.get(key) if key else None
        if connection is None:
            raise ProxyError("unknown_alias", f"no connection is linked under the alias {alias!r}")
        if connection.unavailable:
            raise ProxyError("connection_unavailable", connection.unavailable)
        return connection

    async def fetch(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self.tracing.fetch(scope["headers"], scope["method"]):
            await self._fetch(scope, receive, send)

    async def _fetch(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        request = AppRequest(scope, receive)
        raw = scope.get("raw_path") or scope["path"].encode()
        alias_raw, _, rest = raw[len(FETCH_PREFIX) :].partition(b"/")
        alias = unquote(alias_raw.decode("latin-1"))
        # Labels are filled in as the request is identified; unauthenticated requests stay
        # unlabelled, so made-up aliases cannot grow the metric's cardinality.
        labels = metrics.UNLABELLED
        response: RelayedResponse | JSONResponse
        try:
            active = self._table()
            app = self._app(active, request)
            labels = metrics.Labels(app=app.key)
            connection = self._connection(active, app, alias)
            labels = metrics.Labels(app=app.key, connection=connection.key)
            response = relayed = await self._forward(request, app, connection, b"/" + rest)
            status = relayed.status_code
        except ProxyError as error:
            response = error_response(error)
            status = error.status
            labels = labels.with_code(error.code)
        except AppWentAway:
            return
        metrics.observe(labels, request.method, status, time.perf_counter() - started)
        self.tracing.answered(labels.app, labels.connection, status, labels.code)
        try:
            with self.tracing.phase("scrub"):
                await response(scope, receive, send)
        finally:
            if labels.app:  # else no tenant's: kept nowhere but the metrics
                if isinstance(response, RelayedResponse):
                    code, sent = response.cut_code or labels.code, response.sent_bytes
                else:
                    code, sent = labels.code, len(response.body)
                self.activity.record(
                    labels.app,
                    labels.connection,
                    request.method,
                    b"/" + rest,
                    scope["query_string"],
                    status,
                    code,
                    time.perf_counter() - started,
                    request.received,
                    sent,
                    header(scope, b"traceparent"),
                    self.tracing.trace_id(),
                )

    async def _forward(
        self, request: AppRequest, app: AppRoute, connection: ConnectionRoute, raw_path: bytes
    ) -> RelayedResponse:
        timeout = self.settings.request_read_timeout_seconds
        upstream, injection, place, standing = await self._call(
            connection,
            caller=app.key,
            caller_uid=app.uid or app.key,
            method=request.method,
            raw_path=raw_path,
            query=request.scope["query_string"],
            incoming=request.headers(),
            read_body=lambda limit, take: request.body(limit, timeout, take),
        )

        def cut(error: ProxyError) -> None:
            log.warning(
                "cut off the answer from %s to %s: %s (%s)",
                connection.key,
                app.key,
                error.code,
                error.message,
            )
            metrics.count_cut(
                metrics.Labels(app=app.key, connection=connection.key, code=error.code)
            )

        try:
            # One redactor for the answer's headers and body.
            redact = Redactor(injection.secrets) if injection.secrets else None
            whole = upstream.whole_body()
            return RelayedResponse(
                upstream, redact, whole, standing.headers(), on_cut=cut, on_end=place.release
            )
        except BaseException:
            upstream.release()
            place.release()
            raise

    async def _call(
        self,
        connection: ConnectionRoute,
        *,
        caller: str,
        caller_uid: str,
        method: str,
        raw_path: bytes,
        query: bytes,
        incoming: Iterable[tuple[str, str]],
        read_body: BodyReader,
        readable: bool = False,
        sending: Callable[[], None] | None = None,
        draft: bool = False,
    ) -> tuple[Upstream, Injection, Place, Standing]:
        """Every rule of a connection, in order, then the upstream call with the credential.

        The body is read after the cheaper checks, only up to the connection's limit and within
        the namespace's byte budget. The returned place under the tenant's caps is the caller's
        to release once the answer has been relayed. ``readable`` (a connection test): the
        answer uncompressed, and as it is (see Forwarder.send's ``as_answered``), and
        ``sending`` called just before the request goes upstream. ``draft``: a minted token
        stays with this worker, not the fleet.
        """
        namespace = namespace_of(connection.key)
        tracing = self.tracing
        with tracing.phase("admission"):
            check_method(method, connection.allowed_methods)
            body_rules.check_query(query, connection.allowed_methods)
            path = normalise(raw_path)
            check_path(path, connection.allowed_paths)
            endpoint = endpoint_of(path, connection.allowed_paths)
            # What the upstream will be sent, which is what the rules read: the connection's
            # own Content-Type, say, in place of the app's.
            outgoing = header_policy.upstream_request_headers(
                incoming,
                injected_header_names(connection),
                credentialed=connection.credential.type != "none",
                own=connection.headers,
            )
            check_copy_sources(outgoing, connection.origin, connection.allowed_paths)
        with tracing.phase("limits"):
            standing = await self.quotas.admit(connection, caller_uid, endpoint)
            try:
                place = await self.concurrency.enter(namespace, caller, connection.key)
            except ProxyError:
                # Waits that began together end together: their refusals are a burst to spread.
                await self.turns.take(namespace)
                raise
        held = self.request_bytes.reservation(namespace)
        try:
            with tracing.phase("body"):
                pieces = await read_body(connection.limits.max_request_bytes, held.take)
                credential = connection.credential
                in_query = credential.type == "apiKey" and credential.location == "query"
                await body_rules.check_body(
                    namespace,
                    outgoing,
                    pieces,
                    connection.allowed_methods,
                    credential.parameter if in_query else None,
                )
            body = RequestBody(pieces, partial(self.turns.take, namespace))
            send = partial(self._send, connection, method, path, query, outgoing, body, readable)

            async def attempt(
                sending: Callable[[], None] | None, refused: str = ""
            ) -> tuple[Injection, Upstream]:
                with tracing.phase("credential"):
                    injection = await self.injector.injection(
                        connection, shared=not draft, refused=refused
                    )
                if sending is not None:
                    sending()
                with tracing.phase("upstream"):
                    return injection, await send(injection)

            judge = partial(self._judge_401, connection, caller, endpoint, shared=not draft)
            try:
                injection, upstream = await attempt(sending)
                judged = await judge(injection, upstream)
                if judged is not None and judged.verdict in RETRIED and method in RETRIED_ON_401:
                    # The token was refused (revoked, expired early) or replaced already: one
                    # retry with another, for a request that may be sent twice (its body is read
                    # whole already). Its 401 is judged too (a second token refused there is the
                    # endpoint's answer), and never retried.
                    upstream.release()
                    injection, upstream = await attempt(None, injection.token)
                    await judge(injection, upstream)
                await self._heed_the_vendor(connection, path, endpoint, upstream)
                check_content_type(upstream, method, connection.content_types, injection.secrets)
            except ProxyError:
                await self.turns.take(namespace)
                raise
            # Answers to requests sent together (and their failures) arrive together.
            await self.turns.take(namespace)
        except BaseException:
            place.release()
            raise
        finally:
            # Sent (or never to be): the body's bytes are no longer held.
            held.release()
        return upstream, injection, place, standing

    async def _judge_401(
        self,
        connection: ConnectionRoute,
        caller: str,
        endpoint: str,
        injection: Injection,
        upstream: Upstream,
        *,
        shared: bool,
    ) -> Judged | None:
        """What a 401 to a minted token says (gatehouse_proxy.credentials.token_refusals), counted
        per app; the first bound of a window told to the operator (an Event)."""
        if upstream.status != 401:
            return None
        judged = await self.injector.refused(injection, endpoint, shared=shared)
        if judged is None:
            return None
        if caller == CONNECTION_TEST_CALLER:
            caller = f"{namespace_of(connection.key)}/ConnectionTest/"
        metrics.count_renewal(metrics.Labels(app=caller, connection=connection.key), judged.verdict)
        if judged.news:
            await self.feed.tell(
                RenewalsBounded(
                    connection=connection.key,
                    renewals=MAX_RENEWALS,
                    seconds=min(max(judged.seconds, 0.0), RENEWAL_WINDOW_SECONDS),
                )
            )
        return judged

    async def _heed_the_vendor(
        self, connection: ConnectionRoute, path: UpstreamPath, endpoint: str, upstream: Upstream
    ) -> None:
        """A 429 or 503 with Retry-After pauses, for the fleet, the endpoint it came on, or the
        whole connection when the connection says it is the credential's limit
        (gatehouse_proxy.limits.vendor_pauses): every replica calling on would burn the quota of
        every app on it."""
        if upstream.status not in PAUSING_STATUSES:
            return
        answered = upstream.response.headers
        seconds = requested_pause(answered.getall("retry-after", []))
        if not seconds:
            return
        limit = connection.limits.credential_limit
        whole = is_credential_limit(limit, path, upstream.status, answered)
        scope = await self.quotas.pause(connection, seconds, "" if whole else endpoint)
        if scope is not None:
            await self.feed.tell(
                Throttled(
                    connection=connection.key,
                    status=upstream.status,
                    seconds=seconds,
                    scope=scope,
                    endpoint=endpoint[:MAX_ENDPOINT_CHARS],
                )
            )

    async def _send(
        self,
        connection: ConnectionRoute,
        method: str,
        path: UpstreamPath,
        query: bytes,
        outgoing: list[tuple[str, str]],
        body: RequestBody,
        readable: bool,
        injection: Injection,
    ) -> Upstream:
        """One upstream call: the headers the rules read (``upstream_request_headers``), with
        the hop's own (the trace's, and the Accept-Encoding an answer to scrub needs), then the
        credential."""
        url = connection.origin + path.encoded + upstream_query(query, injection.query)
        outgoing = self.tracing.outgoing(outgoing)
        identity = bool(injection.secrets) or readable
        if identity:
            # An uncompressed answer, so an echoed credential can be scrubbed from it (and
            # a test result read); one compressed anyway is decoded (or refused).
            outgoing = [
                (name, value)
                for name, value in outgoing
                if canonical_name(name) != "accept-encoding"
            ]
            outgoing.append(("Accept-Encoding", "identity"))
        namespace = namespace_of(connection.key)
        return await self.forwarder.send(
            self.pools.session(namespace),
            method=method,
            url=url,
            headers=[*outgoing, *injection.headers.items()],
            body=body,
            timeout_seconds=connection.limits.timeout_seconds,
            max_response_bytes=connection.limits.max_response_bytes,
            as_answered=readable,
            decode=identity,
            pace=partial(self.turns.take, namespace),
        )

    async def run_test(
        self, test: ReplicaTestRequest, sending: Callable[[], None]
    ) -> ReplicaTestOutcome:
        """Runs an operator's ConnectionTest through the same rules as an app's fetch, calling
        ``sending`` just before its request goes upstream.

        Refusals are part of the result, with their detail: the admin running a test should see
        why, unlike app code.
        """
        try:
            if test.draft is not None:
                answer = await self._test_draft(test.draft, test, sending)
            else:
                table = self._table()
                if table.version < test.min_table_version:
                    return Stale(stale=TableBehind(table_version=table.version))
                connection = table.connections.get(test.connection)
                if connection is None:
                    raise ProxyError(
                        "unknown_alias", f"no connection {test.connection!r} is routed"
                    )
                if connection.unavailable:
                    raise ProxyError("connection_unavailable", connection.unavailable)
                answer = await self._test(connection, test, sending)
        except ProxyError as error:
            return ProxyRefused(refused=Problem.of(error.code, error.message))
        return Answered(answered=answer)

    async def _test_draft(
        self, draft: ConnectionRoute, test: ReplicaTestRequest, sending: Callable[[], None]
    ) -> ConnectionTestAnswer:
        """A draft's test: the same path, then its access token (if any) is dropped."""
        try:
            return await self._test(draft, test, sending, draft=True)
        finally:
            self.injector.discard(draft)

    async def _test(
        self,
        connection: ConnectionRoute,
        test: ReplicaTestRequest,
        sending: Callable[[], None],
        *,
        draft: bool = False,
    ) -> ConnectionTestAnswer:
        path, _, query = test.path.partition("?")
        body = b"" if test.body is None else json.dumps(test.body).encode()
        headers = [("content-type", "application/json")] if body else []

        async def read_body(limit: int, take: Callable[[int], None]) -> list[bytes]:
            if len(body) > limit:
                raise ProxyError("request_too_large", f"the request body exceeds {limit} bytes")
            take(len(body))
            return [body] if body else []

        upstream, injection, place, _ = await self._call(
            connection,
            caller=CONNECTION_TEST_CALLER,
            caller_uid=CONNECTION_TEST_CALLER,
            method=test.method,
            raw_path=path.encode(),
            query=query.encode(),
            incoming=headers,
            read_body=read_body,
            readable=True,
            sending=sending,
            draft=draft,
        )
        namespace = namespace_of(connection.key)
        redact = Redactor(injection.secrets)
        try:
            # Read up to the connection's maxResponseBytes, no further: the test shows what an
            # app's fetch of it would be refused.
            prefix = await scrubbed_prefix(
                upstream.body(stop_at_limit=True),
                redact,
                MAX_ANSWER_BODY_BYTES,
                partial(self.turns.take, namespace),
            )
        finally:
            upstream.release()
            place.release()
        answered = upstream.response.headers
        # A redirect's target, shown and never followed: it may echo the injected credential, as
        # may any header.
        location = answered.get("location", "") if is_redirect(upstream.status) else ""
        # The type as an app's fetch would be given it.
        media_type = "" if upstream.media_type is None else as_read(str(upstream.media_type))
        content_type, location = (_text(value) for value in redact.headers([media_type, location]))
        return ConnectionTestAnswer(
            status_code=upstream.status,
            content_type=content_type[:MAX_CONTENT_TYPE_CHARS],
            # A cut inside a character leaves one replacement character, not an error.
            body=prefix.data.decode("utf-8", errors="replace"),
            # Over the limit, what it says of itself, when it says (of its compressed self, when
            # decoded: not its size).
            size_bytes=min(
                max(prefix.size, 0 if upstream.codings else upstream.response.content_length or 0),
                MAX_COUNT,
            ),
            truncated=not prefix.whole or upstream.over_limit,
            location=location[:MAX_LOCATION_CHARS],
            over_limit=upstream.over_limit,
        )


BodyReader = Callable[[int, Callable[[int], None]], Awaitable[list[bytes]]]


def _text(value: str) -> str:
    """A header value as aiohttp reads it, as text a status may hold: bytes that are not UTF-8
    (kept as surrogates, which no JSON encoder takes) as U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def create_app(proxy: Proxy) -> ASGIApp:
    """The app-facing server: the fetch endpoint, and a liveness answer that says nothing."""
    return FirstTurn(Routes(proxy.fetch, proxy.lifespan), proxy.turns, lambda: proxy.store.current)


def create_admin_app(proxy: Proxy) -> Starlette:
    """Readiness and metrics, on a port of their own that apps are not given: both describe
    every tenant's routes and traffic."""

    async def readyz(request: Request) -> Response:
        current = proxy.store.current
        feed = proxy.feed.state.describe()
        if current is None:
            return JSONResponse(
                {"ready": False, "reason": "no routing table yet", "feed": feed}, status_code=503
            )
        # A key rotation may drop the old key once every replica's table is signed with the new
        # key and encrypts nothing with the old one. The last verified table keeps being served
        # while the feed is down; the feed's state says so.
        encrypted_with = sorted(current.keyring_key_ids)
        return JSONResponse(
            {
                "ready": True,
                "tableVersion": current.version,
                "connections": len(current.connections),
                "apps": len(current.apps),
                "tableAgeSeconds": round(proxy.table_age(), 1),
                "signedWith": current.key_id,
                # The keyring keys the table's credentials are encrypted with.
                "encryptedWith": encrypted_with,
                # Deprecated alias of encryptedWith for probes written before 0.2.0; goes in 0.3.0.
                "sealedWith": encrypted_with,
                "feed": feed,
                "store": proxy.describe_store(),
                "activity": {
                    "recentRequests": len(proxy.activity.recent),
                    "usageRows": proxy.activity.usage.rows,
                    "usageDropped": proxy.activity.usage.dropped,
                },
            }
        )

    return Starlette(routes=[Route("/readyz", readyz), Route("/metrics", metrics.endpoint)])
