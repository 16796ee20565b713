"""Errors the proxy answers with: a stable code, the right status, a message without secrets.

Every refusal is a :class:`ProxyError` raised where the rule lives and turned into a JSON response
in one place (:func:`error_response`), so apps can branch on ``error.code``.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse

from gatehouse_contract.errors import RefusalCode, error_body

STATUS_BY_CODE: Mapping[RefusalCode, int] = {
    "invalid_path": 400,
    "invalid_query": 400,
    "invalid_body": 400,
    "path_traversal": 400,
    "unauthenticated": 401,
    # The connection's OAuth 2.0 grant (a viewer's own, or its shared one) is not connected, or
    # the provider no longer accepts it: the person connects (again).
    "viewer_authorization_required": 401,
    "path_not_allowed": 403,
    "unknown_alias": 404,
    "method_not_allowed": 405,
    "images_only": 405,
    "request_timeout": 408,
    "request_too_large": 413,
    "rate_limited": 429,
    "upstream_redirect": 502,
    "upstream_failed": 502,
    # An answer the proxy will not relay: compressed in a way it cannot decode (to scrub the
    # credential), or an interim (1xx) status given as the final one.
    "unsupported_encoding": 502,
    "upstream_informational": 502,
    "response_too_large": 502,
    "blocked_address": 502,
    "credential_failed": 502,
    "token_endpoint_failed": 502,
    "content_type_not_allowed": 502,
    "concurrency_limited": 503,
    "request_bytes_limited": 503,
    "connection_unavailable": 503,
    "not_ready": 503,
    "upstream_timeout": 504,
    # The TLS handshake with the vendor: its certificate not trusted (or not naming its host), or
    # it ended the connection as a server refusing our client certificate (or requiring one) does.
    "upstream_certificate_untrusted": 502,
    "client_certificate_refused": 502,
    # An X-Gatehouse-* header from the app: the proxy's names, never taken from apps.
    "reserved_header": 400,
    # A connection that needs a viewer: no assertion, or one that does not hold.
    "viewer_assertion_missing": 401,
    "viewer_assertion_invalid": 401,
    # The issuer's keys could not be read: not the app's fault, and another assertion will not
    # help.
    "viewer_keys_unavailable": 503,
    # Connection tests only (gatehouse_proxy.table.test_slots): never an app's answer.
    "tests_busy": 503,
    "test_not_started": 503,
    "test_timed_out": 504,
}


class ProxyException(Exception):
    """The root of the proxy's own exceptions. A refusal (:class:`ProxyError`) is answered to the
    app at the door, or given as a connection test's result; the others end inside the room that
    raises them (the store that is away, the feed that broke, the app that went away) and never
    reach an app as themselves."""


class ProxyError(ProxyException):
    """A refusal: the rule that refused, its status, and a message that holds no secret."""

    def __init__(
        self,
        code: RefusalCode,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        details: Mapping[str, str] | None = None,
    ) -> None:
        if code not in STATUS_BY_CODE:
            raise ValueError(f"unknown proxy error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        # More for the app than code and message, beside them in the error body (a 401's
        # ``connectUrl``).
        self.details = dict(details or {})

    @property
    def status(self) -> int:
        return STATUS_BY_CODE[self.code]

    def again(self) -> ProxyError:
        """The same refusal as a new exception, for an answer kept and given again: raising one
        object again and again would chain every raise's traceback onto it, and with them the
        frames of every request it refused."""
        return ProxyError(self.code, self.message, headers=self.headers, details=self.details)


def error_response(error: ProxyError) -> JSONResponse:
    return JSONResponse(
        error_body(error.code, error.message, error.details),
        status_code=error.status,
        headers={**error.headers, "Cache-Control": "no-store"},
    )
