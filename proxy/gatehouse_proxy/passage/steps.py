"""Every rule of a connection, in order, then the upstream call with the credential: the one
place a request's way is read, step by step (:meth:`Passage.through`).

The order: admission (method, query, path, endpoint, the headers sent, the viewer where the
connection needs one, the objects copy headers name), then the cache where the connection has one
(a hit is answered there: it reaches neither the vendor nor the limits; a miss may wait for an
identical request's answer, or fetch it for the fleet), then the limits (the quota, a place under
the tenant's caps), the body (read after the cheaper checks, only up to the connection's limit
and within the namespace's byte budget), the credential, the upstream call; a 401 judged, and
one retry with another token; the vendor's pause heeded; the answer's content type. An app's
fetch and a connection test take the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, Protocol

from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_proxy.caching.response_cache import ResponseCache, Served, Turn
from gatehouse_proxy.credentials.connecting import Connecting
from gatehouse_proxy.credentials.fleet_grants import AuthorizationRequired
from gatehouse_proxy.credentials.injectors import (
    Injection,
    Injector,
    injected_header_names,
    injected_query_parameter,
    sends_credential,
)
from gatehouse_proxy.credentials.token_refusals import RETRIED
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.limits.quotas import Quotas, Standing
from gatehouse_proxy.limits.tenancy import ConcurrencyLimits, Place, RequestBytes, Turns
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.passage import cached
from gatehouse_proxy.passage.refused_tokens import RefusedTokens
from gatehouse_proxy.passage.sending import Outbound, Sender
from gatehouse_proxy.passage.vendor_pause import VendorPause
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
from gatehouse_proxy.upstream.forwarder import RequestBody, Upstream
from gatehouse_proxy.viewers.assertions import Verifier
from gatehouse_proxy.viewers.identity import identity_headers

# Methods a request may be sent again with after a 401 (RFC 9110 9.2.2: idempotent).
RETRIED_ON_401 = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class Request(Protocol):
    """What the caller asks to send: an app's request as read at the door, or a test's."""

    # A sequence, not an iterator: the steps read the headers more than once.
    def headers(self) -> Sequence[tuple[str, str]]: ...

    async def body(self, limit: int, take: Callable[[int], None]) -> list[bytes]:
        """The body in pieces, refused over ``limit`` bytes; ``take`` reserves each piece's
        bytes in the namespace's budget before it is kept."""
        ...


@dataclass(frozen=True, slots=True)
class Testing:
    """A connection test's way: ``sending`` called just before its request goes upstream; a
    ``draft``'s minted token stays with this worker, not the fleet."""

    sending: Callable[[], None]
    draft: bool = False


class Passed(NamedTuple):
    """The answer's head, and what the caller releases once the answer has been relayed (the
    place under the tenant's caps)."""

    upstream: Upstream
    injection: Injection
    place: Place
    standing: Standing


@dataclass(slots=True)
class Admitted:
    """What admission found, for the steps after it: the path as sent upstream, the endpoint it
    matched, the headers the vendor will be sent, and the cache's turn to fetch for the fleet."""

    path: UpstreamPath
    endpoint: str
    outgoing: list[tuple[str, str]]
    turn: Turn | None = None


@dataclass(slots=True)
class Passage:
    """The parts a request's way runs through, made once per process."""

    tracing: Tracing
    quotas: Quotas
    concurrency: ConcurrencyLimits
    request_bytes: RequestBytes
    turns: Turns
    injector: Injector
    sender: Sender
    refused_tokens: RefusedTokens
    vendor_pause: VendorPause
    viewers: Verifier
    connecting: Connecting
    cache: ResponseCache

    async def through(
        self,
        fetch: Fetch,
        connection: ConnectionRoute,
        request: Request,
        testing: Testing | None = None,
    ) -> Passed | Served:
        """Every step, in order; the first that fails raises its ProxyError. ``fetch`` is filled
        in with what the steps learn (the endpoint, the viewer, the cache's outcome). A test is
        never answered from the cache."""
        tracing = self.tracing
        method = fetch.method
        with tracing.phase("admission"):
            check_method(method, connection.allowed_methods)
            body_rules.check_query(fetch.query, connection.allowed_methods)
            path = normalise(fetch.path)
            check_path(path, connection.allowed_paths)
            fetch.endpoint = endpoint = endpoint_of(path, connection.allowed_paths)
            sent = request.headers()
            assertions = header_policy.viewer_assertions(sent)
            # A test calls as nobody: it has no viewer to name, and sends no viewer's identity.
            if connection.needs_viewer and testing is None:
                fetch.viewer = await self.viewers.viewer(assertions, fetch.app)
            # What the upstream will be sent, which is what the rules read: the connection's
            # own Content-Type, say, in place of the app's.
            outgoing = header_policy.upstream_request_headers(
                sent,
                injected_header_names(connection),
                credentialed=sends_credential(connection),
                own=connection.headers,
            )
            if connection.forward_viewer_identity and fetch.viewer is not None:
                outgoing += identity_headers(fetch.app, fetch.viewer)
            check_copy_sources(outgoing, connection.origin, connection.allowed_paths)
        admitted = Admitted(path, endpoint, outgoing)
        if connection.cache is None or testing is not None:
            return await self._onward(fetch, connection, request, admitted, testing)
        if header_policy.has_body(sent):
            # A GET with a body (a search API's): what the body asks is no part of the key.
            fetch.cache = "bypass"
            return await self._onward(fetch, connection, request, admitted, testing)
        with tracing.phase("cache"):
            # An identical request's answer is waited for within the connection's timeout,
            # counted from this request's arrival.
            looked = await cached.consult(
                self.cache,
                fetch,
                connection,
                path,
                outgoing,
                time.monotonic() + _left(connection, fetch),
            )
        if isinstance(looked, Served):
            return looked
        admitted.turn = looked
        try:
            return await self._onward(fetch, connection, request, admitted, testing)
        finally:
            if looked is not None:
                # Refused before the vendor answered (or gone): a waiter takes the fetch over.
                await looked.release()

    async def _onward(
        self,
        fetch: Fetch,
        connection: ConnectionRoute,
        request: Request,
        admitted: Admitted,
        testing: Testing | None,
    ) -> Passed | Served:
        """The limits, the body, the credential and the vendor's answer (kept for the fleet by
        the request whose turn it is to fetch it)."""
        namespace = namespace_of(connection.key)
        tracing = self.tracing
        method = fetch.method
        path, outgoing, turn = admitted.path, admitted.outgoing, admitted.turn
        with tracing.phase("limits"):
            standing = await self.quotas.admit(connection, fetch.app_uid, admitted.endpoint)
            try:
                place = await self.concurrency.enter(namespace, fetch.app, connection.key)
            except ProxyError:
                # Waits that began together end together: their refusals are a burst to spread.
                await self.turns.take(namespace)
                raise
        held = self.request_bytes.reservation(namespace)
        try:
            with tracing.phase("body"):
                pieces = await request.body(connection.limits.max_request_bytes, held.take)
                await body_rules.check_body(
                    namespace,
                    outgoing,
                    pieces,
                    connection.allowed_methods,
                    injected_query_parameter(connection),
                )
            outbound = Outbound(
                connection,
                method,
                path,
                fetch.query,
                # A stale answer's validators: the vendor may confirm it (304) rather than resend.
                [*outgoing, *cached.conditions(turn)],
                RequestBody(pieces, partial(self.turns.take, namespace)),
                readable=testing is not None,
                shared=testing is None or not testing.draft,
                viewer="" if fetch.viewer is None else fetch.viewer.owner,
                timeout_seconds=0.0 if turn is None else _left(connection, fetch),
            )
            try:
                sending = None if testing is None else testing.sending
                injection, upstream = await self._attempt(outbound, sending)
                judged = await self.refused_tokens.judge(
                    fetch, connection, injection, upstream, shared=outbound.shared
                )
                if judged is not None and judged.verdict in RETRIED and method in RETRIED_ON_401:
                    # The token was refused (revoked, expired early) or replaced already: one
                    # retry with another, for a request that may be sent twice (its body is read
                    # whole already). Its 401 is judged too (a second token refused there is the
                    # endpoint's answer), and never retried.
                    upstream.release()
                    injection, upstream = await self._attempt(outbound, None, injection.token)
                    await self.refused_tokens.judge(
                        fetch, connection, injection, upstream, shared=outbound.shared
                    )
                await self.vendor_pause.heed(fetch, connection, path, upstream)
                check_content_type(upstream, method, connection.content_types, injection.secrets)
                served: Served | None = None
                if turn is not None:
                    with tracing.phase("cache"):
                        served = await cached.settle(
                            turn, connection, upstream, injection.secrets, self.cache.clock()
                        )
            except ProxyError as error:
                await self.turns.take(namespace)
                if isinstance(error, AuthorizationRequired) and fetch.viewer is not None:
                    # The viewer connects through the link the app shows them.
                    raise self.connecting.required(
                        error, connection, fetch.app, fetch.viewer
                    ) from None
                stood_in = None
                if turn is not None:
                    stood_in = await cached.stand_in(turn, error, self.cache.clock())
                if stood_in is None:
                    raise
                served = stood_in
            # Answers to requests sent together (and their failures) arrive together.
            await self.turns.take(namespace)
        except BaseException:
            place.release()
            raise
        finally:
            # Sent (or never to be): the body's bytes are no longer held.
            held.release()
        if served is not None:
            fetch.cache = served.outcome
            place.release()  # read whole: nothing is left to relay from the vendor
            return served
        return Passed(upstream, injection, place, standing)

    async def _attempt(
        self, outbound: Outbound, sending: Callable[[], None] | None, refused: str = ""
    ) -> tuple[Injection, Upstream]:
        """The credential, then the upstream call with it; ``refused``: the token a 401 refused."""
        with self.tracing.phase("credential"):
            injection = await self.injector.injection(
                outbound.connection,
                shared=outbound.shared,
                refused=refused,
                viewer=outbound.viewer,
            )
        if sending is not None:
            sending()
        with self.tracing.phase("upstream"):
            return injection, await self.sender.send(outbound, injection)


def _left(connection: ConnectionRoute, fetch: Fetch) -> float:
    """What is left of the connection's timeout, counted from the request's arrival: a request
    that waited for an identical one's answer never waits past it, nor does the call it makes
    when it takes that fetch over (at least a millisecond, so the call's own deadline holds)."""
    return max(connection.limits.timeout_seconds - (time.perf_counter() - fetch.started), 0.001)
