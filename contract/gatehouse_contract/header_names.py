"""Header names as the servers behind the proxy read them, and the names that are the proxy's.

CGI-style servers hand a header to the app as a variable made of its name, upper-cased, with
characters other than letters and digits turned into ``_``: Apache's mod_cgi (every such
character before 2.4), PHP's ``$_SERVER`` (which turns ``.`` and space into ``_`` in any name),
WSGI servers, Rack and gunicorn (``-``). So ``X_Api_Key``, ``X.Api.Key`` and ``X~Api~Key`` can
all arrive as ``HTTP_X_API_KEY``, the injected ``X-Api-Key``'s variable (the class of Puma
CVE-2024-45614). Names are compared in their :func:`canonical_name`: lower case, with every
character other than an ASCII letter or digit read as ``-``.

The proxy drops an app's header whose canonical name it keeps for itself
(:func:`app_may_not_send`); the operator refuses an API key sent as a header whose canonical name
is one of those or frames the body (:func:`reserved_for_api_key`, and
:data:`API_KEY_HEADER_RESERVED_RE2`, the same rule as an RE2 expression for the CRD's CEL), and
a connection's own header (``spec.headers``) likewise, Authorization too
(:func:`reserved_for_connection_header`, :data:`CONNECTION_HEADER_RESERVED_RE2`). The rule lives
here once, for both.

The viewer's identity has names of its own: an app sends its viewer's assertion in
:data:`VIEWER_ASSERTION_HEADER`, which the proxy takes out of every request, and the proxy sends
the identity upstream in the ``X-Gatehouse-*`` headers (:data:`VIEWER_IDENTITY_HEADERS`), which an
app may never send (:func:`reserved_for_proxy`: refused, not merely dropped).
"""

from __future__ import annotations

import re

# Headers that identify the caller, or steer routing without a telling token (below).
DROPPED_FROM_APPS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "via",
        "origin",
        "referer",
        # WebDAV names other resources by URL (RFC 4918), out of the path check's reach.
        "destination",
        "if",
        # httpoxy: CGI servers hand "Proxy" to the app as HTTP_PROXY, which HTTP clients take
        # for their proxy.
        "proxy",
        # Mount point and scheme for WSGI apps behind a proxy (gunicorn takes a SCRIPT_NAME
        # header for WSGI's SCRIPT_NAME), and Cloudflare's scheme and calling Worker.
        "script-name",
        "x-script-name",
        "cf-visitor",
        "cf-worker",
        # Where oauth2-proxy and nginx auth_request send the browser after sign-in.
        "x-auth-request-redirect",
        # Rack::Sendfile maps file paths through these (CVE-2025-61780).
        "x-sendfile-type",
        "x-accel-mapping",
        "content-length",  # recomputed from the body actually sent
        "expect",
        # The viewer's assertion is for the proxy alone: never sent on to an API.
        "gatehouse-viewer-assertion",
    }
)
# Tokens of the names that frameworks and proxies read a request's host, URL, scheme, port,
# method or client address from: Forwarded and X-Forwarded-* (Host, Port, Proto, Prefix, Uri,
# Server, Method, For...), X-Original-* (URL, URI, Host, Method, For, Proto, Prefix, To),
# X-Rewrite-URL, X-HTTP-Method-Override, X-HTTP-Host-Override, X-WAWS-Unencoded-URL,
# Disguised-Host, X-URL-Scheme, X-Scheme, Front-End-Https, X-ARR-SSL, X-Real-IP,
# WL-Proxy-Client-IP, X-Azure-ClientIP, X-Client-Port... None of them is in an API's own
# vocabulary (Stripe-Version, X-Goog-Upload-Protocol, X-Amz-Copy-Source, X-Request-Id...).
ROUTING_TOKENS = frozenset(
    {
        "host",
        "hostname",
        "url",
        "uri",
        "forwarded",
        "original",
        "rewrite",
        "override",
        "method",
        "scheme",
        "proto",
        "ssl",
        "https",
        "port",
        "ip",
        "ipv6",
        "clientip",
        "socketip",
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
# Headers of the proxy's own and of edges that origins trust: Envoy, CloudFront's viewer
# headers, Azure Front Door's (X-Azure-FDID locks an origin to one Front Door).
DROPPED_PREFIXES = (
    "proxy-",
    "x-gatehouse-",
    "x-envoy-",
    "cloudfront-",
    "x-azure-",
    "x-fd-",
)
# Where an app passes its viewer's assertion (a signed JWT), beside its own credential.
VIEWER_ASSERTION_HEADER = "Gatehouse-Viewer-Assertion"
# The proxy's own names: what it sends upstream for a connection with forwardViewerIdentity. An
# app sending any name of the prefix is refused (a vendor must be able to trust them).
PROXY_PREFIX = "x-gatehouse-"
APP_ID_HEADER = "X-Gatehouse-App-Id"  # the app's key, namespace/Kind/name
VIEWER_ID_HEADER = "X-Gatehouse-Viewer-Id"  # the assertion's sub
VIEWER_EMAIL_HEADER = "X-Gatehouse-Viewer-Email"  # its email, when it has one
PROJECT_ID_HEADER = "X-Gatehouse-Project-Id"  # the project: the namespace
VIEWER_IDENTITY_HEADERS = (APP_ID_HEADER, VIEWER_ID_HEADER, VIEWER_EMAIL_HEADER, PROJECT_ID_HEADER)
# What each discloses to the API, as the page and the wizard say it.
VIEWER_IDENTITY_DISCLOSED = (
    (APP_ID_HEADER, "the app's key, namespace/Kind/name"),
    (VIEWER_ID_HEADER, "the viewer's id (the assertion's sub)"),
    (VIEWER_EMAIL_HEADER, "the viewer's e-mail, when the assertion has one"),
    (PROJECT_ID_HEADER, "the project: this namespace"),
)
# What frames a request's body: an API key sent as one would garble the request.
_FRAMING = frozenset({"content-type"})
# Names an API key may be sent as although apps may not send them. The app's Authorization is its
# credential for the proxy, but some APIs want their key there (without "Bearer").
_API_KEY_MAY_USE = frozenset({"authorization"})

_NOT_LETTER_OR_DIGIT = re.compile(r"[^a-z0-9]")


def canonical_name(name: str) -> str:
    """Lower case, with every character other than a letter or digit read as ``-``."""
    lowered = name.lower()
    if lowered.isascii() and lowered.replace("-", "").isalnum():
        return lowered  # the usual name: letters, digits and "-" (isalnum alone takes "ª")
    return _NOT_LETTER_OR_DIGIT.sub("-", lowered)


def app_may_not_send(canonical: str) -> bool:
    """Whether the proxy drops an app's header of this canonical name whatever the connection."""
    return (
        canonical in DROPPED_FROM_APPS
        or canonical in HOP_BY_HOP
        or canonical.startswith(DROPPED_PREFIXES)
        or not ROUTING_TOKENS.isdisjoint(canonical.split("-"))
    )


def reserved_for_proxy(canonical: str) -> bool:
    """Whether a header of this canonical name is one of the proxy's own (``X-Gatehouse-*``),
    which an app's request may not carry at all."""
    return canonical.startswith(PROXY_PREFIX)


def reserved_for_api_key(name: str) -> bool:
    """Whether an API key may not be sent as the header ``name``: the proxy drops it from apps
    (hop-by-hop, identity, routing, its own and edges' prefixes) or it frames the body."""
    canonical = canonical_name(name)
    if canonical in _API_KEY_MAY_USE:
        return False
    return canonical in _FRAMING or app_may_not_send(canonical)


def reserved_for_connection_header(name: str) -> bool:
    """Whether a connection may not send ``name`` as one of its own headers (``spec.headers``):
    what the proxy drops from apps, ``Authorization`` included (a credential belongs in
    ``auth``, encrypted, not in the spec in the clear). ``Content-Type`` may be set: some APIs
    want their own (``application/vnd.api+json``)."""
    return app_may_not_send(canonical_name(name))


def _re2(canonical: str) -> str:
    # Canonical names and tokens hold only letters, digits and "-".
    return canonical.replace("-", "[^0-9A-Za-z]")


def _reserved_re2(exempt: frozenset[str]) -> str:
    """A rule above as an RE2 expression (CEL's matches(), which finds a match anywhere), for
    the CRD: whole reserved names, reserved prefixes, and routing tokens between separators."""
    return (
        "(?i)^(?:"
        + "|".join(
            _re2(name) for name in sorted((DROPPED_FROM_APPS | HOP_BY_HOP | _FRAMING) - exempt)
        )
        + ")$|^(?:"
        + "|".join(_re2(prefix.removesuffix("-")) for prefix in DROPPED_PREFIXES)
        + ")[^0-9A-Za-z]|(?:^|[^0-9A-Za-z])(?:"
        + "|".join(sorted(ROUTING_TOKENS))
        + ")(?:$|[^0-9A-Za-z])"
    )


API_KEY_HEADER_RESERVED_RE2 = _reserved_re2(_API_KEY_MAY_USE)
CONNECTION_HEADER_RESERVED_RE2 = _reserved_re2(_FRAMING)
# The punctuation a header name (an RFC 9110 token) may hold: canonical_name reads each as "-".
TOKEN_PUNCTUATION = "!#$%&'*+.^_`|~"  # noqa: S105 (characters, not a secret)
