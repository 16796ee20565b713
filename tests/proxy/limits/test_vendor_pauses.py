"""Which of a vendor's answers that ask to wait the connection says are the credential's limit
(the pause itself, for the fleet, is in test_quotas.py and tests/e2e/test_quotas.py)."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from gatehouse_contract.routes import CredentialLimit
from gatehouse_proxy.limits.vendor_pauses import is_credential_limit
from gatehouse_proxy.rules.matcher import normalise

SCOPED = {"X-RateLimit-Scope": "Account"}


@pytest.mark.parametrize(
    ("limit", "path", "status", "headers", "whole"),
    [
        # Not said: every pause is the endpoint's.
        (None, b"/api/a", 429, {}, False),
        (None, b"/api/a", 429, SCOPED, False),
        # Said with no paths nor header: every answer of its statuses.
        (CredentialLimit(), b"/api/a", 429, {}, True),
        (CredentialLimit(), b"/api/a", 503, {}, True),
        (CredentialLimit(statuses=(429,)), b"/api/a", 503, {}, False),
        # Its paths, on whole segments.
        (CredentialLimit(path_prefixes=("/api",)), b"/api/a/1", 429, {}, True),
        (CredentialLimit(path_prefixes=("/api",)), b"/apis/a", 429, {}, False),
        # Its header, its value read without case; any value when none is given.
        (
            CredentialLimit(header="x-ratelimit-scope", header_value="account"),
            b"/x",
            429,
            SCOPED,
            True,
        ),
        (
            CredentialLimit(header="x-ratelimit-scope", header_value="account"),
            b"/x",
            429,
            {"X-RateLimit-Scope": "endpoint"},
            False,
        ),
        (CredentialLimit(header="x-ratelimit-scope"), b"/x", 429, SCOPED, True),
        (CredentialLimit(header="x-ratelimit-scope"), b"/x", 429, {}, False),
        # Paths or header: either is enough, within the statuses.
        (
            CredentialLimit(path_prefixes=("/api",), header="x-ratelimit-scope"),
            b"/x",
            429,
            SCOPED,
            True,
        ),
        (
            CredentialLimit(statuses=(503,), path_prefixes=("/api",), header="x-ratelimit-scope"),
            b"/api",
            429,
            SCOPED,
            False,
        ),
    ],
)
def test_the_connection_says_which_answers_are_the_credentials_limit(
    limit: CredentialLimit | None, path: bytes, status: int, headers: dict[str, str], whole: bool
) -> None:
    assert is_credential_limit(limit, normalise(path), status, CIMultiDict(headers)) is whole
