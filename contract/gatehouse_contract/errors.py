"""How every HTTP surface of Gatehouse says no: ``{"error": {"code", "message"}}``.

The proxy's fetch path, the table channel and the service API answer alike, so that a client
reads one shape whichever it called. The code is stable and machine-readable; the message is for
people and never holds a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Literal, get_args

# The proxy's refusal codes: what an app's fetch (and a connection test) is told, by
# ``error.code``. The proxy maps each to its HTTP status; the operator names a refused test's
# condition reason after it (RefusalReason).
RefusalCode = Literal[
    "invalid_path",
    "invalid_query",
    "invalid_body",
    "path_traversal",
    "unauthenticated",
    "viewer_authorization_required",
    "path_not_allowed",
    "unknown_alias",
    "method_not_allowed",
    "images_only",
    "request_timeout",
    "request_too_large",
    "rate_limited",
    "upstream_redirect",
    "upstream_failed",
    "unsupported_encoding",
    "upstream_informational",
    "response_too_large",
    "blocked_address",
    "credential_failed",
    "token_endpoint_failed",
    "content_type_not_allowed",
    "concurrency_limited",
    "request_bytes_limited",
    "connection_unavailable",
    "not_ready",
    "upstream_timeout",
    # The TLS to the vendor (a connection's client certificate and CAs): its certificate, or ours.
    "upstream_certificate_untrusted",
    "client_certificate_refused",
    # The viewer's identity (a connection that needs a viewer; an app's reserved headers).
    "reserved_header",
    "viewer_assertion_missing",
    "viewer_assertion_invalid",
    "viewer_keys_unavailable",
    # Connection tests only: never an app's answer.
    "tests_busy",
    "test_not_started",
    "test_timed_out",
]
REFUSAL_CODES: frozenset[RefusalCode] = frozenset(get_args(RefusalCode))


def as_refusal_code(code: str) -> RefusalCode | None:
    """A code read back from elsewhere (a store, a replica), if it is one this release knows."""
    return code if code in REFUSAL_CODES else None


class RefusalReason(StrEnum):
    """A refusal code as a condition reason names it: the Passed reason of a connection test the
    proxy refused (path_not_allowed is PathNotAllowed). One member per RefusalCode, named after
    it; what each means, and what to do, is on the generated reasons page."""

    INVALID_PATH = "InvalidPath"
    INVALID_QUERY = "InvalidQuery"
    INVALID_BODY = "InvalidBody"
    PATH_TRAVERSAL = "PathTraversal"
    UNAUTHENTICATED = "Unauthenticated"
    VIEWER_AUTHORIZATION_REQUIRED = "ViewerAuthorizationRequired"
    PATH_NOT_ALLOWED = "PathNotAllowed"
    UNKNOWN_ALIAS = "UnknownAlias"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    IMAGES_ONLY = "ImagesOnly"
    REQUEST_TIMEOUT = "RequestTimeout"
    REQUEST_TOO_LARGE = "RequestTooLarge"
    RATE_LIMITED = "RateLimited"
    UPSTREAM_REDIRECT = "UpstreamRedirect"
    UPSTREAM_FAILED = "UpstreamFailed"
    UNSUPPORTED_ENCODING = "UnsupportedEncoding"
    UPSTREAM_INFORMATIONAL = "UpstreamInformational"
    RESPONSE_TOO_LARGE = "ResponseTooLarge"
    BLOCKED_ADDRESS = "BlockedAddress"
    CREDENTIAL_FAILED = "CredentialFailed"
    TOKEN_ENDPOINT_FAILED = "TokenEndpointFailed"  # noqa: S105 (a reason, not a secret)
    CONTENT_TYPE_NOT_ALLOWED = "ContentTypeNotAllowed"
    CONCURRENCY_LIMITED = "ConcurrencyLimited"
    REQUEST_BYTES_LIMITED = "RequestBytesLimited"
    CONNECTION_UNAVAILABLE = "ConnectionUnavailable"
    NOT_READY = "NotReady"
    UPSTREAM_TIMEOUT = "UpstreamTimeout"
    UPSTREAM_CERTIFICATE_UNTRUSTED = "UpstreamCertificateUntrusted"
    CLIENT_CERTIFICATE_REFUSED = "ClientCertificateRefused"
    RESERVED_HEADER = "ReservedHeader"
    VIEWER_ASSERTION_MISSING = "ViewerAssertionMissing"
    VIEWER_ASSERTION_INVALID = "ViewerAssertionInvalid"
    VIEWER_KEYS_UNAVAILABLE = "ViewerKeysUnavailable"
    TESTS_BUSY = "TestsBusy"
    TEST_NOT_STARTED = "TestNotStarted"
    TEST_TIMED_OUT = "TestTimedOut"


def _camel(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_"))


# Made from the codes, so that a code added without its reason fails on import.
REFUSAL_REASONS: Mapping[RefusalCode, RefusalReason] = {
    code: RefusalReason(_camel(code)) for code in get_args(RefusalCode)
}


def refusal_reason(code: RefusalCode) -> RefusalReason:
    """The condition reason a refusal gives: path_not_allowed is PathNotAllowed."""
    return REFUSAL_REASONS[code]


def unknown_refusal_reason(code: str) -> str:
    """A code this release does not know (a newer replica's, during a rolling upgrade, or an
    older one's ``test_expired``) is named as a known one would be: test_expired is TestExpired."""
    return _camel(code)


def error_body(
    code: str, message: str, details: Mapping[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """``details``: more for the caller beside the code and message (a 401's ``connectUrl``)."""
    return {"error": {**(details or {}), "code": code, "message": message}}
