"""Which headers cross the proxy, in each direction.

Requests: the app's headers pass except those that carry identity or routing, control the hop, or
would let the app override what the proxy injects. Routing is a class, not a list: a name with a
token that frameworks and proxies use for the host, URL, scheme, port, method or client address
(``X-Forwarded-Host``, ``X-Original-URL``, ``Disguised-Host``, ``X-Forwarded-Uri``, ``X-Scheme``,
``WL-Proxy-Client-IP``...) is dropped, and so are the prefixes of edge networks' own headers.
Names are compared in their canonical form (``gatehouse_contract.header_names``: every character
other than a letter or digit read as ``-``), as CGI, WSGI and Rack servers read them: they turn
``X_Api_Key`` and ``X.Api.Key`` into the injected ``X-Api-Key``'s variable (``HTTP_X_API_KEY``).
On a credentialed connection ``Range`` and ``If-Range`` are dropped too: an upstream that echoes
the credential would otherwise hand it over in pieces that the scrubber never sees whole.
Responses: only an allowlist reaches app code, so cookies and upstream internals never do, and
only names and values an HTTP server may write: a control byte in a value (which aiohttp reads
from an upstream and uvicorn refuses to send, dropping the app's connection) drops the header.
The upstream's ``Content-Type`` headers never pass as they are: the one type a browser reads in
them (see ``media_types``), the type checked, goes in their place, serialised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gatehouse_contract.header_names import (
    VIEWER_ASSERTION_HEADER,
    app_may_not_send,
    canonical_name,
    reserved_for_proxy,
)
from gatehouse_contract.redaction import Redactor
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.http.media_types import MediaType, as_read, as_sent

_PARTIAL_READS = frozenset({"range", "if-range"})

# And Content-Type, as the one type a browser reads in the upstream's (app_response_headers).
RESPONSE_ALLOWED = frozenset(
    {
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
# What RFC 9110 allows in a field name (a token) and value (no control byte but HTAB): uvicorn
# raises on anything else, once per request, after the app's answer has begun.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9a-z]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _connection_named(headers: Iterable[tuple[str, str]]) -> set[str]:
    """Headers the sender listed in Connection; a hop must drop them (Go CVE-2021-33197)."""
    named: set[str] = set()
    for name, value in headers:
        # The canonical name is "connection" only for that word (it has no "-" to spell).
        if name.lower() == "connection":
            named.update(
                canonical_name(token.strip()) for token in value.split(",") if token.strip()
            )
    return named


_ASSERTION = canonical_name(VIEWER_ASSERTION_HEADER)


def viewer_assertions(app_headers: Iterable[tuple[str, str]]) -> list[str]:
    """The viewer assertions an app's request carries (never sent on: see header_names); an
    ``X-Gatehouse-*`` header, the proxy's own, refuses the request."""
    found = []
    for header, value in app_headers:
        # Every spelling of either name holds the word: most requests' names are passed over
        # without being made canonical.
        if "gatehouse" not in header.lower():
            continue
        name = canonical_name(header)
        if name == _ASSERTION:
            found.append(value)
        elif reserved_for_proxy(name):
            raise ProxyError(
                "reserved_header",
                f"the header {header[:64]!r} is the proxy's own (X-Gatehouse-*): apps may not "
                "send it",
            )
    return found


def has_body(app_headers: Iterable[tuple[str, str]]) -> bool:
    """Whether an app's request comes with a body (RFC 9112 6.3: a Transfer-Encoding, or a
    Content-Length other than 0)."""
    for header, value in app_headers:
        name = header.lower()
        if name == "transfer-encoding" or (name == "content-length" and value.strip() != "0"):
            return True
    return False


def upstream_request_headers(
    app_headers: Iterable[tuple[str, str]],
    injected: Iterable[str],
    *,
    credentialed: bool = False,
    own: Iterable[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """The headers the upstream gets, but for those of the hop (see ``passage.sending``) and the
    credential's: the app's that may go, then the connection's ``own`` in place of the app's of
    the same name. Names in ``injected`` are the credential's alone. The body rules read these,
    and the request is sent with them: what the rules read is what the upstream reads."""
    incoming = list(app_headers)
    own = list(own)
    named = _connection_named(incoming)
    replaced = {canonical_name(header) for header in injected}
    replaced.update(canonical_name(header) for header, _ in own)
    kept: list[tuple[str, str]] = []
    for header, value in incoming:
        name = canonical_name(header)
        if (
            name in named
            or name in replaced
            or app_may_not_send(name)
            or (credentialed and name in _PARTIAL_READS)
        ):
            continue
        kept.append((header, value))
    return [*kept, *own]


def app_response_headers(
    upstream: Iterable[tuple[str, str]],
    redact: Redactor | None = None,
    *,
    media_type: MediaType | None,
) -> list[tuple[str, str]]:
    """The allowlisted upstream headers that an HTTP server may write, at most 16 KiB of them,
    with injected values redacted (a pagination Link header would otherwise hand a query API key
    to the app), also a piece of one (see Redactor.headers). ``media_type``, the answer's type
    as a browser reads it, is its one Content-Type (none if None)."""
    allowed: list[tuple[str, str]] = []
    size = 0
    if media_type is not None:
        # As aiohttp reads values (so redacted as they are): back to its bytes below.
        typed = as_read(str(media_type))
        allowed.append(("content-type", typed))
        size += len("content-type") + len(typed) + 4
    for name, value in upstream:
        lowered = name.lower()
        if (
            lowered in RESPONSE_ALLOWED
            or (lowered.startswith(_RESPONSE_ALLOWED_PREFIXES) and _TOKEN.fullmatch(lowered))
        ) and not _CONTROL.search(value):
            # Only as many as may be kept are redacted (checked again after, as redaction may
            # lengthen a value).
            size += len(lowered) + len(value) + 4
            if size > MAX_RESPONSE_HEADER_BYTES:
                break
            allowed.append((lowered, value))
    if redact is not None and allowed:
        values = redact.headers([value for _, value in allowed])
        allowed = [(name, value) for (name, _), value in zip(allowed, values, strict=True)]
    kept: list[tuple[str, str]] = []
    size = 0
    for name, value in allowed:
        # The upstream's bytes as they came: a header value is bytes to HTTP, and Starlette
        # writes it back as Latin-1.
        value = as_sent(value)
        size += len(name) + len(value) + 4
        if size > MAX_RESPONSE_HEADER_BYTES:
            break
        kept.append((name, value))
    return kept
