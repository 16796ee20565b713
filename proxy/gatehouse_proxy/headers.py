"""Which headers cross the proxy, in each direction.

Requests: the app's headers pass except those that carry identity or routing, control the hop, or
would let the app override what the proxy injects. Responses: only an allowlist reaches app code,
so cookies and upstream internals never do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gatehouse_proxy.redaction import REDACTED

# Headers that identify the caller or steer routing: the proxy decides these, never the app.
_REQUEST_DROPPED = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "forwarded",
        "x-real-ip",
        "x-original-url",
        "x-rewrite-url",
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
        "origin",
        "referer",
        "content-length",  # recomputed from the body actually sent
        "expect",
    }
)
# Hop-by-hop (RFC 9110 7.6.1): they describe this connection, not the request.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_REQUEST_DROPPED_PREFIXES = ("x-forwarded-", "proxy-", "x-gatehouse-")

RESPONSE_ALLOWED = frozenset(
    {
        "content-type",
        "content-encoding",
        "content-language",
        "content-disposition",
        "content-location",
        "accept-ranges",
        "cache-control",
        "content-range",
        "etag",
        "expires",
        "last-modified",
        "link",
        "retry-after",
        "vary",
    }
)
_RESPONSE_ALLOWED_PREFIXES = ("ratelimit", "x-ratelimit-", "x-rate-limit-")
MAX_RESPONSE_HEADER_BYTES = 16 * 1024


def _connection_named(headers: Iterable[tuple[str, str]]) -> set[str]:
    """Headers the sender listed in Connection; a hop must drop them (Go CVE-2021-33197)."""
    named: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            named.update(token.strip().lower() for token in value.split(",") if token.strip())
    return named


def upstream_request_headers(
    app_headers: Iterable[tuple[str, str]], injected: set[str]
) -> list[tuple[str, str]]:
    """The app's headers that may go upstream; names in ``injected`` are the proxy's alone."""
    incoming = list(app_headers)
    named = _connection_named(incoming)
    kept: list[tuple[str, str]] = []
    for name, value in incoming:
        lowered = name.lower()
        if (
            lowered in _REQUEST_DROPPED
            or lowered in HOP_BY_HOP
            or lowered in named
            or lowered in injected
            or lowered.startswith(_REQUEST_DROPPED_PREFIXES)
        ):
            continue
        kept.append((name, value))
    return kept


def _secret_pattern(secret: str) -> re.Pattern[str]:
    """Matches the secret however a URL encoder wrote it: each character raw or %-encoded."""
    parts = []
    for char in secret:
        encoded = "".join(f"%{byte:02x}" for byte in char.encode())
        options = [re.escape(char), re.escape(encoded)] + (["\\+"] if char == " " else [])
        parts.append("(?:" + "|".join(options) + ")")
    return re.compile("".join(parts), re.IGNORECASE)


def _redact(value: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        value = _secret_pattern(secret).sub(REDACTED, value)
    return value


def app_response_headers(
    upstream: Iterable[tuple[str, str]], secrets: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """The allowlisted upstream headers, at most 16 KiB of them, with injected values redacted
    (a pagination Link header would otherwise hand a query API key to the app)."""
    kept: list[tuple[str, str]] = []
    size = 0
    secrets = [secret for secret in secrets if secret]
    for name, raw_value in upstream:
        lowered = name.lower()
        if lowered not in RESPONSE_ALLOWED and not lowered.startswith(_RESPONSE_ALLOWED_PREFIXES):
            continue
        value = _redact(raw_value, secrets)
        size += len(name) + len(value) + 4
        if size > MAX_RESPONSE_HEADER_BYTES:
            break
        kept.append((lowered, value))
    return kept
