"""A connection as the proxy routes it: what the connection controller publishes in the table,
and what a draft test sends with its request."""

from __future__ import annotations

from gatehouse_contract.routes import (
    CachePolicy,
    ConnectionRoute,
    Credential,
    CredentialLimit,
    Limits,
    UpstreamTls,
)
from gatehouse_operator.api import connection
from gatehouse_operator.api.connection import ExternalConnectionSpec


def route_for(
    key: str,
    uid: str,
    spec: ExternalConnectionSpec,
    origin: str,
    credential: Credential,
    unavailable: str,
    cache_epoch: str | None,
    tls: UpstreamTls | None = None,
) -> ConnectionRoute:
    """The proxy's route for a connection (a saved one, or a draft under test). ``cache_epoch``:
    the time of the connection's last purge ("" for none); None keeps its cache off. ``tls``:
    its spec.tls compiled (controllers.upstream_tls); a draft's test goes without."""
    return ConnectionRoute(
        key=key,
        uid=uid,
        origin=origin,
        allowed_methods=frozenset(spec.allowed_methods),
        allowed_paths=tuple(spec.allowed_paths),
        credential=credential,
        limits=Limits(
            timeout_seconds=spec.limits.timeout_seconds,
            max_request_bytes=spec.limits.max_request_bytes,
            max_response_bytes=spec.limits.max_response_bytes,
            requests_per_minute=spec.limits.requests_per_minute,
            connection_requests_per_minute=spec.limits.connection_requests_per_minute or 0,
            requests_per_day=spec.limits.requests_per_day or 0,
            credential_limit=credential_limit(spec.limits.credential_limit),
        ),
        headers=tuple((header.name, header.value) for header in spec.headers),
        content_types=tuple(sorted({media.lower() for media in spec.allowed_content_types})),
        unavailable=unavailable,
        forward_viewer_identity=spec.forward_viewer_identity,
        cache=cache_policy(spec.cache, cache_epoch),
        tls=tls,
    )


def cache_policy(cache: connection.CacheSettings | None, epoch: str | None) -> CachePolicy | None:
    """The proxy's form of ``spec.cache``; none without one, or without an ``epoch`` (a draft's
    test, or a purge time that is no time: each request then reaches the API)."""
    if cache is None or epoch is None:
        return None
    return CachePolicy(
        ttl_seconds=cache.ttl_seconds,
        max_ttl_seconds=cache.max_ttl_seconds,
        max_body_bytes=cache.max_body_bytes,
        scope=cache.scope,
        stale_while_revalidate_seconds=cache.stale_while_revalidate_seconds,
        stale_if_error_seconds=cache.stale_if_error_seconds,
        epoch=epoch,
    )


def credential_limit(limit: connection.CredentialLimit | None) -> CredentialLimit | None:
    """The proxy's form: statuses in order, a header's name and value lower case (read
    without case)."""
    if limit is None:
        return None
    header = limit.header
    return CredentialLimit(
        statuses=tuple(sorted(set(limit.statuses))),
        path_prefixes=tuple(limit.path_prefixes),
        header=header.name.lower() if header else "",
        header_value=header.value.strip().lower() if header else "",
    )
