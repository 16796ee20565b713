"""One upstream call: the request as the rules read it (``Outbound``), with the hop's own headers
(the trace's, and the Accept-Encoding an answer to scrub needs), then the credential, and last a
signing kind's signature of it all (the URL, every header and the body final by then), sent over
the connection's own TLS where it has one (a client certificate, its CAs)."""

from __future__ import annotations

from dataclasses import dataclass

from gatehouse_contract.header_names import canonical_name
from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_proxy.credentials.injectors import Injection, Sending
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.rules.matcher import UpstreamPath
from gatehouse_proxy.rules.query import upstream_query
from gatehouse_proxy.upstream.connection_tls import ConnectionContexts
from gatehouse_proxy.upstream.forwarder import (
    Forwarder,
    RequestBody,
    Upstream,
    UpstreamRequest,
)
from gatehouse_proxy.upstream.pools import TenantPools


@dataclass(slots=True)
class Outbound:
    """A checked request, before its credential: what each attempt sends."""

    connection: ConnectionRoute
    method: str
    path: UpstreamPath
    query: bytes
    headers: list[tuple[str, str]]  # what the rules read (``upstream_request_headers``)
    body: RequestBody
    # A connection test's: the answer uncompressed, and as it is (see UpstreamRequest).
    readable: bool
    # A minted token shared with the fleet (not a draft's, which stays with this worker).
    shared: bool
    # The verified viewer's owner name (Viewer.owner), for a credential that is theirs; "" when
    # the connection needs no viewer.
    viewer: str = ""
    # The upstream call's own timeout, where less than the connection's is left (0: the
    # connection's): a waiter that took an identical request's fetch over has spent some.
    timeout_seconds: float = 0.0


class Sender:
    def __init__(
        self,
        forwarder: Forwarder,
        pools: TenantPools,
        tracing: Tracing,
        tls: ConnectionContexts,
    ) -> None:
        self.forwarder = forwarder
        self.pools = pools
        self.tracing = tracing
        self.tls = tls

    async def send(self, outbound: Outbound, injection: Injection) -> Upstream:
        connection = outbound.connection
        url = (
            connection.origin
            + outbound.path.encoded
            + upstream_query(outbound.query, injection.query)
        )
        outgoing = self.tracing.outgoing(outbound.headers)
        # A signing kind's secrets are its signatures: none until it has signed.
        identity = bool(injection.secrets) or injection.signer is not None or outbound.readable
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
        tls = None
        if connection.tls is not None:
            # Made before the request is signed, which is as late as can be. A draft's (a test
            # of what is not routed yet) is made for its test alone.
            tls = await self.tls.context(connection, keep=outbound.shared)
        headers = [*outgoing, *injection.headers.items()]
        if injection.signer is not None:
            sending = Sending(outbound.method, url, headers, outbound.body.pieces)
            headers = [*headers, *await injection.signer.sign(sending)]
        request = UpstreamRequest(
            outbound.method,
            url,
            headers,
            outbound.timeout_seconds or connection.limits.timeout_seconds,
            connection.limits.max_response_bytes,
            outbound.body,
            as_answered=outbound.readable,
            decode=identity,
            # The tenant's turn the body is paced by already (one per request).
            pace=outbound.body.pace,
            tls=tls,
        )
        return await self.forwarder.send(self.pools.session(namespace), request)
