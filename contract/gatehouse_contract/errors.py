"""How every HTTP surface of Gatehouse says no: ``{"error": {"code", "message"}}``.

The proxy's fetch path, the table channel and the service API answer alike, so that a client
reads one shape whichever it called. The code is stable and machine-readable; the message is for
people and never holds a secret.
"""

from __future__ import annotations

from typing import Literal, cast, get_args

# The proxy's refusal codes: what an app's fetch (and a connection test) is told, by
# ``error.code``. The proxy maps each to its HTTP status; the operator names a refused test's
# condition reason after it (refusal_reason).
RefusalCode = Literal[
    "invalid_path",
    "invalid_query",
    "invalid_body",
    "path_traversal",
    "unauthenticated",
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
    # Connection tests only: never an app's answer.
    "tests_busy",
    "test_not_started",
    "test_timed_out",
]
REFUSAL_CODES: frozenset[str] = frozenset(get_args(RefusalCode))


def as_refusal_code(code: str) -> RefusalCode | None:
    """A code read back from elsewhere (a store, a replica), if it is one this release knows."""
    return cast("RefusalCode", code) if code in REFUSAL_CODES else None


def refusal_reason(code: str) -> str:
    """A refusal code as a condition reason names it: path_not_allowed is PathNotAllowed. A code
    this release does not know (from a newer replica) is named the same way."""
    return "".join(part.capitalize() for part in code.split("_"))


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}
