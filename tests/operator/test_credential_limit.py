"""``spec.limits.credentialLimit``: which of the API's answers that ask to wait are the
credential's limit (R4-6). Bounded and checked, with messages that name the field and the rule;
compiled into the route the proxies read. The API server's CEL rules are applied to real objects
in tests/e2e/test_crd_validation.py, the pauses in tests/e2e/test_quotas.py."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gatehouse_contract.routes import CredentialLimit
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.meta import spec_error
from gatehouse_operator.table.connection_route import credential_limit


def _spec(limit: Any) -> dict[str, Any]:
    return {
        "displayName": "Vendor",
        "baseURL": "https://api.example.com",
        "linkPolicy": "Builders",
        "auth": {"type": "none"},
        "limits": {"credentialLimit": limit},
    }


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        (
            {"statuses": [404]},
            "spec.limits.credentialLimit.statuses.0: 404 is not one of 429 or 503",
        ),
        ({"statuses": []}, "spec.limits.credentialLimit.statuses: List should have at least 1"),
        (
            {"pathPrefixes": ["api"]},
            "spec.limits.credentialLimit.pathPrefixes.0: 'api' does not match the pattern",
        ),
        (
            {"pathPrefixes": [f"/p{index}" for index in range(17)]},
            "spec.limits.credentialLimit.pathPrefixes: List should have at most 16 items",
        ),
        (
            {"header": {"name": "X Scope"}},
            "spec.limits.credentialLimit.header.name: 'X Scope' does not match the pattern",
        ),
        ({"header": {"value": "account"}}, "spec.limits.credentialLimit.header.name: Field"),
        (
            {"header": {"name": "X-Scope", "value": "a\r\nb"}},
            "spec.limits.credentialLimit.header.value: 'a\\r\\nb' does not match the pattern",
        ),
        (
            {"header": {"name": "X-Scope", "value": "a" * 257}},
            "spec.limits.credentialLimit.header.value: String should have at most 256",
        ),
    ],
)
def test_a_bad_credential_limit_is_refused_naming_the_field(limit: Any, said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        ExternalConnectionSpec.model_validate(_spec(limit))
    assert spec_error(refused.value).startswith(said), spec_error(refused.value)


def test_the_route_reads_the_header_without_case_and_the_statuses_in_order() -> None:
    spec = ExternalConnectionSpec.model_validate(
        _spec(
            {
                "statuses": [503, 429],
                "pathPrefixes": ["/api"],
                "header": {"name": "X-RateLimit-Scope", "value": "Account"},
            }
        )
    )
    assert credential_limit(spec.limits.credential_limit) == CredentialLimit(
        statuses=(429, 503),
        path_prefixes=("/api",),
        header="x-ratelimit-scope",
        header_value="account",
    )
    assert credential_limit(
        ExternalConnectionSpec.model_validate(_spec({})).limits.credential_limit
    ) == (CredentialLimit())
    unset = _spec(None)
    del unset["limits"]
    assert (
        credential_limit(ExternalConnectionSpec.model_validate(unset).limits.credential_limit)
        is None
    )
